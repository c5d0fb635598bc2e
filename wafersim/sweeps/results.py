"""The sweep results file: one HDF5 table, one row per point, appended as points finish.

Layout: group ``points`` with resizable columns ``point`` (int64), ``config`` (JSON text),
``seed`` (int64), ``wafersim_version``, ``status`` (``ok``/``failed``), ``error`` (text),
``attempts`` (int64), ``wall_s`` (float64) and ``metrics/<name>`` (float64, NaN when failed).
The file's attributes hold the sweep file's SHA-256 and content and the SHA-256 of every file
its points read (``inputs``), so a changed sweep file, spec, run config, model, defect list or
data file is caught. Each batch is written to a copy that is renamed over the file, so a crash
at any moment leaves the previous complete file: only the points in flight are lost.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from wafersim.sweeps.config import SweepConfig
from wafersim.wafer import __version__
from wafersim.wafer.atomic import atomic_hdf5
from wafersim.wafer.errors import ConfigError

FORMAT = "wafersim-sweep/1"
TEXT_COLUMNS = ("config", "wafersim_version", "status", "error")
INT_COLUMNS = ("point", "seed", "attempts")
FLOAT_COLUMNS = ("wall_s",)
_STR = h5py.string_dtype()


@dataclass(frozen=True)
class PointRecord:
    """What one attempt at one point produced: a row of the table."""

    point: int
    config: str
    seed: int
    wafersim_version: str
    status: str
    error: str
    attempts: int
    wall_s: float
    metrics: dict[str, float] = field(default_factory=dict)


def open_results(path: str | Path, sweep: SweepConfig) -> dict[int, PointRecord]:
    """Create the file for ``sweep``, or check an existing one matches it; return its rows."""
    path = Path(path)
    if not path.exists():
        _create(path, sweep)
        return {}
    check_results_file(path)
    with h5py.File(path, "r") as f:
        _check_matches(path, f.attrs, sweep)
    return {record.point: record for record in read_records(path)}


def check_results_file(path: str | Path) -> None:
    """ConfigError unless ``path`` is a sweep results file (an empty file, any other HDF5
    file or text is named as such, not a traceback)."""
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"{path} is a folder, not a sweep results file")
    if not path.is_file():
        raise ConfigError(f"{path}: no such file")
    if not h5py.is_hdf5(path):
        raise ConfigError(f"{path} is not a wafersim sweep results file (not HDF5)")
    with h5py.File(path, "r") as f:
        if f.attrs.get("format") != FORMAT or not isinstance(f.get("points"), h5py.Group):
            raise ConfigError(f"{path} is not a wafersim sweep results file (format {FORMAT})")
        _check_columns(path, f["points"])


def _check_columns(path: Path, group: h5py.Group) -> None:
    """Every column there, of its kind, and as long as the others (a damaged table is
    named, column by column, not read into a traceback)."""
    metrics = group.get("metrics")
    if not isinstance(metrics, h5py.Group):
        raise ConfigError(f"{path}: the table has no metrics group")
    columns = {name: group.get(name) for name in (*TEXT_COLUMNS, *INT_COLUMNS, *FLOAT_COLUMNS)}
    columns |= {f"metrics/{name}": data for name, data in metrics.items()}
    lengths = set()
    for name, data in columns.items():
        if not isinstance(data, h5py.Dataset) or data.ndim != 1:
            raise ConfigError(f"{path}: column {name} is missing or not a 1-D dataset")
        text = h5py.check_string_dtype(data.dtype) is not None
        if text != (name in TEXT_COLUMNS) or not (text or data.dtype.kind in "iuf"):
            raise ConfigError(f"{path}: column {name} has type {data.dtype}")
        lengths.add(data.shape[0])
    if len(lengths) > 1:
        raise ConfigError(f"{path}: the table's columns differ in length ({sorted(lengths)})")


def _create(path: Path, sweep: SweepConfig) -> None:
    with atomic_hdf5(path) as f:
        f.attrs["format"] = FORMAT
        f.attrs["sweep_sha256"] = sweep.sha256
        f.attrs["inputs"] = json.dumps(dict(sweep.inputs), sort_keys=True)
        f.attrs["sweep"] = json.dumps(sweep.to_dict(), sort_keys=True)
        f.attrs["sweep_path"] = sweep.path
        f.attrs["wafersim_version"] = __version__
        f.attrs["points_total"] = len(sweep.points)
        group = f.create_group("points")
        for name in TEXT_COLUMNS:
            group.create_dataset(name, (0,), dtype=_STR, maxshape=(None,), chunks=(256,))
        for name in INT_COLUMNS:
            group.create_dataset(name, (0,), dtype=np.int64, maxshape=(None,), chunks=(256,))
        for name in (*FLOAT_COLUMNS, *(f"metrics/{m}" for m in sweep.metric_names)):
            group.create_dataset(name, (0,), dtype=np.float64, maxshape=(None,), chunks=(256,))


def _check_matches(path: Path, attrs: Any, sweep: SweepConfig) -> None:
    if attrs.get("format") != FORMAT:
        raise ConfigError(f"{path} is not a wafersim sweep results file (format {FORMAT})")
    written_by = attrs.get("wafersim_version", "before 0.3.0")
    if written_by != __version__:
        raise ConfigError(
            f"{path} was written by wafersim {written_by}, this is {__version__}: options may "
            "mean something else now (0.3.0: --grid is width x height); write to a new --out"
        )
    if attrs["sweep_sha256"] == sweep.sha256:
        _check_inputs(path, attrs, sweep)
        return
    stored = json.loads(attrs["sweep"])
    now = sweep.to_dict()
    changed = [key for key in now if stored.get(key) != now[key]] or ["text only"]
    raise ConfigError(
        f"sweep file {sweep.path} changed since {path} was started "
        f"(sha256 {attrs['sweep_sha256'][:12]} then, {sweep.sha256[:12]} now; "
        f"changed: {', '.join(changed)}); restore it or write to a new --out"
    )


def _check_inputs(path: Path, attrs: Any, sweep: SweepConfig) -> None:
    """ConfigError naming the first input file whose bytes differ from those the table was
    started with (or that was not read then, or is gone now): resumed, its rows would mix two
    wafers or models in one table."""
    then, now = _stored_inputs(attrs), dict(sweep.inputs)
    changed = sorted(name for name in then.keys() | now.keys() if then.get(name) != now.get(name))
    if not changed:
        return
    name = changed[0]
    where = os.path.normpath(Path(sweep.path).resolve().parent / name)
    more = f" (and {len(changed) - 1} more)" if len(changed) > 1 else ""
    raise ConfigError(
        f"input file {where} changed since {path} was started{more} "
        f"(sha256 {_short(then.get(name))} then, {_short(now.get(name))} now); restore it or "
        "write to a new --out"
    )


def _stored_inputs(attrs: Any) -> dict[str, str]:
    """The table's input digests (none in a table written before they were kept)."""
    return json.loads(attrs.get("inputs", "{}"))


