"""``wafersim sweep``: sweep files, the results table, resume, retries and the Dask executor."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from wafersim.wafer.errors import ConfigError

from wafersim import wafer
from wafersim.cli import main
from wafersim.commands.defects import run_defects
from wafersim.sweeps.config import load_sweep
from wafersim.sweeps.results import read_records, read_table
from wafersim.sweeps.run import run_sweep

REPO = Path(__file__).resolve().parent.parent
SMALL = """\
job: defects
base: {preset: small}
axes:
  defect_density_per_cm2: [1.0, 5.0]
  repair: [row, column_shift]
  seed: [0, 1]
metrics: [working_pes, unrepaired_pes, dead_pes]
"""
METRICS = ("working_pes", "unrepaired_pes", "dead_pes")


def _write(tmp_path: Path, text: str, name: str = "sweep.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


@pytest.fixture
def small(tmp_path: Path) -> Path:
    return _write(tmp_path, SMALL)


def test_grid_expands_to_the_cartesian_product_in_order(small):
    """A grid sweep has one point per combination, the last axis varying fastest."""
    sweep = load_sweep(small)
    assert len(sweep.points) == 8
    assert [p.config["seed"] for p in sweep.points[:2]] == [0, 1]
    assert sweep.points[2].config["repair"] == "column_shift"
    assert sweep.points[4].argv[:5] == (
        "defects",
        "--preset",
        "small",
        "--defect-density-per-cm2",
        "5.0",
    )


@pytest.mark.slow
def test_serial_run_matches_the_job_run_alone(small, tmp_path):
    """Each row's metrics equal what ``wafersim defects --json`` gives for that point."""
    summary = run_sweep(load_sweep(small), tmp_path / "r.h5", serial=True)
    assert (summary.ok, summary.failed, summary.ran) == (8, 0, 8)
    table = read_table(tmp_path / "r.h5")
    assert list(table["point"]) == list(range(8))
    args = ["defects", "--preset", "small", "--defect-density-per-cm2", "5.0"]
    alone = run_defects(_parse([*args, "--repair", "row", "--seed", "1"]))
    assert table["working_pes"][5] == alone["working_pes"]
    assert table["seed"][5] == 1
    assert json.loads(table["config"][5])["repair"] == "row"
    assert set(table["wafersim_version"]) == {wafer.__version__}


def _parse(argv):
    from wafersim.commands.parser import parse_command_line

    return parse_command_line(argv)


@pytest.mark.slow
def test_local_cluster_gives_the_same_table_as_serial(small, tmp_path):
    """Two Dask workers produce the same metrics per point index as a serial run."""
    pytest.importorskip("distributed")
    sweep = load_sweep(small)
    run_sweep(sweep, tmp_path / "serial.h5", serial=True)
    summary = run_sweep(sweep, tmp_path / "dask.h5", workers=2)
    assert summary.executor.startswith("dask LocalCluster(2")
    serial, dask = read_table(tmp_path / "serial.h5"), read_table(tmp_path / "dask.h5")
    for name in ("point", "seed", "config", "status", *METRICS):
        assert list(serial[name]) == list(dask[name]), name


@pytest.mark.slow
def test_embedded_cluster_workers_run_without_the_profiler():
    """The embedded cluster's workers run without Dask's statistical profiler."""
    pytest.importorskip("distributed")
    from distributed import Client

    from wafersim.sweeps.run import _local_cluster

    with _local_cluster(1) as cluster, Client(cluster) as client:
        callbacks = client.run(lambda dask_worker: sorted(dask_worker.periodic_callbacks))
    (names,) = callbacks.values()
    assert "heartbeat" in names  # the list is the one Dask keeps
    assert "profile" not in names
    assert "profile-cycle" not in names


@pytest.mark.slow
def test_two_embedded_clusters_at_once_take_no_fixed_port():
    """Each embedded scheduler's HTTP server listens on a free local port, not on Dask's
    8787, so two sweeps on one machine do not compete for it."""
    pytest.importorskip("distributed")
    from wafersim.sweeps.run import _local_cluster

    with _local_cluster(1) as first, _local_cluster(1) as second:
        ports = [cluster.scheduler.http_server.port for cluster in (first, second)]
    assert 8787 not in ports
    assert ports[0] != ports[1]


