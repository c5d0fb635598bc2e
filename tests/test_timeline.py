"""Timelines (Chrome trace events for Perfetto) of ``traffic``, ``kernel`` and ``run``: valid
trace JSON, spans that nest, and counters that sum to the figures each command reports."""

from __future__ import annotations

import collections
import json
import re

import numpy as np
import pytest
from wafersim.fabric.engine import simulate
from wafersim.fabric.mesh import Mesh
from wafersim.fabric.program import ProgramBuilder
from wafersim.fabric.routes import ColorRoutes
from wafersim.fabric.timeline import Timeline, engine_counters
from wafersim.fabric.trace import TraceRecorder
from wafersim.memoryx import _stream_jit as K
from wafersim.memoryx.run import run
from wafersim.memoryx.run_config import load_run_config
from wafersim.memoryx.run_timeline import run_timeline
from wafersim.wafer.arith import ceil_div
from wafersim.wafer.errors import DeadlockError

from tests.test_memoryx_run import write_config
from wafersim.cli import main


def load(path) -> tuple[list[dict], float]:
    document = json.loads(path.read_text())
    assert set(document) == {"traceEvents", "displayTimeUnit", "otherData"}
    for event in document["traceEvents"]:
        assert event["ph"] in "MXCi"
        assert isinstance(event["pid"], int)
        assert event["ph"] == "M" or event["ts"] >= 0
    return document["traceEvents"], document["otherData"]["clock_hz"]


def threads(events) -> dict[tuple[int, int], str]:
    return {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["name"] == "thread_name"}


def assert_spans_nest(events) -> None:
    """On each row, spans are disjoint or one holds the other (what the viewers draw)."""
    rows = collections.defaultdict(list)
    for e in events:
        if e["ph"] == "X":
            rows[e["pid"], e["tid"]].append((e["ts"], e["ts"] + e["dur"]))
    slack = 1e-6  # microseconds: float rounding of cycle -> us
    for spans in rows.values():
        open_ends: list[float] = []
        for start, end in sorted(spans, key=lambda s: (s[0], -s[1])):
            while open_ends and open_ends[-1] <= start + slack:
                open_ends.pop()
            assert not open_ends or end <= open_ends[-1] + slack, (start, end, open_ends[-1])
            open_ends.append(end)


def counter_integrals(events, clock_hz: float, series: str) -> dict[str, float]:
    """Per counter track: the sum of value x cycles it held (the last value holds none)."""
    tracks = collections.defaultdict(list)
    for e in events:
        if e["ph"] == "C":
            tracks[e["name"]].append((e["ts"], e["args"][series]))
    out = {}
    for name, points in tracks.items():
        points.sort()
        held = zip(points, points[1:], strict=False)
        out[name] = sum(value * (end - ts) * clock_hz / 1e6 for (ts, value), (end, _) in held)
    return out


def cli(capsys, argv) -> dict:
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_traffic_timeline_counters_sum_to_the_flits(capsys, tmp_path):
    """Busy counters (a source's injected flits) and delivered counters, per 4 x 4 region,
    integrate to the summary's flits injected and ejected."""
    path = tmp_path / "traffic.json"
    summary = cli(capsys, ["traffic", "--grid", "16x16", "--cycles", "600", "--rate", "0.3",
                           "--trace-every", "50", "--timeline", str(path),
                           "--timeline-block", "4"])  # fmt: skip
    events, clock = load(path)
    assert len({e["name"] for e in events if e["ph"] == "C"}) == 16
    injected = sum(counter_integrals(events, clock, "busy").values()) * 16
    ejected = sum(counter_integrals(events, clock, "delivered").values()) * 16
    assert injected == pytest.approx(summary["flits_injected"], rel=1e-6)
    assert ejected == pytest.approx(summary["flits_ejected"], rel=1e-6)
    assert_spans_nest(events)


