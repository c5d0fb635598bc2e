"""Star stencils (7-point, 25-point) on the cycle engine: a wave-equation step equal to numpy,
within their colors, one input per color and router, the analytic cycles within 3 %, and each
PE doing a step what the vendor's published 25-point program does (its column in chunks
through a chunk buffer, the buffer's pass, the z pass and the update)."""

from __future__ import annotations

import numpy as np
import pytest
import wafersim.kernels.kernel_plan as kernel_plan
from wafersim.fabric import _engine_jit as K
from wafersim.kernels import stencil_layout as lay
from wafersim.kernels import stencil_routes
from wafersim.kernels.grid import kernel_grid
from wafersim.kernels.kernel_plan import recorded
from wafersim.kernels.registry import check_fits, run_kernel
from wafersim.kernels.stencil import (
    COEFFICIENTS,
    COMPUTE_TASK,
    RADIUS,
    max_column,
    reference,
    run_stencil,
    stencil,
    stencil_words,
    wave_step,
)
from wafersim.kernels.tiers import TIERS, estimate
from wafersim.wafer.errors import ConfigError
from wafersim.wafer.geometry import E

WSE2_SRAM_BYTES = 48 * 1024  # a WSE-2 PE's SRAM (wafer.presets)
ANALYTIC_TOLERANCE = 0.03  # the analytic tier against the engine


