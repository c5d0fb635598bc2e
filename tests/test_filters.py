"""Router filters: a route sends a color to the ramp and on, and the router hands its PE only the
wavelets its filter takes (the SDK's range and counter filters), forwarding them all."""

import numpy as np
import pytest
from wafersim.fabric.engine import simulate
from wafersim.fabric.filters import with_index
from wafersim.fabric.mesh import Mesh
from wafersim.fabric.program import ProgramBuilder
from wafersim.fabric.routes import ColorRoutes
from wafersim.wafer.errors import ConfigError, DeadlockError
from wafersim.wafer.geometry import RAMP
from wafersim.wafer.geometry import E as EAST
from wafersim.wafer.geometry import W as WEST
from wafersim.wafer.presets import preset

SPEC = preset("tiny")
WORDS = 32


def _row_stream(width: int, taken: int):
    """PE 0 sends 12 words east along a row of ``width``; every other PE's router sends them
    to its ramp and on east (the last one to its ramp alone), and its PE receives ``taken``
    of them into words 16 on."""
    mesh = Mesh.full(width, 1)
    routes = ColorRoutes(mesh, 1)
    routes.add(0, RAMP, 0, (EAST,))
    for pe in range(1, width):
        routes.add(pe, WEST, 0, (RAMP, EAST) if pe < width - 1 else (RAMP,))
    builder = ProgramBuilder(mesh.pes, SPEC.pe, 1)
    builder.send(0, 0, 0, 0, 12)
    for pe in range(1, width):
        builder.recv(pe, 0, 0, 16, taken)
    return mesh, routes, builder.build()


def test_range_filters_hand_each_pe_its_part_of_a_stream_as_the_sdk_tutorial_does():
    """The SDK's topic-08 tutorial: PE 0 sends 12 wavelets whose index field counts 0..11;
    PE k's range filter takes indices 3k..3k+2; PEs 1 and 2 forward all twelve, PE 3 drops
    the nine it does not take."""
    mesh, routes, program = _row_stream(4, 3)
    for pe in range(1, 4):
        routes.range_filter(pe, 0, min_idx=3 * pe, max_idx=3 * pe + 2)
    memory = np.zeros((4, WORDS), np.float32)
    memory[0, :12] = with_index(np.arange(100, 112), np.arange(12))
    result = simulate(mesh, SPEC, routes, program, memory, max_cycles=500)
    got = np.array([result.mem.words(pe)[16:19] for pe in range(4)]).view(np.uint32)
    for pe in range(1, 4):
        assert (got[pe] >> 16).tolist() == [3 * pe, 3 * pe + 1, 3 * pe + 2]
        assert (got[pe] & 0xFFFF).tolist() == [100 + 3 * pe + i for i in range(3)]
    assert result.link_flits.reshape(4, 5)[1:, RAMP].tolist() == [3, 3, 3]
    assert result.link_flits.reshape(4, 5)[:3, EAST].tolist() == [12, 12, 12]
    assert result.leftover_wavelets == 0


def test_counter_filters_take_one_block_in_every_period_as_the_sdk_fft_transpose_does():
    """The SDK's 2D FFT transpose sets ``limit1 = TRANS_LEN - 1``, ``max_counter = BRICK - 1``
    and staggers ``init_counter`` by bricks: here 12 wavelets in periods of 6, blocks of 2,
    PE k starting its count at 6 - 2 (k - 1), so it takes block k - 1 of each period."""
    mesh, routes, program = _row_stream(4, 4)
    for pe in range(1, 4):
        start = (6 - 2 * (pe - 1)) % 6
        routes.counter_filter(pe, 0, max_counter=1, limit1=5, init_counter=start)
    memory = np.zeros((4, WORDS), np.float32)
    memory[0, :12] = np.arange(12)
    result = simulate(mesh, SPEC, routes, program, memory, max_cycles=500)
    got = np.array([result.mem.words(pe)[16:20] for pe in range(4)])
    assert got[1].tolist() == [0, 1, 6, 7]
    assert got[2].tolist() == [2, 3, 8, 9]
    assert got[3].tolist() == [4, 5, 10, 11]
    assert result.leftover_wavelets == 0


