"""PEs that share one program (ProgramBuilder.share): stored once, run by each on its own SRAM."""

import numpy as np
import pytest
from wafersim.fabric import _engine_jit as K
from wafersim.fabric.engine import simulate
from wafersim.fabric.mesh import Mesh
from wafersim.fabric.program import ProgramBuilder
from wafersim.fabric.routes import ColorRoutes
from wafersim.fabric.switches import switch_ops
from wafersim.wafer.errors import ConfigError
from wafersim.wafer.presets import preset

SPEC = preset("tiny")
LEAVES = (1, 3, 5, 7)


def star(shared: bool):
    """The centre of a 3 x 3 mesh multicasts 16 words; every leaf adds them into its own
    vector, scales it and waits on a second task: each its own program, or the first leaf's
    shared by the others."""
    mesh = Mesh.full(3, 3)
    routes = ColorRoutes(mesh, 1)
    for leaf in LEAVES:
        routes.add_path(0, [4, leaf])
    prog = ProgramBuilder(9, SPEC.pe, 1, tasks=2)
    prog.send(4, 0, 0, 0, 16)
    for leaf in LEAVES[:1] if shared else LEAVES:
        prog.recv_add(leaf, 0, 0, 50, 16)
        prog.vscale(leaf, 0, 70, 50, 2.0, 16)
        prog.wait(leaf, 1, 0, 2)
        prog.vadd(leaf, 1, 90, 70, 50, 16)
    if shared:
        prog.share(list(LEAVES[1:]), [LEAVES[0]] * 3)
    memory = np.random.default_rng(0).standard_normal((9, 128)).astype(np.float32)
    return mesh, routes, prog.build(), memory


def test_pes_sharing_a_program_run_as_if_each_had_its_own_copy():
    mesh, routes, own, memory = star(shared=False)
    *_, shared, _ = star(shared=True)
    assert len(shared.ops) == 1 + 4  # the centre's send, the first leaf's four ops
    assert len(own.ops) == 1 + 4 * 4
    a = simulate(mesh, SPEC, routes, own, memory, max_cycles=1000)
    b = simulate(mesh, SPEC, routes, shared, memory, max_cycles=1000)
    assert a.cycles == b.cycles
    np.testing.assert_array_equal(a.mem.flat, b.mem.flat)
    np.testing.assert_array_equal(a.pe_busy_cycles, b.pe_busy_cycles)
    for leaf in LEAVES:  # each leaf on its own words
        want = (memory[leaf, 50:66] + memory[4, :16]) * np.float32(2)
        np.testing.assert_array_equal(b.mem[leaf, 70:86], want)


def test_a_shared_switch_op_moves_every_sharing_router():
    prog = ProgramBuilder(4, SPEC.pe, 2)
    prog.switch(1, 0, 1, [0, 0, 0, 0, 1])
    prog.share([2, 3], [1, 1])
    assert switch_ops(prog.build()).pes.tolist() == [1, 2, 3]


def test_sharing_refuses_what_would_lose_or_mix_ops():
    prog = ProgramBuilder(4, SPEC.pe, 1)
    prog.vadd(0, 0, 0, 0, 0, 4)
    prog.share([1], [0])
    with pytest.raises(ConfigError, match=r"PE 1 runs PE 0's programs \(share\): add ops there"):
        prog.vadd(1, 0, 0, 0, 0, 4)
    with pytest.raises(ConfigError, match="PE 0 has ops or queue bindings of its own"):
        prog.share([0], [2])
    with pytest.raises(ConfigError, match="PE 1 runs PE 0's programs: share those"):
        prog.share([2], [1])
    with pytest.raises(ConfigError, match="share: 2 PEs and 1 models: one model a PE"):
        prog.share([2, 3], [0])
    assert prog.ops_in(1, 0) == 1


def recorded_program(**options):
    """The program of a weight-streaming GEMM on 6 x 5 PEs (m = 15: each PE's tile alike
    within its row), recorded instead of run."""
    from wafersim.kernels.gemm_weight_stream import weight_stream
    from wafersim.kernels.grid import kernel_grid
    from wafersim.kernels.kernel_plan import recorded

    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((15, 24)), rng.standard_normal((24, 64))
    record = recorded(weight_stream, a, b, kernel_grid(6, 5), preset("wse2"), "fp32", **options)
    grid, program = record.plan.grid, record.program
    ranges = {tuple(program.task_start[pe]) for pe in grid.pe.reshape(-1)}
    return grid, ranges


def test_a_weight_streaming_row_runs_one_program_and_a_staged_run_one_a_pe():
    grid, ranges = recorded_program()
    assert len(ranges) == grid.rows  # a row's five PEs share their first's program
    grid, ranges = recorded_program(inputs="streamed")
    assert len(ranges) == grid.rows * grid.cols


def test_a_builder_builds_again_after_more_ops_in_the_order_added():
    """A later build adds the new ops after each PE's earlier ones."""
    prog = ProgramBuilder(3, SPEC.pe, 1)
    prog.vadd(np.array([2, 0]), 0, 0, 0, 0, 4)
    prog.vscale(1, 0, 0, 0, 1.0, 4)
    first = prog.build()
    prog.vfma(np.array([0, 2]), 0, 0, 0, 0, 4)
    second = prog.build()
    codes = lambda p, pe: p.ops[p.task_start[pe, 0] : p.task_end[pe, 0], 0].tolist()  # noqa: E731
    assert [codes(first, pe) for pe in range(3)] == [[K.OP_VADD], [K.OP_VSCALE], [K.OP_VADD]]
    want = [[K.OP_VADD, K.OP_VFMA], [K.OP_VSCALE], [K.OP_VADD, K.OP_VFMA]]
    assert [codes(second, pe) for pe in range(3)] == want
