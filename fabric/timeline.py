"""Timelines in the Chrome trace-event format, which the Perfetto UI (ui.perfetto.dev) and
``chrome://tracing`` open, as PyTorch's profiler writes them.

A :class:`Timeline` collects spans (``"ph": "X"``), counters (``"C"``) and instants (``"i"``)
on named tracks: a *process* (``pid``: a wafer, MemoryX, the engine) holds *threads*
(``tid``: one row of spans each) and counter tracks. Times are simulated cycles, written in
microseconds at the spec's clock (the format's unit), so the viewer's ruler reads wafer time.
:func:`engine_counters` turns the cycle engine's samples (:class:`fabric.trace.TraceRecorder`)
into counter tracks per region of PEs: busy share, link use, queued wavelets.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from wafersim.fabric.engine import REASON_NAMES
from wafersim.fabric.trace import TraceRecorder
from wafersim.wafer.arith import ceil_div
from wafersim.wafer.atomic import atomic_path
from wafersim.wafer.errors import ConfigError


@dataclass
class Timeline:
    """Trace events of one run; ``clock_hz`` converts cycles to the format's microseconds."""

    clock_hz: float
    events: list[dict[str, Any]] = field(default_factory=list)
    _pids: dict[str, int] = field(default_factory=dict)
    _tids: dict[tuple[str, str], int] = field(default_factory=dict)
    _lane_ends: dict[tuple[str, str], list[float]] = field(default_factory=dict)

    def us(self, cycle: float) -> float:
        """Cycle ``cycle`` in microseconds (to a picosecond: a cycle is about a nanosecond)."""
        return round(float(cycle) / self.clock_hz * 1e6, 6)

    def pid(self, process: str) -> int:
        """The id of ``process`` (named in the trace on first use)."""
        if process not in self._pids:
            self._pids[process] = len(self._pids) + 1
            self.events.append({"ph": "M", "name": "process_name", "pid": self._pids[process],
                                "args": {"name": process}})  # fmt: skip
        return self._pids[process]

    def tid(self, process: str, thread: str) -> tuple[int, int]:
        """(pid, tid) of the row ``thread`` of ``process`` (named on first use)."""
        pid = self.pid(process)
        if (process, thread) not in self._tids:
            self._tids[process, thread] = tid = len(self._tids) + 1
            self.events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                                "args": {"name": thread}})  # fmt: skip
        return pid, self._tids[process, thread]

    def span(self, process: str, thread: str, name: str, start: float, end: float, **args):
        """A span from cycle ``start`` to ``end`` on row ``thread`` of ``process``."""
        pid, tid = self.tid(process, thread)
        ts = self.us(start)
        self.events.append({"ph": "X", "name": name, "pid": pid, "tid": tid, "ts": ts,
                            "dur": max(self.us(end) - ts, 0.0), "args": args})  # fmt: skip

    def lane_span(self, process: str, thread: str, name: str, start: float, end: float, **args):
        """A span on the first row of ``thread``'s lanes (``thread``, ``thread (2)``, ...)
        free at ``start``: spans that overlap without nesting, each on a row it nests on.
        Spans must come in order of ``start``."""
        ends = self._lane_ends.setdefault((process, thread), [])
        lane = next((k for k, last in enumerate(ends) if last <= start), len(ends))
        ends[lane : lane + 1] = [end]
        row = thread if lane == 0 else f"{thread} ({lane + 1})"
        self.span(process, row, name, start, end, **args)

    def counter(self, process: str, name: str, cycle: float, **values: float) -> None:
        """Counter track ``name`` of ``process`` takes ``values`` (series) from ``cycle`` on."""
        rounded = {key: float(f"{value:.7g}") for key, value in values.items()}  # file size
        self.events.append({"ph": "C", "name": name, "pid": self.pid(process),
                            "ts": self.us(cycle), "args": rounded})  # fmt: skip

    def instant(self, process: str, thread: str, name: str, cycle: float, **args) -> None:
        """An event at one cycle (a deadlock, an optimizer update)."""
        pid, tid = self.tid(process, thread)
        self.events.append({"ph": "i", "s": "t", "name": name, "pid": pid, "tid": tid,
                            "ts": self.us(cycle), "args": args})  # fmt: skip

    def write(self, path: str | Path, metadata: dict[str, Any] | None = None) -> Path:
        """Write the trace JSON (atomically); returns the path."""
        document = {"traceEvents": self.events, "displayTimeUnit": "ns",
                    "otherData": {"clock_hz": self.clock_hz, **(metadata or {})}}  # fmt: skip
        with atomic_path(path) as tmp:
            Path(tmp).write_text(json.dumps(document, default=_plain, separators=(",", ":")))
        return Path(path)


