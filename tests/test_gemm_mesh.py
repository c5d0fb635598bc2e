"""GEMM on the mesh: SUMMA, Cannon (naive and interleaved rings) and output-stationary
systolic, run as PE programs on the cycle engine and checked against numpy."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from wafersim.kernels.gemm_cannon import cannon, cannon_cycles, ring_hops, ring_order
from wafersim.kernels.gemm_summa import summa, summa_cycles
from wafersim.kernels.gemm_systolic import systolic, systolic_cycles
from wafersim.kernels.grid import kernel_grid
from wafersim.wafer.errors import ConfigError
from wafersim.wafer.presets import preset

SPEC = preset("tiny")  # WSE-2 PEs: 1 fp32 / 4 fp16 FMAC per cycle, 48 KB SRAM, 24 colors
# SPEC without a scalar loop's issue or a data task's activation, the costs the preset derives
# or assumes: cycle-exact tables then count only the instruction start-ups, and do not change
# when those costs are refitted
BARE = SPEC.replace({"pe.issue_cycles": 0, "pe.task_activation_cycles": 0})
ALGOS = ("summa", "systolic", "cannon-naive", "cannon-interleaved")
SQUARE_ONLY = ("cannon-naive", "cannon-interleaved")
# error bound relative to sum_k |a_ik b_kj|: fp32 accumulates in fp32; fp16 only rounds the
# inputs (the reference uses the same rounded inputs) and accumulates in fp32 too
RTOL = {"fp32": 1e-5, "fp16": 1e-5}
ANALYTIC_TOLERANCE = 0.15


def run(algo: str, a, b, grid, dtype: str = "fp32", spec=SPEC):
    """Run one of :data:`ALGOS`."""
    if algo == "summa":
        return summa(a, b, grid, spec, dtype)
    if algo == "systolic":
        return systolic(a, b, grid, spec, dtype)
    return cannon(a, b, grid, spec, dtype, ring=algo.split("-")[1])


def analytic(algo: str, m: int, k: int, n: int, p: int, q: int, dtype: str) -> int:
    """The analytic estimate matching :func:`run`."""
    if algo == "summa":
        return summa_cycles(m, k, n, p, q, SPEC, dtype)
    if algo == "systolic":
        return systolic_cycles(m, k, n, p, q, SPEC, dtype)
    return cannon_cycles(m, k, n, p, q, SPEC, dtype, algo.split("-")[1])


def operands(m: int, k: int, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    return a, b


def assert_product(result, a, b, dtype: str) -> None:
    """``result.output`` is ``a @ b`` of the dtype-rounded inputs, within RTOL of the scale."""
    if dtype == "fp16":
        a, b = a.astype(np.float16), b.astype(np.float16)
    a, b = a.astype(np.float64), b.astype(np.float64)
    bound = RTOL[dtype] * (np.abs(a) @ np.abs(b)) + 1e-6
    assert np.all(np.abs(result.output - a @ b) <= bound)


@st.composite
def holes(draw, p: int, q: int):
    """A ``(p + 1) x q`` dead-PE mask (one spare row): at most one hole per column, none in
    neighbouring columns (denser holes can leave no free route; that is a ConfigError)."""
    dead = np.zeros((p + 1, q), bool)
    if q == 1:  # a one-column patch has no way around a hole
        return dead
    for j, row in enumerate(draw(st.lists(st.none() | st.integers(0, p), min_size=q, max_size=q))):
        if row is not None and not dead[:, max(0, j - 1)].any():
            dead[row, j] = True
    return dead


@st.composite
def cases(draw):
    """(algo, p, q, dead, m, k, n, dtype, seed): any grid up to 4 x 4 (square for Cannon) on a
    patch with or without holes; every dimension at least the grid's, often not a multiple."""
    algo = draw(st.sampled_from(ALGOS))
    p = draw(st.integers(1, 4))
    q = p if algo in SQUARE_ONLY else draw(st.integers(1, 4))
    dead = draw(holes(p, q)) if draw(st.booleans()) else np.zeros((p, q), bool)
    m = draw(st.integers(p, 3 * p + 2))
    k = draw(st.integers(max(p, q), 3 * max(p, q) + 2))
    n = draw(st.integers(q, 3 * q + 2))
    dtype, seed = draw(st.sampled_from(("fp32", "fp16"))), draw(st.integers(0, 99))
    return algo, p, q, dead, m, k, n, dtype, seed


@settings(max_examples=30, deadline=None)
@given(cases())
def test_matches_numpy(case):
    """Every algorithm equals numpy on any grid, with ragged tiles and holes, fp32 and fp16."""
    algo, p, q, dead, m, k, n, dtype, seed = case
    a, b = operands(m, k, n, seed)
    assert_product(run(algo, a, b, kernel_grid(p, q, dead), dtype), a, b, dtype)


