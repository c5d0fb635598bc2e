"""Sweeps that go wrong say so, sweep files name inputs relative to themselves, and the
shipped sweeps and their plots hold up."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import matplotlib.colors as mcolors
import numpy as np
import pytest
import yaml
from wafersim.wafer.errors import ConfigError

from wafersim.cli import main
from wafersim.plots.sweep import figure, left_out, left_out_note
from wafersim.sweeps.config import load_sweep
from wafersim.sweeps.results import PointRecord, read_records
from wafersim.sweeps.run import failure_kinds, run_sweep

REPO = Path(__file__).resolve().parent.parent
SWEEPS = sorted((REPO / "examples" / "sweeps").glob("*.yaml"))
FAILING = """\
job: defects
base: {preset: small, defect_density_per_cm2: 2.0, pe.sram_bytes: -4}
axes:
  seed: [0, 1, 2]
metrics: [working_pes]
"""


def _write(folder: Path, text: str, name: str = "sweep.yaml") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(textwrap.dedent(text))
    return path


def _sweep_cli(argv: list[str]) -> int:
    """``main(argv)``'s exit status, whether it returns it or exits with it."""
    try:
        return main(argv)
    except SystemExit as exit_info:
        return exit_info.code


@pytest.mark.slow
def test_failed_points_exit_1_and_say_why_on_stderr(tmp_path, capsys):
    """A sweep with failed points prints its summary, each kind of error once with its
    count on stderr, and exits 1; the table is written and a rerun retries the points."""
    sweep, out = _write(tmp_path, FAILING), tmp_path / "r.h5"
    argv = ["sweep", str(sweep), "--serial", "--out", str(out)]
    assert _sweep_cli(argv) == 1
    captured = capsys.readouterr()
    assert "3 points, 0 ok, 3 failed" in captured.out
    assert "3 of 3 points failed" in captured.err
    assert captured.err.count("sram_bytes=-4 is out of range") == 1
    assert "3 x (first: point 0) ConfigError: PESpec.sram_bytes=-4" in captured.err
    assert "rerunning retries 3 of them" in captured.err
    assert [r.attempts for r in read_records(out)] == [1, 1, 1]
    assert _sweep_cli([*argv, "--json"]) == 1  # the retry fails alike
    captured = capsys.readouterr()
    assert "each had its 2 attempts" in captured.err
    result = json.loads(captured.out)
    assert (result["ran"], result["failed"]) == (3, 3)
    (kind,) = result["failures"]
    assert (kind["count"], kind["retryable"]) == (3, 0)
    assert [r.attempts for r in read_records(out)] == [2, 2, 2]


def _failed(point: int, error: str) -> PointRecord:
    return PointRecord(point, "{}", 0, "v", "failed", error, error.count("attempt"), 0.0)


def test_errors_that_differ_in_numbers_are_one_kind():
    """Failures group by their last attempt's error with numbers masked, most common first,
    each kind giving its first point's message."""
    records = [
        _failed(4, "attempt 1: ConfigError: no such file: a.yaml"),
        _failed(0, "attempt 1: ConfigError: needs 147480 bytes on 8x8 PEs"),
        _failed(2, "attempt 1: KeyError: x | attempt 2: ConfigError: needs 81920 bytes on 8x8 PEs"),
        PointRecord(3, "{}", 0, "v", "ok", "", 1, 0.0),
    ]
    first, second = failure_kinds(records)
    assert (first.count, first.first_point, first.retryable) == (2, 0, 1)
    assert first.error == "ConfigError: needs 147480 bytes on 8x8 PEs"
    assert (second.count, second.error) == (1, "ConfigError: no such file: a.yaml")


def _small_spec(folder: Path) -> None:
    from wafersim.wafer.presets import preset

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "wafer.yaml").write_text(yaml.safe_dump(preset("small").to_dict()))
    (folder / "dead.yaml").write_text(yaml.safe_dump({"dead_pes": [[1, 2]], "dead_links": []}))


