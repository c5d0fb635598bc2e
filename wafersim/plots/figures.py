"""PNG figures (the optional ``plot`` extra: matplotlib, on its non-interactive Agg backend,
so plots need no display): the pyplot module, a wafer heatmap and an activity animation."""

from __future__ import annotations

import textwrap
import warnings
from pathlib import Path

import numpy as np

from wafersim.fabric.timeline import region_means
from wafersim.wafer.arith import ceil_div
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
BUSY_LABEL = "busy: share of the sample's cycles the PE computed"
SHARE_SLACK = 1e-5  # float32 rounding of a share
TITLE_CHARS = 40  # a title line the frame's width holds


def activity_animation(frames: list[np.ndarray], cycles: list[int], path: str | Path,
                       title: str, fps: int = 8, *, label: str = BUSY_LABEL,
                       edge_ports: bool = False) -> int:  # fmt: skip
    """An animated GIF of per-PE activity (``frames``: (H, W) shares in [0, 1], one a sample
    ending at ``cycles``; NaN: a hole, drawn grey), averaged down to at most
    :data:`MAX_ANIMATION_SIDE` cells a side; ``edge_ports``: row and column 0 are a kernel's
    edge ports framing its grid, which the axes say. Each frame is drawn by matplotlib, the
    GIF written by Pillow (matplotlib's own dependency); returns the frames written."""
    if not frames:
        raise ConfigError("the animation has no samples: the run was shorter than --trace-every")
    _check_shares(frames)
    from PIL import Image

    plt = pyplot()
    block = max(1, ceil_div(max(np.shape(frames[0])), MAX_ANIMATION_SIDE))
    cells = [_downsample(np.asarray(f, np.float64), MAX_ANIMATION_SIDE) for f in frames]
    fig, ax = plt.subplots(figsize=(5, 5 * cells[0].shape[0] / max(cells[0].shape[1], 1) + 0.6))
    cmap = plt.get_cmap("viridis").with_extremes(bad="lightgrey")
    first = np.ma.masked_invalid(cells[0])
    rows, cols = (side * block for side in first.shape)  # in PEs: the ticks count mesh PEs
    image = ax.imshow(first, cmap=cmap, vmin=0, vmax=1, interpolation="nearest",
                      extent=(-0.5, cols - 0.5, rows - 0.5, -0.5))  # fmt: skip
    fig.colorbar(image, ax=ax, label=label)
    _axis_labels(ax, block, edge_ports)
    head = _frame_title(title, np.shape(frames[0]), edge_ports, np.isnan(frames[0]).any())
    shots = []
    for frame, cycle in zip(cells, cycles, strict=True):
        image.set_data(np.ma.masked_invalid(frame))
        ax.set_title(f"{head}\ncycle {cycle}", fontsize=9)
        fig.canvas.draw()
        shots.append(Image.fromarray(np.asarray(fig.canvas.buffer_rgba())).convert("P"))
    plt.close(fig)
    with atomic_path(path) as tmp:
        shots[0].save(tmp, format="GIF", save_all=True, append_images=shots[1:],
                      duration=round(1000 / fps), loop=0)  # fmt: skip
    return len(shots)


def _check_shares(frames: list[np.ndarray]) -> None:
    """The colour bar runs from 0 to 1: a value outside would be drawn as its end."""
    values = np.concatenate([np.ravel(frame) for frame in frames])
    values = values[~np.isnan(values)]  # holes
    low, high = (values.min(), values.max()) if values.size else (0.0, 0.0)
    if low < -SHARE_SLACK or high > 1 + SHARE_SLACK:
        raise ConfigError(f"animation frames hold shares in [{low:.3g}, {high:.3g}]: "
                          "the colour bar draws [0, 1]")  # fmt: skip


def _axis_labels(ax, block: int, edge_ports: bool) -> None:
    """Axes that say what a cell is: a PE, or the mean of ``block x block`` of them, and
    where a kernel's edge ports sit."""
    means = f"; a cell: the mean of {block} x {block} PEs" if block > 1 else ""
    ports = ("; 0: west edge ports", "; 0: north edge ports") if edge_ports else ("", "")
    ax.set_xlabel(f"x (mesh column{means}{ports[0]})")
    ax.set_ylabel(f"y (mesh row{means}{ports[1]})")
    for axis in (ax.xaxis, ax.yaxis):  # PEs are counted whole
        axis.get_major_locator().set_params(integer=True)


def _frame_title(title: str, shape: tuple[int, int], edge_ports: bool, holes: bool) -> str:
    height, width = shape
    ports = ": edge ports at row and column 0" if edge_ports else ""
    ports += "; holes grey" if holes else ""
    lines = [textwrap.fill(line, TITLE_CHARS) for line in title.splitlines()]
    return "\n".join([*lines, f"{width} x {height} mesh{ports}"])


def _downsample(values: np.ndarray, side: int) -> np.ndarray:
    """``values`` (H, W) as block means, at most ``side`` blocks a side (edges padded; a
    block of holes alone, NaN)."""
    with warnings.catch_warnings():  # a block of holes alone: a mean of nothing
        warnings.simplefilter("ignore", RuntimeWarning)
        return region_means(values, max(1, ceil_div(max(values.shape), side)))
