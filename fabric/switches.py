"""Switch positions: the routes a router holds for one color, changed while a program runs.

A real router holds, per color, one route (one input port to a set of outputs) in each of a
few *switch positions*, and moves between them when a control wavelet passes ([SDK]
``tutorials/topic-06-switches``: "the layout block initializes the default route ... it also
defines routes for switch positions 1, 2, and 3. The hardware updates the route according to
the specified switch positions when it receives a so-called Control Wavelet"). In wafersim a
route table (:class:`fabric.routes.ColorRoutes`) is every router's first position, and a PE's
``switch`` op (:meth:`fabric.program.ProgramBuilder.switch`) moves its own router to another
one once the wavelets that came in under the old one have left (where the control wavelet
trailing them would move it). *Strict* routing, the default, allows one input port per color
in each position and at most :data:`SWITCH_POSITIONS` positions per color and router.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from wafersim.fabric import _engine_jit as K
from wafersim.fabric.control import COUNT, POSITIONS, SWITCH_POSITIONS, unpack_position
from wafersim.fabric.routes import ColorRoutes
from wafersim.fabric.state import ProgramArrays
from wafersim.wafer.errors import ConfigError
from wafersim.wafer.geometry import DIR_NAMES, NUM_PORTS


class Switches(NamedTuple):
    """A program's switch ops: each one's PE, color and new position ``(n, 5)``."""

    pes: np.ndarray
    colors: np.ndarray
    positions: np.ndarray


def switch_ops(program: ProgramArrays) -> Switches:
    """The switch ops of ``program`` (none: empty arrays)."""
    rows = np.flatnonzero(program.ops[:, K.C_CODE] == K.OP_SWITCH)
    if rows.size == 0:
        empty = np.zeros(0, np.int64)
        return Switches(empty, empty, np.zeros((0, NUM_PORTS), np.uint8))
    # each (PE, task)'s switch rows: PEs that share a program (ProgramBuilder.share) each
    # switch their own router
    lo = np.searchsorted(rows, program.task_start.reshape(-1))
    count = np.searchsorted(rows, program.task_end.reshape(-1)) - lo
    first = np.repeat(np.cumsum(count) - count, count)
    rows = rows[np.repeat(lo, count) + np.arange(count.sum()) - first]
    pes = np.repeat(np.arange(count.size), count) // program.task_end.shape[1]
    ops = program.ops[rows]
    return Switches(pes, ops[:, K.C_COLOR], unpack_position(ops[:, K.C_A]))


def all_switches(routes: ColorRoutes, switches: Switches) -> Switches:
    """``switches`` and the positions past the first that ``routes``' routers hold for
    control wavelets to move them to (:mod:`fabric.control`), in one list to check."""
    if routes.switches is None:
        return switches
    fields = routes.switches
    count = fields[:, :, COUNT]
    mixed = np.flatnonzero(count[switches.pes, switches.colors] > 1)
    if mixed.size:
        pe, color = int(switches.pes[mixed[0]]), int(switches.colors[mixed[0]])
        raise ConfigError(
            f"color {color} at {_xy(routes, pe)}: a PE's switch op and switch positions that "
            "control wavelets move; a router's switch of a color takes one or the other"
        )
    held = [np.argwhere(count > k) for k in range(1, SWITCH_POSITIONS)]
    pes = np.concatenate([switches.pes] + [h[:, 0] for h in held])
    colors = np.concatenate([switches.colors] + [h[:, 1] for h in held])
    packed = [fields[h[:, 0], h[:, 1], POSITIONS + k] for k, h in enumerate(held, start=1)]
    positions = np.concatenate([switches.positions, *(unpack_position(q) for q in packed)])
    return Switches(pes.astype(np.int64), colors.astype(np.int64), positions)


def all_positions(routes: ColorRoutes, switches: Switches) -> ColorRoutes:
    """``routes`` with every position a switch op sets merged in (what may ever be routed:
    the table the deadlock check reads), or ``routes`` itself when nothing switches."""
    pes, colors, positions = switches
    if pes.size == 0:
        return routes
    merged = ColorRoutes(routes.mesh, routes.colors)
    merged.table = routes.table.copy()
    np.bitwise_or.at(merged.table, (pes[:, None], np.arange(NUM_PORTS), colors[:, None]),
                     positions)  # fmt: skip
    return merged


def check_strict(routes: ColorRoutes, switches: Switches) -> None:
    """Refuse routes a real router cannot hold: two input ports on one color in a position,
    or more than :data:`SWITCH_POSITIONS` positions of one color at one router."""
    conflicts = routes.strict_conflicts()
    if len(conflicts):
        pe, color = (int(v) for v in conflicts[0])
        ports = [DIR_NAMES[p] for p in np.flatnonzero(routes.table[pe, :, color])]
        raise ConfigError(
            f"strict routing: {len(conflicts)} router(s) take one color from two inputs, e.g. "
            f"color {color} at {_xy(routes, pe)} from {' and '.join(ports)}; a router holds "
            f"one input per color and switch position (pass strict=False to allow it)"
        )
    pes, colors, positions = switches
    if pes.size == 0:
        return
    _check_switch_inputs(routes, pes, colors, positions)
    keys = np.concatenate([pes * routes.colors + colors] * 2)
    initial = routes.table[pes, :, colors]
    rows = np.concatenate([initial, positions])
    distinct = np.unique(np.column_stack([keys, rows]), axis=0)[:, 0]
    key, count = np.unique(distinct, return_counts=True)
    if count.max() > SWITCH_POSITIONS:
        worst = int(key[count.argmax()])
        raise ConfigError(
            f"strict routing: color {worst % routes.colors} at "
            f"{_xy(routes, worst // routes.colors)} takes {int(count.max())} switch positions; "
            f"a router holds {SWITCH_POSITIONS} per color"
        )


def check_filtered_inputs(routes: ColorRoutes, switches: Switches) -> None:
    """Refuse a filtered color that a router takes from two inputs, even unstrict: the
    filter counts the color's wavelets in the order they come, which two inputs leave
    undefined."""
    if routes.filters is None:
        return
    filtered = routes.filters[:, :, K.F_KIND] != K.FILTER_NONE
    for pe, color in routes.strict_conflicts():
        if filtered[pe, color]:
            _refuse_two_inputs(routes, int(pe), int(color), routes.table[pe, :, color])
    pes, colors, positions = switches
    bad = np.flatnonzero(((positions != 0).sum(axis=1) > 1) & filtered[pes, colors])
    if bad.size:
        i = int(bad[0])
        _refuse_two_inputs(routes, int(pes[i]), int(colors[i]), positions[i])


def _refuse_two_inputs(routes: ColorRoutes, pe: int, color: int, masks: np.ndarray) -> None:
    ports = " and ".join(DIR_NAMES[p] for p in np.flatnonzero(masks))
    raise ConfigError(
        f"color {color} at {_xy(routes, pe)} has a filter and comes from {ports}: a filtered "
        f"color takes one input a switch position"
    )


def _check_switch_inputs(routes, pes, colors, positions) -> None:
    inputs = (positions != 0).sum(axis=1)
    bad = np.flatnonzero(inputs > 1)
    if bad.size:
        i = int(bad[0])
        ports = [DIR_NAMES[p] for p in np.flatnonzero(positions[i])]
        raise ConfigError(
            f"strict routing: a switch position of color {int(colors[i])} at "
            f"{_xy(routes, int(pes[i]))} takes it from {' and '.join(ports)}; a position "
            f"has one input"
        )


def _xy(routes: ColorRoutes, pe: int) -> str:
    return f"PE ({pe % routes.mesh.width},{pe // routes.mesh.width})"
