"""The study's PNG: relative saturation throughput and mean route stretch against defect
density, one line per repair strategy with its 95 % interval as a band."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from wafersim.figures import pyplot
from wafersim.stats import MeanCI, mean_ci
from wafersim.study_traffic import CLEAN_ROUTING, FAULT_ROUTING
from wafersim.wafer.atomic import atomic_path

if TYPE_CHECKING:
    from wafersim.study_result import StudyResult


MARKERS = ("o", "s", "^", "v", "D")  # one per repair strategy in plots


def plot_study(result: StudyResult, path: str | Path) -> None:
    """Two panels against defect density (log axis where every density shown is > 0)."""
    plt = pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.5))
    shown = [a for a in result.aggregates() if a.defect_density_per_cm2 > 0]
    log_x = bool(shown)
    shown = shown or result.aggregates()
    for i, strategy in enumerate(result.config.strategies):
        mine = [a for a in shown if a.strategy == strategy]
        x = np.array([a.defect_density_per_cm2 for a in mine])
        style = {"label": strategy, "marker": MARKERS[i % len(MARKERS)]}
        _band(left, x, [a.metrics["relative_saturation_throughput"] for a in mine], style)
        _band(right, x, [a.metrics["mean_route_stretch_hops"] for a in mine], style)
    _routing_reference(left, result)
    side = result.window.side
    left.set_ylabel(f"saturation throughput / defect-free ({side}x{side} window)")
    right.set_ylabel("mean route stretch (added hops per multicast)")
    for ax in (left, right):
        ax.set_xscale("log" if log_x else "linear")
        ax.set_xlabel("defect density (defects / cm$^2$)")
        ax.grid(True, alpha=0.3)
        ax.legend(title="repair")
    zero = (
        " (density 0 not shown on the log axis)"
        if log_x and 0.0 in result.config.densities_per_cm2
        else ""
    )
    fig.suptitle(
        f"{result.spec.name}: {result.config.seeds} seeds, mean and 95 % CI{zero}", fontsize=10
    )
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=120)
    plt.close(fig)


def _band(ax: Any, x: np.ndarray, cis: list[MeanCI], style: dict[str, str]) -> None:
    mean = np.array([c.mean for c in cis])
    half = np.array([c.half_width for c in cis])
    (line,) = ax.plot(x, mean, **style)
    ax.fill_between(x, mean - half, mean + half, color=line.get_color(), alpha=0.2)


def _routing_reference(ax: Any, result: StudyResult) -> None:
    """A dashed line at the defect-free window's throughput under FAULT_ROUTING (relative
    to xy): what a faulty window would reach if its faults cost nothing."""
    fault = result.baselines[f"{FAULT_ROUTING}_saturation_throughput_flits_per_pe_cycle"]
    clean = result.baselines[f"{CLEAN_ROUTING}_saturation_throughput_flits_per_pe_cycle"]
    ratio = mean_ci(fault / clean).mean
    if math.isfinite(ratio):
        label = f"defect-free, {FAULT_ROUTING} routing"
        ax.axhline(ratio, color="gray", linestyle="--", linewidth=1, label=label)
