"""Plots of a sweep's results table: a metric against one config key, one line per series.

Points that share the x value and the series (the other axes, seeds for example) are
averaged; the band is the 95 % confidence interval of the mean (Student's t, as published
defect-yield studies report). An x value written ``PxQ`` (a kernel grid) is plotted as its
number of PEs. Labels are the keys themselves, which carry their units (``AXIS_UNITS`` adds
them to the few that do not).
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np

from wafer.atomic import atomic_path
from wafer.errors import ConfigError
from wafer.stats import mean_ci
from wafer.sweep_results import read_records

GRID = re.compile(r"^(\d+)x(\d+)$")
AXIS_UNITS = {  # the config keys whose names do not carry their units
    "grid": "PEs",
    "batch": "sequences per step",
    "seq": "tokens",
    "swarmx.wafers": "wafers",
    "steps": "training steps",
}


def curves(path: str | Path, x: str, y: str, series: list[str]) -> dict[str, dict[str, list]]:
    """Per series label (the values of the ``series`` keys): sorted ``x``, mean ``y``, 95 %
    half-width and samples per point."""
    groups: dict[str, dict[float, list[float]]] = {}
    records = [r for r in read_records(path) if r.status == "ok"]
    if not records:
        raise ConfigError(f"{path}: no finished points to plot")
    for record in records:
        config = json.loads(record.config)
        if y not in record.metrics:
            raise ConfigError(f"--y {y!r} is not a metric of {path}: {', '.join(record.metrics)}")
        label = ", ".join(f"{key}={_value(config, key)}" for key in series)
        xs = groups.setdefault(label, {})
        xs.setdefault(_number(x, _value(config, x)), []).append(record.metrics[y])
    return {label: _summarise(points) for label, points in sorted(groups.items())}


def _value(config: dict[str, Any], key: str) -> Any:
    if key not in config:
        raise ConfigError(f"{key!r} is not a key of the sweep's points: {', '.join(config)}")
    return config[key]


def _number(key: str, value: Any) -> float:
    if isinstance(value, str) and GRID.match(value):
        rows, cols = GRID.match(value).groups()
        return float(int(rows) * int(cols))
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"--x {key!r} has the non-numeric value {value!r}; pick a numeric key")
    return float(value)


def _summarise(points: dict[float, list[float]]) -> dict[str, list]:
    xs = sorted(points)
    stats = [mean_ci(np.array(points[x])) for x in xs]
    return {
        "x": xs,
        "mean": [c.mean for c in stats],
        "ci95": [0.0 if math.isnan(c.half_width) else c.half_width for c in stats],
        "n": [c.n for c in stats],
    }


LINE_STYLES = ("-", "--", ":", "-.")
COLORS_PER_STYLE = 10  # matplotlib's default color cycle
LEGEND_INSIDE_MAX = 4  # more series than this: the legend goes beside the axes


def plot(data: dict[str, dict[str, list]], x: str, y: str, title: str, out: Path, logx: bool):
    """Write the PNG: one line (and its confidence band) per series."""
    import matplotlib as mpl

    mpl.use("Agg")
    import matplotlib.pyplot as plt

    many = len(data) > LEGEND_INSIDE_MAX
    fig, ax = plt.subplots(figsize=(11 if many else 7, 4.5))
    for i, (label, c) in enumerate(data.items()):
        mean, band = np.array(c["mean"]), np.array(c["ci95"])
        style = LINE_STYLES[i // COLORS_PER_STYLE % len(LINE_STYLES)]  # past the color cycle
        ax.plot(c["x"], mean, marker="o", linestyle=style, label=label or y)
        if band.any():
            ax.fill_between(c["x"], mean - band, mean + band, alpha=0.2)
    ax.set_xlabel(f"{x} ({AXIS_UNITS[x]})" if x in AXIS_UNITS else x)
    ax.set_ylabel(y)
    if logx:
        ax.set_xscale("log")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    if many:  # beside the axes, where it hides no data
        ax.legend(fontsize="x-small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    else:
        ax.legend(fontsize="small")
    fig.tight_layout()
    with atomic_path(out) as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    plt.close(fig)
