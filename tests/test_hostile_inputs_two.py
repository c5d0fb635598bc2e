"""Hostile input, second round: grids and seeds at the door, dimensions a kernel does not
take, sweeps too large to expand, megabyte values in error messages, paths in a run config
read from another working directory, and TensorBoard events on a full disk. Each is refused
with one line (exit 2, or 74 for an output), at once, or works as documented."""

from __future__ import annotations

import argparse
import errno
import os
import shutil
import subprocess
import threading
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import yaml
from wafersim.wafer.errors import ConfigError, OutputError, WaferSimError

from wafersim.cli import main

ROOT = Path(__file__).resolve().parents[1]
SMALL_MODEL = ROOT / "examples" / "models" / "fc-digits-small.yaml"
MEGABYTE = "x" * 2**20
MESSAGE_CHARS = 300  # the longest one-line error a megabyte value may give (its folder as DIR)


def _one_line(capsys, argv: list[str]) -> str:
    """``wafersim argv``'s one-line error (exit 2: from the job or from argparse)."""
    try:
        status = main(argv)
    except SystemExit as exit_:  # argparse's usage error
        status = exit_.code
    err = capsys.readouterr().err.strip()
    assert status == 2, (argv, err)
    assert len(err.splitlines()) == 1, err
    return err


# ---- grids, seeds and kernel dimensions -----------------------------------------------------


@pytest.mark.parametrize("pattern", ["uniform", "hotspot"])
def test_traffic_to_another_pe_is_refused_on_a_one_pe_grid(capsys, pattern):
    """Uniform and hotspot packets go to another PE: a 1x1 grid is refused, naming the range."""
    err = _one_line(capsys, ["traffic", "--grid", "1x1", "--pattern", pattern])
    assert "needs at least 2" in err
    assert "[1, 4096]" in err


def test_a_mesh_left_with_one_working_pe_is_refused_for_uniform_traffic(tiny):
    """A mesh whose holes leave one working PE has no other PE to send to."""
    from wafersim.fabric.mesh import Mesh
    from wafersim.fabric.traffic import TrafficConfig, run_traffic

    alive = np.array([[True, False]])
    mesh = Mesh(2, 1, alive, np.zeros((1, 2, 4), bool))
    config = TrafficConfig(2, 1, routing="updown", cycles=10, warmup=0)
    with pytest.raises(ConfigError, match=r"1 working PE\(s\).*needs at least 2"):
        run_traffic(config, tiny, mesh)


@pytest.mark.parametrize("command", [["traffic"], ["kernel", "gemm", "--tier", "analytic"]])
@pytest.mark.parametrize("grid", ["²x²", "٣x3", "1" * 5000 + "x1"])
def test_a_grid_is_ascii_digits_only(capsys, command, grid):
    """``--grid`` takes WxH in ASCII digits; '²' passes str.isdigit but is no number."""
    assert "must look like WxH" in _one_line(capsys, [*command, "--grid", grid])


@pytest.mark.parametrize("seed", ["9223372036854775808", "-1", "٣", "1_0", "+5", "1e3", ""])
def test_a_seed_outside_int64_or_not_ascii_digits_is_refused(capsys, seed):
    """``--seed`` is ASCII digits for an integer in [0, 2^63 - 1]."""
    err = _one_line(capsys, ["traffic", "--seed", seed])
    assert "must be an integer >= 0 and <= 2^63 - 1" in err


def test_the_seed_range_is_int64_exactly():
    """2^63 - 1 is a seed, 2^63 is refused by the parser itself, before any command runs."""
    from wafersim.commands.options import seed_value

    assert seed_value(str(2**63 - 1)) == 2**63 - 1
    with pytest.raises(argparse.ArgumentTypeError):
        seed_value(str(2**63))


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["gemv", "--k", "0"], "--k=0: gemv takes --m and --n only"),
        (["gemv", "--k", "64"], "--k=64: gemv takes --m and --n only"),
        (["broadcast", "--m", "8"], "--m=8: broadcast takes --n only"),
        (["stencil", "--k", "8"], "--k=8: stencil takes --n only"),
    ],
)
def test_a_dimension_the_kernel_does_not_take_is_refused(capsys, argv, message):
    """A dimension given is one the kernel takes: another would change nothing, silently."""
    assert message in _one_line(capsys, ["kernel", *argv, "--tier", "analytic"])


