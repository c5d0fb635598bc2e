"""The study's result: its table, the aggregates over seeds, and its JSON and HDF5 forms."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import h5py
import numpy as np

from wafersim import wafer
from wafersim.stats import MeanCI, mean_ci
from wafersim.studies.config import StudyConfig
from wafersim.studies.traffic import TRAFFIC_STATUS, traffic_summary
from wafersim.wafer.atomic import atomic_hdf5
from wafersim.wafer.errors import ConfigError
from wafersim.wafer.spec import WaferSpec, spec_from_dict

FORMAT = "wafersim-defect-study"
FORMAT_VERSION = 2  # raised whenever the tables' columns change


class Column(NamedTuple):
    """A measured column: its numpy dtype, its unit, and the range its values and intervals
    keep to; ``high`` is a number or the name of a limit of :func:`column_limits`."""

    dtype: str
    unit: str
    low: float
    high: float | str


ID_COLUMNS: dict[str, str] = {  # column -> numpy dtype: what a row is
    "defect_density_per_cm2": "f8",
    "strategy": "U16",
    "seed_index": "i8",
    "defect_seed": "i8",
    "traffic_seed": "i8",
    "window_seed": "i8",
}
INF = math.inf
METRIC_COLUMNS: dict[str, Column] = {  # what a row measures; each gets a mean and interval
    "dead_pes": Column("i8", "PEs", 0, "physical_pes"),
    "working_pes": Column("i8", "PEs", 0, "logical_pes"),
    "unrepaired_pes": Column("i8", "PEs", 0, "logical_pes"),
    "unrepaired_links": Column("i8", "links", 0, "logical_links"),
    "stranded_pes": Column("i8", "PEs", 0, "logical_pes"),
    "routes": Column("i8", "multicasts", 0, "logical_lines"),
    "mean_route_stretch_hops": Column("f8", "hops", 0, INF),
    "max_route_stretch_hops": Column("f8", "hops", 0, INF),
    "window_holes": Column("f8", "PEs per window", 0, "window_pes"),
    "window_dead_links": Column("f8", "links per window", 0, "window_links"),
    "fault_routed_windows": Column("f8", "share of windows", 0, 1),
    "measured_windows": Column("i8", "windows", 0, "windows_per_map"),
    "zero_load_latency_cycles": Column("f8", "cycles", 0, INF),
    "saturation_throughput_flits_per_pe_cycle": Column("f8", "flits/PE/cycle", 0, INF),
    "relative_saturation_throughput": Column("f8", "ratio", 0, INF),
    "relative_saturation_throughput_vs_xy": Column("f8", "ratio", 0, INF),
}
ROW_COLUMNS: dict[str, str] = ID_COLUMNS | {n: c.dtype for n, c in METRIC_COLUMNS.items()}
METRICS = tuple(METRIC_COLUMNS)
WINDOW_COLUMNS: dict[str, str] = {  # one row per (density, strategy, seed, window)
    "defect_density_per_cm2": "f8",
    "strategy": "U16",
    "seed_index": "i8",
    "window_index": "i8",
    "x0": "i8",
    "y0": "i8",
    "window_holes": "i8",
    "window_dead_links": "i8",
    "traffic_routing": "U16",
    "traffic_status": "i8",
    "zero_load_latency_cycles": "f8",
    "saturation_throughput_flits_per_pe_cycle": "f8",
    "relative_saturation_throughput": "f8",
    "relative_saturation_throughput_vs_xy": "f8",
}


def column_limits(spec: WaferSpec, config: StudyConfig) -> dict[str, float]:
    """The wafer's and the study's totals that bound the count columns."""
    width, height, side = spec.logical_width_pes, spec.logical_height_pes, config.window_pes
    return {
        "physical_pes": spec.physical_pes,
        "logical_pes": spec.logical_pes,
        "logical_links": width * (height - 1) + height * (width - 1),
        "logical_lines": width + height,
        "window_pes": side * side,
        "window_links": 2 * side * (side - 1),
        "windows_per_map": config.windows_per_map,
    }


def column_ranges(spec: WaferSpec, config: StudyConfig) -> dict[str, tuple[float, float]]:
    """Each metric's ``(low, high)`` with its named limit resolved."""
    limits = column_limits(spec, config)
    return {
        name: (float(c.low), float(limits[c.high] if isinstance(c.high, str) else c.high))
        for name, c in METRIC_COLUMNS.items()
    }


