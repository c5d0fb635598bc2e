"""The core's queues: each color a PE reads is bound to an input queue and each color it sends on
to an output queue, in color order from queue 1; the engine's router hands the core no more of
a color than its input queue holds, and the core sends no more ahead than its output queue."""

import numpy as np
import pytest
from wafersim.fabric import _engine_jit as K
from wafersim.fabric.core_queues import input_depths, output_depths, receive_depths, send_depths
from wafersim.fabric.engine import program_state, run_kernel
from wafersim.fabric.mesh import Mesh
from wafersim.fabric.program import ProgramBuilder
from wafersim.fabric.routes import ColorRoutes
from wafersim.fabric.state import empty_traffic, start_tasks
from wafersim.wafer.errors import ConfigError
from wafersim.wafer.presets import preset
from wafersim.wafer.spec import spec_from_dict

SPEC = preset("tiny")


def test_queue_depths_follow_the_sdk():
    """WSE-2: input queues 0-1 six wavelets, 2-3 four, 4-7 two; output queues 0-1 two, 2-3
    six, 4-5 two (the SDK's DSD page and its allreduce pe.csl). WSE-3: 8, 4, 4 in; 8 out."""
    assert input_depths(preset("wse2").pe).tolist() == [6, 6, 4, 4, 2, 2, 2, 2]
    assert output_depths(preset("wse2").pe).tolist() == [2, 2, 6, 6, 2, 2]
    assert input_depths(preset("wse3").pe).tolist() == [8, 8, 4, 4, 4, 4, 4, 4]
    assert output_depths(preset("wse3").pe).tolist() == [8] * 6


def test_colors_take_queues_from_one_in_color_order():
    """PE 0 reads colors 5, 1 and 3 (two tasks, one of them in a loop): 1 -> queue 1 (6),
    3 -> queue 2 (4), 5 -> queue 3 (4); colors it sends on or never reads take queue 7's (2).
    PE 1 reads nine colors: the eighth and ninth share queue 7's depth."""
    builder = ProgramBuilder(2, SPEC.pe, 12, tasks=2)
    builder.recv(0, 0, 5, 0, 4)
    builder.repeat(3, lambda i: builder.fmacs(0, 1, 1, 8, 16 + 4 * i, 2, 1), None)
    builder.recv_add(0, 1, 3, 40, 4)
    builder.send(0, 0, 7, 0, 4)
    for c in range(9):
        builder.recv(1, c % 2, c, 0, 1)
    program = builder.build()
    depths = receive_depths(program, 12, SPEC.pe)
    assert depths[0].tolist() == [2, 6, 2, 4, 2, 4, 2, 2, 2, 2, 2, 2]
    assert depths[1].tolist() == [6, 4, 4, 2, 2, 2, 2, 2, 2, 2, 2, 2]
    # PE 0 sends on color 7 alone: output queue 1 (two deep); the rest take queue 5's (two)
    assert send_depths(program, 12, SPEC.pe)[0].tolist() == [2] * 12


def test_sends_take_output_queues_from_one_in_color_order():
    """Colors 4, 0, 9, 2, 6 and 8 sent: 0 -> queue 1 (2), 2 -> 2 (6), 4 -> 3 (6), 6 -> 4 (2),
    8 -> 5 (2), 9 past the last queue (2)."""
    builder = ProgramBuilder(1, SPEC.pe, 10, tasks=2)
    for i, c in enumerate((4, 0, 9, 2, 6, 8)):
        builder.send(0, i % 2, c, 0, 1)
    depths = send_depths(builder.build(), 10, SPEC.pe)[0]
    assert depths[[0, 2, 4, 6, 8, 9]].tolist() == [2, 6, 6, 2, 2, 2]


def _held_by_a_busy_reader(spec):
    """PE 0 streams 20 words on each of colors 0 and 2 to PE 1, which computes for 300
    cycles before it reads either: the most wavelets of each color PE 1's input queues held,
    and PE 0's output queues (its router's ramp queues)."""
    mesh = Mesh.full(2, 1)
    routes = ColorRoutes(mesh, 3)
    routes.add_path(0, [0, 1])
    routes.add_path(2, [0, 1])
    builder = ProgramBuilder(mesh.pes, spec.pe, 3, tasks=2)
    builder.send(0, 0, 0, 0, 20)
    builder.send(0, 1, 2, 0, 20)
    builder.vscale(1, 0, 100, 100, 2.0, 300)
    builder.recv(1, 0, 0, 0, 20)
    builder.wait(1, 1, 0, 1)
    builder.recv(1, 1, 2, 40, 20)
    program = builder.build()
    fab, st = program_state(mesh, spec, routes.table, program, 500)
    start_tasks(st, program, fab.startup)
    traffic = empty_traffic(mesh.width, mesh.height)
    held, sent = np.zeros(3, np.int64), np.zeros(3, np.int64)
    for t in range(2000):
        status, _ = run_kernel(fab, st, program, traffic, t, t + 1, False)
        held = np.maximum(held, st.rx_count[1])
        sent = np.maximum(sent, st.q_count[0, K.RAMP])
        if status == K.STATUS_DONE:
            return held, sent
    pytest.fail("the program did not finish")


