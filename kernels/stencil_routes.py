"""The stencil's streams as the vendor's published 25-point program routes them: one color a
way, shared by every PE of a line, whose routers' switch positions control wavelets turn
(``Cerebras/sdk-examples``, ``benchmarks/25-pt-stencil``: ``routes.csl``, ``switches.csl``,
``oned_exch.csl``; :mod:`fabric.control`).

Along a line, in the direction a way's data runs, PE ``x`` sends its chunk to itself and the
``r`` PEs after it. The line's senders take turns in ``r + 1`` phases, PE ``x`` in phase
``x mod (r + 1)``, so senders ``r + 1`` apart stream at once on stretches of the line that do
not meet. A router's switch holds the role its PE plays in the phase under way:

- *send*: from its ramp on to the next PE and to its own PE (``R -> D + R``);
- *pass*: from the previous PE on to the next and to its PE (``U -> D + R``), while the
  sender is 1 to ``r - 1`` PEs upstream;
- *last*: from the previous PE to its PE alone (``U -> R``), while the sender is ``r`` PEs
  upstream: that stream ends here;
- *transient*: from its ramp to its ramp (``R -> R``), between its send and *last*, where
  its own second control wavelet ends.

After its chunk a sender sends two control wavelets (``switches.csl``): the first advances its
own router (send to transient), the next PE's (to send: the next sender's turn) and the one
``r`` on (last to pass); the second advances its own again (transient to last). Each router
pops the command it reads (``always_pop``); the routers of a detour between two PEs hold no
switch and pass the commands on as they came (an assumption: the SDK's lines have no
detours). A sender's data waits at its ramp until its
switch turns to *send*, which orders the phases without any other handshake.

``routes.csl`` writes each position as an ``rx`` or a ``tx`` alone; the reading under which its
program delivers is that a position changes that side of the route held before it (send: ``rx
= RAMP``; transient: ``tx = RAMP``; last: ``rx`` the previous PE), which the masks here spell
out whole. The first PE of a line starts at *send*; the others as ``initialSwitchPosition``
says, PEs at ``x mod (r + 1) = 0`` sending, those ``r`` after them at *last*, the rest passing.

On a patch with holes a line is one chain around them (:meth:`kernels.wiring.Wiring.chain`,
never cut: a PE cannot pass on a stream it is not the end of), and a way takes two colors by
line parity: a kernel row that shifts at a hole crosses the router of the row beside it, which
must not switch the color it crosses on.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from wafersim.fabric.control import ADVANCE, NOP
from wafersim.fabric.routes import ColorRoutes
from wafersim.kernels.kernel_plan import KernelPlan
from wafersim.wafer.errors import ConfigError
from wafersim.wafer.geometry import NUM_DIRS, NUM_PORTS, RAMP

WAYS = ((0, 1), (0, -1), (1, 0), (-1, 0))  # (row, column) steps: E, W, S, N
RAMP_BIT = np.uint8(1 << RAMP)


class WayRoutes(NamedTuple):
    """Where each PE is on the line of each way and how it streams there: ``place[d, i, j]``
    (``x``, counted from the line's first PE as its data runs), ``color[d, i, j]``, the
    color its chunk leaves on, and ``chained[d, i, j]``, whether its line is one switched
    chain (else every sender's stream is a tree of its own color, without switches)."""

    place: np.ndarray  # int64 (4, P, Q)
    color: np.ndarray  # int64 (4, P, Q)
    chained: np.ndarray  # bool (4, P, Q)

    def upstream(self, d: int, key: tuple[int, int], k: int) -> tuple[int, int]:
        """The grid position of the PE ``k`` upstream of ``key`` on way ``d``."""
        di, dj = WAYS[d]
        return key[0] - di * k, key[1] - dj * k


def first_commands(r: int) -> list[int]:
    """The first control wavelet's commands (``firstSwitchCommands``): its sender's router,
    the next one and the one ``r`` on advance."""
    commands = [NOP] * (r + 1)
    commands[0] = commands[1] = commands[r] = ADVANCE
    return commands


SECOND_COMMANDS = [ADVANCE]  # the second's (secondSwitchCommands): its sender's router alone


def senders(x: int, r: int) -> int:
    """Chunks PE ``x`` of a line receives a way: its own and up to ``r`` upstream
    (``senderCount``)."""
    return min(r + 1, x + 1)


def distance(x: int, arrival: int, r: int) -> int:
    """How far upstream the sender of PE ``x``'s ``arrival``-th chunk of a round is: senders
    take turns by ``x mod (r + 1)`` (``consts.csl``'s ``permuteConsts``)."""
    return (x - arrival) % (r + 1)


def colors_a_way(plan: KernelPlan) -> int:
    """One color a way on a clean grid, as published; two (by line parity) around holes."""
    return 1 if plan.grid.clean else 2


def route_ways(plan: KernelPlan, r: int, chains: bool = True) -> WayRoutes:
    """Route every line of every way and say where each PE is: each line as one chain with
    its routers' switches where it can be (``chains``), else as trees."""
    grid = plan.grid
    shape = (len(WAYS), grid.rows, grid.cols)
    ways = WayRoutes(np.zeros(shape, np.int64), np.zeros(shape, np.int64), np.ones(shape, bool))
    per_way = colors_a_way(plan)
    for d in range(len(WAYS)):
        for k, line in enumerate(_lines(d, grid.rows, grid.cols)):
            pes, owner = grid.pe[line], ("stencil", d, k)
            ways.place[d][line] = np.arange(len(pes))
            if not chains:
                ways.color[d][line] = _trees(plan, pes, d * (r + 1), owner, r)
                ways.chained[d][line] = False
                continue
            try:
                ways.color[d][line] = _chain(plan, pes, d * per_way + k % per_way, owner, r)
            except ConfigError:  # a router it must cross twice, or no color left: trees
                first = 2 * len(WAYS) + (r + 1) * (d if r == 1 else d % 2)
                ways.color[d][line] = _trees(plan, pes, first, owner, r)
                ways.chained[d][line] = False
    return ways


def _chain(plan: KernelPlan, pes: np.ndarray, asked: int, owner: tuple, r: int) -> int:
    """Route a line as one chain with its switches; the color it got."""
    if len(pes) == 1:  # a line of one PE: it sends to itself
        used = plan.wiring.connect(asked, int(pes[0]), [int(pes[0])], owner)
    else:
        used = plan.wiring.chain(asked, pes.tolist(), owner, whole=True)[0].color
    _switches(plan.wiring.routes, pes, used, r)
    return used


def _trees(plan: KernelPlan, pes: np.ndarray, first: int, owner: tuple, r: int) -> np.ndarray:
    """Route a line as a program without switches would: each PE's stream to itself and
    the ``r`` after it as a multicast tree of its own, on color ``first + x mod (r + 1)``
    (or a detour color). For a line no single chain can take (holes leave a router it must
    cross twice, which holds one input a color) the colors start past the chained ways'
    (each way its own for the 7-point star; opposite ways apart for the 25-point one, whose
    20 would not fit); for a patch where chains and trees together find no colors, every
    line is trees, each way on its own ``r + 1`` colors. The colors they got."""
    return np.array([plan.wiring.connect(first + x % (r + 1), int(pe),
                                         [int(p) for p in pes[x : x + r + 1]], (*owner, x))
                     for x, pe in enumerate(pes)], np.int64)  # fmt: skip


def _lines(d: int, rows: int, cols: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Way ``d``'s lines as index arrays into the grid, each in the order its data runs."""
    di, dj = WAYS[d]
    if dj:
        j = np.arange(cols) if dj > 0 else np.arange(cols)[::-1]
        return [(np.full(cols, i), j) for i in range(rows)]
    i = np.arange(rows) if di > 0 else np.arange(rows)[::-1]
    return [(i, np.full(rows, j)) for j in range(cols)]


def _switches(routes: ColorRoutes, pes: np.ndarray, color: int, r: int) -> None:
    """Each router of a chained line: its table's route (position 0) and the positions
    past it, grouped by their count and start, as the module says."""
    table = routes.table[pes, :, color]  # (L, 5): the chain's routes
    entry = np.argmax(table[:, :NUM_DIRS] != 0, axis=1)  # U, from the previous PE
    on = np.where(np.arange(len(pes)) == 0, table[:, RAMP], table[np.arange(len(pes)), entry])
    on = on & ~RAMP_BIT  # D: the outputs on to the next PE
    routes.add(int(pes[0]), RAMP, color, (RAMP,))  # the first PE's table: send
    send, transient, last = (np.zeros((len(pes), NUM_PORTS), np.int64) for _ in range(3))
    send[:, RAMP] = on | RAMP_BIT
    transient[:, RAMP] = RAMP_BIT
    last[np.arange(len(pes)), entry] = RAMP_BIT
    x = np.arange(len(pes))
    groups = [(x == 0, [transient], 0)]
    if r == 1:  # no pass phase: twoPatternRoute's ring, numbered from last (the table's)
        routes.table[pes[1:], entry[1:], color] = RAMP_BIT
        groups += [((x > 0) & (x % 2 == 0), [send, transient], 1),
                   ((x > 0) & (x % 2 == 1), [send, transient], 0)]  # fmt: skip
    else:
        phase = x % (r + 1)
        groups += [((x > 0) & (x < r), [send, transient], 0),
                   ((x >= r) & (phase == 0), [send, transient, last], 1),
                   ((x >= r) & (phase == r), [send, transient, last], 3),
                   ((x >= r) & (phase > 0) & (phase < r), [send, transient, last], 0)]  # fmt: skip
    for members, positions, current in groups:
        if members.any():
            routes.switch_positions(pes[members], color, [p[members] for p in positions],
                                    current=current, ring_mode=True, pop_mode="always")  # fmt: skip
