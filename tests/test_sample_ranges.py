"""The engine's per-sample figures are shares in their range on real runs (kernels of two
GEMM algorithms, one on a patch with holes, and traffic of two patterns, one on a mesh with a
hole): a PE's busy share and each stall reason's share in [0, 1], the reasons of every working
PE summing to 1, in the trace, its timeline and its animation. And the ``traffic`` command's
figures: its rate leaves the engine's compile out, its hotspot share is an option."""

from __future__ import annotations

import itertools
import json
import re
import time

import numpy as np
import pytest
from wafersim.fabric import engine
from wafersim.fabric.mesh import Mesh
from wafersim.fabric.timeline import Timeline, engine_counters
from wafersim.fabric.trace import TraceRecorder, traced
from wafersim.fabric.traffic import TrafficConfig, run_traffic
from wafersim.kernels.grid import kernel_grid
from wafersim.kernels.registry import run_kernel
from wafersim.wafer.errors import ConfigError
from wafersim.wafer.presets import preset

from wafersim.cli import main

SPEC = preset("tiny")
SLACK = 1e-5  # float32 rounding of a share
REASONS = ("computing", "waiting_input", "waiting_output", "waiting_sram", "idle")


def gemm(algo: str, every: int, dead: list[tuple[int, int]] = ()) -> tuple[TraceRecorder, Mesh]:
    """A 4 x 4 GEMM of ``algo`` traced every ``every`` cycles, on a 5 x 5 patch with the
    ``dead`` PEs (row, column) as holes (none: a 4 x 4 patch)."""
    side = 5 if dead else 4
    holes = np.zeros((side, side), bool)
    for at in dead:
        holes[at] = True
    grid = kernel_grid(4, 4, holes, None, np.arange(4))
    trace = TraceRecorder(every)
    with traced(trace):
        run_kernel("gemm", algo, {"m": 32, "k": 32, "n": 32}, grid, SPEC, seed=1)
    return trace, grid.mesh


def traffic(pattern: str, **options) -> tuple[TraceRecorder, Mesh]:
    """8 x 8 traffic near saturation, traced every 50 cycles; ``mesh`` may have holes."""
    mesh = options.pop("mesh", Mesh.full(8, 8))
    cfg = TrafficConfig(8, 8, pattern=pattern, rate=0.5, cycles=600, warmup=100, seed=3,
                        **options)  # fmt: skip
    trace = TraceRecorder(50)
    run_traffic(cfg, SPEC, mesh=mesh, trace=trace)
    return trace, mesh


def holed_mesh() -> Mesh:
    alive = np.ones((8, 8), bool)
    alive[2, 5] = False
    return Mesh(8, 8, alive, np.zeros((8, 8, 4), bool))


RUNS = {
    "gemm weight_stream": lambda: gemm("weight_stream", 25),
    "gemm summa": lambda: gemm("summa", 25),
    "gemm weight_stream with holes": lambda: gemm("weight_stream", 25, [(1, 1), (3, 2)]),
    "uniform traffic": lambda: traffic("uniform"),
    "hotspot traffic": lambda: traffic("hotspot", hotspot_fraction=0.5),
    "uniform traffic with a hole": lambda: traffic(
        "uniform", routing="updown", mesh=holed_mesh()
    ),  # fmt: skip
}


@pytest.mark.parametrize("run", list(RUNS))
def test_every_sample_share_is_in_its_range(run):
    """Working PEs' shares lie in [0, 1], reasons sum to 1, task-cycles in [0, tasks]; holes NaN."""
    trace, mesh = RUNS[run]()
    live = mesh.alive
    assert trace.cycles == sorted(set(trace.cycles))  # each sample spans some cycles
    for busy, tasks, reasons in zip(trace.pe, trace.busy_tasks, trace.reasons, strict=True):
        assert np.isnan(busy[~live]).all()
        assert np.isnan(reasons[~live]).all()
        assert (busy[live] >= 0).all()
        assert (busy[live] <= 1 + SLACK).all()
        assert (tasks[live] >= 0).all()
        assert (tasks[live] <= trace.tasks + SLACK).all()
        assert (reasons[live] >= -SLACK).all()
        assert (reasons[live] <= 1 + SLACK).all()
        np.testing.assert_allclose(reasons[live].sum(axis=-1), 1, atol=SLACK)
        np.testing.assert_array_equal(busy[live], reasons[live][:, 0])  # busy: computed


