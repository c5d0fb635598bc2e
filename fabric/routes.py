"""Static color routes: per router, an input port forwards a color to a set of outputs."""

from __future__ import annotations

import numpy as np
from wafersim.fabric import control
from wafersim.fabric import filters as F
from wafersim.fabric._engine_jit import MAX_COLORS
from wafersim.fabric.mesh import Mesh
from wafersim.wafer.errors import ConfigError
from wafersim.wafer.geometry import DIR_NAMES, NUM_PORTS, RAMP


class ColorRoutes:
    """A route table ``(P, 5, C)`` of output-port bitmasks, built and checked in Python."""

    def __init__(self, mesh: Mesh, colors: int) -> None:
        if not 1 <= colors <= MAX_COLORS:
            raise ConfigError(f"colors={colors} is out of range [1, {MAX_COLORS}]")
        self.mesh, self.colors = mesh, colors
        self.table = np.zeros((mesh.pes, NUM_PORTS, colors), np.uint8)
        # int32 (P, C, 4): each router's filter of what it hands its PE (fabric.filters)
        self.filters: np.ndarray | None = None
        # int32 (P, C, control.SWITCH_FIELDS): each router's switch positions past the table's
        self.switches: np.ndarray | None = None
        self._link_ok = mesh.link_ok()

    def add(self, pe: int, in_port: int, color: int, out_ports: tuple[int, ...]) -> None:
        """Forward ``color`` arriving at ``pe`` on ``in_port`` to every port in ``out_ports``."""
        if not 0 <= color < self.colors:
            raise ConfigError(f"color={color} is out of range [0, {self.colors - 1}]")
        if not 0 <= pe < self.mesh.pes or not self.mesh.alive.reshape(-1)[pe]:
            raise ConfigError(f"route at pe={pe}: no working router there")
        for port in out_ports:
            if port != RAMP and not self._link_ok[pe, port]:
                raise ConfigError(
                    f"route of color {color} at pe={pe} uses dead or missing link {DIR_NAMES[port]}"
                )
            self.table[pe, in_port, color] |= np.uint8(1 << port)

    def counter_filter(
        self, pes, color: int, *, max_counter: int, limit1: int, init_counter: int = 0
    ) -> None:
        """Routers ``pes`` hand their PE the wavelets of ``color`` they count at most
        ``max_counter``, counting from ``init_counter`` and back to 0 after ``limit1``
        (the SDK's counter filter, :mod:`fabric.filters`); they forward every wavelet."""
        pes = self._filtered(pes, color)
        F.set_counter(self.filters, pes, color, max_counter, limit1, init_counter)

    def range_filter(self, pes, color: int, *, min_idx: int, max_idx: int) -> None:
        """Routers ``pes`` hand their PE the wavelets of ``color`` whose upper 16 bits lie
        in ``[min_idx, max_idx]`` (the SDK's range filter, :mod:`fabric.filters`)."""
        pes = self._filtered(pes, color)
        F.set_range(self.filters, pes, color, min_idx, max_idx)

    def switch_positions(
        self,
        pes,
        color: int,
        positions,
        *,
        current: int = 0,
        ring_mode: bool = False,
        pop_mode: str = "none",
    ) -> None:
        """Routers ``pes`` hold switch positions 1 and on of ``color`` besides the table's
        route (position 0), each an output mask per input port ``(5,)`` or ``(len(pes),
        5)``; they start at ``current``, and control wavelets move them (the SDK's
        ``.switches``: :mod:`fabric.control`; ``pop_mode`` "none", "always" or
        "on_advance")."""
        pes = self._routers(pes, color, "switch")
        for k, position in enumerate(positions, start=1):
            self._check_links(pes, color, k, control.position_masks(position, len(pes), k))
        if self.switches is None:
            self.switches = control.new_switches(self.mesh.pes, self.colors)
        control.set_positions(self.switches, pes, color, positions, current, ring_mode, pop_mode)

    def _check_links(self, pes: np.ndarray, color: int, k: int, position) -> None:
        outs = np.bitwise_or.reduce(position, axis=1)
        for port in range(RAMP):
            bad = (outs >> port & 1).astype(bool) & ~self._link_ok[pes, port].astype(bool)
            if bad.any():
                raise ConfigError(
                    f"switch position {k} of color {color} at pe={int(pes[bad.argmax()])} "
                    f"uses dead or missing link {DIR_NAMES[port]}"
                )

    def _filtered(self, pes, color) -> np.ndarray:
        pes = self._routers(pes, color, "filter")
        if self.filters is None:
            self.filters = F.new_filters(self.mesh.pes, self.colors)
        return pes

    def _routers(self, pes, color, what: str) -> np.ndarray:
        """``pes`` as int64 ids of working routers, and ``color`` in range, else one line."""
        F.check_field("color", color, 0, self.colors - 1)
        given = np.atleast_1d(pes)
        if given.dtype.kind not in "iu":
            raise ConfigError(f"pes={pes!r} must be integer PE ids in [0, {self.mesh.pes - 1}]")
        pes = given.astype(np.int64)
        alive = self.mesh.alive.reshape(-1)
        bad = (pes < 0) | (pes >= self.mesh.pes)
        bad[~bad] |= ~alive[pes[~bad]].astype(bool)
        if bad.any():
            raise ConfigError(
                f"{what} at pe={int(pes[bad.argmax()])}: no working router there (PEs "
                f"0-{self.mesh.pes - 1}, dead ones excluded)"
            )
        return pes

    def strict_conflicts(self) -> np.ndarray:
        """int64 (k, 2): the ``(pe, color)`` pairs that more than one input port routes. A
        real router holds one switch position per color (one input to a set of outputs);
        this table allows one per input port and color, which a strict router would not."""
        inputs = (self.table != 0).sum(axis=1)
        return np.argwhere(inputs > 1)

    def add_path(self, color: int, pes: list[int], deliver: bool = True) -> None:
        """Route ``color`` along neighbouring ``pes`` from the first one's ramp to the last's.

        Where a router already forwards the color from the same input, the outputs merge,
        which is how multicast trees are built from paths that share a prefix.
        """
        width = self.mesh.width
        in_port = RAMP
        for here, there in zip(pes, pes[1:], strict=False):
            out = _direction(here, there, width)
            self.add(here, in_port, color, (out,))
            in_port = (out + 2) % 4
        if deliver:
            self.add(pes[-1], in_port, color, (RAMP,))


def _direction(a: int, b: int, width: int) -> int:
    ax, ay, bx, by = a % width, a // width, b % width, b // width
    steps = {(0, -1): 0, (1, 0): 1, (0, 1): 2, (-1, 0): 3}
    step = (bx - ax, by - ay)
    if step not in steps:
        raise ConfigError(f"route step from pe {a} to pe {b} is not between neighbours")
    return steps[step]