def inputs(p: int, q: int, n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``u``, ``u_prev`` (standard normal) and ``vp`` (positive, about the published run's)."""
    rng = np.random.default_rng(seed)
    u, u_prev = rng.standard_normal((2, p, q, n)).astype(np.float32)
    vp = rng.uniform(0.01, 0.04, (p, q, n)).astype(np.float32)
    return u, u_prev, vp


@pytest.fixture
def routes(monkeypatch):
    """The route tables of the kernels run in the test."""
    seen = []
    simulate = kernel_plan.simulate

    def spy(mesh, spec, table, program, memory, **options):
        seen.append(table.table.copy())
        return simulate(mesh, spec, table, program, memory, **options)

    monkeypatch.setattr(kernel_plan, "simulate", spy)
    return seen


@pytest.mark.parametrize(
    ("algo", "p", "q", "n"),
    [("star7", 4, 5, 16), ("star7", 1, 6, 8), ("star7", 3, 3, 1), ("star25", 9, 7, 24),
     ("star25", 3, 10, 5), ("star7", 2, 3, 401), ("star25", 5, 6, 802)],
)  # fmt: skip
def test_equals_numpy_with_one_input_per_color_and_router(algo, p, q, n, routes, wse2):
    """Any grid shape, columns shorter than the radius and columns of two and three chunks
    (their last chunk padded) included."""
    u, u_prev, vp = inputs(p, q, n, p * q + n)
    result = stencil(u, u_prev, vp, kernel_grid(p, q), wse2, algo)
    np.testing.assert_allclose(result.output, wave_step(u, u_prev, vp, algo), rtol=1e-5,
                               atol=1e-5)  # fmt: skip
    inputs_per_color = (routes[-1] != 0).sum(axis=1)  # (routers, colors): input ports
    assert inputs_per_color.max() == 1
    assert result.colors_used == 4  # one a way, as the published routes


def test_the_reference_is_the_laplacian():
    """The 7-point star of a quadratic is its Laplacian inside the grid (2 + 2 + 2 = 6)."""
    z, y, x = np.meshgrid(*(np.arange(6.0),) * 3, indexing="ij")
    u = x**2 + y**2 + z**2
    assert np.allclose(reference(u, "star7")[1:-1, 1:-1, 1:-1], 6.0)
    for coef in COEFFICIENTS.values():  # a constant has no Laplacian
        assert coef[0] + 6 * sum(coef[1:]) == pytest.approx(0.0)


@pytest.mark.parametrize("algo", sorted(RADIUS))
def test_the_wave_step_is_two_u_less_the_last_plus_vp_times_the_laplacian(algo):
    """Inside the grid, a quadratic's step adds ``6 vp`` to ``2 u - u_prev`` (both stars are
    exact on quadratics); where ``u`` is constant in time and ``vp`` zero, nothing moves."""
    r = RADIUS[algo]
    z, y, x = np.meshgrid(*(np.arange(2 * r + 4.0),) * 3, indexing="ij")
    u = x**2 + y**2 + z**2
    vp = np.full_like(u, 0.25)
    inside = (slice(r, -r),) * 3
    assert np.allclose(wave_step(u, u / 2, vp, algo)[inside], 1.5 * u[inside] + 1.5)
    assert np.array_equal(wave_step(u, u, np.zeros_like(u), algo), u)


@pytest.mark.parametrize("algo", sorted(RADIUS))
@pytest.mark.parametrize("n", [12, 900])
def test_holes_are_skipped_and_the_result_holds(algo, n, wse2):
    """On a patch with dead PEs the kernel's neighbours are kernel neighbours (routes
    detour, a way's lines alternating two colors); the result is numpy's on the kernel
    grid, for the 25-point star too."""
    dead = np.zeros((7, 6), bool)
    dead[[1, 4], [2, 3]] = True
    u, u_prev, vp = inputs(6, 6, n, 3)
    result = stencil(u, u_prev, vp, kernel_grid(6, 6, dead), wse2, algo)
    np.testing.assert_allclose(result.output, wave_step(u, u_prev, vp, algo), rtol=1e-5,
                               atol=1e-5)  # fmt: skip
    assert result.colors_used == 8


# a patch where kernel row 6 shifts a row down at column 3 and two at column 5 (holes at
# (3, 6), (5, 5) and (5, 7)): the hops into and out of (4, 6) both need the router at
# (4, 7), which one chain cannot cross twice, so that row's senders stream on trees
STAIR = {(7, 0), (5, 5), (3, 6), (0, 7), (5, 7)}


@pytest.mark.parametrize("algo", sorted(RADIUS))
def test_a_line_no_chain_can_take_streams_on_trees_and_the_result_holds(algo, wse2, monkeypatch):
    dead = np.zeros((12, 10), bool)
    for x, y in STAIR:
        dead[y, x] = True
    ran = []
    route_ways = stencil_routes.route_ways
    monkeypatch.setattr(stencil_routes, "route_ways", lambda *a: ran.append(route_ways(*a))
                        or ran[-1])  # fmt: skip
    u, u_prev, vp = inputs(10, 10, 20, 7)
    result = stencil(u, u_prev, vp, kernel_grid(10, 10, dead), wse2, algo)
    np.testing.assert_allclose(result.output, wave_step(u, u_prev, vp, algo), rtol=1e-5,
                               atol=1e-5)  # fmt: skip
    (ways,) = ran  # one routing: no fallback to trees everywhere
    assert not ways.chained.all()
    assert ways.chained.mean() > 0.5


def routes_of(algo: str, grid, wse2) -> stencil_routes.WayRoutes:
    """How :func:`stencil` routes ``grid``'s lines (chains where it can)."""
    plan = kernel_plan.KernelPlan(grid, wse2, tasks=COMPUTE_TASK + 1)
    return stencil_routes.route_ways(plan, RADIUS[algo])


def test_holes_crowding_the_chains_fall_back_to_trees_everywhere(wse2):
    """Holes crowding the patch's west and east columns leave too few colors for chains and
    trees both: every line streams on trees, as a program without switches would, and the
    result holds."""
    dead = np.zeros((13, 11), bool)
    for x, y in [(9, 2), (9, 3), (4, 4), (7, 6), (2, 7), (8, 7), (1, 8), (10, 8), (0, 9),
                 (2, 9), (2, 11)]:  # fmt: skip
        dead[y, x] = True
    grid = kernel_grid(10, 11, dead)
    u, u_prev, vp = inputs(10, 11, 9, 1)
    with pytest.raises(ConfigError, match="no free route"):
        routes_of("star7", grid, wse2)
    result = stencil(u, u_prev, vp, grid, wse2, "star7")
    np.testing.assert_allclose(result.output, wave_step(u, u_prev, vp, "star7"), rtol=1e-5,
                               atol=1e-5)  # fmt: skip


@pytest.mark.parametrize(
    ("algo", "side", "n"), [("star7", 8, 64), ("star25", 12, 64), ("star25", 7, 600)]
)
def test_analytic_cycles_within_three_percent(algo, side, n, wse2):
    """One chunk and two: the analytic tier follows the engine's step."""
    result = run_kernel("stencil", algo, {"n": n}, kernel_grid(side, side), wse2)
    assert abs(result.analytic_cycles / result.cycles - 1) <= ANALYTIC_TOLERANCE
    assert result.max_abs_error < 1e-4


def test_bad_input_is_a_config_error(wse2):
    zeros = np.zeros((2, 2, 2), np.float32)
    with pytest.raises(ConfigError, match="one of the stencils"):
        stencil(zeros, zeros, zeros, kernel_grid(2, 2), wse2, "star9")
    with pytest.raises(ConfigError, match="fp32 only"):
        run_kernel("stencil", "star7", {"n": 4}, kernel_grid(2, 2), wse2, "fp16")
    wide = np.zeros((2, 3, 2), np.float32)
    with pytest.raises(ConfigError, match="kernel grid"):
        stencil(wide, wide, wide, kernel_grid(2, 2), wse2, "star7")
    with pytest.raises(ConfigError, match="vp of shape .* must match u's"):
        stencil(zeros, zeros, np.zeros((2, 2, 3), np.float32), kernel_grid(2, 2), wse2, "star7")


@pytest.mark.slow
def test_cycles_do_not_grow_with_the_grid(wse2):
    """Each way's chunks are received on a task of their own and the senders' turns pass
    along each line, so no wait chains across the grid: a larger grid takes the same cycles
    (its interior PEs do the same work)."""
    small, large = (run_kernel("stencil", "star25", {"n": 16}, kernel_grid(side, side), wse2)
                    for side in (10, 24))  # fmt: skip
    assert large.cycles == pytest.approx(small.cycles, rel=0.01)


def test_a_three_chunk_column_runs_exactly_in_48_kb(wse2):
    """900 cells of the 25-point star (three chunks of 300) on 9 x 9 PEs: numpy's step, in
    48 KB a PE, the analytic tier within 3 %."""
    u, u_prev, vp = inputs(9, 9, 900, 900)
    result = stencil(u, u_prev, vp, kernel_grid(9, 9), wse2, "star25")
    np.testing.assert_allclose(result.output, wave_step(u, u_prev, vp, "star25"), rtol=1e-5,
                               atol=1e-5)  # fmt: skip
    assert result.sram_peak_bytes <= WSE2_SRAM_BYTES
    assert abs(result.analytic_cycles / result.cycles - 1) <= ANALYTIC_TOLERANCE


# n: (chunks, cells a chunk), util.csl's rule (1 + n // 401 chunks, rounded up)
CHUNKS = {1: (1, 1), 400: (1, 400), 401: (2, 201), 600: (2, 300), 802: (3, 268), 1203: (4, 301)}


def test_the_column_is_chunked_as_the_published_program_chunks_it():
    """At most 400 cells a chunk, as few chunks as that allows, the last one padded."""
    assert {n: tuple(lay.chunks(n)) for n in CHUNKS} == CHUNKS
    assert lay.chunks(802).padded == 804


@pytest.mark.parametrize(("algo", "n"), [("star25", 1000), ("star7", 2000)])
def test_the_footprint_is_the_published_layout_and_fits_48_kb_on_any_grid(algo, n, wse2):
    """Two levels of the padded column with their halos, the accumulator, vp and the chunk
    buffer (4 ways x r + 1 chunks): the grid's shape changes nothing, and the paper's
    1,000-cell columns fit the 25-point star in 48 KB."""
    r = RADIUS[algo]
    count, size = lay.chunks(n)
    expected = 2 * (count * size + 2 * r) + count * size + n + 4 * (r + 1) * size
    for p, q in ((1, 1), (9, 9), (994, 750)):
        assert stencil_words(n, p, q, algo) == expected
        assert expected * 4 <= WSE2_SRAM_BYTES
    check_fits("stencil", algo, {"n": n}, 994, 750, wse2, "fp32")  # the whole wafer


@pytest.mark.parametrize(
    ("algo", "p", "q", "n"), [("star7", 4, 5, 16), ("star25", 9, 7, 24), ("star25", 3, 4, 401)]
)
def test_the_footprint_is_what_the_program_allocates(algo, p, q, n, wse2):
    """The footprint the compiler and the CLI check is the engine run's, byte for byte."""
    zeros = np.zeros((p, q, n), np.float32)
    result = stencil(zeros, zeros, zeros, kernel_grid(p, q), wse2, algo)
    assert result.sram_peak_bytes == 4 * stencil_words(n, p, q, algo)


@pytest.mark.parametrize("algo", sorted(RADIUS))
def test_a_column_beyond_sram_is_one_line_naming_n_and_what_fits(algo, wse2):
    """One cell beyond the longest column: every tier's one line names n and the lengths
    that fit; a length in a gap of the chunk rule (the buffer's chunk is largest just below
    a multiple of 401) is refused though a longer one fits."""
    most = max_column(wse2, algo)
    ranges = lay.fitting_ranges(RADIUS[algo], wse2)
    assert ranges[-1][1] == most
    assert stencil_words(most, 2, 2, algo) * 4 <= wse2.pe.sram_bytes
    assert stencil_words(most + 1, 2, 2, algo) * 4 > wse2.pe.sram_bytes
    check_fits("stencil", algo, {"n": most}, 2, 2, wse2, "fp32")
    messages = set()
    for tier in TIERS:
        with pytest.raises(ConfigError) as caught:
            estimate("stencil", algo, {"n": most + 1}, kernel_grid(2, 2), wse2, tier)
        messages.add(str(caught.value))
    (message,) = messages
    listed = ", ".join(f"[{a}, {b}]" for a, b in ranges)
    assert f"n={most + 1}: the z column must be in {listed} cells" in message
    assert "(pe.sram_bytes)" in message
    assert "\n" not in message
    if algo == "star25":  # star7 fits every length up to its longest
        gap = ranges[0][1] + 1
        assert len(ranges) > 1
        with pytest.raises(ConfigError, match=f"n={gap}: the z column must be in"):
            check_fits("stencil", algo, {"n": gap}, 2, 2, wse2, "fp32")


def step_ops(algo: str, side: int, n: int, at: tuple[int, int], wse2) -> dict:
    """The ops of PE ``at`` in a ``side x side`` step, by task: (code, elements) rows (a
    wavelet an element for a move, a word for a vector op, none for a wait)."""
    record = recorded(run_stencil, algo, {"n": n}, kernel_grid(side, side), wse2, "fp32", 0)
    pe, program = int(record.plan.grid.pe[at]), record.program
    tasks = {}
    for task in range(program.task_start.shape[1]):
        rows = program.ops[program.task_start[pe, task] : program.task_end[pe, task]]
        code = rows[:, K.C_CODE]
        moves = np.isin(code, (K.OP_SEND, K.OP_RECV))
        count = np.where(moves, rows[:, K.C_N], np.where(code == K.OP_WAIT, 0, rows[:, K.C_M]))
        tasks[task] = np.stack([code, count], axis=1)
    return tasks


def elements(rows: np.ndarray, code: int) -> int:
    """Elements of the ops of ``code`` among ``rows`` (:func:`step_ops`)."""
    return int(rows[rows[:, 0] == code, 1].sum())


def test_an_interior_pe_does_the_published_program_s_step(wse2):
    """star25, n = 600 (two chunks of 300), the middle PE of 9 x 9, against task.csl and
    oned_exch.csl: a receive a way of its 5 columns (recvMode's @fmuls) and the same 20
    chunks' worth added from the buffer (reduceBuffer's @fadds), its own column sent four
    ways, each chunk followed by two control wavelets (dataFinTask, ctrlFinTask), n zeroed,
    8 shifted columns and 3 update passes of n (scaleWithZConsts, epilog)."""
    n, r = 600, RADIUS["star25"]
    tasks = step_ops("star25", 9, n, (4, 4), wse2)
    receivers, senders, compute = range(4), range(4, 8), tasks[8]
    assert len(tasks) == 9
    assert [elements(tasks[t], K.OP_RECV) for t in receivers] == [(r + 1) * n] * 4
    assert sum(elements(tasks[t], K.OP_SEND) for t in senders) == 4 * n
    for t in senders:
        assert (tasks[t][:, 0] == K.OP_CONTROL).sum() == 2 * 2  # two a chunk
    vaxpy = compute[compute[:, 0] == K.OP_VAXPY, 1]
    vscale = compute[compute[:, 0] == K.OP_VSCALE, 1]
    assert vscale.tolist() == [n, n]  # the zeroing and the update's negation
    assert vaxpy[: 2 * 20].tolist() == [300] * 40  # the buffer's pass, a chunk of 20 slots each
    assert vaxpy[40:].tolist() == [n] * (2 * r + 1)  # the z pass and the 2u
    assert compute[compute[:, 0] == K.OP_VFMA, 1].tolist() == [n]  # vp's
    arithmetic = (K.OP_VFMA, K.OP_VAXPY, K.OP_VSCALE, K.OP_VADD, K.OP_RECV_ADD, K.OP_MATMUL)
    assert not any(elements(tasks[t], code) for t in range(8) for code in arithmetic)


def test_an_edge_pe_adds_the_whole_buffer_all_the_same(wse2):
    """A corner PE first on two ways' lines receives only its own column on them, and on
    the two others its own and the four before it (senderCount); its buffer's pass adds all
    20 slots, as reduceBuffer's @fadds does (the step takes every PE alike)."""
    tasks = step_ops("star25", 9, 32, (0, 0), wse2)
    received = [elements(tasks[t], K.OP_RECV) for t in range(4)]  # E, W, S, N
    assert received == [32, 5 * 32, 32, 5 * 32]
    compute = tasks[8]
    assert (compute[:, 0] == K.OP_VAXPY).sum() == 20 + 2 * 4 + 1  # the pass, z, the 2u
    assert compute[compute[:, 0] == K.OP_VAXPY][:20, 1].tolist() == [32] * 20


def test_a_sender_s_stream_stops_r_pes_on_and_the_switches_turn(wse2, monkeypatch):
    """On a clean line each link carries the chunks (and first control wavelets) of the
    senders whose streams reach past it, the ``r`` before it at most: a stream ends at its
    *last* router, and the line's senders share one color by turns."""
    runs = []
    simulate = kernel_plan.simulate
    monkeypatch.setattr(kernel_plan, "simulate", lambda *a, **k: runs.append(simulate(*a, **k))
                        or runs[-1])  # fmt: skip
    for algo in sorted(RADIUS):
        r, q, n = RADIUS[algo], 9, 8
        zeros = np.zeros((1, q, n), np.float32)
        stencil(zeros, zeros, zeros, kernel_grid(1, q), wse2, algo)
        east = runs[-1].link_flits[1, 1 : q + 1, E].tolist()  # out of each PE's east port
        assert east == [min(r, x + 1) * (n + 1) for x in range(q - 1)] + [0]