@pytest.mark.parametrize("run", list(RUNS))
def test_every_timeline_counter_is_a_share_in_range(run):
    """Every timeline counter event, the closing ones too: busy in [0, 1], reasons sum to 1."""
    trace, _ = RUNS[run]()
    for block in (1, 3):
        timeline = Timeline(SPEC.clock_hz)
        engine_counters(timeline, trace, block)
        counters = [e["args"] for e in timeline.events if e["ph"] == "C"]
        assert counters
        for values in counters:
            assert 0 <= values["busy"] <= 1 + SLACK, values
            assert sum(values[name] for name in REASONS) == pytest.approx(1, abs=SLACK), values


def test_a_holes_track_is_left_out_of_the_timeline():
    """With a track per PE, a hole has none: it has no cycles to share out."""
    trace, mesh = gemm("weight_stream", 25, [(1, 1), (3, 2)])
    timeline = Timeline(SPEC.clock_hz)
    engine_counters(timeline, trace, 1)
    tracks = {e["name"] for e in timeline.events if e["ph"] == "C"}
    assert len(tracks) == mesh.alive.sum() == mesh.pes - 2
    assert "PE (2,2)" not in tracks
    assert "PE (3,4)" not in tracks


def test_a_rows_busy_share_is_the_share_of_its_cycles_it_computed():
    """A row's busy sample is the share of its cycles it computed, as a per-cycle trace sees."""
    coarse, _ = gemm("weight_stream", 40)
    fine, _ = gemm("weight_stream", 1)
    assert max(np.nanmax(tasks) for tasks in coarse.busy_tasks) > 1  # tasks overlap
    assert fine.cycles == list(range(1, fine.cycles[-1] + 1))
    computed = np.array(fine.reasons)[..., 0]  # (cycle, H, W): 1 where the PE computed
    start = 0
    for end, busy in zip(coarse.cycles, coarse.pe, strict=True):
        rows = computed[start:end].mean(axis=(0, 2))
        np.testing.assert_allclose(busy.mean(axis=1), rows, atol=SLACK)
        start = end


def test_a_run_ending_at_a_chunk_boundary_adds_no_empty_sample():
    """Sampled every cycle: one sample a cycle, the last ending at the run's last cycle."""
    trace = TraceRecorder(1)
    with traced(trace):
        grid = kernel_grid(2, 2)
        result = run_kernel("gemm", "weight_stream", {"m": 8, "k": 8, "n": 8}, grid, SPEC)
    assert trace.cycles == list(range(1, result.cycles + 1))


def test_the_hdf5_trace_holds_shares_and_task_cycles_apart(tmp_path):
    """The HDF5 trace: pe_activity in [0, 1], pe_busy_tasks apart, reasons summing to 1."""
    import h5py

    path = tmp_path / "t.h5"
    assert main(["traffic", "--grid", "8x8", "--rate", "0.6", "--cycles", "400",
                 "--trace-every", "50", "--trace", str(path), "--json"]) == 0  # fmt: skip
    with h5py.File(path) as f:
        activity, reasons = f["pe_activity"][()], f["pe_cycle_reasons"][()]
        assert f["pe_busy_tasks"].shape == activity.shape == (8, 8, 8)
    assert activity.min() >= 0
    assert activity.max() <= 1
    np.testing.assert_allclose(reasons.sum(axis=-1), 1, atol=SLACK)


def test_the_animation_refuses_values_its_colour_bar_cannot_show(tmp_path):
    """A frame above 1, which a colour bar of [0, 1] would draw as 1, is refused."""
    from wafersim.plots.figures import activity_animation

    frames = [np.full((4, 4), 0.5), np.full((4, 4), 1.5)]
    with pytest.raises(ConfigError, match=r"shares in \[0.5, 1.5\]"):
        activity_animation(frames, [10, 20], tmp_path / "a.gif", "test")


