"""Control wavelets: routed under a router's current switch position, then moving it, as the
SDK's switches tutorial and stencil and allreduce programs use them."""

import numpy as np
import pytest
from wafersim.fabric.control import ADVANCE, NOP
from wafersim.fabric.engine import simulate
from wafersim.fabric.mesh import Mesh
from wafersim.fabric.program import ProgramBuilder
from wafersim.fabric.routes import ColorRoutes
from wafersim.wafer.errors import ConfigError, DeadlockError
from wafersim.wafer.geometry import RAMP
from wafersim.wafer.geometry import E as EAST
from wafersim.wafer.geometry import N as NORTH
from wafersim.wafer.geometry import S as SOUTH
from wafersim.wafer.geometry import W as WEST
from wafersim.wafer.presets import preset

SPEC = preset("tiny")
WORDS = 16


def _position(port_in: int, *outs: int) -> np.ndarray:
    """A switch position: ``port_in`` routed to ``outs``, no other input."""
    masks = np.zeros(5, np.int64)
    for out in outs:
        masks[port_in] |= 1 << out
    return masks


def test_a_sender_turns_its_switch_to_each_neighbour_as_the_sdk_tutorial_does():
    """The SDK's topic-06: the centre of 3 x 3 routes one color ramp to north (position 0),
    west, east and south (1-3), starts at position 1 in ring mode, and sends a control
    wavelet before each of four data wavelets 0, 2, 4, 6: east reads 0, south 2, north 4,
    west 6 (each control wavelet goes out under the old position, then moves the switch)."""
    mesh = Mesh.full(3, 3)
    routes = ColorRoutes(mesh, 1)
    routes.add(4, RAMP, 0, (NORTH,))
    positions = [_position(RAMP, WEST), _position(RAMP, EAST), _position(RAMP, SOUTH)]
    routes.switch_positions(4, 0, positions, current=1, ring_mode=True)
    receivers = {1: SOUTH, 3: EAST, 5: WEST, 7: NORTH}  # PE: the port it hears the centre on
    for pe, port in receivers.items():
        routes.add(pe, port, 0, (RAMP,))
    builder = ProgramBuilder(mesh.pes, SPEC.pe, 1)
    for k in range(4):
        builder.control(4, 0, 0, [ADVANCE])
        builder.send(4, 0, 0, k, 1)
    for pe in receivers:
        builder.recv(pe, 0, 0, 0, 1)
    memory = np.zeros((9, WORDS), np.float32)
    memory[4, :4] = [0, 2, 4, 6]
    result = simulate(mesh, SPEC, routes, builder.build(), memory, max_cycles=500)
    got = {pe: float(result.mem.words(pe)[0]) for pe in receivers}
    assert got == {5: 0.0, 7: 2.0, 1: 4.0, 3: 6.0}  # east, south, north, west
    assert result.leftover_wavelets == 0
    # the four control wavelets went out too, one to each neighbour, whose router took it
    assert result.link_flits.reshape(9, 5)[4, :4].tolist() == [2, 2, 2, 2]


def _chain(pop_mode: str, commands, received: list[int]):
    """PE 0 of a row of 4 sends words 1 and 2 east, a control wavelet of ``commands``, then
    3 and 4; routers 1 and 2 hand their PE and forward (position 0), or forward alone
    (position 1); router 3 hands its PE. PEs 1-3 receive ``received`` words: a PE handed
    more leaves wavelets behind, one handed fewer waits for ever (a deadlock)."""
    mesh = Mesh.full(4, 1)
    routes = ColorRoutes(mesh, 1)
    routes.add(0, RAMP, 0, (EAST,))
    for pe in (1, 2):
        routes.add(pe, WEST, 0, (RAMP, EAST))
    routes.switch_positions([1, 2], 0, [_position(WEST, EAST)], pop_mode=pop_mode)
    routes.switch_positions(0, 0, [], pop_mode=pop_mode)  # its sender's router: no switch
    routes.add(3, WEST, 0, (RAMP,))
    builder = ProgramBuilder(mesh.pes, SPEC.pe, 1)
    builder.send(0, 0, 0, 0, 2)
    builder.control(0, 0, 0, commands)
    builder.send(0, 0, 0, 2, 2)
    for pe, n in enumerate(received, start=1):
        builder.recv(pe, 0, 0, 0, n)
    memory = np.zeros((4, WORDS), np.float32)
    memory[0, :4] = [1, 2, 3, 4]
    result = simulate(mesh, SPEC, routes, builder.build(), memory, max_cycles=500)
    for pe, n in enumerate(received, start=1):
        assert result.mem.words(pe)[:n].tolist() == [1, 2, 3, 4][:n]
    assert result.link_flits.reshape(4, 5)[1:, RAMP].tolist() == received
    assert result.leftover_wavelets == 0


