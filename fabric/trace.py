"""Traces: link utilization and PE activity sampled every N cycles, saved to HDF5."""

from __future__ import annotations

import contextlib
import json
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import numpy as np
from wafersim.fabric import _engine_jit as K
from wafersim.wafer import __version__
from wafersim.wafer.atomic import atomic_hdf5
from wafersim.wafer.errors import ConfigError

PORT_NAMES = "N,E,S,W,R"
REASONS = "computing,waiting_input,waiting_output,waiting_sram,idle"  # fabric.engine's names
# the recorder that runs given none record into (a kernel's run, deep under its plan)
TRACE_IN_USE: ContextVar[Any] = ContextVar("trace_in_use", default=None)


@contextlib.contextmanager
def traced(recorder: TraceRecorder | None):
    """Within the block, engine runs given no trace record into ``recorder``."""
    token = TRACE_IN_USE.set(recorder)
    try:
        yield recorder
    finally:
        TRACE_IN_USE.reset(token)


def check_every(every_cycles) -> int:
    """A sampling period: an integer >= 1 (ConfigError naming it otherwise)."""
    if isinstance(every_cycles, bool) or not isinstance(every_cycles, int) or every_cycles < 1:
        raise ConfigError(f"trace_every_cycles={every_cycles!r} must be an integer >= 1")
    return every_cycles


def reasons_before(reasons: np.ndarray, cycle: int) -> np.ndarray:
    """int64 (P, 5): each PE's cycles by reason before ``cycle``, from the engine's
    ``st.reasons`` (P, 8). A run that ends (done or deadlocked) counts every PE's current
    reason on to the cycle the engine stopped in, past ``cycle``; nothing moved in those
    cycles, so they are all of that reason and come off it here."""
    counts = reasons[:, : K.REASONS].copy()
    extra = np.maximum(reasons[:, K.R_SINCE] - cycle, 0)
    past = np.flatnonzero(extra)
    counts[past, reasons[past, K.R_NOW]] -= extra[past]
    return counts


