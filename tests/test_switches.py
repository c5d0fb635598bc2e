"""Switch positions and strict routing (``fabric.switches``): a router holds one input per
color and position, moves to another position when its PE says so, and keeps wavelets that
arrive for a position it is not in until it gets there."""

import numpy as np
import pytest
from wafersim.fabric.control import SWITCH_POSITIONS, pack_position, unpack_position
from wafersim.fabric.engine import simulate
from wafersim.fabric.mesh import Mesh
from wafersim.fabric.program import ProgramBuilder
from wafersim.fabric.routes import ColorRoutes
from wafersim.wafer.errors import ConfigError
from wafersim.wafer.geometry import RAMP, E, W
from wafersim.wafer.presets import preset

SPEC = preset("tiny")
N = 8


def position(**outputs) -> np.ndarray:
    """A switch position: input port name -> output ports, e.g. ``position(W=(RAMP,))``."""
    masks = np.zeros(5, np.uint8)
    for port, outs in outputs.items():
        masks[{"W": W, "E": E, "R": RAMP}[port]] = sum(1 << o for o in outs)
    return masks


def three_in_a_row():
    """PE 0 and PE 2 both send ``N`` values on color 0 to PE 1 in the middle."""
    mesh = Mesh.full(3, 1)
    routes = ColorRoutes(mesh, 1)
    routes.add(0, RAMP, 0, (E,))
    routes.add(2, RAMP, 0, (W,))
    routes.add(1, W, 0, (RAMP,))
    prog = ProgramBuilder(3, SPEC.pe, 1)
    prog.send(0, 0, 0, 0, N)
    prog.send(2, 0, 0, 0, N)
    memory = np.random.default_rng(0).standard_normal((3, 64)).astype(np.float32)
    return mesh, routes, prog, memory


def test_positions_pack_and_unpack():
    masks = np.array([[1, 2, 4, 8, 16], [0, 31, 0, 0, 3]], np.uint8)
    np.testing.assert_array_equal(unpack_position(pack_position(masks)), masks)


def test_switch_takes_the_second_stream_after_the_first():
    """PE 1 takes PE 0's stream, switches, then takes PE 2's, which waited at its east port."""
    mesh, routes, prog, memory = three_in_a_row()
    prog.recv(1, 0, 0, 16, N)
    prog.switch(1, 0, 0, position(E=(RAMP,)))
    prog.recv(1, 0, 0, 32, N)
    result = simulate(mesh, SPEC, routes, prog.build(), memory, max_cycles=1000)
    np.testing.assert_array_equal(result.mem[1, 16 : 16 + N], memory[0, :N])
    np.testing.assert_array_equal(result.mem[1, 32 : 32 + N], memory[2, :N])
    assert routes.table[1, E, 0] == 0, "a run switches its own copy of the table"


def test_two_inputs_on_one_color_are_refused_unless_not_strict():
    mesh, routes, prog, memory = three_in_a_row()
    routes.add(1, E, 0, (RAMP,))
    prog.recv(1, 0, 0, 16, 2 * N)
    with pytest.raises(ConfigError, match=r"strict routing: .*color 0 at PE \(1,0\) from E and W"):
        simulate(mesh, SPEC, routes, prog.build(), memory, max_cycles=1000)
    result = simulate(mesh, SPEC, routes, prog.build(), memory, max_cycles=1000, strict=False)
    got = np.sort(result.mem[1, 16 : 16 + 2 * N])
    np.testing.assert_array_equal(got, np.sort(np.concatenate([memory[0, :N], memory[2, :N]])))


def test_a_filtered_color_from_two_inputs_is_refused_even_unstrict():
    """Two inputs of a filtered color leave the order the filter counts them in undefined."""
    mesh, routes, prog, memory = three_in_a_row()
    routes.add(1, E, 0, (RAMP,))
    routes.counter_filter(1, 0, max_counter=0, limit1=1)
    prog.recv(1, 0, 0, 16, N)
    two = r"color 0 at PE \(1,0\) has a filter and comes from E and W"
    with pytest.raises(ConfigError, match=two):
        simulate(mesh, SPEC, routes, prog.build(), memory, max_cycles=1000, strict=False)


def test_a_position_with_two_inputs_is_refused():
    mesh, routes, prog, memory = three_in_a_row()
    prog.switch(1, 0, 0, position(E=(RAMP,), W=(RAMP,)))
    with pytest.raises(ConfigError, match="switch position of color 0 at PE \\(1,0\\)"):
        simulate(mesh, SPEC, routes, prog.build(), memory, max_cycles=1000)


def test_more_positions_than_the_router_holds_are_refused():
    mesh, routes, prog, memory = three_in_a_row()
    outs = [(E,), (E, RAMP), (W, RAMP), (W, E, RAMP)]  # none the table's own W -> RAMP
    for out in outs[:SWITCH_POSITIONS]:  # with the table's own: one too many
        prog.switch(1, 0, 0, position(W=out))
    with pytest.raises(ConfigError, match=f"takes {SWITCH_POSITIONS + 1} switch positions"):
        simulate(mesh, SPEC, routes, prog.build(), memory, max_cycles=1000)


def test_a_filter_holds_in_every_switch_position():
    """PE 1 filters color 0 (one wavelet of every two, a counter filter): it takes half of
    PE 0's stream, switches to PE 2's, and takes half of that too, its count going on."""
    mesh, routes, prog, memory = three_in_a_row()
    routes.counter_filter(1, 0, max_counter=0, limit1=1)
    prog.recv(1, 0, 0, 16, N // 2)
    prog.switch(1, 0, 0, position(E=(RAMP,)))
    prog.recv(1, 0, 0, 32, N // 2)
    result = simulate(mesh, SPEC, routes, prog.build(), memory, max_cycles=1000)
    np.testing.assert_array_equal(result.mem[1, 16 : 16 + N // 2], memory[0, :N:2])
    np.testing.assert_array_equal(result.mem[1, 32 : 32 + N // 2], memory[2, :N:2])
    assert result.leftover_wavelets == 0
