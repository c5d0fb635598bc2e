"""Fuzzing every file the CLI reads: a mutated spec, run config, model, sweep
file, defect list, defect map, checkpoint or sweep results file is either accepted by
validation, and then used as its kind is (a spec draws and repairs a map, a model compiles,
a map repairs, a results table reads), or refused with a
:class:`~wafer.errors.WaferSimError` (one line, exit 2 at the command line), never another
exception; and reading it never changes it. The cases stop at validation or run on tiny
grids, without the cycle engine, so the suite compiles no engine of its own.

Text files get byte-level mutations (a cut, a byte changed, text inserted, a line dropped or
doubled) and value-level ones (a leaf of the parsed tree replaced by an odd value); HDF5 files
get an attribute or a dataset replaced, or a dataset removed.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from pathlib import Path

import h5py
import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from wafersim.wafer.errors import WaferSimError

ROOT = Path(__file__).resolve().parents[1]
FUZZ = settings(max_examples=300, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip

ODD_VALUES = st.sampled_from(
    [
        0,
        -1,
        1,
        2**40,
        1.5,
        -0.0,
        1e300,
        True,
        False,
        None,
        "",
        "x",
        "tiny",
        [],
        {},
        [1, "a"],
        {"k": 1},
    ]  # fmt: skip
)


# ---- the inputs and what reads them --------------------------------------------------------


def _model(tmp: Path) -> Path:
    return _copy(ROOT / "examples" / "models" / "fc-digits.yaml", tmp)


def _run_config(tmp: Path) -> Path:
    text = (ROOT / "examples" / "fc_digits.yaml").read_text()
    path = tmp / "run.yaml"
    path.write_text(re.sub(r"model: (\S+)", lambda m: f"model: {ROOT / 'examples' / m[1]}", text))
    return path


def _spec(tmp: Path) -> Path:
    path = tmp / "spec.toml"
    path.write_text('preset = "tiny"\nlogical_width_pes = 6\n[pe]\nsram_bytes = 32768\n')
    return path


def _sweep(tmp: Path) -> Path:
    path = tmp / "sweep.yaml"
    path.write_text(
        "job: defects\nbase: {preset: tiny}\naxes:\n  pe_defect_prob: [0.0, 0.1]\n"
        "  seed: [0, 1]\nmetrics: [working_pes]\n"
    )
    return path


def _defect_list(tmp: Path) -> Path:
    path = tmp / "dead.yaml"
    path.write_text("dead_pes: [[0, 0], [2, 3]]\ndead_links: [[1, 1, E]]\n")
    return path


def _copy(src: Path, tmp: Path) -> Path:
    dst = tmp / src.name
    shutil.copyfile(src, dst)
    return dst


def _read_spec(path: Path) -> None:
    """Accepted: a defect map drawn and repaired on it (where its wafer is small)."""
    from wafersim.wafer.config_io import load_spec
    from wafersim.wafer.defects import generate
    from wafersim.wafer.repair import repair

    spec = load_spec(path)
    if spec.physical_width_pes * spec.physical_height_pes <= 10_000:
        repair(generate(spec, "poisson", 0, pe_defect_prob=0.1), "column_shift")


def _read_run_config(path: Path) -> None:
    from wafersim.memoryx.run_config import load_run_config

    load_run_config(path)


def _read_model(path: Path) -> None:
    """Accepted: compiled for the small preset (the analytic placement, no engine)."""
    from wafersim.compiler.model_file import load_model
    from wafersim.compiler.plan import CompileOptions, compile_plan
    from wafersim.wafer.presets import preset

    compile_plan(load_model(path), preset("small"), CompileOptions(batch=4))


def _read_sweep(path: Path) -> None:
    from wafersim.sweeps.config import load_sweep

    load_sweep(path)


def _read_defect_list(path: Path) -> None:
    from wafersim.wafer.defects import generate
    from wafersim.wafer.presets import preset

    generate(preset("tiny"), "explicit", path=str(path))


TEXT_INPUTS = {
    "spec": (_spec, _read_spec),
    "run config": (_run_config, _read_run_config),
    "model": (_model, _read_model),
    "sweep": (_sweep, _read_sweep),
    "defect list": (_defect_list, _read_defect_list),
}


def _defect_map(tmp: Path) -> Path:
    from wafersim.wafer.defects import generate
    from wafersim.wafer.presets import preset

    path = tmp / "map.h5"
    generate(preset("tiny"), "poisson", 1, pe_defect_prob=0.1).save(path)
    return path


def _checkpoint(tmp: Path) -> Path:
    from wafersim.memoryx.checkpoint import save_checkpoint
    from wafersim.memoryx.optimizer import AdamW
    from wafersim.memoryx.store import WeightStore

    store = WeightStore.materialised({"w": (4, 3), "b": (3,)}, seed=1)
    AdamW().apply(store, "w", np.ones((4, 3), np.float32), 1)
    path = tmp / "c.h5"
    save_checkpoint(path, store, 1, AdamW())
    return path


def _results(tmp: Path) -> Path:
    from wafersim.sweeps.config import load_sweep
    from wafersim.sweeps.run import run_sweep

    path = tmp / "r.h5"
    run_sweep(load_sweep(_sweep(tmp)), path, serial=True)
    return path


def _read_map(path: Path) -> None:
    """Accepted: repaired."""
    from wafersim.wafer.defects import DefectMap
    from wafersim.wafer.repair import repair

    repair(DefectMap.load(path), "column_shift")


def _read_checkpoint(path: Path) -> None:
    from wafersim.memoryx.checkpoint import load_checkpoint

    load_checkpoint(path)


def _read_results(path: Path) -> None:
    """Accepted: read as the table ``wafersim plot`` reads."""
    from wafersim.sweeps.results import read_table

    read_table(path)


HDF5_INPUTS = {
    "defect map": (_defect_map, _read_map),
    "checkpoint": (_checkpoint, _read_checkpoint),
    "results": (_results, _read_results),
}


def _made(entry, factory) -> tuple[Path, object]:
    """A fresh input of one kind in its own folder, and its reader."""
    make, read = entry
    return make(factory.mktemp("fuzz")), read


def _refused_or_accepted(read, path: Path) -> None:
    """The one property: a WaferSimError or nothing, and the file as it was."""
    before = path.read_bytes()
    message = ""
    try:
        read(path)
    except WaferSimError as error:
        message = str(error)
    assert "\n" not in message, message
    assert path.read_bytes() == before, "reading changed the file"


# ---- text mutations --------------------------------------------------------------------------


@st.composite
def byte_mutations(draw, data: bytes) -> bytes:
    kind = draw(st.sampled_from(["cut", "byte", "insert", "drop line", "double line"]))
    at = draw(st.integers(0, max(0, len(data) - 1)))
    if kind == "cut":
        return data[:at]
    if kind == "byte":
        return data[:at] + bytes([draw(st.integers(0, 255))]) + data[at + 1 :]
    if kind == "insert":
        text = draw(st.sampled_from([b"{", b"[", b":", b"\t", b'"', b"- x", b"\n  y: 1", b"=="]))
        return data[:at] + text + data[at:]
    lines = data.splitlines(keepends=True)
    i = at % max(1, len(lines))
    return b"".join(
        lines[:i] + lines[i + 1 :] if kind == "drop line" else lines[: i + 1] + lines[i:]
    )


def _leaves(tree, prefix=()):
    if isinstance(tree, dict):
        for key, value in tree.items():
            yield from _leaves(value, (*prefix, key))
    elif isinstance(tree, list) and tree:
        for i, value in enumerate(tree):
            yield from _leaves(value, (*prefix, i))
    else:
        yield prefix


def _replaced(tree, where, value):
    if not where:
        return value
    copy = dict(tree) if isinstance(tree, dict) else list(tree)
    copy[where[0]] = _replaced(tree[where[0]], where[1:], value)
    return copy


def _parse(path: Path):
    if path.suffix == ".toml":
        import tomllib

        return tomllib.loads(path.read_text())
    return yaml.safe_load(path.read_text())


def _dump(path: Path, tree) -> tuple[Path, str]:
    if path.suffix == ".toml":  # values TOML cannot hold (None) are written as YAML would
        path = path.with_suffix(".yaml")
    return path, yaml.safe_dump(tree)


@pytest.mark.parametrize("name", sorted(TEXT_INPUTS))
@FUZZ
@given(data=st.data())
def test_mutated_text_inputs_are_accepted_or_one_line_errors(tmp_path_factory, name, data):
    path, read = _made(TEXT_INPUTS[name], tmp_path_factory)
    path.write_bytes(data.draw(byte_mutations(path.read_bytes())))
    _refused_or_accepted(read, path)


@pytest.mark.parametrize("name", sorted(TEXT_INPUTS))
@FUZZ
@given(data=st.data())
def test_odd_values_in_text_inputs_are_accepted_or_one_line_errors(tmp_path_factory, name, data):
    original, read = _made(TEXT_INPUTS[name], tmp_path_factory)
    tree = _parse(original)
    where = data.draw(st.sampled_from(list(_leaves(tree))))
    path, text = _dump(original, _replaced(tree, where, data.draw(ODD_VALUES)))
    path.write_text(text)
    _refused_or_accepted(read, path)


# ---- HDF5 mutations ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(HDF5_INPUTS))
@FUZZ
@given(data=st.data())
def test_mutated_hdf5_inputs_are_accepted_or_one_line_errors(tmp_path_factory, name, data):
    path, read = _made(HDF5_INPUTS[name], tmp_path_factory)
    with h5py.File(path, "r+") as f:
        attrs = [(obj, key) for obj in _objects(f) for key in obj.attrs]
        datasets = [obj for obj in _objects(f) if isinstance(obj, h5py.Dataset)]
        kind = data.draw(st.sampled_from(["attribute", "dataset", "remove"]))
        if kind == "attribute" and attrs:
            obj, key = data.draw(st.sampled_from(attrs))
            value = data.draw(ODD_VALUES)
            obj.attrs[key] = (
                json.dumps(value) if isinstance(value, list | dict) or value is None else value
            )
        elif datasets:
            target = data.draw(st.sampled_from(datasets))
            name_, parent = target.name, target.parent
            del parent[name_.rsplit("/", 1)[1]]
            if kind == "dataset":
                parent[name_.rsplit("/", 1)[1]] = data.draw(
                    st.sampled_from([np.zeros(3), np.ones((2, 2), np.int8), np.array([b"x"])])
                )
    _refused_or_accepted(read, path)


def _objects(f: h5py.File) -> list:
    found = [f]
    f.visititems(lambda _name, obj: found.append(obj))
    return found


# ---- hostile command-line words: grids and seeds --------------------------------------------

GRID_WORDS = ["8x8", "64X32", "²x²", "٣x3", "8x８", "1" * 5000 + "x1", "8x8x8", "x8", "8x", "",
              " 8x8", "8x8\n", "1_0x4", "+8x8", "0x0", "999999999x1", "1000000000x1"]  # fmt: skip
SEED_WORDS = ["0", "007", str(2**63 - 1), str(2**63), "-1", "٣", "1_0", "+5", " 5", "1e3", "",
              "9" * 5000, "0x10"]  # fmt: skip
HOSTILE_TEXT = st.text(alphabet=st.sampled_from("0123456789xX²٣８-_ +e\n"), max_size=30)


def _grid_or_refused(text: str) -> None:
    """The one property of ``--grid``: two ints written in ASCII digits, or a ConfigError."""
    from wafersim.commands.options import parse_grid

    try:
        grid = parse_grid(text)
    except WaferSimError as error:
        grid, message = None, str(error)
    if grid is None:
        assert "\n" not in message
    else:
        assert re.fullmatch(r"[0-9]+[xX][0-9]+", text), text
        assert grid == tuple(int(side) for side in re.split("[xX]", text))


def _seed_or_refused(text: str) -> None:
    """The one property of ``--seed``: an int in [0, 2^63 - 1] from ASCII digits, or argparse's
    usage error."""
    import argparse

    from wafersim.commands.options import seed_value

    try:
        seed = seed_value(text)
    except argparse.ArgumentTypeError as error:
        seed, message = None, str(error)
    if seed is None:
        assert "<= 2^63 - 1" in message
    else:
        assert re.fullmatch(r"[0-9]+", text), text
        assert seed == int(text) <= 2**63 - 1


@pytest.mark.parametrize("word", GRID_WORDS)
def test_a_grid_word_is_ascii_wxh_or_refused(word):
    """``--grid`` is W x H in ASCII digits ('²' passes str.isdigit), else one line."""
    _grid_or_refused(word)


@pytest.mark.parametrize("word", SEED_WORDS)
def test_a_seed_word_is_an_int64_in_ascii_digits_or_refused(word):
    """``--seed`` is ASCII digits for an integer in [0, 2^63 - 1], else a usage error."""
    _seed_or_refused(word)


@FUZZ
@given(text=HOSTILE_TEXT)
def test_any_grid_or_seed_word_is_taken_as_written_or_refused(text):
    """No grid or seed word gets past the door as another number than it reads, or crashes."""
    _grid_or_refused(text)
    _seed_or_refused(text)


# ---- sweeps too large to expand ---------------------------------------------------------------

SPEC_AXES = ("pe.sram_bytes", "clock_hz", "spare_rows", "spare_cols", "router.colors",
             "io.edge_ports", "link.hop_latency_cycles", "pe.area_mm2")  # fmt: skip


@pytest.mark.parametrize(
    ("sampling", "lengths", "points"),
    [
        ("grid", (10,) * 8, 10**8),
        ("grid", (317, 317), 100_489),
        ("grid", (100_001,), 100_001),
        ("list", (100_001, 100_001), 100_001),
        ("random", (3,), 10**12),
    ],
)
def test_a_sweep_past_its_point_limit_is_refused_before_expanding(
    tmp_path, monkeypatch, sampling, lengths, points
):
    """A sweep's points are counted from its axes' lengths (or ``samples``) and refused past
    MAX_POINTS with one line naming both, before a point is made."""
    from wafersim.sweeps import config as sweep_config

    def expand(*_args):
        raise AssertionError("expanded before it was counted")

    monkeypatch.setattr(sweep_config, "_axis_values", expand)
    axes = {key: list(range(n)) for key, n in zip(SPEC_AXES, lengths, strict=False)}
    tree = {"job": "defects", "base": {"preset": "tiny"}, "sampling": sampling, "axes": axes,
            "metrics": ["working_pes"]}  # fmt: skip
    if sampling == "random":
        tree["samples"] = points
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(tree))
    with pytest.raises(WaferSimError) as error:
        sweep_config.load_sweep(path)
    assert f"{points:,} points" in str(error.value)
    assert f"at most {sweep_config.MAX_POINTS:,}" in str(error.value)


# ---- huge values ------------------------------------------------------------------------------

HUGE_VALUES = {"a megabyte of text": "x" * 2**20, "a 4,227-digit integer": 7**5000}
MESSAGE_CHARS = 300  # the longest line a huge value may give (its file's folder as DIR)


def _validate_run_config(path: Path) -> None:
    """Accepted: loaded and checked as ``run --validate-only`` checks before it compiles."""
    from wafersim.memoryx.run import validate_config
    from wafersim.memoryx.run_config import load_run_config

    validate_config(load_run_config(path))


HUGE_INPUTS = {
    "run config": (_run_config, _validate_run_config),
    "model": (_model, _read_model),
    "sweep": (_sweep, _read_sweep),
    "defect list": (_defect_list, _read_defect_list),
}


def _huge_cases() -> list[tuple[str, tuple, str]]:
    """Every leaf of each input, with each huge value (the inputs made in a folder that goes)."""
    with tempfile.TemporaryDirectory() as tmp:
        return [
            (name, where, label)
            for name, (make, _read) in HUGE_INPUTS.items()
            for where in _leaves(_parse(make(Path(tmp))))
            for label in HUGE_VALUES
        ]


HUGE_CASES = _huge_cases()


@pytest.mark.parametrize(("name", "where", "label"), HUGE_CASES)
def test_a_huge_value_anywhere_is_accepted_or_a_short_line(tmp_path, name, where, label):
    """Each leaf of a run config, model, sweep or defect list replaced by a huge value is
    accepted or refused in one line under 300 characters: a bad value is quoted by excerpt."""
    make, read = HUGE_INPUTS[name]
    original = make(tmp_path)
    path, text = _dump(original, _replaced(_parse(original), where, HUGE_VALUES[label]))
    path.write_text(text)
    message = ""
    try:
        read(path)
    except WaferSimError as error:
        message = str(error)
    assert "\n" not in message
    message = message.replace(str(tmp_path), "DIR")  # the bound is the message's, not the path's
    assert len(message) < MESSAGE_CHARS, message[: 2 * MESSAGE_CHARS]


# ---- relative paths from another working directory -----------------------------------------


def _with_relative_defects(folder: Path) -> Path:
    path = _run_config(folder)
    tree = yaml.safe_load(path.read_text())
    _defect_list(folder)
    tree["wafer"]["defects"] = {"model": "explicit", "path": "dead.yaml", "repair": "none"}
    path.write_text(yaml.safe_dump(tree))
    return path


def _with_relative_data(folder: Path) -> Path:
    path = _run_config(folder)
    tree = yaml.safe_load(path.read_text())
    mnist = folder / "mnist"
    mnist.mkdir()
    for stem, array in (("train-images-idx3-ubyte", np.zeros((4, 8, 8), np.uint8)),
                        ("train-labels-idx1-ubyte", np.zeros(4, np.uint8)),
                        ("t10k-images-idx3-ubyte", np.zeros((2, 8, 8), np.uint8)),
                        ("t10k-labels-idx1-ubyte", np.zeros(2, np.uint8))):  # fmt: skip
        dims = b"".join(d.to_bytes(4, "big") for d in array.shape)
        (mnist / stem).write_bytes((0x0800 + array.ndim).to_bytes(4, "big") + dims + array.data)
    tree["data"] = {"name": "mnist", "path": "mnist"}
    path.write_text(yaml.safe_dump(tree))
    return path


def _read_named_defects(path: Path) -> None:
    from wafersim.memoryx.run import logical_grid
    from wafersim.memoryx.run_config import load_run_config

    config = load_run_config(path)
    assert logical_grid(config, 0) is not None
    assert path.parent.resolve() / "dead.yaml" in config.files


def _read_named_data(path: Path) -> None:
    from wafersim.memoryx.data import dataset_size
    from wafersim.memoryx.run_config import load_run_config

    config = load_run_config(path)
    assert dataset_size(config.data, config.seed).train_samples == 4
    assert path.parent.resolve() / "mnist" / "train-images-idx3-ubyte" in config.files


RELATIVE_INPUTS = {
    "wafer.defects.path": (_with_relative_defects, _read_named_defects),
    "data.path": (_with_relative_data, _read_named_data),
}


@pytest.mark.parametrize("key", sorted(RELATIVE_INPUTS))
@pytest.mark.parametrize("cwd", ["sibling", "parent", "root"])
def test_a_run_config_s_relative_paths_read_the_same_from_any_cwd(tmp_path, monkeypatch, key, cwd):
    """A relative path in a run config is read from the config's folder, whatever the
    working directory, and its digests name the same files the run reads."""
    make, read = RELATIVE_INPUTS[key]
    folder = tmp_path / "project"
    folder.mkdir()
    path = make(folder)
    (tmp_path / "sibling").mkdir()
    monkeypatch.chdir({"sibling": tmp_path / "sibling", "parent": tmp_path, "root": "/"}[cwd])
    read(path if cwd != "parent" else Path("project") / path.name)
