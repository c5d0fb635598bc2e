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
from wafersim.study_config import StudyConfig
from wafersim.study_traffic import TRAFFIC_STATUS, Window, window_summary
from wafersim.wafer.atomic import atomic_path
from wafersim.wafer.errors import ConfigError
from wafersim.wafer.spec import WaferSpec, spec_from_dict

FORMAT = "wafersim-defect-study"
FORMAT_VERSION = 1

ROW_COLUMNS: dict[str, str] = {  # column -> numpy dtype; one row per (density, strategy, seed)
    "defect_density_per_cm2": "f8",
    "strategy": "U16",
    "seed_index": "i8",
    "defect_seed": "i8",
    "traffic_seed": "i8",
    "dead_pes": "i8",
    "working_pes": "i8",
    "unrepaired_pes": "i8",
    "unrepaired_links": "i8",
    "stranded_pes": "i8",
    "routes": "i8",
    "mean_route_stretch_hops": "f8",
    "max_route_stretch_hops": "f8",
    "window_holes": "i8",
    "window_dead_links": "i8",
    "traffic_routing": "U16",
    "traffic_status": "i8",
    "zero_load_latency_cycles": "f8",
    "saturation_throughput_flits_per_pe_cycle": "f8",
    "relative_saturation_throughput": "f8",
}
METRICS = (  # the columns that get a mean and a confidence interval
    "dead_pes",
    "working_pes",
    "unrepaired_pes",
    "unrepaired_links",
    "stranded_pes",
    "mean_route_stretch_hops",
    "max_route_stretch_hops",
    "window_holes",
    "window_dead_links",
    "zero_load_latency_cycles",
    "saturation_throughput_flits_per_pe_cycle",
    "relative_saturation_throughput",
)


class Aggregate(NamedTuple):
    """Every metric's mean and 95 % interval over the seeds of one (density, strategy)."""

    defect_density_per_cm2: float
    strategy: str
    metrics: dict[str, MeanCI]


@dataclass(frozen=True, eq=False)
class StudyResult:
    """The study table (one row per density, strategy and seed) and what produced it."""

    spec: WaferSpec
    config: StudyConfig
    window: Window
    rows: dict[str, np.ndarray]  # ROW_COLUMNS, each (points,)
    baselines: dict[str, np.ndarray]  # float64 (seeds,) each: defect-free window figures
    wall_s: float

    def __len__(self) -> int:
        return int(self.rows["seed_index"].size)

    def aggregates(self) -> list[Aggregate]:
        """One :class:`Aggregate` per (density, strategy), in the config's order."""
        out = []
        for density in self.config.densities_per_cm2:
            for strategy in self.config.strategies:
                mask = (self.rows["defect_density_per_cm2"] == density) & (
                    self.rows["strategy"] == strategy
                )
                metrics = {name: mean_ci(self.rows[name][mask]) for name in METRICS}
                out.append(Aggregate(density, strategy, metrics))
        return out

    def to_json(self) -> dict[str, Any]:
        """JSON-ready summary: aggregates, config, spec, window, seed and version."""
        return {
            "format": FORMAT,
            "config": self.config.to_dict(),
            "spec": self.spec.to_dict(),
            "seed": self.config.seed,
            "wafersim_version": wafer.__version__,
            "points": len(self),
            "traffic_window": window_summary(self.window),
            "defect_free_window": {
                name: [_finite(v) for v in values.tolist()]
                for name, values in self.baselines.items()
            },
            "traffic_status_codes": TRAFFIC_STATUS,
            "aggregates": [_aggregate_json(a) for a in self.aggregates()],
            "wall_s": self.wall_s,
        }

    def _attrs(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "spec": json.dumps(self.spec.to_dict(), sort_keys=True),
            "config": json.dumps(self.config.to_dict(), sort_keys=True),
            "seed": self.config.seed,
            "window": json.dumps(window_summary(self.window), sort_keys=True),
            "traffic_status_codes": json.dumps(TRAFFIC_STATUS, sort_keys=True),
            "wafersim_version": wafer.__version__,
            "wall_s": self.wall_s,
        }

    def save_hdf5(self, path: str | Path) -> None:
        """Write the table (group ``rows``, one dataset per column), the aggregates, the
        defect-free window figures and the provenance (attributes) to HDF5, atomically."""
        with atomic_path(path) as tmp, h5py.File(tmp, "w") as f:
            f.attrs.update(self._attrs())
            _write_columns(f.create_group("rows"), self.rows)
            _write_columns(f.create_group("aggregates"), _aggregate_columns(self.aggregates()))
            _write_columns(f.create_group("defect_free_window"), self.baselines)

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


def _read_study(f: h5py.File) -> StudyResult:
    if f.attrs.get("format") != FORMAT:
        raise ConfigError(f"format attribute is {f.attrs.get('format')!r}, not {FORMAT!r}")
    rows = {name: _read_column(f["rows"][name], dtype) for name, dtype in ROW_COLUMNS.items()}
    window = json.loads(f.attrs["window"])
    return StudyResult(
        spec=spec_from_dict(json.loads(f.attrs["spec"])),
        config=StudyConfig.from_dict(json.loads(f.attrs["config"])),
        window=Window(window["x0"], window["y0"], window["side_pes"]),
        rows=rows,
        baselines={name: data[()] for name, data in f["defect_free_window"].items()},
        wall_s=float(f.attrs["wall_s"]),
    )


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
            "ci95_half_width": _finite(ci.half_width),
            "ci95_low": _finite(ci.low),
            "ci95_high": _finite(ci.high),
            "n": ci.n,
        }
    return out


def _aggregate_columns(aggregates: list[Aggregate]) -> dict[str, np.ndarray]:
    """Aggregates as columns: density, strategy, and per metric mean, half-width and n."""
    columns: dict[str, np.ndarray] = {
        "defect_density_per_cm2": np.array([a.defect_density_per_cm2 for a in aggregates]),
        "strategy": np.array([a.strategy for a in aggregates], dtype="U16"),
    }
    for name in METRICS:
        cis = [a.metrics[name] for a in aggregates]
        columns[f"{name}_mean"] = np.array([c.mean for c in cis], np.float64)
        columns[f"{name}_ci95_half_width"] = np.array([c.half_width for c in cis], np.float64)
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