# ---- sweeps too large to expand -------------------------------------------------------------


def _sweep(tmp_path: Path, body: dict) -> Path:
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump({"job": "defects", "base": {"preset": "tiny"},
                                    "metrics": ["working_pes"], **body}))  # fmt: skip
    return path


EIGHT_AXES = {
    key: list(range(10))
    for key in ("seed", "pe.sram_bytes", "clock_hz", "spare_rows", "spare_cols",
                "router.colors", "io.edge_ports", "link.hop_latency_cycles")
}  # fmt: skip


@pytest.mark.parametrize(
    ("body", "count"),
    [
        ({"axes": EIGHT_AXES}, "100,000,000 points"),
        ({"axes": [EIGHT_AXES, {"seed": [1]}]}, "100,000,001 points"),
        ({"sampling": "random", "samples": 10**9, "axes": {"seed": [1, 2]}}, "1,000,000,000"),
    ],
)
def test_a_sweep_is_counted_before_it_is_expanded(tmp_path, monkeypatch, body, count):
    """A sweep of more than MAX_POINTS points is refused by its count, nothing expanded."""
    from wafersim.sweeps import config as sweep_config
    from wafersim.sweeps.config import load_sweep

    def expand(*_args):
        raise AssertionError("expanded before it was counted")

    monkeypatch.setattr(sweep_config, "_axis_values", expand)
    with pytest.raises(ConfigError, match="at most 100,000") as error:
        load_sweep(_sweep(tmp_path, body))
    assert count in str(error.value)


@pytest.mark.parametrize(
    "bounds",
    [
        {"integers": [0, 2**70]},
        {"uniform": [0, 10**400]},
        {"uniform": [-1e308, 1e308]},
        {"uniform": [float("nan"), 1.0]},
    ],
)
def test_a_random_axis_beyond_what_numpy_draws_is_refused(tmp_path, bounds):
    """A random axis's bounds are ones numpy draws from (int64, a finite width, above 0)."""
    from wafersim.sweeps.config import load_sweep

    body = {"sampling": "random", "samples": 2, "axes": {"pe_defect_prob": bounds}}
    with pytest.raises(ConfigError, match=r"axes\.pe_defect_prob\."):
        load_sweep(_sweep(tmp_path, body))


# ---- megabyte values in messages ------------------------------------------------------------


def _run_config(folder: Path, **changes) -> Path:
    config = {"model": str(SMALL_MODEL), "wafer": {"preset": "tiny"},
              "data": {"name": "digits"}, "batch": 4, "steps": 1, **changes}  # fmt: skip
    path = folder / "run.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.mark.parametrize(
    "changes",
    [
        {"model": MEGABYTE},
        {"tier": MEGABYTE},
        {"dtype": [MEGABYTE]},
        {"wafer": {"preset": MEGABYTE}},
        {"wafer": {"preset": "tiny", "overrides": {"logical_width_pes": 7**5000}}},
        {"wafer": {"preset": "tiny", "defects": {"model": MEGABYTE}}},
        {"wafer": {"preset": "tiny", "defects": {"model": "explicit", "path": MEGABYTE}}},
        {"data": {"name": MEGABYTE}},
        {"data": {"name": "digits", "test_fraction": 7**5000}},
        {"data": {"name": "mnist", "path": MEGABYTE}},
        {"optimizer": {"name": [MEGABYTE]}},
        {"optimizer": {"name": "adamw", "lr": MEGABYTE}},
        {"init_std": 7**5000},
        {"sparsity": {"density": MEGABYTE}},
        {"input": {"workers": MEGABYTE}},
    ],
)
def test_a_megabyte_value_in_a_run_config_is_a_short_line(capsys, tmp_path, changes):
    """A huge bad value in a run config is quoted by a bounded excerpt: one short line."""
    path = _run_config(tmp_path, **changes)
    err = _one_line(capsys, ["run", str(path), "--validate-only"])
    assert len(err.replace(str(tmp_path), "DIR")) < MESSAGE_CHARS, err


