"""Study sweeps (`run` jobs over run-config keys) and ``wafersim plot``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from wafersim.wafer.errors import ConfigError

from wafersim.cli import main
from wafersim.plots.sweep import curves
from wafersim.sweeps.config import load_sweep
from wafersim.sweeps.results import read_table
from wafersim.sweeps.run import run_sweep

pytestmark = pytest.mark.slow  # runs study sweeps and plots them

REPO = Path(__file__).resolve().parent.parent
STUDIES = {"no_stall": 84, "scaling": 7, "defect_throughput": 252, "kernel_placement": 12}


@pytest.mark.parametrize(("name", "points"), STUDIES.items())
def test_study_sweep_files_are_valid(name, points):
    """Each shipped study sweep file expands to its points, every one parsable."""
    assert len(load_sweep(REPO / "examples" / "sweeps" / f"{name}.yaml").points) == points


def run_study(tmp_path: Path) -> Path:
    """A small run study: tokens per batch x defect seed, timing-only."""
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump({
        "model": str(REPO / "examples/models/gpt2-small.yaml"), "tier": "analytic",
        "wafer": {"preset": "wse2", "defects": {"pe_defect_prob": 1e-3, "repair": "none"}},
        "seq": 16, "dtype": "fp16", "steps": 1,
    }))  # fmt: skip
    sweep = tmp_path / "study.yaml"
    sweep.write_text(yaml.safe_dump({
        "job": "run", "base": {"args": str(config), "summary_only": True},
        "axes": {"batch": [1, 2], "wafer.defects.seed": [0, 1, 2]},
        "metrics": ["stall_fraction", "samples_per_sec"],
    }))  # fmt: skip
    out = tmp_path / "study.h5"
    run_sweep(load_sweep(sweep), out, serial=True)
    return out


def test_run_study_and_plot(tmp_path, capsys, monkeypatch):
    """A run sweep fills its table; the plot averages the seeds with a 95 % band."""
    monkeypatch.chdir(tmp_path)  # run points write out/<config>-<digest>/
    out = run_study(tmp_path)
    table = read_table(out)
    assert list(table["status"]) == ["ok"] * 6
    data = curves(out, "batch", "samples_per_sec", ["wafer.defects.seed"])
    assert len(data) == 3
    pooled = curves(out, "batch", "samples_per_sec", [])[""]
    assert pooled["x"] == [1.0, 2.0]
    assert pooled["n"] == [3, 3]
    assert pooled["ci95"][0] > 0  # the defect maps differ, so the band has width
    png = tmp_path / "plot.png"
    assert main(["plot", str(out), "--x", "batch", "--y", "samples_per_sec", "--out",
                 str(png), "--json"]) == 0  # fmt: skip
    printed = json.loads(capsys.readouterr().out)
    assert printed["curves"][""]["mean"] == pooled["mean"]
    assert png.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize(
    ("x", "y", "message"),
    [
        ("colour", "samples_per_sec", "'colour' is not a key"),
        ("batch", "flops", "not a metric"),
    ],
)
def test_plot_errors_name_the_key(study, x, y, message):
    """An unknown key or metric is a clear error listing what the table has."""
    with pytest.raises(ConfigError, match=message):
        curves(study, x, y, [])


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    folder = tmp_path_factory.mktemp("study")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        return run_study(folder)


def test_a_seed_axis_is_the_run_configs_seed(tmp_path):
    """In a run sweep, `seed` is the run config's key (an override), not --seed."""
    sweep = {"job": "run", "base": {"args": str(REPO / "examples/fc_digits.yaml")},
             "axes": {"seed": [0, 1]}, "metrics": ["samples_per_sec"]}  # fmt: skip
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(sweep))
    argvs = [p.argv for p in load_sweep(path).points]
    assert argvs[1][-1] == "seed=1"
    assert "--seed" not in argvs[1]


def test_panels_and_the_ideal_line(tmp_path, capsys, monkeypatch):
    """A sweep of two panels (dead-PE fraction, defect density) plots each on its own axis,
    the other panel's points left out; --ideal scales each series' clean point (x = 0) by
    the share of PEs that still work."""
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump({
        "model": str(REPO / "examples/models/gpt2-small.yaml"), "tier": "analytic",
        "wafer": {"preset": "wse2", "defects": {"repair": "none"}}, "batch": 4,
        "activations": "ignore", "seq": 512, "dtype": "fp16", "steps": 1,
    }))  # fmt: skip
    sweep = tmp_path / "panels.yaml"
    sweep.write_text(yaml.safe_dump({
        "job": "run", "base": {"args": str(config), "summary_only": True},
        "axes": [{"wafer.defects.pe_defect_prob": [0, 0.05]},
                 {"wafer.defects.defect_density_per_cm2": [0, 1]}],
        "metrics": ["samples_per_sec", "working_fraction"],
    }))  # fmt: skip
    out = tmp_path / "panels.h5"
    assert run_sweep(load_sweep(sweep), out, serial=True).ok == 4
    fraction = curves(out, "wafer.defects.pe_defect_prob", "samples_per_sec", [],
                      "working_fraction")[""]  # fmt: skip
    assert fraction["x"] == [0.0, 0.05]
    assert fraction["n"] == [1, 1]
    assert fraction["ideal"][0] == fraction["mean"][0]
    assert 0.9 * fraction["mean"][0] < fraction["ideal"][1] < 0.97 * fraction["mean"][0]
    assert fraction["mean"][1] <= fraction["mean"][0]  # dead PEs never make it faster
    relative = curves(out, "wafer.defects.pe_defect_prob", "samples_per_sec", [],
                      "working_fraction", relative=True)[""]  # fmt: skip
    assert relative["mean"][0] == relative["ideal"][0] == 1.0
    assert relative["ideal"][1] == pytest.approx(fraction["ideal"][1] / fraction["mean"][0])
    png = tmp_path / "density.png"
    argv = [
        "plot",
        str(out),
        "--x",
        "wafer.defects.defect_density_per_cm2",
        "--y",
        "samples_per_sec",
        "--ideal",
        "working_fraction",
        "--logx",
        "--out",
        str(png),
    ]
    assert main(argv) == 0
    assert "ideal:" in capsys.readouterr().out
    assert png.read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(ConfigError, match="no_metric"):
        curves(out, "wafer.defects.pe_defect_prob", "samples_per_sec", [], "no_metric")
