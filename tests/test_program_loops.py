"""Loops in PE programs (ProgramBuilder.repeat): a rolled program runs bit for bit as the
same program written out, iteration by iteration, and no longer grows with its iterations."""

import numpy as np
import pytest
from wafersim.fabric import _engine_jit as K
from wafersim.fabric.engine import simulate
from wafersim.fabric.mesh import Mesh
from wafersim.fabric.program import NotALoop, ProgramBuilder, row_repeats, task_ops, words
from wafersim.fabric.routes import ColorRoutes
from wafersim.kernels import gemm_weight_stream as ws
from wafersim.kernels.fast_tier import grid_with_holes
from wafersim.kernels.grid import kernel_grid
from wafersim.kernels.kernel_plan import recorded
from wafersim.wafer.errors import ConfigError
from wafersim.wafer.presets import preset

SPEC = preset("tiny")
VALUES = 8  # values a step streams
WORD_VALUES = {"fp32": 1, "fp16": 2, "bf16": 2}


def stream_program(roll: bool, dtype: str, count: int, nested: bool):
    """PE 0 streams ``count`` blocks to PE 1, which adds each into a buffer of its own,
    scales it, multiplies it into an accumulator (fmacs) and, on a second task that waits
    for the first, adds two vectors; ``nested``: each step also streams three parts by an
    inner loop."""
    prog = ProgramBuilder(2, SPEC.pe, 1, tasks=2)
    prog.roll_loops = roll
    w = words(VALUES, dtype)

    def part(i, j):
        prog.send(0, 0, 0, i * w + j * 2, 2 * WORD_VALUES[dtype], dtype)

    def part_in(i, j):
        prog.recv(1, 0, 0, 600 + i * 8 + j * 2, 2 * WORD_VALUES[dtype], dtype)

    def step(i):
        prog.send(0, 0, 0, i * w, VALUES, dtype)
        if nested:
            prog.repeat(3, lambda j: part(i, j))
        prog.send(0, 0, 0, 900, 4, dtype)
        prog.recv_add(1, 0, 0, 100 + i * w, VALUES, dtype)
        if nested:
            prog.repeat(3, lambda j: part_in(i, j))
        prog.vscale(1, 0, 200 + i * w, 100 + i * w, 0.5, VALUES, dtype)
        prog.fmacs(1, 0, 0, 400 + i * 4, 500, 4, 4, dtype)
        prog.wait(1, 1, 0, prog.ops_in(1, 0))
        prog.vadd(1, 1, 300 + i * w, 200 + i * w, 100, VALUES, dtype)

    prog.vscale(1, 1, 700, 700, 2.0, 4)
    prog.repeat(count, step)
    prog.send(0, 0, 0, 0, 4, dtype)
    prog.recv(1, 0, 0, 800, 4, dtype)
    return prog.build()


def run(program):
    mesh = Mesh.full(2, 1)
    routes = ColorRoutes(mesh, 1)
    routes.add_path(0, [0, 1])
    memory = np.random.default_rng(1).standard_normal((2, 1024)).astype(np.float32)
    return simulate(mesh, SPEC, routes, program, memory, max_cycles=100_000)


def assert_identical(a, b):
    """The same cycles, SRAM, counters and ops done."""
    assert a.cycles == b.cycles
    np.testing.assert_array_equal(a.mem.flat.view(np.uint32), b.mem.flat.view(np.uint32))
    for name in ("pe_busy_cycles", "pe_stall_cycles", "pe_cycle_reasons", "link_flits",
                 "link_stalls", "ops_done"):  # fmt: skip
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)