@pytest.mark.parametrize(
    "entry",
    [
        {"op": MEGABYTE, "name": "f"},
        {"op": "linear", "name": "f", "out": MEGABYTE},
        {"op": "linear", "name": "f", "out": 7**5000},
        {"op": "linear", "name": "f", "out": 4, "bias": [MEGABYTE]},
        {"op": "linear", "name": "f", "out": 4, "from": MEGABYTE},
        {"op": "linear", "name": MEGABYTE, "out": 4, "bias": 2},
        {"repeat": MEGABYTE, "name": "b", "block": [{"op": "relu", "name": "r"}]},
        {MEGABYTE: 1},
    ],
)
def test_a_megabyte_value_in_a_model_file_is_a_short_line(tmp_path, entry):
    """A huge bad value in a model file is quoted by a bounded excerpt."""
    from wafersim.compiler.model_file import load_model

    path = tmp_path / "model.yaml"
    path.write_text(yaml.safe_dump({"name": "m", "input_features": 4, "graph": [entry]}))
    with pytest.raises(WaferSimError) as error:
        load_model(path)
    assert len(str(error.value).replace(str(tmp_path), "DIR")) < MESSAGE_CHARS, str(error.value)[
        :400
    ]


@pytest.mark.parametrize(
    "body",
    [
        {"job": MEGABYTE},
        {"axes": {"pe_defect_prob": [MEGABYTE]}},
        {"axes": {"pe_defect_prob": {MEGABYTE: [0, 1]}}},
        {"axes": {"seed": [7**5000]}},
        {"axes": {"defect_list": [MEGABYTE]}},
        {"axes": {MEGABYTE: [1]}},
        {"axes": {"seed": [1]}, "metrics": [[MEGABYTE]]},
        {"axes": {"seed": [1]}, "samples": MEGABYTE},
        {"axes": {"seed": [1]}, MEGABYTE: 1},
    ],
)
def test_a_megabyte_value_in_a_sweep_file_is_a_short_line(tmp_path, body):
    """A huge bad value in a sweep file is quoted by a bounded excerpt."""
    from wafersim.sweeps.config import load_sweep

    with pytest.raises(ConfigError) as error:
        load_sweep(_sweep(tmp_path, body))
    assert len(str(error.value).replace(str(tmp_path), "DIR")) < MESSAGE_CHARS, str(error.value)[
        :400
    ]


# ---- paths in a run config ------------------------------------------------------------------


def _idx(array: np.ndarray) -> bytes:
    header = (0x0800 + array.ndim).to_bytes(4, "big")
    return header + b"".join(d.to_bytes(4, "big") for d in array.shape) + array.tobytes()


def _project(folder: Path, absolute: bool = False) -> Path:
    """A run config in ``folder`` naming its model, defect list and MNIST folder relatively
    (``absolute``: the data folder by its absolute path)."""
    folder.mkdir()
    shutil.copyfile(SMALL_MODEL, folder / "model.yaml")
    (folder / "dead.yaml").write_text("dead_pes: [[1, 1]]\n")
    mnist = folder / "mnist"
    mnist.mkdir()
    for part, count in (("train", 8), ("t10k", 4)):
        images = np.arange(count * 64, dtype=np.uint8).reshape(count, 8, 8)
        (mnist / f"{part}-images-idx3-ubyte").write_bytes(_idx(images))
        labels = np.arange(count, dtype=np.uint8) % 10
        (mnist / f"{part}-labels-idx1-ubyte").write_bytes(_idx(labels))
    overrides = {"name": "tiny-16x16", "logical_width_pes": 16, "logical_height_pes": 16}
    config = {
        "model": "model.yaml",
        "wafer": {"preset": "tiny", "overrides": overrides,
                  "defects": {"model": "explicit", "path": "dead.yaml", "repair": "none"}},
        "data": {"name": "mnist", "path": str(mnist) if absolute else "mnist"},
        "batch": 4,
        "steps": 1,
    }  # fmt: skip
    (folder / "run.yaml").write_text(yaml.safe_dump(config))
    return folder / "run.yaml"


@pytest.mark.slow
def test_a_run_config_s_paths_are_read_from_its_folder(capsys, tmp_path, monkeypatch):
    """A relative defect list and data folder are read from the config's folder, as its
    model is, from any working directory (here a sibling folder)."""
    path = _project(tmp_path / "project")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    assert main(["run", str(path), "--validate-only", "--json"]) == 0, capsys.readouterr().err