@pytest.mark.parametrize(
    ("pop_mode", "commands", "received"),
    [
        # no pop: every router reads the first command; 0 and 3 hold no switch
        ("none", [ADVANCE], [2, 2, 4]),
        ("none", [NOP, ADVANCE], [4, 4, 4]),
        # always: each router takes its own command, its sender's first (the stencil's)
        ("always", [NOP, ADVANCE], [2, 4, 4]),
        ("always", [NOP, NOP, ADVANCE], [4, 2, 4]),
        ("always", [ADVANCE, NOP], [4, 4, 4]),  # router 0's ADVANCE moves no switch
        # on advance: a router passes the commands on unread unless it moved (the allreduce's)
        ("on_advance", [ADVANCE, NOP], [2, 4, 4]),
        ("on_advance", [ADVANCE, ADVANCE], [2, 2, 4]),
    ],
)
def test_a_control_wavelet_moves_the_switches_its_commands_name(pop_mode, commands, received):
    _chain(pop_mode, commands, received)


def test_a_switch_past_its_last_position_wraps_in_ring_mode_and_stays_without():
    """Two control wavelets at a router of two positions: in ring mode the second brings it
    back to position 0 (ramp and on), without ring mode it stays at position 1."""
    for ring, received in ((True, [4, 6, 6]), (False, [2, 6, 6])):
        mesh = Mesh.full(4, 1)
        routes = ColorRoutes(mesh, 1)
        routes.add(0, RAMP, 0, (EAST,))
        routes.add(1, WEST, 0, (RAMP, EAST))
        routes.switch_positions(1, 0, [_position(WEST, EAST)], ring_mode=ring)
        routes.add(2, WEST, 0, (RAMP, EAST))
        routes.add(3, WEST, 0, (RAMP,))
        builder = ProgramBuilder(mesh.pes, SPEC.pe, 1)
        for k in range(3):
            builder.send(0, 0, 0, 2 * k, 2)
            if k < 2:
                builder.control(0, 0, 0, [ADVANCE])
        for pe, n in enumerate(received, start=1):
            builder.recv(pe, 0, 0, 0, n)
        memory = np.zeros((4, WORDS), np.float32)
        memory[0, :6] = np.arange(1, 7)
        result = simulate(mesh, SPEC, routes, builder.build(), memory, max_cycles=500)
        assert result.link_flits.reshape(4, 5)[1:, RAMP].tolist() == received
        expected_pe1 = [1, 2, 5, 6] if ring else [1, 2]
        assert result.mem.words(1)[: received[0]].tolist() == expected_pe1
        assert result.leftover_wavelets == 0


def test_a_counter_filter_counts_data_wavelets_alone():
    """The SDK's transposes set ``count_control = false``: a control wavelet between two
    blocks leaves a counter filter's period where the data put it."""
    mesh = Mesh.full(3, 1)
    routes = ColorRoutes(mesh, 1)
    routes.add(0, RAMP, 0, (EAST,))
    routes.add(1, WEST, 0, (RAMP, EAST))
    routes.add(2, WEST, 0, (RAMP,))
    routes.counter_filter(1, 0, max_counter=0, limit1=1)  # takes every other data wavelet
    builder = ProgramBuilder(mesh.pes, SPEC.pe, 1)
    builder.send(0, 0, 0, 0, 1)
    builder.control(0, 0, 0, [NOP])
    builder.send(0, 0, 0, 1, 3)
    builder.recv(1, 0, 0, 0, 2)
    builder.recv(2, 0, 0, 0, 4)
    memory = np.zeros((3, WORDS), np.float32)
    memory[0, :4] = [1, 2, 3, 4]
    result = simulate(mesh, SPEC, routes, builder.build(), memory, max_cycles=500)
    assert result.mem.words(1)[:2].tolist() == [1, 3]
    assert result.mem.words(2)[:4].tolist() == [1, 2, 3, 4]
    assert result.leftover_wavelets == 0


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda r: r.switch_positions(1, 0, [_position(WEST, EAST)] * 4), "positions: 4 given"),
        (lambda r: r.switch_positions(1, 0, [_position(WEST, EAST)], current=2), "current=2"),
        (lambda r: r.switch_positions(1, 0, [_position(WEST, EAST)], pop_mode="x"), "pop_mode"),
        (lambda r: r.switch_positions(1, 0, [_position(WEST, EAST)], ring_mode=1), "ring_mode"),
        (lambda r: r.switch_positions(1, 2, [_position(WEST, EAST)]), "color=2"),
        (lambda r: r.switch_positions(9, 0, [_position(WEST, EAST)]), "switch at pe=9"),
        (lambda r: r.switch_positions(3, 0, [_position(WEST, EAST)]), "dead or missing link E"),
    ],
)
def test_bad_switch_positions_are_refused_with_one_line(call, message):
    routes = ColorRoutes(Mesh.full(4, 1), 1)
    with pytest.raises(ConfigError, match=message):
        call(routes)