@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
@pytest.mark.parametrize("nested", [False, True])
@pytest.mark.parametrize("count", [1, 2, 3, 7])
def test_a_loop_runs_as_its_iterations_written_out(dtype, nested, count):
    """Rolled and written out: the same run, bit for bit; the rolled table no longer grows
    with the iterations."""
    rolled = stream_program(True, dtype, count, nested)
    plain = stream_program(False, dtype, count, nested)
    assert_identical(run(rolled), run(plain))
    np.testing.assert_array_equal(task_ops(rolled), task_ops(plain))
    np.testing.assert_array_equal(task_ops(plain), plain.task_end - plain.task_start)
    if count >= 3:
        assert len(rolled.ops) < len(plain.ops)
        assert len(stream_program(True, dtype, count + 10, nested).ops) == len(rolled.ops)


def test_row_repeats_counts_nested_bodies():
    """A body row runs its loop's count times, a nested one the product; headers and step
    rows never."""
    program = stream_program(True, "fp32", 5, nested=True)
    times = row_repeats(program)
    control = np.isin(program.ops[:, K.C_CODE], (K.OP_LOOP, K.OP_STEPS))
    assert (times[control] == 0).all()
    assert sorted(set(times[~control].tolist())) == [1, 5, 15]


def builder():
    return ProgramBuilder(2, SPEC.pe, 1, tasks=2)


@pytest.mark.parametrize(
    ("count", "emit", "match"),
    [
        (0, lambda p, i: None, "count=0"),
        (3, lambda p, i: p.vadd(0, 0, 10 * i * i, 0, 0, 4), "fixed step"),
        (3, lambda p, i: p.vadd(0, 0, 0, 0, 0, 4 + i), "other ops"),
        (3, lambda p, i: [p.vadd(0, 0, 0, 0, 0, 4) for _ in range(i + 1)], "other ops"),
        (3, lambda p, i: p.vadd(i % 2, 0, 0, 0, 0, 4), "other ops"),
        (3, lambda p, i: p.vscale(0, 0, 0, 0, float(i), 4), "other ops"),
        (5000, lambda p, i: p.vadd(0, 0, 4 * i, 0, 0, 4), "SRAM range"),
        (3, lambda p, i: p.switch(0, 0, 0, [1, 0, 0, 0, 0]), "switch"),
    ],
)  # fmt: skip
def test_a_loop_that_is_not_one_is_refused(count, emit, match):
    """A count below one, iterations that differ but in addresses moving by a fixed step,
    a last iteration outside the PE's SRAM and a switch in a loop are refused."""
    prog = builder()
    with pytest.raises(ConfigError, match=match):
        prog.repeat(count, lambda i: emit(prog, i))


def test_a_loop_that_is_not_one_falls_back_to_its_iterations():
    """``fallback``: the iterations written out, once the kernel's state is set back."""
    prog = builder()
    reset = []
    prog.repeat(4, lambda i: prog.vadd(0, 0, i * i, 0, 0, 4), fallback=lambda: reset.append(1))
    built = prog.build()
    assert reset == [1]
    assert built.ops[:, K.C_DST].tolist() == [0, 1, 4, 9]
    assert (built.ops[:, K.C_CODE] == K.OP_VADD).all()


def test_loops_nest_a_fixed_depth():
    """Loops nest ``LOOP_DEPTH`` deep; one more is refused."""
    prog = builder()

    def nest(depth):
        if depth == 0:
            return lambda i: prog.vadd(0, 0, 0, 0, 0, 4)
        return lambda i: prog.repeat(3, nest(depth - 1))

    nest(K.LOOP_DEPTH)(0)
    assert task_ops(prog.build())[0, 0] == 3**K.LOOP_DEPTH
    with pytest.raises(ConfigError, match="nest"):
        nest(K.LOOP_DEPTH + 1)(0)


def test_a_program_that_starts_with_a_loop():
    """A task whose first row is a loop's header starts inside it."""
    programs = []
    for roll in (True, False):
        prog = ProgramBuilder(2, SPEC.pe, 1, tasks=1)
        prog.roll_loops = roll
        prog.repeat(5, lambda i, p=prog: (p.send(0, 0, 0, 4 * i, 4), p.recv(1, 0, 0, 4 * i, 4)))
        programs.append(prog.build())
    assert programs[0].ops[programs[0].task_start[0, 0], K.C_CODE] == K.OP_LOOP
    assert_identical(run(programs[0]), run(programs[1]))


