"""Traces: link utilization and PE activity sampled every N cycles, saved to HDF5."""

from __future__ import annotations

import contextlib
import json
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import h5py
import numpy as np
from wafersim.wafer import __version__
from wafersim.wafer.atomic import atomic_path
from wafersim.wafer.errors import ConfigError

PORT_NAMES = "N,E,S,W,R"
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


class TraceRecorder:
    """Collects per-sample link utilization (wavelets per cycle out of each port), PE
    activity (busy cycles per cycle) and the wavelets queued at each router at the sample's
    end, as the engine runs in chunks of ``every_cycles``; and the deadlock that ended a run
    (cycle, message), if one did. ``width`` and ``height``: the mesh's, else taken from the
    first run the recorder is given to (:meth:`begin`)."""

    def __init__(self, every_cycles: int, width: int | None = None, height: int | None = None):
        self.every_cycles = check_every(every_cycles)
        self.shape = (height or 0, width or 0)
        self.cycles: list[int] = []
        self.link: list[np.ndarray] = []
        self.pe: list[np.ndarray] = []
        self.queued: list[np.ndarray] = []
        self.reasons: list[np.ndarray] = []
        self.deadlock: tuple[int, str] | None = None
        self.traffic = False
        self._restart(self.shape[0] * self.shape[1])

    def begin(self, width: int, height: int, traffic: bool = False) -> None:
        """A run on a ``width x height`` mesh starts (synthetic ``traffic`` or programs):
        size the recorder if it has no shape yet; ConfigError if it has another (one
        recorder, one mesh)."""
        if self.shape == (0, 0):
            self.__init__(self.every_cycles, width, height)
        elif self.shape != (height, width):
            raise ConfigError(f"a trace of a {self.shape[1]}x{self.shape[0]} mesh cannot "
                              f"record a {width}x{height} one")  # fmt: skip
        self.traffic = traffic
        self._restart(width * height)

    def _restart(self, pes: int) -> None:
        self._last = (0, np.zeros((pes, 5), np.int64), np.zeros(pes, np.int64),
                      np.zeros((pes, 5), np.int64))  # fmt: skip

    def sample(self, st: Any, cycle: int) -> None:
        """Record the utilization since the previous sample, ending at ``cycle``."""
        last_cycle, last_flits, last_busy, last_reasons = self._last
        span = max(cycle - last_cycle, 1)
        self.cycles.append(cycle)
        link = (st.link_flits - last_flits) / span
        self.link.append(link.reshape(*self.shape, 5).astype(np.float32))
        self.pe.append(((st.busy - last_busy) / span).reshape(self.shape).astype(np.float32))
        self.queued.append(st.q_count.sum(axis=(1, 2)).reshape(self.shape).astype(np.int32))
        reasons = st.reasons[:, :5].copy()
        share = (reasons - last_reasons) / span
        if self.traffic:  # a source computes as it injects; its other cycles are idle
            share[:, 0] = (st.busy - last_busy) / span
            share[:, 4] = 1 - share[:, :4].sum(axis=1)
        self.reasons.append(share.reshape(*self.shape, 5).astype(np.float32))
        self._last = (cycle, st.link_flits.copy(), st.busy.copy(), reasons)

    def save(self, path: str | Path, attrs: dict[str, Any]) -> None:
        """Write ``cycles``, ``link_utilization`` (S, H, W, 5), ``pe_activity`` (S, H, W),
        ``queued_wavelets`` (S, H, W) and ``pe_cycle_reasons`` (S, H, W, 5: each PE's share
        of the sample's cycles by reason, ``fabric.engine.REASON_NAMES``)."""
        with atomic_path(path) as tmp, h5py.File(tmp, "w") as f:
            f.create_dataset("cycles", data=np.array(self.cycles, np.int64))
            f.create_dataset("link_utilization", data=np.array(self.link), compression="gzip")
            f.create_dataset("pe_activity", data=np.array(self.pe), compression="gzip")
            f.create_dataset("queued_wavelets", data=np.array(self.queued), compression="gzip")
            f.create_dataset("pe_cycle_reasons", data=np.array(self.reasons), compression="gzip")
            f.attrs["reasons"] = "computing,waiting_input,waiting_output,waiting_sram,idle"
            f.attrs["ports"] = PORT_NAMES
            f.attrs["every_cycles"] = self.every_cycles
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

    def begin(self, width: int, height: int, traffic: bool = False) -> None:
        self.cycles, self.sent = [0], [0]

    def sample(self, st: Any, cycle: int) -> None:
        self.cycles.append(cycle)
        self.sent.append(int(st.link_flits[self.routers, :4].sum()))