def test_kernel_timeline_has_a_track_per_pe_summing_to_the_busy_cycles(capsys, tmp_path):
    """With one PE a region, the grid's PEs' busy_tasks counters integrate to busy_task_cycles and
    their busy counters to the cycles they computed (the edge ports' frame, row and column
    0, has tracks of its own)."""
    path = tmp_path / "kernel.json"
    summary = cli(capsys, ["kernel", "gemm", "--grid", "4x4", "--m", "16", "--k", "16",
                           "--n", "32", "--trace-every", "40", "--timeline", str(path),
                           "--timeline-block", "1"])  # fmt: skip
    events, clock = load(path)
    tasks = counter_integrals(events, clock, "busy_tasks")
    assert len(tasks) == 25  # the 4 x 4 grid and its ports' frame
    assert sum(on_grid(tasks).values()) == pytest.approx(summary["busy_task_cycles"], rel=1e-6)
    computed = summary["pe_cycles_by_reason"]["computing"]
    busy = on_grid(counter_integrals(events, clock, "busy"))
    assert sum(busy.values()) == pytest.approx(computed, rel=1e-4, abs=0.05)
    for reason, cycles in summary["pe_cycles_by_reason"].items():  # stall reasons too
        shares = on_grid(counter_integrals(events, clock, reason))
        assert sum(shares.values()) == pytest.approx(cycles, rel=1e-4, abs=0.05), reason
    (run_span,) = [e for e in events if e["ph"] == "X"]
    assert run_span["dur"] == pytest.approx(summary["cycles"] / clock * 1e6)


def on_grid(tracks: dict[str, float]) -> dict[str, float]:
    """The tracks of the kernel grid's PEs, not of its edge ports (row or column 0)."""
    return {name: v for name, v in tracks.items() if min(map(int, re.findall(r"\d+", name)))}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["kernel", "gemm", "--tier", "fast"], "--timeline and --animation record the cycle"),
        (["kernel", "gemm", "--timeline-block", "0"], r"timeline block=0 \(--timeline-block\)"),
        (["traffic", "--timeline-block", "-2"], r"timeline block=-2"),
        (["run", "examples/fc_digits.yaml", "--validate-only"], "--timeline: --validate-only"),
    ],
)
def test_bad_timeline_options_are_one_line(capsys, tmp_path, argv, message):
    """Before any work: the fast tier, a bad region size, a mode that runs no step."""
    assert main([*argv, "--timeline", str(tmp_path / "t.json")]) == 2
    err = capsys.readouterr().err
    assert re.search(message, err)
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "t.json").exists()


def test_run_timeline_counters_and_waits_match_the_summary(tmp_path):
    """Steps hold their passes, the waits for weights sum to stall_cycles, the byte counters
    end at memoryx_bytes_in and _out, and each layer's update is an instant in MemoryX."""
    config = load_run_config(write_config(tmp_path, steps=2, tier="fast"))
    result = run(config, tmp_path / "out")
    path = run_timeline(result).write(tmp_path / "run.json")
    events, clock = load(path)
    assert_spans_nest(events)
    rows = threads(events)
    summary = result.streams[0].summary()
    waits = [e for e in events if e["ph"] == "X" and rows[e["pid"], e["tid"]].startswith("wait")]
    assert sum(e["dur"] for e in waits) * clock / 1e6 == pytest.approx(summary["stall_cycles"],
                                                                      abs=1)  # fmt: skip
    last = {}
    for e in sorted((e for e in events if e["ph"] == "C"), key=lambda e: e["ts"]):
        last[e["name"]] = e["args"].get("bytes", e["args"].get("joules"))
    assert last["bytes in from MemoryX"] == summary["memoryx_bytes_in"]
    assert last["bytes out to MemoryX"] == summary["memoryx_bytes_out"]
    assert last["prefetch buffer bytes"] == 0
    steps = [e for e in events if e["ph"] == "X" and e["name"].startswith("step ")]
    assert len(steps) == 2
    updates = [e for e in events if e["ph"] == "i" and e["name"].startswith("update ")]
    assert len(updates) == 2 * sum(1 for s in result.streams[0].segments if s.out_bytes)


