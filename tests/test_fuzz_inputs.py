"""Fuzzing every file the CLI reads (issue 27): a mutated spec, run config, model, sweep
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
    from wafersim.sweep_config import load_sweep

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
    from wafersim.sweep import run_sweep
    from wafersim.sweep_config import load_sweep

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
    from wafersim.sweep_results import read_table

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
