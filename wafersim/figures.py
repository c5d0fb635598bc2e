"""PNG figures (the optional ``plot`` extra: matplotlib, on its non-interactive Agg backend,
so plots need no display): the pyplot module and a wafer heatmap."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from wafer.atomic import atomic_path
from wafer.errors import ConfigError


def pyplot():
    """matplotlib.pyplot on the Agg backend; ConfigError when matplotlib is missing."""
    try:
        import matplotlib
    except ImportError:
        raise ConfigError("plots need matplotlib: pip install 'wafersim[plot]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def wafer_heatmap(values: np.ndarray, path: str | Path, title: str, label: str) -> None:
    """Draw an (H, W) array as a heatmap with north at the top, and save it as PNG."""
    plt = pyplot()
    height, width = values.shape
    fig, ax = plt.subplots(figsize=(6, 6 * height / max(width, 1) + 0.6))
    image = ax.imshow(values, origin="upper", cmap="viridis", interpolation="nearest")
    ax.set_xlabel("x (PE column)")
    ax.set_ylabel("y (PE row)")
    ax.set_title(title)
    fig.colorbar(image, ax=ax, label=label)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=120)
    plt.close(fig)
