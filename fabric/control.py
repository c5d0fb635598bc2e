"""Control wavelets, and the switch positions they move as they pass the routers of a color.

A router holds, per color, a route in each of up to four *switch positions*; a *control
wavelet* on the color is routed under the current position and then moves the switch of
each router it passes, as its commands say ([SDK-EX] ``tutorials/topic-06-switches``: "The
hardware updates the route according to the specified switch positions when it receives a
so-called Control Wavelet"; its sender, at position 1 with ``ring_mode``, sends a control
wavelet before each of four data wavelets and its neighbours read E 0, S 2, N 4, W 6). A
control wavelet carries a command for each of the next routers it passes, the first for its
sender's own (``benchmarks/25-pt-stencil/switches.csl``: "the switch commands for seven
downstream PEs", ``sw_nop`` or ``sw_adv``, and a router with ``.pop_mode = .{ .always_pop =
true }`` passes the rest on to the next; ``pop_on_advance``, in
``benchmarks/benchmark-libs/allreduce/pe.csl``, pops the command only where it advanced the
switch; with neither every router reads the same first command). A switch at its last
position goes back to the first in ``ring_mode``, else stays (an assumption: the SDK's
examples all set ring mode). Control wavelets here are never handed to the PE (the examples'
``ceFilter``/``NOCE`` bit: "Tell the router to not forward control wavelets to the PE"); a
counter filter does not count them (``count_control = false``, as the 2D FFT sets it). Moving
a switch costs no cycle beyond the wavelet's own (an assumption; the SDK gives no figure).

A route table (:class:`fabric.routes.ColorRoutes`) is every router's position 0;
:meth:`fabric.routes.ColorRoutes.switch_positions` adds positions 1-3, and
:meth:`fabric.program.ProgramBuilder.control` sends a control wavelet.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from wafersim.fabric import _engine_jit as K
from wafersim.fabric.filters import check_field, filtered_routes
from wafersim.wafer.errors import ConfigError
from wafersim.wafer.geometry import NUM_PORTS

NOP, ADVANCE = K.CMD_NOP, K.CMD_ADVANCE  # a control wavelet's command for one router
MAX_COMMANDS = 8  # routers one control wavelet commands, its sender's first [SDK-EX] stencil
POP_MODES = {"none": K.POP_NONE, "always": K.POP_ALWAYS, "on_advance": K.POP_ON_ADVANCE}
SWITCH_FIELDS = K.CONFIG_FIELDS - K.FILTER_FIELDS
# columns of ColorRoutes.switches: the color configuration's past the filter's
CURRENT, COUNT, RING, POP, POSITIONS = (
    k - K.FILTER_FIELDS for k in (K.S_CURRENT, K.S_COUNT, K.S_RING, K.S_POP, K.S_POSITIONS)
)
SWITCH_POSITIONS = 4  # per color and router: positions 0-3 [SDK topic-06-switches]


def pack_position(masks) -> np.ndarray:
    """int64 (n,): the output masks ``(n, 5)`` of each input port packed into one op field
    (a mask's bits are the five output ports: one past them is refused)."""
    masks = np.asarray(masks, np.int64).reshape(-1, NUM_PORTS)
    if masks.size and not (masks.min() >= 0 and masks.max() <= K.SWITCH_MASK):
        raise ConfigError(
            f"switch position mask {int(masks.max())} is out of range [0, {K.SWITCH_MASK}] "
            "(one bit an output port)"
        )
    shifts = K.SWITCH_BITS * np.arange(NUM_PORTS, dtype=np.int64)
    return (masks << shifts).sum(axis=1)


def unpack_position(packed) -> np.ndarray:
    """uint8 (n, 5): the inverse of :func:`pack_position`."""
    packed = np.asarray(packed, np.int64).reshape(-1, 1)
    shifts = K.SWITCH_BITS * np.arange(NUM_PORTS, dtype=np.int64)
    return ((packed >> shifts) & K.SWITCH_MASK).astype(np.uint8)


def encode_commands(commands: Sequence[int]) -> int:
    """A control wavelet's commands (:data:`NOP` or :data:`ADVANCE`, its sender's router
    first, at most :data:`MAX_COMMANDS`) packed two bits a router, as an op holds them."""
    if isinstance(commands, str | bytes) or not isinstance(commands, Sequence | np.ndarray):
        raise ConfigError(f"commands={commands!r} must be a list of NOP (0) and ADVANCE (1)")
    if not 1 <= len(commands) <= MAX_COMMANDS:
        raise ConfigError(
            f"commands: {len(commands)} given; a control wavelet carries 1 to {MAX_COMMANDS}"
        )
    packed = 0
    for i, command in enumerate(commands):
        check_field(f"commands[{i}]", command, NOP, ADVANCE)
        packed |= int(command) << (2 * i)
    return packed


def new_switches(pes: int, colors: int) -> np.ndarray:
    """int32 (P, C, SWITCH_FIELDS) of routers holding one position a color (no switch)."""
    switches = np.zeros((pes, colors, SWITCH_FIELDS), np.int32)
    switches[:, :, COUNT] = 1
    return switches


def set_positions(switches, pes, color, positions, current: int, ring_mode: bool, pop_mode: str):
    """Positions 1 and on of ``color`` at routers ``pes``: each position an output mask per
    input port ``(5,)`` or ``(len(pes), 5)``, as :meth:`ProgramBuilder.switch` takes one
    (none: the router only passes control wavelets on, in its pop mode)."""
    if len(positions) >= SWITCH_POSITIONS:
        raise ConfigError(
            f"positions: {len(positions)} given; a switch holds at most {SWITCH_POSITIONS - 1} "
            "besides the route (position 0)"
        )
    check_field("current", current, 0, len(positions))
    if pop_mode not in POP_MODES:
        raise ConfigError(f"pop_mode={pop_mode!r} is not one of {', '.join(POP_MODES)}")
    if not isinstance(ring_mode, bool):
        raise ConfigError(f"ring_mode={ring_mode!r} must be True or False")
    fields = switches[pes, color]
    for k, position in enumerate(positions, start=1):
        fields[:, POSITIONS + k] = pack_position(position_masks(position, len(pes), k))
    fields[:, CURRENT] = current
    fields[:, COUNT] = 1 + len(positions)
    fields[:, RING] = int(ring_mode)
    fields[:, POP] = POP_MODES[pop_mode]
    switches[pes, color] = fields


def position_masks(position, pes: int, k: int) -> np.ndarray:
    """int64 (pes, 5): switch position ``k``'s output masks per input port, given as
    ``(5,)`` for every PE or ``(pes, 5)``; else one line naming it and the shapes."""
    masks = np.asarray(position)
    ok = masks.dtype.kind in "iu" and masks.shape in ((NUM_PORTS,), (pes, NUM_PORTS))
    if not ok:
        raise ConfigError(
            f"switch position {k}: shape {masks.shape} of {masks.dtype}; an integer output "
            f"mask per input port, ({NUM_PORTS},) or ({pes}, {NUM_PORTS})"
        )
    return np.broadcast_to(masks.astype(np.int64), (pes, NUM_PORTS))


def color_config(
    table: np.ndarray, filters: np.ndarray | None, switches: np.ndarray | None, controls: bool
) -> tuple[np.ndarray, np.ndarray]:
    """The engine's copy of route ``table`` (uint8 (P, 5, C)) and its color configuration
    (``FabricArrays.color_config``, int32 (P, C, CONFIG_FIELDS), the run's own: it counts
    and switches in it), or ``(1, 1, 1)`` where no router filters or switches and no program
    sends a control wavelet (``controls``): the engine then prunes their code. A router
    starts at its current position, position 0 being the table's; where programs send
    control wavelets every route carries the engine's ``CONTROLLED`` flag, and the run's
    queues keep each wavelet's metadata."""
    if filters is None and switches is None and not controls:
        return table, np.zeros((1, 1, 1), np.int32)
    pes, _, colors = table.shape
    config = np.zeros((pes, colors, K.CONFIG_FIELDS), np.int32)
    config[:, :, K.S_COUNT] = 1
    if filters is not None:
        config[:, :, : K.FILTER_FIELDS] = filters
    if switches is not None:
        config[:, :, K.FILTER_FIELDS :] = switches
    config[:, :, K.S_POSITIONS] = pack_position(table.transpose(0, 2, 1)).reshape(pes, colors)
    route = table.copy()
    for pe, color in np.argwhere(config[:, :, K.S_CURRENT] > 0):  # starting elsewhere
        packed = config[pe, color, K.S_POSITIONS + config[pe, color, K.S_CURRENT]]
        route[pe, :, color] = unpack_position(packed)[0]
    if filters is not None:
        route = filtered_routes(route, filters)
    if controls:  # every route: a control wavelet may pass any router (the engine's flag)
        route |= K.CONTROLLED
    return route, config