@pytest.mark.parametrize(
    ("commands", "message"),
    [([], "commands: 0 given"), ([NOP] * 9, "commands: 9 given"), ([2], r"commands\[0\]=2")],
)
def test_bad_commands_are_refused_with_one_line(commands, message):
    builder = ProgramBuilder(2, SPEC.pe, 1)
    with pytest.raises(ConfigError, match=message):
        builder.control(0, 0, 0, commands)


def test_a_switch_op_on_a_color_with_positions_for_control_wavelets_is_refused():
    """Both would move one switch, each from a position the other does not know."""
    mesh = Mesh.full(3, 1)
    routes = ColorRoutes(mesh, 1)
    routes.add(0, RAMP, 0, (EAST,))
    routes.add(1, WEST, 0, (RAMP,))
    routes.switch_positions(1, 0, [_position(WEST, EAST)])
    builder = ProgramBuilder(mesh.pes, SPEC.pe, 1)
    builder.switch(1, 0, 0, _position(WEST, RAMP))
    memory = np.zeros((3, WORDS), np.float32)
    with pytest.raises(ConfigError, match=r"color 0 at PE \(1,0\): a PE's switch op and"):
        simulate(mesh, SPEC, routes, builder.build(), memory, max_cycles=100)


def test_a_loop_whose_control_wavelets_differ_is_written_out_not_rolled():
    """A control op keeps its commands where other ops keep an address: a loop would move
    them by a step, so iterations that send other commands do not make one."""
    builder = ProgramBuilder(2, SPEC.pe, 1)
    commands = [[NOP], [ADVANCE], [NOP, NOP], [ADVANCE, ADVANCE], [NOP, ADVANCE]]
    builder.repeat(5, lambda i: builder.control(0, 0, 0, commands[i]), lambda: None)
    ops = builder.build().ops
    assert ops[ops[:, 0] == 14][:, 3].tolist() == [0, 1, 0, 5, 4]


@pytest.mark.parametrize(
    ("position", "message"),
    [
        ([0, 8, 0], r"shape \(3,\)"),
        ([0, 0, 0, 2.5, 0], "float64"),
        (np.zeros((2, 5), int), r"\(2, 5\)"),
    ],
)
def test_a_position_of_the_wrong_shape_or_type_is_refused(position, message):
    routes = ColorRoutes(Mesh.full(4, 1), 1)
    with pytest.raises(ConfigError, match=message):
        routes.switch_positions(1, 0, [position])


def test_commands_that_are_not_a_list_are_refused():
    with pytest.raises(ConfigError, match="commands=1 must be a list"):
        ProgramBuilder(2, SPEC.pe, 1).control(0, 0, 0, 1)


def test_a_control_wavelet_with_no_route_is_named_in_the_deadlock_report():
    mesh = Mesh.full(3, 1)
    routes = ColorRoutes(mesh, 1)
    routes.add(0, RAMP, 0, (EAST,))
    routes.add(2, WEST, 0, (RAMP,))  # router 1 has no route: the wavelet waits there
    builder = ProgramBuilder(mesh.pes, SPEC.pe, 1)
    builder.control(0, 0, 0, [NOP])
    memory = np.zeros((3, WORDS), np.float32)
    with pytest.raises(DeadlockError, match=r"color 0 \(a control wavelet\) wants nothing"):
        simulate(mesh, SPEC, routes, builder.build(), memory, max_cycles=100, check_routes=False)


def test_a_pe_whose_control_wavelets_have_nowhere_to_go_is_named_in_the_deadlock_report():
    """No route takes the color from PE 0's ramp: its output queue fills and its control op
    waits, which the report names."""
    mesh = Mesh.full(2, 1)
    routes = ColorRoutes(mesh, 1)
    routes.add(1, WEST, 0, (RAMP,))
    builder = ProgramBuilder(mesh.pes, SPEC.pe, 1)
    for _ in range(8):
        builder.control(0, 0, 0, [NOP])
    memory = np.zeros((2, WORDS), np.float32)
    with pytest.raises(DeadlockError, match=r"PE \(0,0\) task 0 control color 0"):
        simulate(mesh, SPEC, routes, builder.build(), memory, max_cycles=100, check_routes=False)
