"""Identities cover every file a result depends on; each output has one writer at a time."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml
from wafersim.memoryx.run_config import load_run_config
from wafersim.wafer.atomic import exclusive
from wafersim.wafer.errors import ConfigError
from wafersim.wafer.presets import preset

from wafersim.cli import main
from wafersim.commands import defects as defects_command
from wafersim.sweeps.config import load_sweep
from wafersim.sweeps.results import open_results, read_records
from wafersim.sweeps.run import run_sweep

ROOT = Path(__file__).resolve().parents[1]
GPT3 = ROOT / "examples" / "gpt3_175b_layers.yaml"
DIGITS_MODEL = ROOT / "examples" / "models" / "fc-digits-small.yaml"


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def _spec(path: Path, width: int) -> Path:
    spec = preset("small").to_dict() | {"name": f"small-{width}", "logical_width_pes": width}
    return _write(path, yaml.safe_dump(spec))


def _dead(path: Path, x: int) -> Path:
    return _write(path, yaml.safe_dump({"dead_pes": [[x, 1]], "dead_links": []}))


@pytest.mark.slow
def test_a_resume_after_the_spec_file_changed_is_refused_naming_it(tmp_path, capsys):
    """A sweep whose spec file changed since its table was started is refused, naming it."""
    spec = _spec(tmp_path / "inputs" / "wafer.yaml", 12)
    sweep = _write(tmp_path / "sweep.yaml", """\
        job: defects
        base: {spec: inputs/wafer.yaml, defect_model: poisson}
        axes: {seed: [0, 1]}
        metrics: [working_pes]
        """)  # fmt: skip
    out = tmp_path / "r.h5"
    run_sweep(load_sweep(sweep), out, serial=True)
    _spec(spec, 14)
    with pytest.raises(ConfigError, match=rf"input file {spec} changed since .*r.h5"):
        run_sweep(load_sweep(sweep), out, serial=True)
    assert main(["sweep", str(sweep), "--out", str(out), "--serial"]) == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1
    assert str(spec) in error
    assert len(read_records(out)) == 2  # nothing of the other wafer was added


def test_a_resume_after_a_file_named_by_the_run_config_changed_is_refused(tmp_path):
    """A run sweep reads the files its run config names (here a defect list): one changed
    since the table was started refuses the resume, naming it, before any point runs."""
    dead = _dead(tmp_path / "dead.yaml", 1)
    config = yaml.safe_load(GPT3.read_text())
    config["model"] = str(ROOT / "examples" / "models" / "gpt3-175b.yaml")
    config["wafer"]["defects"] = {"model": "explicit", "path": str(dead)}
    _write(tmp_path / "run.yaml", yaml.safe_dump(config))
    sweep = _write(tmp_path / "sweep.yaml", """\
        job: run
        base: {args: run.yaml, summary_only: true}
        axes: {batch: [1, 2]}
        metrics: [samples_per_sec]
        """)  # fmt: skip
    loaded = load_sweep(sweep)
    assert {"dead.yaml", "run.yaml"} <= set(dict(loaded.inputs))
    open_results(tmp_path / "r.h5", loaded)  # the table started, no point run
    _dead(dead, 2)
    with pytest.raises(ConfigError, match=rf"input file {dead} changed since"):
        open_results(tmp_path / "r.h5", load_sweep(sweep))


def _digests(path: Path) -> tuple[str, str]:
    config = load_run_config(path)
    return config.digest, config.run_digest


@pytest.mark.parametrize("named", ["defect list", "data file"])
def test_a_run_configs_digests_cover_every_file_it_names(tmp_path, named):
    """Changing a file the run config names (an explicit defect list, a data set's file)
    changes its digests: the default output folder and the checkpoints' training."""
    dead = _dead(tmp_path / "dead.yaml", 1)
    mnist = tmp_path / "mnist"
    for stem in ("train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                 "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"):  # fmt: skip
        _write(mnist / stem, "idx")
    config = {
        "model": str(DIGITS_MODEL),
        "wafer": {"preset": "tiny", "defects": {"model": "explicit", "path": str(dead)}},
        "data": {"name": "mnist", "path": str(mnist)},
    }
    path = _write(tmp_path / "run.yaml", yaml.safe_dump(config))
    before = _digests(path)
    assert _digests(path) == before
    if named == "defect list":
        _dead(dead, 2)
    else:
        _write(mnist / "t10k-labels-idx1-ubyte", "IDX")
    after = _digests(path)
    assert after[0] != before[0]
    assert after[1] != before[1]


@pytest.mark.slow
def test_a_second_run_on_a_held_folder_is_refused_at_once(tmp_path, capsys):
    """While one ``run`` writes a folder, a second on it (another seed) is refused with one
    line naming the folder (exit 2); the folder keeps the first run's results alone."""
    from wafersim.memoryx import run_modes  # noqa: F401  (imported before the lock is held)

    out = tmp_path / "shared"
    lock = out / ".run.lock"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-m", "wafersim.cli", "run", str(GPT3), "--out", str(out),
            "--summary-only", "seed=1"]  # fmt: skip
    log = tmp_path / "first.err"
    with log.open("w") as err:
        first = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=err)
    deadline = time.monotonic() + 120
    while _holder(lock) != str(first.pid) and first.poll() is None:
        assert time.monotonic() < deadline, "the first run took no lock"
        time.sleep(0.02)
    assert _holder(lock) == str(first.pid), log.read_text()
    status = main(["run", str(GPT3), "--out", str(out), "--summary-only", "seed=2"])
    error = capsys.readouterr().err.strip()
    assert first.wait(timeout=300) == 0, log.read_text()
    assert status == 2
    held = f"--out {out}: another run holds this folder (pid {first.pid}, {lock})"
    assert error == f"wafersim run: error: {held}; wait for it to end, or give another --out"
    assert yaml.safe_load((out / "run.yaml").read_text())["seed"] == 1
    with exclusive(out / ".run", "run"):  # the ended run holds nothing
        pass


