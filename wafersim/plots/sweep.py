"""Plots of a sweep's results table: a metric against one config key, one line per series.

Points that share the x value and the series (the other axes, seeds for example) are
averaged; the band is the 95 % confidence interval of the mean (Student's t, as published
defect-yield studies report). An x value written ``WxH`` (a ``--grid``) is plotted as its
number of PEs. Labels are the keys themselves, which carry their units (``AXIS_UNITS`` adds
them to the few that do not). Points without the x key (another panel of the sweep) are left
out; so are points that failed or finished without a value of the metric, which
:func:`left_out` names for a footnote on the figure and a note from ``wafersim plot``.

``ideal``: a metric that scales the series' point at ``x = 0`` (a clean wafer, say) into an
ideal line, dashed in the series' colour: with ``working_fraction``, a defect study's ideal,
the clean throughput times the share of PEs that still work. A series needs its ``x = 0``
point, which a logarithmic axis does not draw. ``relative``: every series divided by its
point at ``x = 0``, so that series of different scales (two models) share the axes.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np

from wafersim.stats import mean_ci
from wafersim.sweeps.results import PointRecord, points_total, read_records
from wafersim.wafer.atomic import atomic_path
from wafersim.wafer.errors import ConfigError

GRID = re.compile(r"^(\d+)x(\d+)$")
AXIS_UNITS = {  # the config keys whose names do not carry their units
    "grid": "PEs",
    "batch": "sequences per step",
    "seq": "tokens",
    "swarmx.wafers": "wafers",
    "steps": "training steps",
}


def curves(path: str | Path, x: str, y: str, series: list[str], ideal: str | None = None,
           relative: bool = False) -> dict[str, dict[str, list]]:  # fmt: skip
    """Per series label (the values of the ``series`` keys): sorted ``x``, mean ``y``, 95 %
    half-width and samples per point, and with ``ideal`` the ideal line (``ideal``: its y
    per x); ``relative``: divided by the series' ``x = 0`` mean (see the module docstring).
    Points that failed or lack a value are left out (:func:`left_out` names them)."""
    groups: dict[str, dict[float, list[tuple[float, float]]]] = {}
    records = read_records(path)
    _check_metrics(path, records, y, ideal)
    plotted = [r for r in records if _plotted(r, y, ideal)]
    if not plotted:
        raise ConfigError(f"{path}: no finished points to plot ({len(records)} in the table: "
                          "failed, or without a value of the metric)")  # fmt: skip
    for record in plotted:
        config = json.loads(record.config)
        if x not in config:
            continue  # a point of another panel
        label = ", ".join(f"{key}={_value(config, key)}" for key in series)
        scale = record.metrics[ideal] if ideal else 1.0
        xs = groups.setdefault(label, {})
        xs.setdefault(_number(x, config[x]), []).append((record.metrics[y], scale))
    if not groups:
        _value(json.loads(plotted[0].config), x)  # no point has it: the error names the keys
    out = {label: _summarise(points, ideal) for label, points in sorted(groups.items())}
    return {label: _relative(c) for label, c in out.items()} if relative else out


def _check_metrics(path: str | Path, records: list[PointRecord], y: str, ideal: str | None):
    """ConfigError when ``y`` or ``ideal`` is not a metric of the table."""
    names = records[0].metrics if records else {}
    for metric, flag in ((y, "--y"), (ideal, "--ideal")):
        if records and metric is not None and metric not in names:
            raise ConfigError(f"{flag} {metric!r} is not a metric of {path}: {', '.join(names)}")


def _plotted(record: PointRecord, y: str, ideal: str | None) -> bool:
    """Whether the point finished with a value of ``y`` (and of ``ideal``)."""
    values = [record.metrics[y]] + ([record.metrics[ideal]] if ideal else [])
    return record.status == "ok" and not any(math.isnan(v) for v in values)


def left_out(path: str | Path, x: str, y: str, ideal: str | None = None) -> dict[str, Any]:
    """The points with ``x`` that the plot leaves out, so a reader knows the curves are not
    the whole sweep: failed, or finished without a value of ``y`` (or ``ideal``), by point
    index, and how many of the sweep's points the table does not hold yet."""
    records = read_records(path)
    ours = [r for r in records if x in json.loads(r.config)]  # not another panel's
    return {
        "failed": sorted(r.point for r in ours if r.status != "ok"),
        "no_value": sorted(r.point for r in ours if r.status == "ok" and not _plotted(r, y, ideal)),
        "metrics": [m for m in (y, ideal) if m],
        "not_run": max(0, points_total(path) - len(records)),
    }


NOTE_INDICES = 8  # point indices a note names; the rest are counted


def left_out_note(left: dict[str, Any]) -> str:
    """One line naming the points :func:`left_out` found ("" when none)."""
    parts = []
    if left["failed"]:
        parts.append(f"{_points(left['failed'])} failed")
    if left["no_value"]:
        metrics = " or ".join(left["metrics"])
        parts.append(f"{_points(left['no_value'])} without a value of {metrics}")
    if left["not_run"]:
        parts.append(f"{left['not_run']} of the sweep's points not in the table yet")
    return f"left out: {'; '.join(parts)}" if parts else ""


