"""A weight-streaming run as a timeline (:class:`fabric.timeline.Timeline`: Perfetto / Chrome
trace events), from the stream's event times (:mod:`memoryx.streaming`).

Per wafer (a process each): its steps, each holding its layer passes as they computed, on one
row (the wafer computes one pass at a time, so they nest); the cycles compute waited for
weights on a row of their own (a segment's waits summed and drawn at the start of its window,
where prefetch leaves them; a wait between its tiles is counted there too); the weights
streaming in and the gradients streaming out, each pass's bytes as one span while the link
moved them; MemoryX's optimizer update of each layer as an instant once its gradients
arrived; and counters: bytes in and out so far, and the weights held in the prefetch buffer
(a pass's bytes from their arrival to its compute's end), and the joules spent so far (each
pass's at its end, a step's SRAM leakage at the step's end: :mod:`memoryx.energy`). The
counters' last values are ``memoryx_bytes_in``, ``memoryx_bytes_out`` and
``energy.total_j`` of performance.json; the waits sum to its ``stall_cycles``. Not drawn:
SwarmX (its tree's latency is folded into the edge's) and checkpoint writes (not simulated).
"""

from __future__ import annotations

from fabric.timeline import Timeline
from memoryx import _stream_kernel as K
from memoryx.energy import segment_joules
from memoryx.run import RunResult, optimizer_of
from memoryx.streaming import StreamResult


def run_timeline(result: RunResult) -> Timeline:
    """The timeline of every wafer's stream of ``result``."""
    timeline = Timeline(result.config.spec.clock_hz)
    slots = len(optimizer_of(result.config).slots)
    for w, stream in enumerate(result.streams):
        joules = segment_joules(result.wafers[w].plan, stream, result.config.spec, slots)
        _wafer(timeline, f"wafer {w}", stream, joules)
    return timeline


def _wafer(timeline: Timeline, wafer: str, stream: StreamResult, joules) -> None:
    """``joules``: each segment's and a step's leakage (:func:`memoryx.energy.segment_joules`)."""
    changes: list[tuple[float, str, float]] = []  # (cycle, counter, bytes or joules added)
    previous_end, (segment_j, leakage_j) = 0.0, joules
    for s, row in enumerate(stream.times):
        first, last = row[0, K.COMPUTE_START], row[-1, K.COMPUTE_END]
        timeline.span(wafer, "steps and passes", f"step {s}", first, last, step=s)
        changes.append((last, "energy", leakage_j))
        links = stream.link_spans(s)
        for j, (seg, (weights, grads)) in enumerate(zip(stream.segments, links, strict=True)):
            start, end, stall = row[j, K.COMPUTE_START], row[j, K.COMPUTE_END], row[j, K.STALL]
            name = f"{seg.layer} {seg.pass_name}"
            timeline.span(wafer, "steps and passes", name, start, end,
                          layer=seg.layer, pass_name=seg.pass_name, step=s,
                          compute_cycles=seg.compute_cycles, stall_cycles=float(stall))  # fmt: skip
            if stall > 0:
                timeline.span(wafer, "waiting for weights", f"stall {seg.layer}",
                              previous_end, previous_end + stall, cycles=float(stall))  # fmt: skip
            previous_end = end
            changes.append((end, "energy", segment_j[j]))
            if weights:
                arrived = row[j, K.IN_END]
                timeline.span(wafer, "MemoryX -> wafer (weights)", name, *weights,
                              bytes=seg.in_bytes)  # fmt: skip
                changes += [(arrived, "in", seg.in_bytes), (arrived, "held", seg.in_bytes),
                            (end, "held", -seg.in_bytes)]  # fmt: skip
            if grads:
                sent = row[j, K.OUT_END]
                timeline.span(wafer, "wafer -> MemoryX (gradients)", seg.layer, *grads,
                              bytes=seg.out_bytes)  # fmt: skip
                timeline.instant(wafer, "MemoryX optimizer", f"update {seg.layer}", sent, step=s)
                changes.append((sent, "out", seg.out_bytes))
    _counters(timeline, wafer, changes)


def _counters(timeline: Timeline, wafer: str, changes: list[tuple[float, str, float]]) -> None:
    """Counter tracks from the byte changes, in time order."""
    totals = {"in": 0.0, "out": 0.0, "held": 0.0, "energy": 0.0}
    names = {
        "in": ("bytes in from MemoryX", "bytes"),
        "out": ("bytes out to MemoryX", "bytes"),
        "held": ("prefetch buffer bytes", "bytes"),
        "energy": ("energy (J)", "joules"),
    }
    for cycle, key, added in sorted(changes, key=lambda change: change[0]):
        totals[key] += added
        track, unit = names[key]
        timeline.counter(wafer, track, cycle, **{unit: totals[key]})