def test_a_kernel_animation_says_its_mesh_has_an_edge_port_frame(tmp_path, monkeypatch):
    """A kernel's frame names its mesh's edge-port row and column; nothing is "averaged"."""
    import matplotlib.axes

    titles, labels = [], []
    monkeypatch.setattr(matplotlib.axes.Axes, "set_title",
                        lambda self, text, **_: titles.append(text))  # fmt: skip
    for axis in ("xlabel", "ylabel"):
        real = getattr(matplotlib.axes.Axes, f"set_{axis}")
        monkeypatch.setattr(matplotlib.axes.Axes, f"set_{axis}",
                            lambda self, text, _real=real, **kw: labels.append(text)
                            or _real(self, text, **kw))  # fmt: skip
    assert (
        main(
            [
                "kernel",
                "gemm",
                "--grid",
                "4x4",
                "--m",
                "16",
                "--k",
                "16",
                "--n",
                "16",
                "--trace-every",
                "50",
                "--animation",
                str(tmp_path / "a.gif"),
                "--json",
            ]
        )
        == 0
    )
    assert "4x4 PEs" in titles[0]
    assert "5 x 5 mesh: edge ports at row and column 0" in titles[0]
    axes = [label for label in labels if "mesh" in label]  # not the colour bar's
    assert axes == ["x (mesh column; 0: west edge ports)", "y (mesh row; 0: north edge ports)"]


COMPILE_S = 1000.0  # a fake compile's seconds


def test_the_traffic_rate_leaves_the_engine_compile_out(capsys, monkeypatch):
    """The traffic rate is the run's own: a compile (1000 s, fake clock) shows in compile_s."""
    ticks, compiled = itertools.count(), []  # the clock ticks a second a reading
    real = engine.compile_once

    def slow(dispatcher, args):
        compiled.append(COMPILE_S)
        real(dispatcher, args)

    monkeypatch.setattr(time, "perf_counter", lambda: next(ticks) + sum(compiled))
    monkeypatch.setattr(engine, "compile_once", slow)
    assert main(["traffic", "--grid", "8x8", "--cycles", "300", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert compiled == [COMPILE_S]
    assert COMPILE_S <= r["compile_s"] < 2 * COMPILE_S
    assert 0 < r["sim_wall_s"] < COMPILE_S
    assert r["router_cycles_per_s"] == pytest.approx(64 * 300 / r["sim_wall_s"])


def test_a_hotspot_fraction_of_1_sends_every_flit_to_the_centre():
    """hotspot_fraction is the share of packets to the centre PE: at 1, all of them."""
    trace, _ = traffic("hotspot", hotspot_fraction=1.0)
    delivered = sum(sample[..., 4] for sample in trace.link) * 50  # wavelets into each PE
    centre = delivered[4, 4]
    assert centre > 0
    assert centre == pytest.approx(delivered.sum())


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--hotspot-fraction", "0.3"],
            "--hotspot-fraction=0.3 applies to --pattern hotspot only, not uniform",
        ),  # fmt: skip
        (["--pattern", "transpose", "--hotspot-fraction", "0.25"], "hotspot only, not transpose"),
        (
            ["--pattern", "hotspot", "--hotspot-fraction", "1.5"],
            re.escape("hotspot_fraction=1.5 is out of range [0.0, 1.0]"),
        ),
    ],
)
def test_a_misplaced_or_out_of_range_hotspot_fraction_is_one_line(capsys, argv, message):
    """--hotspot-fraction with another pattern, or outside [0, 1]: a one-line error."""
    assert main(["traffic", "--grid", "4x4", *argv]) == 2
    err = capsys.readouterr().err
    assert re.search(message, err)
    assert len(err.strip().splitlines()) == 1


def test_the_hotspot_fraction_is_documented_and_checked_in_the_config(capsys):
    """--help gives the option's default; the config refuses a share for another pattern."""
    with pytest.raises(SystemExit):
        main(["traffic", "--help"])
    assert re.search(r"--hotspot-fraction.*\(default\s+0\.25\)", capsys.readouterr().out,
                     re.DOTALL)  # fmt: skip
    with pytest.raises(ConfigError, match="hotspot_fraction=0.5 applies to pattern='hotspot'"):
        TrafficConfig(pattern="uniform", hotspot_fraction=0.5)