def _plain(value):
    if isinstance(value, np.integer | np.floating):
        return value.item()
    return str(value)


def check_block(block) -> int:
    """``block`` (PEs a side of a timeline region) as an int; ConfigError unless >= 1."""
    if isinstance(block, bool) or not isinstance(block, int) or block < 1:
        raise ConfigError(f"timeline block={block!r} (--timeline-block) must be an integer >= 1")
    return block


def engine_counters(timeline: Timeline, trace: TraceRecorder, block: int,
                    process: str = "cycle engine") -> None:  # fmt: skip
    """Counter tracks from the engine's samples, per ``block x block`` region of PEs (one
    track per PE with ``block`` 1), each a mean over its working PEs and the sample's cycles:
    the busy share (``busy``, in [0, 1]: the share of a PE's cycles in which it computed, a
    traffic source's in which it injected a flit), the tasks whose op ran a cycle
    (``busy_tasks``, in [0, tasks]), the wavelets a cycle on each of its routers' four mesh
    links (``links``) and to its PEs (``delivered``), the wavelets queued at its routers at
    the sample's end (``queued``) and the share of its PE-cycles of each stall reason
    (``fabric.engine.REASON_NAMES``, summing to 1). A region of holes alone has no track.
    Each track's last sample holds to the run's end, where it is written again (the viewers
    end a track at its last event); a deadlock the trace saw is an instant whose message
    names the routers."""
    check_block(block)
    height, width = trace.shape
    names = [_region(x, y, block, width, height)
             for y in range(0, height, block) for x in range(0, width, block)]  # fmt: skip
    start = 0
    values: list[dict | None] = []
    for k, end in enumerate(trace.cycles):
        values = _sample_counters(trace, k, block, len(names))
        _write_counters(timeline, process, names, start, values)
        start = end
    if trace.cycles:  # every track ends where the run ends
        _write_counters(timeline, process, names, start, values)
    if trace.deadlock is not None:
        cycle, message = trace.deadlock
        timeline.instant(process, "deadlock", "deadlock", cycle, message=message)


COUNTER_SERIES = ("busy", "busy_tasks", "links", "delivered", *REASON_NAMES)


def _sample_counters(trace: TraceRecorder, k: int, block: int, regions: int) -> list[dict | None]:
    """Sample ``k``'s counter values of each region (None: a region of holes alone)."""
    links = trace.link[k].astype(np.float64)
    per_pe = np.dstack([trace.pe[k], trace.busy_tasks[k], links[..., :4].mean(axis=-1),
                        links[..., 4], trace.reasons[k]])  # fmt: skip
    live = ~np.isnan(per_pe[..., :1])  # holes are NaN in the PE series
    per_pe[..., 2:4] = np.where(live, per_pe[..., 2:4], np.nan)  # means over working routers
    with warnings.catch_warnings():  # a region of holes alone: a mean of nothing
        warnings.simplefilter("ignore", RuntimeWarning)
        means = region_means(per_pe, block).reshape(regions, len(COUNTER_SERIES))
    queued = region_means(trace.queued[k].astype(np.float64), block, np.nansum).reshape(-1)
    return [None if np.isnan(row[0]) else
            {**dict(zip(COUNTER_SERIES, row.tolist(), strict=True)), "queued": float(waiting)}
            for row, waiting in zip(means, queued, strict=True)]  # fmt: skip


def _write_counters(timeline: Timeline, process: str, names: list[str], cycle: float,
                    values: list[dict | None]) -> None:  # fmt: skip
    for name, series in zip(names, values, strict=True):
        if series is not None:
            timeline.counter(process, name, cycle, **series)


def region_means(values: np.ndarray, block: int, reduce=np.nanmean) -> np.ndarray:
    """Means (or ``reduce``, e.g. ``np.nansum``) of ``values`` (H, W, ...) over ``block x
    block`` regions, the last ones smaller where the sides do not divide:
    (ceil(H / block), ceil(W / block), ...)."""
    height, width = values.shape[:2]
    rows, cols = ceil_div(height, block), ceil_div(width, block)
    padded = np.full((rows * block, cols * block, *values.shape[2:]), np.nan)
    padded[:height, :width] = values
    blocks = padded.reshape(rows, block, cols, block, *values.shape[2:])
    return reduce(blocks, axis=(1, 3))


def _region(x: int, y: int, block: int, width: int, height: int) -> str:
    if block == 1:
        return f"PE ({x},{y})"
    return f"PEs x {x}-{min(x + block, width) - 1}, y {y}-{min(y + block, height) - 1}"