_KILLABLE = """
import sys, time
import wafersim.sweeps.run as sweep
from wafersim.sweeps.config import load_sweep
run = sweep.run_point
def slow(*args):
    time.sleep(0.3)
    return run(*args)
sweep.run_point = slow
sweep.run_sweep(load_sweep(sys.argv[1]), sys.argv[2], serial=True)
"""


@pytest.mark.slow
def test_killed_sweep_resumes_and_ends_with_every_point_once(small, tmp_path):
    """SIGKILL mid-sweep keeps the finished rows; re-running runs only the rest."""
    out = tmp_path / "r.h5"
    proc = subprocess.Popen([sys.executable, "-c", _KILLABLE, str(small), str(out)], cwd=REPO)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not _rows_at_least(out, 3):
            time.sleep(0.05)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    done_before = len(read_records(out))
    assert 3 <= done_before < 8
    summary = run_sweep(load_sweep(small), out, serial=True)
    assert (summary.skipped, summary.ran) == (done_before, 8 - done_before)
    points = [r.point for r in read_records(out)]
    assert sorted(points) == list(range(8))
    assert {r.status for r in read_records(out)} == {"ok"}


def _rows_at_least(path: Path, n: int) -> bool:
    try:
        return len(read_records(path)) >= n
    except (OSError, KeyError, ConfigError):  # not written yet
        return False


FAILING = """\
job: defects
base: {preset: small, defect_density_per_cm2: 2.0}
sampling: list
axes:
  pe.sram_bytes: [65536, -4, 49152]
  seed: [0, 1, 2]
metrics: [working_pes]
"""


@pytest.mark.slow
def test_failing_point_is_recorded_retried_once_and_the_others_finish(tmp_path):
    """A point that raises is a failed row with its error; one re-run retries it, no more."""
    sweep = load_sweep(_write(tmp_path, FAILING))
    out = tmp_path / "r.h5"
    first = run_sweep(sweep, out, serial=True)
    assert (first.ok, first.failed) == (2, 1)
    bad = next(r for r in read_records(out) if r.point == 1)
    assert bad.status == "failed"
    assert bad.attempts == 1
    assert "attempt 1: ConfigError" in bad.error
    assert "sram_bytes=-4" in bad.error
    second = run_sweep(sweep, out, serial=True)
    assert (second.ran, second.skipped, second.failed) == (1, 2, 1)
    bad = next(r for r in read_records(out) if r.point == 1)
    assert bad.attempts == 2
    assert "attempt 1:" in bad.error
    assert "attempt 2:" in bad.error
    assert run_sweep(sweep, out, serial=True).ran == 0
    assert len(read_records(out)) == 3


def test_a_metric_the_job_cannot_return_is_refused_before_any_point_runs(tmp_path, capsys):
    """A metric no result of the job holds is one line naming it and the job's result keys,
    when the sweep file loads: no point runs and no table is written (exit status 2)."""
    path = _write(tmp_path, SMALL.replace("dead_pes]", "workng_pes]"))
    with pytest.raises(ConfigError) as info:
        load_sweep(path)
    assert str(info.value) == (
        f"{path}: metric 'workng_pes' is not in the job's result; scalar keys like it: "
        "working_pes; see docs/fields.md, wafersim defects"
    )
    out = tmp_path / "r.h5"
    assert main(["sweep", str(path), "--serial", "--out", str(out)]) == 2
    assert "metric 'workng_pes'" in capsys.readouterr().err
    assert not out.exists()
    with pytest.raises(ConfigError, match=r"'no_such_key' is not in the job's result; see docs"):
        load_sweep(_write(tmp_path, SMALL.replace("dead_pes]", "no_such_key]")))


@pytest.mark.parametrize(
    ("job", "metric"),
    [("defects", "spec.pe.sram_bytes"), ("traffic", "saturated"), ("run", "step_cycles"),
     ("run", "energy.per_step_j.total_j"), ("kernel", "pe_cycles_by_reason.idle"),
     ("compile", "totals.cycles")],
)  # fmt: skip
def test_metrics_the_fields_table_and_the_modes_document_are_known(job, metric):
    """Figures of the fields table (``*`` any key), echoed inputs, flags and a mode's own
    figures are metrics a sweep file may name."""
    from wafersim.sweeps.metrics import job_metrics

    (read,) = job_metrics(job, (metric,))
    assert read.keys == tuple(metric.split("."))


