"""The core's input queues: each color a PE reads is bound to one, in color order from queue 1,
and the engine's router hands the core no more of a color than its queue holds."""

import numpy as np
import pytest
from wafersim.fabric import _engine_jit as K
from wafersim.fabric.engine import program_state, run_kernel
from wafersim.fabric.input_queues import queue_depths, receive_depths
from wafersim.fabric.mesh import Mesh
from wafersim.fabric.program import ProgramBuilder
from wafersim.fabric.routes import ColorRoutes
from wafersim.fabric.state import empty_traffic, start_tasks
from wafersim.wafer.errors import ConfigError
from wafersim.wafer.presets import preset
from wafersim.wafer.spec import spec_from_dict

SPEC = preset("tiny")


def test_wse2_queue_depths_follow_the_sdk_example():
    """Queues 0-1 six wavelets, 2-3 four, 4-7 two (the SDK's allreduce pe.csl)."""
    assert queue_depths(preset("wse2").pe).tolist() == [6, 6, 4, 4, 2, 2, 2, 2]


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
    depths = receive_depths(builder.build(), 12, SPEC.pe)
    assert depths[0].tolist() == [2, 6, 2, 4, 2, 4, 2, 2, 2, 2, 2, 2]
    assert depths[1].tolist() == [6, 4, 4, 2, 2, 2, 2, 2, 2, 2, 2, 2]


def _held_by_a_busy_reader(spec):
    """PE 0 streams 20 words on each of colors 0 and 2 to PE 1, which computes for 300
    cycles before it reads either: the most wavelets of each color its core's queues held."""
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
    held = np.zeros(3, np.int64)
    for t in range(2000):
        status, _ = run_kernel(fab, st, program, traffic, t, t + 1, False)
        held = np.maximum(held, st.rx_count[1])
        if status == K.STATUS_DONE:
            return held
    pytest.fail("the program did not finish")


def test_a_busy_reader_holds_as_many_wavelets_as_its_queue():
    """Color 0 is bound to queue 1 (six deep), color 2 to queue 2 (four); the rest wait in
    the routers behind them."""
    assert _held_by_a_busy_reader(SPEC)[[0, 2]].tolist() == [6, 4]
    deeper = SPEC.replace({"pe.input_queue_01_wavelets": 9, "pe.input_queue_23_wavelets": 1})
    assert _held_by_a_busy_reader(deeper)[[0, 2]].tolist() == [9, 1]


def test_a_spec_file_may_leave_the_input_queues_out():
    """Older spec files name no input queues: they take the WSE-2's; a value out of range
    is refused with the field's name."""
    data = SPEC.to_dict()
    for key in ("input_queue_01_wavelets", "input_queue_23_wavelets", "input_queue_47_wavelets"):
        del data["pe"][key]
    assert spec_from_dict(data).pe == SPEC.pe
    data["pe"]["input_queue_47_wavelets"] = 0
    with pytest.raises(ConfigError, match="input_queue_47_wavelets=0 is out of range"):
        spec_from_dict(data)