def test_a_busy_reader_and_its_sender_hold_as_many_wavelets_as_their_queues():
    """Color 0 is bound to input queue 1 (six deep) and output queue 1 (two), color 2 to
    input queue 2 (four) and output queue 2 (six); the rest wait in the link's queue."""
    held, sent = _held_by_a_busy_reader(SPEC)
    assert held[[0, 2]].tolist() == [6, 4]
    assert sent[[0, 2]].tolist() == [2, 6]
    depths = {"input_queue_01": 9, "input_queue_23": 1, "output_queue_01": 3, "output_queue_23": 1}
    other = SPEC.replace({f"pe.{queue}_wavelets": depth for queue, depth in depths.items()})
    held, sent = _held_by_a_busy_reader(other)
    assert held[[0, 2]].tolist() == [9, 1]
    assert sent[[0, 2]].tolist() == [3, 1]


def test_a_spec_file_may_leave_the_core_queues_out():
    """Older spec files name no core queues: they take the WSE-2's; a value out of range is
    refused with the field's name."""
    data = SPEC.to_dict()
    for key in [k for k in data["pe"] if "_queue_" in k]:
        del data["pe"][key]
    assert spec_from_dict(data).pe == SPEC.pe
    data["pe"]["input_queue_47_wavelets"] = 0
    with pytest.raises(ConfigError, match="input_queue_47_wavelets=0 is out of range"):
        spec_from_dict(data)


def test_a_program_binds_colors_to_queues_and_the_rest_take_the_free_ones():
    """PE 0 reads colors 1, 3 and 5 and binds 3 to input queue 1: 3 -> queue 1 (six), 1 ->
    queue 2 (four), 5 -> queue 3 (four). PE 1 binds color 0 to queue 4 (two) and reads 0 and
    2: 2 takes queue 1 (six). PE 2 shares PE 1's program and so its bindings. Sends alike."""
    builder = ProgramBuilder(3, SPEC.pe, 8)
    for c in (1, 3, 5):
        builder.recv(0, 0, c, 0, 1)
    builder.bind_queue(0, 3, 1)
    builder.recv(1, 0, 0, 0, 1)
    builder.recv(1, 0, 2, 0, 1)
    builder.send(1, 0, 6, 0, 1)
    builder.send(1, 0, 7, 0, 1)
    builder.bind_queue([1], 0, 4)
    builder.bind_queue(1, 7, 1, output=True)
    builder.share([2], [1])
    program = builder.build()
    depths = receive_depths(program, 8, SPEC.pe)
    assert depths[0, [1, 3, 5]].tolist() == [4, 6, 4]
    assert depths[1, [0, 2]].tolist() == depths[2, [0, 2]].tolist() == [2, 6]
    # output: 7 bound to queue 1 (two), 6 takes the first free one, 2 (six)
    assert send_depths(program, 8, SPEC.pe)[2, [6, 7]].tolist() == [6, 2]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        ((0, 1, 8), "input queue=8 is out of range \\[0, 7\\]"),
        ((0, 1, 6, True), "output queue=6 is out of range \\[0, 5\\]"),
        ((0, 9, 1), "color=9 is out of range \\[0, 7\\]"),
        ((0, 2, 3), "PE 0: color 2 or input queue 3 is bound"),  # queue 3 holds color 1
        ((0, 1, 4), "PE 0: color 1 or input queue 4 is bound"),  # color 1 is on queue 3
        ((5, 1, 4), "pe=5 is out of range"),
    ],
)
def test_a_binding_the_core_cannot_make_is_refused(call, message):
    builder = ProgramBuilder(2, SPEC.pe, 8)
    builder.bind_queue(0, 1, 3)
    with pytest.raises(ConfigError, match=message):
        builder.bind_queue(*call)


def test_a_pe_that_shares_a_program_binds_no_queue_of_its_own():
    """Bindings go with the program: a sharing PE takes its model's, so binding one of its
    own is refused, and so is sharing once it has bound one."""
    builder = ProgramBuilder(3, SPEC.pe, 4)
    builder.share([1], [0])
    with pytest.raises(ConfigError, match="PE 1 runs PE 0's programs"):
        builder.bind_queue(1, 2, 3)
    builder.bind_queue(2, 2, 3)
    with pytest.raises(ConfigError, match="PE 2 has ops or queue bindings of its own"):
        builder.share([2], [0])


def test_a_plans_bindings_follow_its_colors_renumbered():
    """A plan runs on the colors it uses, renumbered from 0: its bindings move with them."""
    from wafersim.kernels.grid import kernel_grid
    from wafersim.kernels.kernel_plan import KernelPlan

    plan = KernelPlan(kernel_grid(1, 2), SPEC)
    src, dst = int(plan.grid.pe[0, 0]), int(plan.grid.pe[0, 1])
    color = 5
    plan.wiring.connect(color, src, [dst], "stream")
    plan.prog.send(src, 0, color, plan.alloc(src, 4, "out"), 4)
    plan.prog.recv(dst, 0, color, plan.alloc(dst, 4, "in"), 4)
    plan.prog.bind_queue(dst, color, 6)
    _routes, program = plan._compact_colors()
    assert program.queues.shape[2] == 1  # one color in use, now color 0
    assert program.queues[0, dst, 0] == 6
    assert receive_depths(program, 1, SPEC.pe)[dst, 0] == 2