# a 4 x 4 kernel on a 5-row patch: column 1 skips a hole in row 2, column 3 one in row 0 (its
# north port is cut off, so a neighbouring port feeds it)
HOLES = np.zeros((5, 4), bool)
HOLES[2, 1] = HOLES[0, 3] = True


@pytest.mark.parametrize("algo", ALGOS)
@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
def test_holes_match_numpy(algo, dtype):
    """With holes (one spare row), routes detour and the result still equals numpy."""
    a, b = operands(11, 9, 10, 3)
    assert_product(run(algo, a, b, kernel_grid(4, 4, HOLES), dtype), a, b, dtype)


def test_summa_successive_broadcasts_never_mix():
    """SUMMA with tiny tiles (broadcast-bound) on 16 x 16 still equals numpy: a step's stream
    never interleaves with the previous one in a receive queue."""
    a, b = operands(41, 42, 48, 7)
    assert_product(summa(a, b, kernel_grid(16, 16), SPEC, "fp32"), a, b, "fp32")


# Cycle-exact runs on a 2 x 2 grid, m = k = n = 2, fp32, every tile 1 x 1, on BARE. A send,
# receive or wait does steps of one cycle; a multiply (a one-instruction matmul column, or
# an fmacs wavelet) does a step of s + 1 = 3 cycles: its instruction's start-up s = 2 and
# one FMAC. Engine rules (fabric/_engine_jit.py) the tables use:
#  * a task's first op acts in cycle 2 (op startup 2); a step of cost c in cycle t lets the
#    op's next step act in cycle t + c and, after the op's last step, the task's next op in
#    cycle t + c + 2 (startup 2): t + 3 after a wait, send or receive, t + 5 after a
#    multiply; the run ends c cycles after its last step;
#  * a wavelet sent in cycle t can be received h hops away in cycle t + 1 + h;
#  * a PE's ramp takes one wavelet per cycle, round-robin over candidates port * u + color
#    after the last one served, u the colors a run uses (renumbered 0..u-1 in order; 8 for
#    Cannon and SUMMA: from N 0 * 8 + color, E 8, S 16, W 24 + color);
#  * tasks step in index order: a wait sees an op that a lower-numbered task finishes in the
#    same cycle, one of a higher-numbered task in the next cycle.
EXACT_CYCLES = {
    # systolic: the west port of row i sends A[i, 0], A[i, 1], the north port of column j
    # B[0, j], B[1, j] in cycles 2 and 3 (A colors 0 and 2 by row, B 1 and 3 by column);
    # task 0 receives A, task 1 waits for it (seen that cycle: task 0 is lower) and fmacs B
    # (one chunk): its first wavelet 3 cycles after the wait, the second 3 after that (B1
    # has long been in):
    #   PE     ramp (cycle:wavelet)      A in  fmacs   last
    #   (0,0)  4:B0 5:A0 6:B1 7:A1         7   10, 13   13
    #   (0,1)  4:B0 5:A0 6:B1 7:A1         7   10, 13   13
    #   (1,0)  4:A0 5:B0 6:A1 7:B1         6    9, 12   12
    #   (1,1)  5:B0 6:A0 7:B1 8:A1         8   11, 14   14  -> 17 cycles
    "systolic": 17,
    # cannon (both rings are 0, 1 for P = 2): the skewed blocks are loaded; in cycle 2 task 0
    # multiplies step 0 and tasks 1 and 3 send A left and B up (1 hop, arriving in cycle 4);
    # tasks 2 and 4 receive them in cycles 4 and 5, in the ramp's order. Task 0's next op
    # acts in cycle 2 + 3 + 2 = 7, when every PE sees both blocks (even one that task 2
    # received in cycle 5, seen in cycle 6), so the order no longer matters:
    #   PE     A from  B from  ramp      task 0: wait A, wait B, multiply   last
    #   (0,0)  E (9)   S (21)  4:A 5:B   7, 10, 13                          13
    #   (0,1)  W (24)  S (23)  4:B 5:A   7, 10, 13                          13
    #   (1,0)  E (11)  N (4)   4:B 5:A   7, 10, 13                          13
    #   (1,1)  W (26)  N (6)   4:B 5:A   7, 10, 13                          13  -> 16 cycles
    "cannon-naive": 16,
    "cannon-interleaved": 16,
    # summa: two steps; step t's roots are column t (A) and row t (B). Step 0's roots are the
    # first PEs of the forward chains (A colors 0 and 4 by row, B 2 and 6 by column) and
    # send in cycle 2 (1 hop, received in cycle 4); (1,1) takes B0 (N, candidate 6) before
    # A0 (W, 28). Step 1's roots (column 1, row 1) first wait for step 0's piece (a wait on
    # a higher-numbered task sees it a cycle late), then send down the backward chains
    # (A colors 1, 5, B 3, 7); (0,0) takes A1 (E, 9) before B1 (S, 19). No router
    # switches: each root is the first PE of the chain it sends on. Step 1's pieces are all
    # in by cycle 11, before any multiply task waits for them (13 at the earliest), so each
    # PE's step 1 starts 5 cycles after its step 0 multiply:
    #   PE     A in  B in  task 4: wait A, wait B, mul | wait A, wait B, mul   last
    #   (0,0)  10    11    2, 5, 8 | 13, 16, 19                              19
    #   (0,1)  4     10    4, 7, 10 | 15, 18, 21                             21
    #   (1,0)  11    4     2, 5, 8 | 13, 16, 19                              19
    #   (1,1)  5     4     5, 8, 11 | 16, 19, 22                             22  -> 25
    "summa": 25,
}