def _short(sha256: str | None) -> str:
    return "none" if sha256 is None else sha256[:12]


def read_records(path: str | Path) -> list[PointRecord]:
    """Every row of the table, in file order."""
    check_results_file(path)
    with h5py.File(path, "r") as f:
        group = f["points"]
        columns = {name: group[name].asstr()[:] for name in TEXT_COLUMNS}
        columns |= {name: group[name][:] for name in (*INT_COLUMNS, *FLOAT_COLUMNS)}
        metrics = {name: data[:] for name, data in group["metrics"].items()}
    return [
        PointRecord(
            **{name: _scalar(values[row]) for name, values in columns.items()},
            metrics={name: float(values[row]) for name, values in metrics.items()},
        )
        for row in range(len(columns["point"]))
    ]


def points_total(path: str | Path) -> int:
    """How many points the sweep that wrote the table has (its rows may be fewer yet)."""
    check_results_file(path)
    with h5py.File(path, "r") as f:
        return int(f.attrs.get("points_total", len(f["points/point"])))


def read_table(path: str | Path) -> dict[str, np.ndarray]:
    """The table as columns (``metrics/<name>`` flattened to ``<name>``), sorted by point."""
    records = sorted(read_records(path), key=lambda r: r.point)
    table = {
        name: np.array([getattr(r, name) for r in records])
        for name in (*INT_COLUMNS, *TEXT_COLUMNS, *FLOAT_COLUMNS)
    }
    names = records[0].metrics if records else {}
    table |= {name: np.array([r.metrics[name] for r in records]) for name in names}
    return table


def _scalar(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def write_records(path: str | Path, sweep: SweepConfig, records: list[PointRecord]) -> None:
    """Add (or, for a retried point, replace) rows of ``sweep``'s file; atomically, via a
    copy of the file, and only if the file still belongs to ``sweep``."""
    if not records:
        return
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path} disappeared while the sweep ran: its last points were lost")
    with atomic_hdf5(path, update=True) as f:
        if not _belongs(f.attrs, sweep):
            raise ConfigError(
                f"{path} now belongs to another sweep (sha256 "
                f"{str(f.attrs.get('sweep_sha256'))[:12]}, this one {sweep.sha256[:12]}): "
                "this sweep's last points were not written; write to another --out"
            )
        _write_rows(f["points"], records)


def _belongs(attrs: Any, sweep: SweepConfig) -> bool:
    """Whether the table was started by ``sweep``: its file and its input files."""
    same_file = attrs.get("sweep_sha256") == sweep.sha256
    return same_file and _stored_inputs(attrs) == dict(sweep.inputs)


def _write_rows(group: h5py.Group, records: list[PointRecord]) -> None:
    """One write per column for the whole batch (a scalar write costs about as much)."""
    rows = {int(point): row for row, point in enumerate(group["point"][:])}
    size = len(rows)
    latest = {record.point: record for record in records}  # a point once, its last record
    for point in latest:
        if point not in rows:
            rows[point] = size
            size += 1
    order = sorted(latest, key=rows.__getitem__)  # h5py writes rows in increasing order
    where = _selection([rows[point] for point in order])
    ordered = [latest[point] for point in order]
    metric_names = list(group["metrics"])
    columns = {name: [getattr(r, name) for r in ordered]
               for name in (*TEXT_COLUMNS, *INT_COLUMNS, *FLOAT_COLUMNS)}  # fmt: skip
    columns |= {f"metrics/{m}": [r.metrics.get(m, np.nan) for r in ordered] for m in metric_names}
    for name, values in columns.items():
        column = group[name]
        column.resize((size,))
        column[where] = np.array(values, dtype=object if name in TEXT_COLUMNS else column.dtype)


def _selection(rows: list[int]) -> slice | list[int]:
    """``rows`` as a slice when they are consecutive and increasing, as appended rows are:
    h5py writes a slice several times faster than a list of rows."""
    if rows and rows == list(range(rows[0], rows[0] + len(rows))):
        return slice(rows[0], rows[0] + len(rows))
    return rows