class Aggregate(NamedTuple):
    """Every metric's mean and 95 % interval over the seeds of one (density, strategy)."""

    defect_density_per_cm2: float
    strategy: str
    metrics: dict[str, MeanCI]


@dataclass(frozen=True, eq=False)
class StudyResult:
    """The study table (one row per density, strategy and seed), its windows' table (one
    row per window of each row) and what produced them."""

    spec: WaferSpec
    config: StudyConfig
    positions: np.ndarray  # int64 (seeds, windows_per_map, 2): each window's (x0, y0)
    rows: dict[str, np.ndarray]  # ROW_COLUMNS, each (points,)
    window_rows: dict[str, np.ndarray]  # WINDOW_COLUMNS, each (points * windows_per_map,)
    baselines: dict[str, np.ndarray]  # float64 (seeds,) each: defect-free window figures
    wall_s: float

    def __len__(self) -> int:
        return int(self.rows["seed_index"].size)

    def aggregates(self) -> list[Aggregate]:
        """One :class:`Aggregate` per (density, strategy), in the config's order."""
        ranges = column_ranges(self.spec, self.config)
        out = []
        for density in self.config.densities_per_cm2:
            for strategy in self.config.strategies:
                mask = (self.rows["defect_density_per_cm2"] == density) & (
                    self.rows["strategy"] == strategy
                )
                metrics = {name: mean_ci(self.rows[name][mask], *ranges[name]) for name in METRICS}
                out.append(Aggregate(density, strategy, metrics))
        return out

    def to_json(self) -> dict[str, Any]:
        """JSON-ready summary: aggregates, columns, config, spec, windows, seed and version."""
        return {
            "format": FORMAT,
            "config": self.config.to_dict(),
            "spec": self.spec.to_dict(),
            "seed": self.config.seed,
            "wafersim_version": wafer.__version__,
            "points": len(self),
            "traffic_window": traffic_summary(self.config.window_pes, self.positions),
            "defect_free_window": {
                name: [_finite(v) for v in values.tolist()]
                for name, values in self.baselines.items()
            },
            "traffic_status_codes": TRAFFIC_STATUS,
            "columns": _columns_json(self.spec, self.config),
            "interval": INTERVAL_NOTE,
            "aggregates": [_aggregate_json(a) for a in self.aggregates()],
            "wall_s": self.wall_s,
        }

    def _attrs(self) -> dict[str, Any]:
        summary = traffic_summary(self.config.window_pes, self.positions)
        return {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "spec": json.dumps(self.spec.to_dict(), sort_keys=True),
            "config": json.dumps(self.config.to_dict(), sort_keys=True),
            "seed": self.config.seed,
            "traffic_window": json.dumps(summary, sort_keys=True),
            "traffic_status_codes": json.dumps(TRAFFIC_STATUS, sort_keys=True),
            "wafersim_version": wafer.__version__,
            "wall_s": self.wall_s,
        }

    def save_hdf5(self, path: str | Path) -> None:
        """Write the table (group ``rows``, one dataset per column), the windows' table, the
        aggregates, the defect-free window figures, the window positions and the
        provenance (attributes) to HDF5, atomically."""
        with atomic_hdf5(path) as f:
            f.attrs.update(self._attrs())
            _write_columns(f.create_group("rows"), self.rows)
            _write_columns(f.create_group("windows"), self.window_rows)
            _write_columns(f.create_group("aggregates"), _aggregate_columns(self.aggregates()))
            _write_columns(f.create_group("defect_free_window"), self.baselines)
            f.create_dataset("window_positions", data=self.positions)

    @classmethod
    def load_hdf5(cls, path: str | Path) -> StudyResult:
        """Read a study written by :meth:`save_hdf5`; anything else raises ConfigError."""
        path = Path(path)
        if not path.is_file() or not h5py.is_hdf5(path):
            raise ConfigError(f"{path}: not an HDF5 file, so not a wafersim defect study")
        try:
            with h5py.File(path, "r") as f:
                return _read_study(f)
        except (KeyError, ValueError, TypeError, OSError) as error:
            raise ConfigError(f"{path}: not a valid wafersim defect study: {error}") from None