def _holder(lock: Path) -> str:
    return lock.read_text() if lock.is_file() else ""


def _run_sweep_file(tmp_path: Path, axes: str) -> Path:
    _write(tmp_path / "run.yaml", GPT3.read_text().replace("models/", f"{ROOT}/examples/models/"))
    return _write(tmp_path / "sweep.yaml", f"""\
        job: run
        base: {{args: run.yaml}}
        axes: {axes}
        metrics: [samples_per_sec]
        """)  # fmt: skip


def test_two_points_writing_one_folder_are_refused_before_any_runs(tmp_path, capsys, monkeypatch):
    """Two run points of one config write one default folder: the sweep is refused before any
    point runs, naming both points and the folder; points of two configs are not."""
    monkeypatch.chdir(tmp_path)
    sweep = _run_sweep_file(tmp_path, "{summary_only: [true, false]}")
    with pytest.raises(ConfigError, match=r"points 0 and 1 would both write out/run-\w{12} "):
        load_sweep(sweep)
    out = tmp_path / "r.h5"
    assert main(["sweep", str(sweep), "--out", str(out), "--serial"]) == 2
    assert "points 0 and 1 would both write" in capsys.readouterr().err
    assert not out.exists()
    assert len(load_sweep(_run_sweep_file(tmp_path, "{batch: [1, 2]}")).points) == 2


def test_sweeps_refuse_every_output_option_a_command_lists(tmp_path, monkeypatch):
    """The options a sweep refuses are those the job's Command.outputs lists, not a list of
    their own."""
    command = dataclasses.replace(defects_command.COMMAND, outputs={"repair": "file"})
    monkeypatch.setattr(defects_command, "COMMAND", command)
    sweep = _write(tmp_path / "sweep.yaml", """\
        job: defects
        base: {preset: small}
        axes: {repair: [row, none]}
        metrics: [working_pes]
        """)  # fmt: skip
    with pytest.raises(ConfigError, match="axes.repair: points cannot write files"):
        load_sweep(sweep)