@pytest.mark.parametrize("algo", ALGOS)
def test_cycles_on_2x2_match_hand_derivation(algo):
    """A 2 x 2 run of 1 x 1 tiles on BARE takes the cycles derived by hand in EXACT_CYCLES."""
    a, b = operands(2, 2, 2, 0)
    assert run(algo, a, b, kernel_grid(2, 2), spec=BARE).cycles == EXACT_CYCLES[algo]


@pytest.mark.parametrize("algo", ALGOS)
@pytest.mark.parametrize(
    ("m", "grid", "dtype"), [(64, 8, "fp32"), (64, 8, "fp16"), (48, 6, "fp32")]
)
def test_analytic_within_tolerance(algo, m, grid, dtype):
    """The analytic estimate is within 15 % of the engine on compute-bound square runs."""
    a, b = operands(m, m, m, 1)
    result = run(algo, a, b, kernel_grid(grid, grid), dtype)
    assert result.analytic_cycles == analytic(algo, m, m, m, grid, grid, dtype)
    assert abs(result.analytic_cycles / result.cycles - 1) <= ANALYTIC_TOLERANCE


def test_interleaved_ring_hops_at_most_two():
    """The interleaved ring visits every position once and no shift is longer than two hops;
    the naive ring's wrap-around is P - 1 hops."""
    for p in range(1, 12):
        assert sorted(ring_order(p, "interleaved")) == list(range(p))
        assert max(ring_hops(p, "interleaved")) <= 2
        assert max(ring_hops(p, "naive")) == p - 1


def test_interleaved_ring_beats_naive_when_broadcast_bound():
    """With 1 x 1 tiles on 16 x 16 the naive ring's 15-hop wrap-around holds up the run and
    the two-hop ring is faster. On BARE: with the preset's scalar loop issue (tens of cycles
    an instruction) the multiply of 1 x 1 tiles outlasts every shift, and the rings tie."""
    a, b = operands(16, 16, 16, 2)
    grid = kernel_grid(16, 16)
    naive, interleaved = (
        cannon(a, b, grid, BARE, "fp32", ring) for ring in ("naive", "interleaved")
    )
    assert interleaved.cycles < naive.cycles


def test_cannon_needs_square_grid():
    """Cannon on a non-square grid is a ConfigError that says so."""
    a, b = operands(6, 6, 6, 0)
    with pytest.raises(ConfigError, match=r"square grid, got 2 rows by 3 columns"):
        cannon(a, b, kernel_grid(2, 3), SPEC, "fp32")


def test_unknown_ring_is_rejected():
    """An unknown ring name is a ConfigError listing the valid ones."""
    a, b = operands(4, 4, 4, 0)
    with pytest.raises(ConfigError, match="naive, interleaved"):
        cannon(a, b, kernel_grid(2, 2), SPEC, "fp32", ring="spiral")


@pytest.mark.parametrize("algo", ALGOS)
def test_tile_too_big_for_sram(algo):
    """Tiles that do not fit a PE's 48 KB are a ConfigError naming the SRAM need."""
    a, b = operands(256, 256, 256, 0)
    with pytest.raises(ConfigError, match=r"SRAM: PE \(\d+,\d+\) needs \d+ bytes"):
        run(algo, a, b, kernel_grid(2, 2))


@pytest.mark.parametrize("algo", ALGOS)
def test_bad_operands(algo):
    """Mismatched inner dimensions, an unknown dtype and too few rows are ConfigErrors."""
    a, b = operands(4, 4, 4, 0)
    with pytest.raises(ConfigError, match=r"m x k and k x n"):
        run(algo, a, b[:3], kernel_grid(2, 2))
    with pytest.raises(ConfigError, match="fp32, fp16, bf16"):
        run(algo, a, b, kernel_grid(2, 2), "fp8")
    with pytest.raises(ConfigError, match="m=1 must be >= 2"):
        run(algo, a[:1], b, kernel_grid(2, 2))