@pytest.mark.slow
def test_input_files_resolve_against_the_sweep_files_folder(tmp_path, monkeypatch):
    """``spec`` and ``defect_list`` written relative to the sweep file run from any folder."""
    _small_spec(tmp_path / "inputs")
    _write(tmp_path / "sweeps", """\
        job: defects
        base: {spec: ../inputs/wafer.yaml, defect_model: explicit, repair: none}
        axes: {defect_list: [../inputs/dead.yaml]}
        metrics: [dead_pes]
        """)  # fmt: skip
    (tmp_path / "elsewhere" / "deep").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "elsewhere" / "deep")  # ../inputs is not there
    sweep = Path("../../sweeps/sweep.yaml")  # relative to the cwd
    summary = run_sweep(load_sweep(sweep), tmp_path / "r.h5", serial=True)
    assert (summary.ok, summary.failed) == (1, 0)
    assert read_records(tmp_path / "r.h5")[0].metrics["dead_pes"] == 1
    assert load_sweep(sweep).points[0].config["defect_list"] == "../inputs/dead.yaml"


def test_run_and_compile_files_resolve_against_the_sweep_files_folder(tmp_path, monkeypatch):
    """A run point's config and ``model``, and a compile point's model, named relative to
    the sweep file become absolute paths of the files beside it."""
    root = tmp_path.resolve()
    _write(root / "models", "", "m.yaml")
    _write(root / "in", "model: ../models/m.yaml\n", "run.yaml")
    run = _write(root / "in", """\
        job: run
        base: {args: run.yaml}
        axes: {model: [../models/m.yaml]}
        metrics: [samples_per_sec]
        """)  # fmt: skip
    compile_sweep = _write(root / "in", """\
        job: compile
        base: {args: ../models/m.yaml}
        axes: {batch: [1]}
        metrics: [totals.cycles]
        """, "c.yaml")  # fmt: skip
    (root / "elsewhere").mkdir()
    monkeypatch.chdir(root / "elsewhere")
    args = load_sweep(run).points[0].job.options
    assert args.config == str(root / "in" / "run.yaml")
    assert args.overrides == [f"model={root / 'models' / 'm.yaml'}"]
    compiled = load_sweep(compile_sweep).points[0].job.options
    assert compiled.model == str(root / "models" / "m.yaml")


@pytest.mark.parametrize(
    ("base", "field"),
    [
        ("{preset: small, spec: nope.yaml}", "base.spec='nope.yaml'"),
        ("{preset: small, defects: maps/nope.h5}", "base.defects='maps/nope.h5'"),
    ],
)
def test_a_missing_input_file_is_the_sweep_files_error(tmp_path, base, field):
    """An input file that is not there is one ConfigError naming the field, before any run."""
    sweep = _write(tmp_path, f"job: defects\nbase: {base}\naxes: {{seed: [0]}}\nmetrics: [a]\n")
    with pytest.raises(ConfigError, match=rf"{field}: no such file {tmp_path}"):
        load_sweep(sweep)


@pytest.mark.parametrize("option", ["timeline", "animation"])
def test_options_that_write_files_are_refused(tmp_path, option):
    """Points cannot write a timeline or an animation: parallel points would overwrite it."""
    sweep = _write(tmp_path, f"job: kernel\nbase: {{args: gemm, {option}: t.json}}\n"
                             "axes: {m: [8]}\nmetrics: [cycles]\n")  # fmt: skip
    with pytest.raises(ConfigError, match=f"base.{option}: points cannot write files"):
        load_sweep(sweep)


@pytest.mark.slow
def test_every_shipped_sweep_validates_from_any_folder(tmp_path, monkeypatch):
    """Each sweep in examples/sweeps loads from another folder, and each run point's config
    (run config, model and overrides) loads too."""
    from wafersim.memoryx.run_config import load_run_config
    from wafersim.wafer.config_io import parse_overrides

    monkeypatch.chdir(tmp_path)
    assert len(SWEEPS) >= 6
    for path in SWEEPS:
        sweep = load_sweep(path)
        assert sweep.points, path
        for point in sweep.points if sweep.job == "run" else ():
            args = point.job.options
            load_run_config(args.config, parse_overrides(args.overrides))