def weight_stream_runs(monkeypatch, a, b, grid, dtype, reduce, **options):
    """The weight-streaming kernel built with loops, and written out: its run and op table
    (rows) each way."""
    args = (a, b, grid, SPEC, dtype, reduce)
    rolled = ws.weight_stream(*args, **options), recorded(ws.weight_stream, *args, **options)
    monkeypatch.setattr(ProgramBuilder, "roll_loops", False)
    plain = ws.weight_stream(*args, **options), recorded(ws.weight_stream, *args, **options)
    return rolled[0], plain[0], len(rolled[1].program.ops), len(plain[1].program.ops)


def operands(m, k, n, seed=0, density=1.0):
    """Random ``A`` and ``B``, ``B``'s values kept with probability ``density``."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    return a, np.where(rng.random(b.shape) < density, b, np.float32(0))


@pytest.mark.parametrize(
    ("grid", "shape", "dtype", "reduce", "density", "options"),
    [
        ((4, 2), (8, 16, 763), "fp32", "chain", 1.0, {}),  # two chunk widths
        ((2, 2), (8, 16, 1000), "fp32", "tree", 1.0, {}),  # two widths, a loop each
        ((2, 2), (8, 16, 500), "fp16", "tree", 1.0, {}),
        ((2, 3), (8, 16, 500), "bf16", "chain", 1.0, {}),
        ((2, 2), (8, 16, 300), "fp32", "tree", 0.1, {}),  # pruned: written out
        ((2, 2), (8, 16, 300), "fp32", "chain", 1.0, {"inputs": "streamed", "outputs": "gathered"}),
        ("holes", (16, 64, 1024), "fp16", "tree", 1.0, {}),
        ("holes", (16, 64, 1024), "fp32", "chain", 1.0, {}),
    ],
)  # fmt: skip
def test_weight_streaming_loops_run_as_written_out(monkeypatch, grid, shape, dtype, reduce,
                                                   density, options):  # fmt: skip
    """Weight streaming's chunks as loops (all its blocks dense): a shorter op table whose
    run is its written-out program's, bit for bit (cycles, output, busy cycles, reasons),
    with two chunk widths, staged and with holes."""
    grid = grid_with_holes(8, 4, 0.1, seed=5) if grid == "holes" else kernel_grid(*grid)
    rolled, plain, rolled_ops, plain_ops = weight_stream_runs(
        monkeypatch, *operands(*shape, density=density), grid, dtype, reduce, **options
    )
    assert (rolled_ops < plain_ops) == (density == 1)
    assert rolled.cycles == plain.cycles
    np.testing.assert_array_equal(rolled.output.view(np.uint32), plain.output.view(np.uint32))
    np.testing.assert_array_equal(rolled.pe_busy_cycles, plain.pe_busy_cycles)
    np.testing.assert_array_equal(rolled.pe_cycle_reasons, plain.pe_cycle_reasons)


def test_weight_streaming_iterations_that_are_no_loop_are_written_out(monkeypatch):
    """Iterations refused as a loop once built are written out from the kernel's state
    before them: the op table of the kernel written out, row for row."""
    a, b = operands(8, 16, 500)
    args = (ws.weight_stream, a, b, kernel_grid(2, 3), SPEC, "fp32", "chain")
    check = ProgramBuilder._check_same

    def refuse_the_last(self, first, other, which):
        if which != "iteration 1":
            raise NotALoop(which)
        check(self, first, other, which)

    monkeypatch.setattr(ProgramBuilder, "_check_same", refuse_the_last)
    refused = recorded(*args).program.ops
    monkeypatch.setattr(ProgramBuilder, "roll_loops", False)
    np.testing.assert_array_equal(refused, recorded(*args).program.ops)


def test_weight_streaming_program_stops_growing_with_its_chunks():
    """A tree's chunks repeat every two: eight times the chunks, the same op table."""
    sizes = []
    for n in (256, 2048):
        a, b = operands(8, 16, n)
        record = recorded(ws.weight_stream, a, b, kernel_grid(2, 2), SPEC, "fp32", "tree")
        sizes.append(len(record.program.ops))
    assert sizes[0] == sizes[1]