def _points(indices: list[int]) -> str:
    """``3 points (1, 4, 7)``, the indices past ``NOTE_INDICES`` counted."""
    shown = ", ".join(map(str, indices[:NOTE_INDICES]))
    more = f" and {len(indices) - NOTE_INDICES} more" if len(indices) > NOTE_INDICES else ""
    return f"{len(indices)} point{'' if len(indices) == 1 else 's'} ({shown}{more})"


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


def _summarise(points: dict[float, list[tuple[float, float]]], ideal: str | None) -> dict:
    xs = sorted(points)
    stats = [mean_ci(np.array([value for value, _ in points[x]])) for x in xs]
    out = {
        "x": xs,
        "mean": [c.mean for c in stats],
        "ci95": [0.0 if math.isnan(c.half_width) else c.half_width for c in stats],
        "n": [c.n for c in stats],
    }
    if ideal:
        clean = out["mean"][_clean(xs, "--ideal")]
        out["ideal"] = [clean * float(np.mean([s for _, s in points[x]])) for x in xs]
    return out


def _clean(xs: list[float], flag: str) -> int:
    """The index of ``x = 0`` in ``xs``, which ``flag`` needs."""
    if 0.0 not in xs:
        raise ConfigError(f"{flag} needs each series' point at x = 0 (a clean wafer): a series "
                          "has none; add 0 to the sweep's axis")  # fmt: skip
    return xs.index(0.0)


def _relative(c: dict[str, list]) -> dict[str, list]:
    """A series divided by its ``x = 0`` mean."""
    clean = c["mean"][_clean(c["x"], "--relative")]
    scaled = {key: [v / clean for v in c[key]] for key in ("mean", "ci95", "ideal") if key in c}
    return {**c, **scaled}


LINE_STYLES = ("-", "--", ":", "-.")
COLORS_PER_STYLE = 10  # matplotlib's default color cycle
LEGEND_INSIDE_MAX = 4  # more series than this: the legend goes beside the axes


def plot(data: dict[str, dict[str, list]], x: str, y: str, title: str, out: Path, logx: bool,
         note: str = "") -> None:  # fmt: skip
    """Write the PNG of :func:`figure`."""
    import matplotlib.pyplot as plt

    fig = figure(data, x, y, title, logx, note)
    with atomic_path(out) as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    plt.close(fig)


def figure(data: dict[str, dict[str, list]], x: str, y: str, title: str, logx: bool,
           note: str = "") -> Any:  # fmt: skip
    """One line (and its confidence band) per series, each ideal line dashed in its series'
    colour; the legend lists the series' values under their keys; ``note`` (the points left
    out) goes below the axes as a footnote."""
    import matplotlib as mpl

    mpl.use("Agg")
    import matplotlib.pyplot as plt

    many = len(data) > LEGEND_INSIDE_MAX
    fig, ax = plt.subplots(figsize=(11 if many else 7, 4.5))
    for i, (label, c) in enumerate(data.items()):
        style = LINE_STYLES[i // COLORS_PER_STYLE % len(LINE_STYLES)]  # past the color cycle
        _series(ax, c, _values(label) or y, style, logx)
    if any("ideal" in c for c in data.values()):
        ax.plot([], [], linestyle="--", color="grey", label="dashed: ideal")
    ax.set_xlabel(f"{x} ({AXIS_UNITS[x]})" if x in AXIS_UNITS else x)
    ax.set_ylabel(y)
    if logx:
        ax.set_xscale("log")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    _legend(ax, _keys(next(iter(data), "")), many)
    fig.tight_layout()
    if note:
        fig.text(0.01, 0.01, note, fontsize="x-small", color="dimgrey", wrap=True)
        fig.subplots_adjust(bottom=fig.subplotpars.bottom + NOTE_HEIGHT)
    return fig


NOTE_HEIGHT = 0.05  # share of the figure's height a footnote takes below the axes


def _legend(ax: Any, keys: str | None, many: bool) -> None:
    if many:  # beside the axes, where it hides no data
        ax.legend(fontsize="x-small", loc="upper left", bbox_to_anchor=(1.01, 1.0), title=keys,
                  title_fontsize="x-small")  # fmt: skip
    else:
        ax.legend(fontsize="small", title=keys, title_fontsize="small")


def _series(ax, c: dict[str, list], label: str, style: str, logx: bool) -> None:
    """One series: its means, band and ideal line (no ``x = 0`` on a log axis), all in the
    line's colour (a band left to matplotlib's cycle took the next series' colour)."""
    keep = np.array(c["x"]) > 0 if logx else np.ones(len(c["x"]), bool)
    xs, mean, band = (np.array(c[key])[keep] for key in ("x", "mean", "ci95"))
    (line,) = ax.plot(xs, mean, marker="o", linestyle=style, label=label)
    if band.any():
        ax.fill_between(xs, mean - band, mean + band, color=line.get_color(), alpha=0.2)
    if "ideal" in c:
        ax.plot(xs, np.array(c["ideal"])[keep], linestyle="--", color=line.get_color(), alpha=0.7)


def _values(label: str) -> str:
    """``k1=v1, k2=v2`` -> ``v1, v2``."""
    return ", ".join(part.split("=", 1)[-1] for part in label.split(", ")) if label else ""


def _keys(label: str) -> str | None:
    """``k1=v1, k2=v2`` -> ``k1, k2`` (None without series)."""
    return ", ".join(part.split("=", 1)[0] for part in label.split(", ")) if label else None