def test_a_run_config_s_digests_and_reads_name_the_same_files(tmp_path, monkeypatch):
    """The checked config holds the relative paths made absolute from its folder (absolute
    ones as given), and its digests cover exactly those files."""
    from wafersim.memoryx.run_config import config_files, load_run_config

    project = tmp_path / "project"
    path = _project(project, absolute=True)
    monkeypatch.chdir(tmp_path)
    config = load_run_config(Path("project") / "run.yaml")
    assert config.wafer.defects is not None
    assert config.wafer.defects.params["path"] == str((project / "dead.yaml").resolve())
    assert config.data["path"] == str(project / "mnist")
    names = {p.name for p in config.files}
    assert {"model.yaml", "dead.yaml", "train-images-idx3-ubyte"} <= names
    assert set(config_files(path, {})) == {path.resolve(), *config.files}


# ---- TensorBoard events on a full disk ------------------------------------------------------


def _result(steps: int) -> SimpleNamespace:
    """The parts of a run's result that its events read: ``steps`` steps of one stream, of a
    real run config."""
    from wafersim.memoryx.run_config import run_config

    config = run_config({"model": str(SMALL_MODEL), "batch": 4}, ROOT)
    times = np.cumsum(np.ones((steps, 1, 8)), axis=0)
    stream = SimpleNamespace(total_cycles=steps, times=times)
    history = SimpleNamespace(losses=[1.0 / (i + 1) for i in range(steps)],
                              accuracy=[(steps, 0.5)])  # fmt: skip
    return SimpleNamespace(config=config, streams=[stream], wafers=[0],
                           history=history)  # fmt: skip


def _write_events_within(out: Path, result, seconds: float = 60.0) -> BaseException | None:
    """What ``write_events`` raised (None: nothing); a write still going after ``seconds``
    hung (tensorboardX's own writer thread waits forever once a full disk kills it)."""
    from wafersim.memoryx.run_events import write_events

    raised: list[BaseException | None] = []

    def write() -> None:
        try:
            write_events(result, out)
            raised.append(None)
        except BaseException as error:  # noqa: BLE001 (handed back to the test)
            raised.append(error)

    worker = threading.Thread(target=write, daemon=True)
    worker.start()
    worker.join(seconds)
    assert raised, "write_events hung"
    return raised[0]


def _left(out: Path) -> list[str]:
    return sorted(p.name for p in out.iterdir())


def test_a_failed_events_write_is_one_output_error_and_leaves_the_old_file(tmp_path, monkeypatch):
    """A write that fails (a full disk) is one OutputError naming the events file, at once;
    the folder keeps its older events file and holds no part-written one."""
    pytest.importorskip("tensorboardX")
    from tensorboardX import record_writer

    out = tmp_path / "out"
    assert _write_events_within(out, _result(3)) is None
    before = _left(out)

    def full(self, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(record_writer.RecordWriter, "write", full)
    error = _write_events_within(out, _result(3))
    assert isinstance(error, OutputError), error
    assert f"cannot write {out}/events.out.tfevents" in str(error)
    assert "No space left on device" in str(error)
    assert _left(out) == before


@pytest.mark.slow
def test_events_on_a_real_full_disk_are_one_output_error(tmp_path):
    """On a 64 KiB tmpfs, events larger than the disk are one OutputError naming the file,
    and leave neither a part-written file nor the temporary folder, nor the file open."""
    pytest.importorskip("tensorboardX")
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(disk)],
                             capture_output=True, check=False)  # fmt: skip
    if mounted.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (root only)")
    try:
        out = disk / "out"
        error = _write_events_within(out, _result(4000))
        assert isinstance(error, OutputError), error
        assert f"cannot write {out}/events.out.tfevents" in str(error)
        assert "No space left on device" in str(error)
        assert _left(out) == []
        unmounted = subprocess.run(["umount", str(disk)], capture_output=True, check=False)
        assert unmounted.returncode == 0, unmounted.stderr  # busy: the file was left open
    finally:
        if os.path.ismount(disk):
            subprocess.run(["umount", "-l", str(disk)], check=False)
