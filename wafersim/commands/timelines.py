"""Timelines of the engine's commands (``kernel``, ``traffic``): a span for the run and the
engine's counters per region of PEs (:func:`fabric.timeline.engine_counters`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from wafersim.fabric.timeline import Timeline, check_block, engine_counters
from wafersim.fabric.trace import TraceRecorder
from wafersim.wafer.arith import ceil_div
from wafersim.wafer.spec import WaferSpec

MOST_REGIONS_A_SIDE = 8  # the default region size keeps a timeline to 64 counter tracks


def default_block(width: int, height: int) -> int:
    """PEs a side of a region so that a side has at most :data:`MOST_REGIONS_A_SIDE`."""
    return max(1, ceil_div(max(width, height), MOST_REGIONS_A_SIDE))


def write_engine_timeline(path: str | Path, trace: TraceRecorder, spec: WaferSpec,
                          block: int | None, name: str, cycles: int,
                          metadata: dict[str, Any]) -> Path:  # fmt: skip
    """The timeline of one engine run named ``name`` that took ``cycles`` cycles."""
    height, width = trace.shape
    block = default_block(width, height) if block is None else check_block(block)
    timeline = Timeline(spec.clock_hz)
    timeline.span("cycle engine", "run", name, 0, cycles, cycles=cycles)
    engine_counters(timeline, trace, block)
    return timeline.write(path, {**metadata, "timeline_block": block,
                                 "trace_every_cycles": trace.every_cycles})  # fmt: skip