def test_a_list_element_is_no_metric():
    """A list's elements (``losses[]``) are documented figures but no metric: a metric is one
    number per point."""
    from wafersim.sweeps.metrics import job_metrics

    with pytest.raises(ConfigError, match=r"'losses\[\]' is not in the job's result"):
        job_metrics("run", ("losses[]",))


def test_a_metric_reads_its_dotted_path_and_names_what_is_missing():
    """A metric walks its dotted path; null is NaN, a flag 1 or 0, and a result without it
    is a failed point naming the result's scalar keys."""
    import math

    from wafersim.sweeps.metrics import Metric

    result = {"a": 1, "b": {"c": 2.5, "d": None}, "flag": True, "text": "x"}
    assert Metric.named("b.c").read(result) == 2.5
    assert math.isnan(Metric.named("b.d").read(result))
    assert Metric.named("flag").read(result) == 1.0
    with pytest.raises(ConfigError, match=r"metric 'b.e' is not in the job's result; scalar "
                                          "keys: a, flag$"):  # fmt: skip
        Metric.named("b.e").read(result)
    with pytest.raises(ConfigError, match="metric 'text' is 'x', not a number"):
        Metric.named("text").read(result)


@pytest.mark.slow
def test_changed_sweep_file_is_an_error_naming_the_change(small, tmp_path):
    """Resuming with an edited sweep file is refused, naming the table that changed."""
    out = tmp_path / "r.h5"
    run_sweep(load_sweep(small), out, serial=True)
    small.write_text(SMALL.replace("[0, 1]", "[0, 1, 2]"))
    with pytest.raises(ConfigError, match=r"changed since .*changed: axes\)"):
        run_sweep(load_sweep(small), out, serial=True)


def test_random_sampling_is_seeded_and_within_bounds(tmp_path):
    """Random sampling draws ``samples`` points, the same ones for the same sample_seed."""
    text = """\
    job: defects
    base: {preset: small}
    sampling: random
    samples: 5
    sample_seed: 7
    axes:
      defect_density_per_cm2: {loguniform: [0.5, 8.0]}
      repair: [row, column_shift]
      seed: {integers: [0, 100]}
    metrics: [working_pes]
    """
    first = load_sweep(_write(tmp_path, text, "a.yaml")).points
    again = load_sweep(_write(tmp_path, text, "b.yaml")).points
    assert [p.config for p in first] == [p.config for p in again]
    assert len(first) == 5
    assert all(0.5 <= p.config["defect_density_per_cm2"] <= 8.0 for p in first)


def test_panels_expand_one_after_the_other(tmp_path):
    """A list of axes tables gives each table's points in turn, each with its own keys."""
    text = """\
    job: defects
    base: {preset: small, repair: none}
    axes:
      - {defect_density_per_cm2: [0.5, 1.0], seed: [0, 1]}
      - {pe_defect_prob: [0.01], seed: [0, 1]}
    metrics: [working_pes]
    """
    points = load_sweep(_write(tmp_path, text)).points
    assert [p.index for p in points] == list(range(6))
    assert [p.config.get("defect_density_per_cm2") for p in points] == [
        0.5,
        0.5,
        1.0,
        1.0,
        None,
        None,
    ]
    assert [p.config.get("pe_defect_prob") for p in points[4:]] == [0.01, 0.01]
    assert "--pe-defect-prob" in points[4].argv