INTERVAL_NOTE = (
    "mean over seeds (one sample per defect map) and 95 % Student-t interval "
    "mean +- t(n-1) * s / sqrt(n), clipped to the column's range (columns); "
    "null where fewer than two finite samples"
)


def _read_study(f: h5py.File) -> StudyResult:
    if f.attrs.get("format") != FORMAT:
        raise ConfigError(f"format attribute is {f.attrs.get('format')!r}, not {FORMAT!r}")
    version = f.attrs.get("format_version")
    if version != FORMAT_VERSION:
        shown = int(version) if isinstance(version, (int, np.integer)) else version
        raise ConfigError(
            f"format_version {shown!r} is not {FORMAT_VERSION}: the study was written by "
            "another wafersim version; run it again"
        )
    return StudyResult(
        spec=spec_from_dict(json.loads(f.attrs["spec"])),
        config=StudyConfig.from_dict(json.loads(f.attrs["config"])),
        positions=f["window_positions"][()].astype(np.int64),
        rows=_read_table(f["rows"], ROW_COLUMNS),
        window_rows=_read_table(f["windows"], WINDOW_COLUMNS),
        baselines={name: data[()] for name, data in f["defect_free_window"].items()},
        wall_s=float(f.attrs["wall_s"]),
    )


def _read_table(group: h5py.Group, columns: dict[str, str]) -> dict[str, np.ndarray]:
    return {name: _read_column(group[name], dtype) for name, dtype in columns.items()}


def _columns_json(spec: WaferSpec, config: StudyConfig) -> dict[str, dict[str, Any]]:
    """Each metric's unit and range (``null`` for an unbounded end)."""
    ranges = column_ranges(spec, config)
    return {
        name: {"unit": c.unit, "low": _finite(ranges[name][0]), "high": _finite(ranges[name][1])}
        for name, c in METRIC_COLUMNS.items()
    }


def _finite(value: float) -> float | None:
    """JSON has no NaN: ``None`` stands for a figure that could not be measured."""
    return float(value) if math.isfinite(value) else None


def _aggregate_json(aggregate: Aggregate) -> dict[str, Any]:
    out: dict[str, Any] = {
        "defect_density_per_cm2": aggregate.defect_density_per_cm2,
        "strategy": aggregate.strategy,
    }
    for name, ci in aggregate.metrics.items():
        out[name] = {
            "mean": _finite(ci.mean),
            "ci95_low": _finite(ci.low),
            "ci95_high": _finite(ci.high),
            "n": ci.n,
        }
    return out


def _aggregate_columns(aggregates: list[Aggregate]) -> dict[str, np.ndarray]:
    """Aggregates as columns: density, strategy, and per metric mean, interval and n."""
    columns: dict[str, np.ndarray] = {
        "defect_density_per_cm2": np.array([a.defect_density_per_cm2 for a in aggregates]),
        "strategy": np.array([a.strategy for a in aggregates], dtype="U16"),
    }
    for name in METRICS:
        cis = [a.metrics[name] for a in aggregates]
        columns[f"{name}_mean"] = np.array([c.mean for c in cis], np.float64)
        columns[f"{name}_ci95_low"] = np.array([c.low for c in cis], np.float64)
        columns[f"{name}_ci95_high"] = np.array([c.high for c in cis], np.float64)
        columns[f"{name}_n"] = np.array([c.n for c in cis], np.int64)
    return columns


def _write_columns(group: h5py.Group, columns: dict[str, np.ndarray]) -> None:
    for name, values in columns.items():
        data = np.char.encode(values, "utf-8") if values.dtype.kind == "U" else values
        group.create_dataset(name, data=data)


def _read_column(dataset: h5py.Dataset, dtype: str) -> np.ndarray:
    data = dataset[()]
    return (
        np.char.decode(data, "utf-8").astype(dtype)
        if data.dtype.kind == "S"
        else data.astype(dtype)
    )