def test_a_filter_that_takes_nothing_more_leaves_a_receiver_waiting():
    """A counter filter taking 1 of each 12 hands the PE one wavelet: a receive of two
    then waits for a wavelet that never comes, which the engine reports as a deadlock."""
    mesh, routes, program = _row_stream(2, 2)
    routes.counter_filter(1, 0, max_counter=0, limit1=11)
    memory = np.zeros((2, WORDS), np.float32)
    with pytest.raises(Exception, match="deadlock"):
        simulate(mesh, SPEC, routes, program, memory, max_cycles=500)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_counter": -1, "limit1": 2}, "max_counter=-1 is out of range"),
        ({"max_counter": 0, "limit1": 3.5}, "limit1=3.5 is out of range: an integer"),
        ({"max_counter": True, "limit1": 3}, "max_counter=True is out of range: an integer"),
        ({"max_counter": 0, "limit1": 2, "init_counter": 5}, "init_counter=5 is out of range"),
        ({"max_counter": 0, "limit1": -1}, "limit1=-1 is out of range"),
    ],
)
def test_counter_filter_fields_out_of_range_are_refused(kwargs, message):
    routes = ColorRoutes(Mesh.full(2, 1), 2)
    with pytest.raises(ConfigError, match=message):
        routes.counter_filter(1, 0, **kwargs)


def test_range_filter_and_router_out_of_range_are_refused():
    routes = ColorRoutes(Mesh.full(2, 1), 2)
    with pytest.raises(ConfigError, match="min_idx=4 is out of range"):
        routes.range_filter(1, 0, min_idx=4, max_idx=3)
    with pytest.raises(ConfigError, match="max_idx=65536 is out of range"):
        routes.range_filter(1, 0, min_idx=0, max_idx=65536)
    with pytest.raises(ConfigError, match="color=2 is out of range"):
        routes.range_filter(1, 2, min_idx=0, max_idx=1)
    with pytest.raises(ConfigError, match="filter at pe=7: no working router"):
        routes.range_filter(7, 0, min_idx=0, max_idx=1)
    with pytest.raises(ConfigError, match="pes=1.7 must be integer PE ids"):
        routes.range_filter(1.7, 0, min_idx=0, max_idx=1)
    with pytest.raises(ConfigError, match="color=None is out of range"):
        routes.range_filter(1, None, min_idx=0, max_idx=1)
    with pytest.raises(ConfigError, match="min_idx=0.5 is out of range: an integer"):
        routes.range_filter(1, 0, min_idx=0.5, max_idx=1)


def test_a_counter_filter_past_its_period_takes_every_wavelet():
    """``max_counter`` at or past ``limit1``: every count is at most it, so the PE takes all."""
    mesh, routes, program = _row_stream(2, 12)
    routes.counter_filter(1, 0, max_counter=20, limit1=3)
    memory = np.zeros((2, WORDS), np.float32)
    memory[0, :12] = np.arange(12)
    result = simulate(mesh, SPEC, routes, program, memory, max_cycles=500)
    assert result.mem.words(1)[16:28].tolist() == list(range(12))


def test_a_deadlock_report_names_only_the_outputs_a_filter_leaves():
    """PE 1's filter takes none of the stream, which backs up from PE 2: its head waits for
    the east link alone, not for its PE's queue."""
    mesh, routes, _program = _row_stream(3, 1)
    routes.range_filter(1, 0, min_idx=5, max_idx=5)
    builder = ProgramBuilder(mesh.pes, SPEC.pe, 1)
    builder.send(0, 0, 0, 0, 30)
    builder.recv(2, 0, 0, 0, 1)
    memory = np.zeros((3, WORDS), np.float32)
    memory[0, :30] = with_index(np.arange(30), 0)
    with pytest.raises(DeadlockError) as err:
        simulate(mesh, SPEC, routes, builder.build(), memory, max_cycles=2000)
    assert "PE (1,0) in-port W color 0 wants E (no credit: queue at PE (2,0) full);" in str(
        err.value
    )


def test_a_plans_filters_follow_its_colors_renumbered():
    """A plan runs on the colors it uses, renumbered from 0 (color 5 becomes 0 here): its
    filters move with them, and the run hands the receiver every other word of the stream."""
    from wafersim.kernels.grid import kernel_grid
    from wafersim.kernels.kernel_plan import KernelPlan

    plan = KernelPlan(kernel_grid(1, 2), SPEC)
    src, dst = int(plan.grid.pe[0, 0]), int(plan.grid.pe[0, 1])
    color = 5
    plan.wiring.connect(color, src, [dst], "stream")
    out = plan.alloc(src, 8, "out")
    plan.load(src, out, np.arange(8, dtype=np.float32))
    plan.prog.send(src, 0, color, out, 8)
    plan.prog.recv(dst, 0, color, plan.alloc(dst, 4, "in"), 4)
    plan.wiring.routes.counter_filter(dst, color, max_counter=0, limit1=1)
    result = plan.run(max_cycles=500)
    assert result.mem.words(dst)[:4].tolist() == [0, 2, 4, 6]