class TraceRecorder:
    """Collects, as the engine runs in chunks of ``every_cycles``, per sample: link
    utilization (wavelets per cycle out of each port), each PE's busy share (the share of the
    sample's cycles in which it computed; a traffic source: injected a flit), its task-cycles
    a cycle (``busy_tasks``: tasks whose op ran, in [0, tasks]), its share of the cycles by
    stall reason and the wavelets queued at each router at the sample's end; holes are NaN
    in the per-PE shares; and the deadlock that ended a run (cycle, message), if one did.
    ``width`` and ``height``: the mesh's, else taken from the first run the recorder is
    given to (:meth:`begin`)."""

    def __init__(self, every_cycles: int, width: int | None = None, height: int | None = None):
        self.every_cycles = check_every(every_cycles)
        self._clear(width, height)

    def _clear(self, width: int | None, height: int | None) -> None:
        """No samples yet, for a ``width x height`` mesh (None: sized by the first run)."""
        self.shape = (height or 0, width or 0)
        self.cycles: list[int] = []
        self.link: list[np.ndarray] = []
        self.pe: list[np.ndarray] = []
        self.busy_tasks: list[np.ndarray] = []
        self.queued: list[np.ndarray] = []
        self.reasons: list[np.ndarray] = []
        self.deadlock: tuple[int, str] | None = None
        self.traffic = False
        self.tasks = 1
        self._restart(self.shape[0] * self.shape[1], None)

    def begin(self, width: int, height: int, traffic: bool = False,
              alive: np.ndarray | None = None, tasks: int = 1) -> None:  # fmt: skip
        """A run on a ``width x height`` mesh starts (synthetic ``traffic`` or programs of
        ``tasks`` tasks a PE; ``alive`` (H, W): its working PEs, default all): size the
        recorder if it has no shape yet; ConfigError if it has another (one recorder, one
        mesh)."""
        if self.shape == (0, 0):
            self._clear(width, height)
        elif self.shape != (height, width):
            raise ConfigError(f"a trace of a {self.shape[1]}x{self.shape[0]} mesh cannot "
                              f"record a {width}x{height} one")  # fmt: skip
        self.traffic, self.tasks = traffic, tasks
        self._restart(width * height, alive)

    def _restart(self, pes: int, alive: np.ndarray | None) -> None:
        self._dead = np.zeros(pes, bool) if alive is None else ~np.asarray(alive, bool).ravel()
        self._last = (0, np.zeros((pes, 5), np.int64), np.zeros(pes, np.int64),
                      np.zeros((pes, 5), np.int64))  # fmt: skip

    def sample(self, st: Any, cycle: int) -> None:
        """Record the utilization since the previous sample, ending at ``cycle`` (nothing
        where no cycle passed since: a run that ended where the last chunk did)."""
        last_cycle, last_flits, last_busy, last_reasons = self._last
        span = cycle - last_cycle
        if span <= 0:
            return
        reasons = reasons_before(st.reasons, cycle)
        self.cycles.append(cycle)
        link = (st.link_flits - last_flits) / span
        self.link.append(link.reshape(*self.shape, 5).astype(np.float32))
        tasks = (st.busy - last_busy) / span
        share = self._shares(reasons - last_reasons, tasks, span)
        self.pe.append(self._per_pe(share[:, K.REASON_COMPUTING]))
        self.busy_tasks.append(self._per_pe(tasks))
        self.queued.append(st.q_count.sum(axis=(1, 2)).reshape(self.shape).astype(np.int32))
        self.reasons.append(self._per_pe(share))
        self._last = (cycle, st.link_flits.copy(), st.busy.copy(), reasons)

    def _shares(self, counted: np.ndarray, tasks: np.ndarray, span: int) -> np.ndarray:
        """(P, 5): the share of the sample's cycles by reason; a traffic source computes as it
        injects (a flit a cycle at most), waits for output as its queue is full, else idles."""
        share = counted / span
        if self.traffic:
            share[:, K.REASON_COMPUTING] = tasks
            share[:, K.REASON_IDLE] = 1 - share[:, : K.REASON_IDLE].sum(axis=1)
        return share

    def _per_pe(self, values: np.ndarray) -> np.ndarray:
        """``values`` (P, ...) as float32 (H, W, ...), NaN at the holes (they have no cycles)."""
        out = values.astype(np.float32)
        out[self._dead] = np.nan
        return out.reshape(*self.shape, *values.shape[1:])

    def save(self, path: str | Path, attrs: dict[str, Any]) -> None:
        """Write ``cycles``, ``link_utilization`` (S, H, W, 5), ``pe_activity`` (S, H, W: each
        PE's busy share, in [0, 1]), ``pe_busy_tasks`` (S, H, W: task-cycles a cycle, in
        [0, tasks]), ``queued_wavelets`` (S, H, W) and ``pe_cycle_reasons`` (S, H, W, 5: each
        PE's share of the sample's cycles by reason, ``fabric.engine.REASON_NAMES``, summing
        to 1); holes are NaN."""
        with atomic_hdf5(path) as f:
            f.create_dataset("cycles", data=np.array(self.cycles, np.int64))
            for name, samples in (("link_utilization", self.link), ("pe_activity", self.pe),
                                  ("pe_busy_tasks", self.busy_tasks),
                                  ("queued_wavelets", self.queued),
                                  ("pe_cycle_reasons", self.reasons)):  # fmt: skip
                f.create_dataset(name, data=np.array(samples), compression="gzip")
            f.attrs["reasons"] = REASONS
            f.attrs["ports"] = PORT_NAMES
            f.attrs["every_cycles"] = self.every_cycles
            f.attrs["tasks"] = self.tasks
            f.attrs["wafersim_version"] = __version__
            f.attrs["run"] = json.dumps(attrs, sort_keys=True, default=str)

    def mean_link_utilization(self) -> np.ndarray:
        """(H, W): mean wavelets per cycle over the four mesh links out of each router."""
        if not self.link:
            return np.zeros(self.shape, np.float32)
        return np.mean([sample[..., :4].mean(axis=-1) for sample in self.link], axis=0)


class SentProbe:
    """Wavelets a few routers have sent (out of their four mesh ports), sampled every
    ``every_cycles``: the pace of a run too long to trace whole (a whole wafer's weights
    streaming in at its edge ports), without a trace's per-PE arrays. Given to the engine
    as its ``trace``."""

    def __init__(self, every_cycles: int, routers: np.ndarray) -> None:
        self.every_cycles = check_every(every_cycles)
        self.routers = np.asarray(routers, np.int64)
        self.reads = ("link_flits",)  # what a GPU run copies back for a sample
        self.cycles: list[int] = [0]
        self.sent: list[int] = [0]
        self.deadlock: tuple[int, str] | None = None

    def begin(self, width: int, height: int, traffic: bool = False, **_run: Any) -> None:
        """A run starts (its mesh's other facts, ``alive`` and ``tasks``, do not matter here)."""
        self.cycles, self.sent = [0], [0]

    def sample(self, st: Any, cycle: int) -> None:
        self.cycles.append(cycle)
        self.sent.append(int(st.link_flits[self.routers, :4].sum()))
