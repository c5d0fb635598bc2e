"""The study's PNG: relative saturation throughput and mean route stretch against defect
density, one line per repair strategy with its 95 % interval as a band."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from wafersim.plots.figures import pyplot
from wafersim.stats import MeanCI
from wafersim.studies.traffic import CLEAN_ROUTING
from wafersim.wafer.atomic import atomic_path

if TYPE_CHECKING:
    from wafersim.studies.result import StudyResult


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
        line = _band(left, x, [a.metrics["relative_saturation_throughput"] for a in mine], style)
        vs_xy = [a.metrics["relative_saturation_throughput_vs_xy"].mean for a in mine]
        left.plot(x, vs_xy, color=line.get_color(), linestyle=":", linewidth=1)
        _band(right, x, [a.metrics["mean_route_stretch_hops"] for a in mine], style)
    left.plot([], [], color="gray", linestyle=":", label=f"vs defect-free under {CLEAN_ROUTING}")
    config = result.config
    side = config.window_pes
    left.set_ylabel(
        f"saturation throughput / defect-free, same routing\n"
        f"(mean of {config.windows_per_map} random {side}x{side} windows per map)"
    )
    right.set_ylabel("mean route stretch (added hops per multicast)")
    for ax in (left, right):
        ax.set_xscale("log" if log_x else "linear")
        ax.set_xlabel("defect density (defects / cm$^2$)")
        ax.grid(True, alpha=0.3)
        ax.legend(title="repair")
    hidden = log_x and 0.0 in config.densities_per_cm2
    zero = " (density 0 not shown on the log axis)" if hidden else ""
    fig.suptitle(f"{result.spec.name}: {config.seeds} seeds, mean and 95 % CI{zero}", fontsize=10)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=120)
    plt.close(fig)


def _band(ax: Any, x: np.ndarray, cis: list[MeanCI], style: dict[str, str]) -> Any:
    """The means as a line and their intervals as a band; returns the line."""
    mean = np.array([c.mean for c in cis])
    (line,) = ax.plot(x, mean, **style)
    low, high = np.array([c.low for c in cis]), np.array([c.high for c in cis])
    ax.fill_between(x, low, high, color=line.get_color(), alpha=0.2)
    return line