BAD = {
    "unknown top-level key": ("job: defects\naxes: {seed: [1]}\nmetrics: [a]\nsteps: 3\n", "steps"),
    "unknown job": ("job: train\naxes: {seed: [1]}\nmetrics: [a]\n", "job='train'"),
    "no axes": ("job: defects\nmetrics: [a]\n", "axes=None"),
    "empty panel": ("job: defects\naxes: [{seed: [1]}, {}]\nmetrics: [a]\n", "axes[1]={}"),
    "panel not a table": ("job: defects\naxes: [{seed: [1]}, 3]\nmetrics: [a]\n", "axes[1]=3"),
    "unknown axis key": ("job: defects\naxes: {sram: [1]}\nmetrics: [a]\n", "axes.sram"),
    "axis not a list": ("job: defects\naxes: {seed: 3}\nmetrics: [a]\n", "axes.seed=3"),
    "zipped lengths differ": (
        "job: defects\nsampling: list\naxes: {seed: [1, 2], repair: [row]}\nmetrics: [a]\n",
        "one length",
    ),
    "random without samples": (
        "job: defects\nsampling: random\naxes: {seed: [1]}\nmetrics: [a]\n",
        "samples=None",
    ),
    "no metrics": ("job: defects\naxes: {seed: [1]}\nmetrics: []\n", "metrics=[]"),
    "file-writing option": ("job: defects\naxes: {out: [a.h5]}\nmetrics: [a]\n", "axes.out"),
    "invalid choice": ("job: defects\naxes: {repair: [glue]}\nmetrics: [a]\n", "'glue'"),
    "key in base and axes": (
        "job: defects\nbase: {seed: 1}\naxes: {seed: [1]}\nmetrics: [a]\n",
        "both base and axes",
    ),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_sweep_file_is_a_one_line_config_error(tmp_path, case):
    """Each malformed sweep file raises one ConfigError line naming the file and the field."""
    text, expected = BAD[case]
    path = _write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_sweep(path)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(str(path))
    assert expected in message


def test_example_sweep_file_is_valid():
    """The ready defect-tolerance sweep in examples/sweeps loads: 5 x 3 x 4 points."""
    sweep = load_sweep(REPO / "examples" / "sweeps" / "defect_tolerance.yaml")
    assert len(sweep.points) == 60
    assert "unrepaired_pes" in sweep.metric_names


@pytest.mark.slow
def test_cli_prints_progress_to_stderr_and_a_summary(small, tmp_path, capsys):
    """``wafersim sweep --serial`` reports progress on stderr and the summary on stdout."""
    out = tmp_path / "r.h5"
    assert main(["sweep", str(small), "--serial", "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert "sweep: 8/8 points done, 0 failed" in captured.err
    assert "8 points, 8 ok, 0 failed" in captured.out
    with pytest.raises(SystemExit) as usage:  # a usage error, as argparse's own
        main(["sweep", str(small), "pe.sram_bytes=1", "--serial", "--out", str(out)])
    assert usage.value.code == 2
    assert "no key=value overrides" in capsys.readouterr().err


def test_chunks_grow_to_the_target_time_and_stay_bounded():
    """A chunk holds one point until times are known, then about CHUNK_TARGET_S of them."""
    from wafersim.sweeps.results import PointRecord
    from wafersim.sweeps.run import CHUNK_TARGET_S, MAX_CHUNK, ChunkSizer

    def records(*walls):
        return [PointRecord(i, "{}", 0, "v", "ok", "", 1, w) for i, w in enumerate(walls)]

    sizer = ChunkSizer()
    assert sizer.size() == 1
    sizer.add(records(float("nan")))  # a lost worker's point has no time
    assert sizer.size() == 1
    sizer.add(records(0.1, 0.3))
    assert sizer.size() == int(CHUNK_TARGET_S / 0.2)
    sizer.add(records(*[1e-4] * 1000))
    assert sizer.size() == MAX_CHUNK
    slow = ChunkSizer()
    slow.add(records(60.0))
    assert slow.size() == 1


def test_last_chunks_shrink_so_workers_finish_together(small):
    """Near the end a chunk holds a share of the points left, an eighth of a full one at least."""
    from collections import deque

    from wafersim.sweeps.run import (
        CHUNKS_IN_FLIGHT_PER_WORKER,
        MAX_CHUNK,
        MIN_CHUNK_SHARE,
        _ChunkFeed,
    )

    feed = _ChunkFeed(None, load_sweep(small), deque(range(1000)))
    feed.sizer.points, feed.sizer.wall_s = 100, 0.001  # fast points: MAX_CHUNK a chunk
    assert feed._size(workers=2) == MAX_CHUNK
    assert CHUNKS_IN_FLIGHT_PER_WORKER == 2
    feed.queue = deque(range(100))
    assert feed._size(workers=2) == 25  # 100 points over 2 workers x 2 chunks in flight
    feed.queue = deque(range(20))
    assert feed._size(workers=2) == MAX_CHUNK // MIN_CHUNK_SHARE  # not 5: the floor
    feed.queue = deque(range(3))
    assert feed._size(workers=2) == 3  # what is left


def test_a_lost_chunk_goes_out_again_point_by_point(small):
    """A chunk whose worker died is sent again one point per task; only a point that loses
    its worker alone is recorded as failed (and retried on the next run)."""
    from collections import deque

    from wafersim.sweeps.run import _ChunkFeed

    class Lost:
        def result(self):
            raise RuntimeError("KilledWorker")

    sweep = load_sweep(small)
    feed = _ChunkFeed(None, sweep, deque())
    chunk, single = Lost(), Lost()
    feed.flying = {chunk: [(sweep.points[0], 1), (sweep.points[3], 2)],
                   single: [(sweep.points[5], 1)]}  # fmt: skip
    assert feed.finished(chunk) == []
    assert [(p.index, a) for p, a in feed.alone] == [(0, 1), (3, 2)]
    (record,) = feed.finished(single)
    assert (record.point, record.attempts, record.status) == (5, 1, "failed")
    assert "worker lost: RuntimeError: KilledWorker" in record.error


@pytest.mark.slow
def test_serial_sweeps_and_dask_chunks_prepare_the_process_before_the_first_point(
    small, monkeypatch, tmp_path
):
    """Both runners set up malloc, Numba and the job's parser before a point, not inside its
    time; a worker then freezes the garbage collector's view, once."""
    import gc

    import wafersim.sweeps._numba_start as numba_start
    import wafersim.sweeps.run as sweep_module

    calls = []
    for module, name in ((sweep_module, "keep_freed_memory"), (numba_start, "first_call"),
                         (sweep_module, "cli_parser"), (gc, "freeze")):  # fmt: skip
        monkeypatch.setattr(module, name, lambda *args, name=name: calls.append((name, *args)))
    real_run_point = sweep_module.run_point

    def run_point(*args):
        calls.append(("point",))
        return real_run_point(*args)

    monkeypatch.setattr(sweep_module, "run_point", run_point)
    sweep_module._prepare_worker.cache_clear()
    sweep = load_sweep(small)
    prepare = [("keep_freed_memory",), ("first_call",), ("cli_parser", "defects")]
    run_sweep(sweep, tmp_path / "r.h5", serial=True)
    assert calls == prepare + [("point",)] * len(sweep.points)
    calls.clear()
    for _ in range(2):
        records = sweep_module.run_points(sweep.job, [(sweep.points[0], 1)], sweep.metrics)
    assert calls == [*prepare, ("freeze",), ("point",), ("point",)]
    assert records[0].status == "ok"
    sweep_module._prepare_worker.cache_clear()


def test_appended_rows_are_written_as_a_slice_and_scattered_ones_as_a_list():
    """Consecutive rows go to h5py as one slice; rows of retried points stay a list."""
    from wafersim.sweeps.results import _selection

    assert _selection([4, 5, 6]) == slice(4, 7)
    assert _selection([7]) == slice(7, 8)
    assert _selection([1, 3, 4]) == [1, 3, 4]


@pytest.mark.slow
def test_a_table_of_another_version_is_not_resumed(small, tmp_path):
    """A results table another wafersim version wrote may hold points whose options meant
    something else (0.3.0 turned kernel --grid into width x height): it is refused."""
    import h5py

    out = tmp_path / "r.h5"
    run_sweep(load_sweep(small), out, serial=True)
    with h5py.File(out, "a") as f:
        f.attrs["wafersim_version"] = "0.2.0"
    with pytest.raises(ConfigError, match="written by wafersim 0.2.0, this is"):
        run_sweep(load_sweep(small), out, serial=True)


@pytest.mark.slow
def test_a_results_file_takes_one_sweep_at_a_time(small, tmp_path):
    """A second sweep on an --out another one is writing is refused at once, naming it
    (two sweeps started together would both report success while the file kept one sweep's
    rows under the other's header); a write into a file that another sweep has
    taken over is refused rather than mixed in."""
    from wafersim.wafer.atomic import exclusive

    from wafersim.sweeps.results import write_records

    out = tmp_path / "r.h5"
    busy = pytest.raises(ConfigError, match=r"r.h5 is being written by another sweep \(pid")
    with exclusive(out, "sweep"), busy:  # as if another sweep were running
        run_sweep(load_sweep(small), out, serial=True)
    assert not out.exists()
    run_sweep(load_sweep(small), out, serial=True)
    other = load_sweep(_write(tmp_path, SMALL.replace("seed: [0, 1]", "seed: [7]"), "b.yaml"))
    rows = read_records(out)
    with pytest.raises(ConfigError, match="now belongs to another sweep"):
        write_records(out, other, rows[:1])
    assert read_records(out) == rows