def test_a_deadlock_is_an_instant_naming_its_routers(tmp_path, tiny):
    """A receive of 5 words where 3 are sent: the trace keeps the deadlock, the timeline
    marks it where the engine stopped."""
    mesh, spec = Mesh.full(2, 1), tiny
    routes = ColorRoutes(mesh, 1)
    routes.add_path(0, [0, 1])
    builder = ProgramBuilder(mesh.pes, spec.pe, 1)
    builder.send(0, 0, 0, 0, 3)
    builder.recv(1, 0, 0, 0, 5)
    trace = TraceRecorder(10)
    with pytest.raises(DeadlockError) as caught:
        simulate(mesh, spec, routes, builder.build(), np.ones((2, 8), np.float32),
                 max_cycles=500, trace=trace)  # fmt: skip
    assert trace.deadlock is not None
    assert trace.deadlock[1] == str(caught.value)
    timeline = Timeline(spec.clock_hz)
    engine_counters(timeline, trace, 1)
    (instant,) = [e for e in timeline.events if e["ph"] == "i"]
    assert instant["name"] == "deadlock"
    assert "PE (1,0)" in instant["args"]["message"]
    assert instant["ts"] == pytest.approx(trace.deadlock[0] / spec.clock_hz * 1e6, abs=1e-6)


def test_animations_have_a_frame_a_sample(capsys, tmp_path):
    """kernel and traffic --animation: an animated GIF, one frame per engine sample."""
    from PIL import Image

    for argv, frames in (
        (["kernel", "gemm", "--grid", "4x4", "--m", "16", "--k", "16", "--n", "32"], None),
        (["traffic", "--grid", "8x8", "--cycles", "300"], 3),
    ):
        path = tmp_path / f"{argv[0]}.gif"
        summary = cli(capsys, [*argv, "--trace-every", "100", "--animation", str(path)])
        expected = frames or ceil_div(summary["cycles"], 100)
        with Image.open(path) as gif:
            assert gif.format == "GIF"
            assert gif.n_frames == expected


def test_animation_frames_average_a_wafer_down():
    """A wafer larger than the frame is shown as block means, edges padded."""
    from wafersim.plots.figures import _downsample

    values = np.arange(12, dtype=float).reshape(3, 4)
    np.testing.assert_array_equal(_downsample(values, 2), [[2.5, 4.5], [8.5, 10.5]])
    np.testing.assert_array_equal(_downsample(values, 4), values)


@pytest.mark.slow
def test_run_timeline_draws_swarmx_and_checkpoints(tmp_path):
    """Two wafers: each pass's weights broadcast and gradients reduced by SwarmX, spanning
    every wafer's own transfer (overlapping passes on lanes where they nest); a checkpoint
    instant after each step that wrote one."""
    path = write_config(tmp_path, steps=3, checkpoint_every=2, swarmx={"wafers": 2})
    result = run(load_run_config(path), tmp_path / "out")
    timeline = run_timeline(result)
    events, _ = load(timeline.write(tmp_path / "run.json"))
    assert_spans_nest(events)
    rows = threads(events)
    swarmx = collections.defaultdict(list)
    for e in events:
        if e["ph"] == "X" and rows[e["pid"], e["tid"]].startswith(("broadcast", "reduce")):
            swarmx[rows[e["pid"], e["tid"]].split(" ")[0], e["args"]["step"], e["name"]].append(e)
    segments = result.streams[0].segments
    assert len(swarmx) == 3 * sum(bool(s.in_bytes) + bool(s.out_bytes) for s in segments)
    for s in range(3):
        for stream in result.streams:  # SwarmX's span holds each wafer's own transfer
            for j, (seg, (weights, grads)) in enumerate(
                zip(segments, stream.link_spans(s), strict=True)
            ):
                for kind, name, link, end in (("broadcast", f"{seg.layer} {seg.pass_name}",
                                               weights, stream.times[s, j, K.IN_END]),
                                              ("reduce", seg.layer, grads,
                                               stream.times[s, j, K.OUT_END])):  # fmt: skip
                    if link is None:
                        continue
                    spans = swarmx[kind, s, name]
                    assert any(e["ts"] <= timeline.us(link[0]) + 1e-6
                               and timeline.us(end) <= e["ts"] + e["dur"] + 1e-6
                               for e in spans)  # fmt: skip
    saved = sorted(e["args"]["steps_done"] for e in events if e["name"].startswith("checkpoint"))
    assert saved == [2, 3]  # every 2 steps, and the last
    written = sorted(p.name for p in (tmp_path / "out" / "checkpoints").glob("*.h5"))
    assert written == ["step_00000002.h5", "step_00000003.h5"]
