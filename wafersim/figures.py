"""PNG figures (the optional ``plot`` extra: matplotlib, on its non-interactive Agg backend,
so plots need no display): the pyplot module, a wafer heatmap and an activity animation."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from wafersim.fabric.timeline import region_means
from wafersim.wafer.atomic import atomic_path
from wafersim.wafer.errors import ConfigError


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


MAX_ANIMATION_SIDE = 128  # cells a side of an animation frame: a whole wafer is averaged down


def activity_animation(frames: list[np.ndarray], cycles: list[int], path: str | Path,
                       title: str, fps: int = 8) -> int:  # fmt: skip
    """An animated GIF of per-PE activity (``frames``: (H, W) busy shares, one a sample
    ending at ``cycles``), averaged down to at most :data:`MAX_ANIMATION_SIDE` cells a side;
    each frame drawn by matplotlib, the GIF written by Pillow (matplotlib's own dependency);
    returns the frames written."""
    if not frames:
        raise ConfigError("the animation has no samples: the run was shorter than --trace-every")
    from PIL import Image

    plt = pyplot()
    cells = [_downsample(np.asarray(f, np.float64), MAX_ANIMATION_SIDE) for f in frames]
    fig, ax = plt.subplots(figsize=(5, 5 * cells[0].shape[0] / max(cells[0].shape[1], 1) + 0.6))
    image = ax.imshow(cells[0], cmap="viridis", vmin=0, vmax=1, interpolation="nearest")
    fig.colorbar(image, ax=ax, label="busy share of the sample's cycles")
    ax.set_xlabel("x (PE column, averaged)")
    ax.set_ylabel("y (PE row, averaged)")
    shots = []
    for frame, cycle in zip(cells, cycles, strict=True):
        image.set_data(frame)
        ax.set_title(f"{title}\ncycle {cycle}", fontsize=9)
        fig.canvas.draw()
        shots.append(Image.fromarray(np.asarray(fig.canvas.buffer_rgba())).convert("P"))
    plt.close(fig)
    with atomic_path(path) as tmp:
        shots[0].save(tmp, format="GIF", save_all=True, append_images=shots[1:],
                      duration=round(1000 / fps), loop=0)  # fmt: skip
    return len(shots)


def _downsample(values: np.ndarray, side: int) -> np.ndarray:
    """``values`` (H, W) as block means, at most ``side`` blocks a side (edges padded)."""
    return region_means(values, max(1, -(-max(values.shape) // side)))