def test_kernel_placement_points_fit_the_pes_sram():
    """Every point of the shipped kernel-placement sweep fits its PEs' SRAM, by the
    kernels' own footprint check (running it all takes tens of seconds)."""
    from wafersim.kernels.registry import check_fits, shape_of
    from wafersim.wafer.config_io import parse_overrides, resolve_spec

    from wafersim.commands.options import parse_grid

    sweep = load_sweep(REPO / "examples" / "sweeps" / "kernel_placement.yaml")
    algos = set()
    for point in sweep.points:
        args = point.job.options
        spec = resolve_spec(args.preset, args.spec, parse_overrides(args.overrides))
        width, height = parse_grid(args.grid)
        shape = shape_of(args.kernel, args.m, args.k, args.n)
        check_fits(args.kernel, args.algo, shape, height, width, spec, args.dtype)
        algos.add(args.algo)
    assert len(algos) >= 4  # still a comparison of placements


@pytest.fixture
def failed_table(tmp_path: Path) -> Path:
    """A table of 3 points on ``pe.sram_bytes``: point 1 failed, point 2 lost its value."""
    import h5py

    sweep = _write(tmp_path, """\
        job: defects
        base: {preset: small, defect_density_per_cm2: 2.0}
        sampling: list
        axes: {pe.sram_bytes: [65536, -4, 49152], seed: [0, 1, 2]}
        metrics: [working_pes]
        """)  # fmt: skip
    out = tmp_path / "r.h5"
    run_sweep(load_sweep(sweep), out, serial=True)
    with h5py.File(out, "r+") as f:
        row = list(f["points/point"][:]).index(2)
        f["points/metrics/working_pes"][row] = np.nan
    return out


@pytest.mark.slow
def test_plot_names_the_points_it_leaves_out(failed_table, tmp_path, capsys):
    """``wafersim plot`` names failed points and points without a value on stderr, in its
    summary and in the figure's footnote."""
    png = tmp_path / "p.png"
    argv = ["plot", str(failed_table), "--x", "pe.sram_bytes", "--y", "working_pes",
            "--out", str(png), "--json"]  # fmt: skip
    assert main(argv) == 0
    captured = capsys.readouterr()
    left = json.loads(captured.out)["left_out"]
    assert (left["failed"], left["no_value"], left["not_run"]) == ([1], [2], 0)
    note = "left out: 1 point (1) failed; 1 point (2) without a value of working_pes"
    assert note in captured.err
    assert left_out_note(left_out(failed_table, "pe.sram_bytes", "working_pes")) == note
    fig = figure({"": {"x": [1.0], "mean": [2.0], "ci95": [0.0], "n": [1]}}, "x", "y", "t",
                 False, note)  # fmt: skip
    assert note in [text.get_text() for text in fig.texts]
    _close(fig)


def _close(fig) -> None:
    import matplotlib.pyplot as plt  # after figure() chose its backend

    plt.close(fig)


def test_each_band_takes_its_lines_colour():
    """A series' confidence band is drawn in its line's colour, even after a series that has
    no band."""
    data = {
        "a=1": {"x": [1.0, 2.0], "mean": [1.0, 2.0], "ci95": [0.0, 0.0], "n": [1, 1]},
        "a=2": {"x": [1.0, 2.0], "mean": [2.0, 3.0], "ci95": [0.3, 0.2], "n": [3, 3]},
    }
    fig = figure(data, "x", "y", "t", False)
    ax = fig.axes[0]
    (band,) = ax.collections
    line = ax.get_lines()[1]
    assert mcolors.to_rgb(line.get_color()) == tuple(band.get_facecolor()[0][:3])
    _close(fig)


@pytest.mark.parametrize("error", [SystemError("error return without exception set"),
                                   KeyboardInterrupt()])  # fmt: skip
@pytest.mark.slow
def test_an_interrupt_stops_the_sweep_rather_than_failing_a_point(tmp_path, monkeypatch, error):
    """Ctrl-C inside a point (a SystemError when it lands in Numba's code) stops the sweep,
    resumable: no point is recorded as failed."""
    import wafersim.commands.jobs as jobs_module

    class Interrupted:
        def execute(self, args):
            raise error

    monkeypatch.setattr(jobs_module, "command", lambda job: Interrupted())
    sweep = load_sweep(_write(tmp_path, FAILING.replace(", pe.sram_bytes: -4", "")))
    out = tmp_path / "out.h5"
    with pytest.raises(type(error)):
        run_sweep(sweep, out=str(out), serial=True)
    assert not out.exists() or all(r.status != "failed" for r in read_records(out))
