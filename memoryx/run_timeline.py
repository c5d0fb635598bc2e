"""A weight-streaming run as a timeline (:class:`fabric.timeline.Timeline`: Perfetto / Chrome
trace events), from the stream's event times (:mod:`memoryx.streaming`).

Per wafer (a process each): its steps, each holding its layer passes as they computed, on one
row (the wafer computes one pass at a time, so they nest); the cycles compute waited for
weights on a row of their own (a segment's waits summed and drawn at the start of its window,
where prefetch leaves them; a wait between its tiles is counted there too); the weights
streaming in and the gradients streaming out, each pass's bytes as one span while the link
moved them; MemoryX's optimizer update of each layer as an instant once its gradients
arrived; with several wafers, SwarmX's broadcast of each pass's weights and its reduction of
the gradients as spans (from the first wafer's first byte to the last wafer's arrival); the
checkpoints a functional run wrote, as instants after their steps; and counters: bytes in
and out so far, the weights held in the prefetch buffer (a pass's bytes from their arrival
to its compute's end), and the joules spent so far (each pass's at its end, a step's SRAM
leakage at the step's end: :mod:`memoryx.energy`). The
counters' last values are ``memoryx_bytes_in``, ``memoryx_bytes_out`` and
``energy.total_j`` of performance.json; the waits sum to its ``stall_cycles``.
"""

from __future__ import annotations

from wafersim.fabric.timeline import Timeline
from wafersim.memoryx import _stream_jit as K
from wafersim.memoryx.energy import segment_joules
from wafersim.memoryx.report import run_seconds
from wafersim.memoryx.run import RunResult, optimizer_of
from wafersim.memoryx.run_config import RunConfig
from wafersim.memoryx.streaming import StreamResult
from wafersim.memoryx.training import step_due

BROADCAST = "broadcast (weights to the wafers)"
REDUCE = "reduce (gradients from the wafers)"


def run_timeline(result: RunResult) -> Timeline:
    """The timeline of every wafer's stream of ``result``."""
    timeline = Timeline(result.config.spec.clock_hz)
    slots, run_s = len(optimizer_of(result.config).slots), run_seconds(result)
    for w, stream in enumerate(result.streams):
        joules = segment_joules(result.wafers[w].plan, stream, result.config.spec, slots, run_s)
        _wafer(timeline, f"wafer {w}", stream, joules)
    if len(result.streams) > 1:
        _swarmx(timeline, result.streams)
    if result.history is not None:  # a functional run writes checkpoints
        _checkpoints(timeline, result.streams[0], result.config)
    return timeline


def _swarmx(timeline: Timeline, streams: list[StreamResult]) -> None:
    """Each pass's weights broadcast down SwarmX's tree, from the first wafer's first byte
    to the last wafer's arrival, and its gradients reduced up, from the first wafer's first
    byte to the sum's arrival in MemoryX (every wafer runs the same passes); successive
    passes overlap there, so each takes the first free lane."""
    spans = []  # (start, end, row, name, bytes, step)
    for s in range(streams[0].times.shape[0]):
        ends = [stream.times[s] for stream in streams]
        links = [stream.link_spans(s) for stream in streams]
        for j, seg in enumerate(streams[0].segments):
            name = f"{seg.layer} {seg.pass_name}"
            weights = [link[j][0] for link in links]  # None where the segment moves none
            grads = [link[j][1] for link in links]
            if seg.in_bytes:
                start = min(span[0] for span in weights if span is not None)
                end = max(row[j, K.IN_END] for row in ends)
                spans.append((start, end, BROADCAST, name, seg.in_bytes, s))
            if seg.out_bytes:
                start = min(span[0] for span in grads if span is not None)
                end = max(row[j, K.OUT_END] for row in ends)
                spans.append((start, end, REDUCE, seg.layer, seg.out_bytes, s))
    for start, end, row, name, moved, s in sorted(spans, key=lambda span: span[0]):
        timeline.lane_span("SwarmX", row, name, start, end, bytes=moved, step=s)


def _checkpoints(timeline: Timeline, stream: StreamResult, config: RunConfig) -> None:
    """An instant where each checkpoint was written: after its step's last pass (MemoryX
    holds the weights and writes them off the wafer's path, so no time is charged)."""
    steps = stream.times.shape[0]
    for s in range(steps):
        if step_due(s + 1, config.checkpoint_every, steps):
            end = stream.times[s, -1, K.COMPUTE_END]
            timeline.instant("MemoryX", "checkpoints", f"checkpoint after step {s}", end,
                             step=s, steps_done=s + 1)  # fmt: skip


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