def each_program(roll: bool, counts):
    """PE ``p`` adds ``counts[p]`` blocks of its own SRAM into an accumulator, a loop of
    its own count each (``repeat_each``), between ops before and after."""
    prog = ProgramBuilder(2, SPEC.pe, 1, tasks=1)
    prog.roll_loops = roll
    pes = np.arange(2)
    prog.vscale(pes, 0, 500, 500, 2.0, 4)

    def block(on, i):
        prog.vadd(on, 0, 500, 500, 8 * i, 4)
        prog.vaxpy(on, 0, 600 + 4 * i, 8 * i + 4, 0.5, 4)

    prog.repeat_each(pes, np.array(counts), block)
    prog.vadd(pes, 0, 700, 500, 600, 4)
    return prog.build()


@pytest.mark.parametrize("counts", [(7, 4), (9, 2), (0, 5), (1, 2)])
def test_loops_of_a_count_a_pe_run_as_written_out(counts):
    """A loop with a count of its own on each PE: the run of its iterations written out,
    bit for bit; PEs of fewer than three written out, the others one loop each."""
    rolled, plain = each_program(True, counts), each_program(False, counts)
    assert_identical(run(rolled), run(plain))
    np.testing.assert_array_equal(task_ops(rolled), task_ops(plain))
    heads = rolled.ops[:, K.C_CODE] == K.OP_LOOP
    assert rolled.ops[heads, K.C_N].tolist() == [c for c in counts if c >= 3]


def test_a_loop_of_a_count_a_pe_adds_to_its_pes_alone():
    """``repeat_each``: an iteration adding ops to a PE not given, or a PE given twice,
    is refused."""
    prog = builder()
    with pytest.raises(ConfigError, match="not given"):
        prog.repeat_each([0], [3], lambda on, i: prog.vadd(on + 1, 0, 4 * i, 0, 0, 4))
    with pytest.raises(ConfigError, match="twice"):
        prog.repeat_each([0, 0], [3, 4], lambda on, i: None)


@pytest.mark.parametrize(
    ("pes", "counts", "message"),
    [
        ([0], [2.7], "counts must be integers"),
        ([0], [True], "counts must be integers"),
        ([0, 1], [3, 4, 5], "3 counts for 2 PEs"),
        ([[0, 1]], [3], "pes must be a 1-D array"),
        ([0], [-1], "loop count=-1 must be >= 0"),
    ],
)
def test_a_loop_of_a_count_a_pe_refuses_counts_that_are_not_one_integer_a_pe(pes, counts, message):
    """Counts that are not integers (or bools), as many as the PEs, or a 2-D list of PEs,
    are refused naming the field before any op is added."""
    prog = builder()
    with pytest.raises(ConfigError, match=message):
        prog.repeat_each(pes, counts, lambda on, i: prog.vadd(on, 0, 4 * i, 0, 0, 4))
    assert not prog.ops_in(np.array([0, 1]), 0).any()


def test_a_pe_runs_at_most_max_tasks_tasks():
    """The engine tallies a cycle's task statuses a byte each: a builder of more tasks a PE
    is refused before any op, naming the range."""
    with pytest.raises(ConfigError, match=rf"tasks=256 is out of range \[1, {K.MAX_TASKS}\]"):
        ProgramBuilder(2, preset("tiny").pe, 1, tasks=256)
    ProgramBuilder(2, preset("tiny").pe, 1, tasks=K.MAX_TASKS)
