"""PNG plots of a run: the per-layer timeline (streaming vs compute) and a wafer heatmap
(the ``plot`` extra: matplotlib; :func:`write_plots` says so when it is missing)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from wafersim.fabric.engine import REASON_NAMES
from wafersim.memoryx import _stream_jit as K
from wafersim.memoryx.report import assigned_cycles
from wafersim.memoryx.run import RunResult
from wafersim.memoryx.streaming import StreamResult
from wafersim.plots.figures import pyplot
from wafersim.wafer.atomic import atomic_path
from wafersim.wafer.errors import ConfigError

LANES = ("weights in", "compute", "gradients out")
MAX_LEGEND_LAYERS = 20  # more layers than that: the colors repeat and no legend is drawn


def write_plots(result: RunResult, out_dir: Path) -> list[str] | str:
    """The timeline of the last step and the wafer heatmap as PNGs; without matplotlib,
    the line saying how to get it (the run's other outputs do not need it)."""
    try:
        pyplot()
    except ConfigError:
        return "matplotlib is not installed: pip install 'wafersim[plot]' for PNG plots"
    stream = result.streams[0]
    written = [str(timeline(stream, out_dir / "timeline.png"))]
    first = result.wafers[0]
    measured = result.history is not None and result.history.busy is not None
    busy = np.array(result.history.busy) if measured else assigned_cycles(first, result)
    holes = None if first.logical is None else first.logical.hole
    # the engine's busy count is task-cycles: two tasks whose ops run in a cycle count 2
    measured_label = "busy task-cycles (cycle engine)"
    label = measured_label if measured else "cycles of work placed (analytic)"
    written.append(str(heatmap(busy, holes, label, out_dir / "wafer.png", "work")))
    if measured and result.history.reasons is not None:  # a picture per stall reason
        reasons = np.array(result.history.reasons, np.int64)
        for k, name in enumerate(REASON_NAMES):
            if reasons[..., k].any():
                path = out_dir / f"wafer_{name}.png"
                title = f"GEMM cycles {name.replace('_', ' ')}"
                written.append(str(heatmap(reasons[..., k], holes, f"{name} cycles", path, title)))
    return written


def timeline(stream: StreamResult, path: Path) -> Path:
    """Bars per segment of the last step: when its weights streamed in, when it computed,
    and when its gradients left; compute stalls show as gaps in the middle lane."""
    times = stream.times[-1]
    origin = times[:, K.COMPUTE_START].min()
    lanes: dict[int, tuple[list, list]] = {2: ([], []), 1: ([], []), 0: ([], [])}
    layers = list(dict.fromkeys(seg.layer for seg in stream.segments))  # in step order
    layer_color = {layer: f"C{i % 10}" for i, layer in enumerate(layers)}
    links = stream.link_spans(len(stream.times) - 1)
    for j, (seg, (weights, grads)) in enumerate(zip(stream.segments, links, strict=True)):
        row, color = times[j], layer_color[seg.layer]
        bars = [(1, row[K.COMPUTE_START], row[K.COMPUTE_END])]
        bars += [(lane, *span) for lane, span in ((2, weights), (0, grads)) if span]
        for lane, start, stop in bars:
            lanes[lane][0].append((start - origin, stop - start))
            lanes[lane][1].append(color)
    fig, ax = pyplot().subplots(figsize=(11, 3.2))
    for lane, (spans, colors) in lanes.items():
        ax.broken_barh(spans, (lane - 0.4, 0.8), facecolors=colors)
    ax.set_yticks([2, 1, 0], LANES)
    ax.set_xlabel("cycles since the step's first compute")
    ax.set_title(f"Last step: {len(stream.segments)} passes of {len(layers)} layers "
                 "(a color per layer)")  # fmt: skip
    if len(layers) <= MAX_LEGEND_LAYERS:
        handles = [pyplot().Rectangle((0, 0), 1, 1, color=layer_color[name]) for name in layers]
        ax.legend(handles, layers, loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=7,
                  title="layer")  # fmt: skip
    return _save(fig, path)


def heatmap(values: np.ndarray, holes: np.ndarray | None, label: str, path: Path,
            title: str) -> Path:  # fmt: skip
    """Per logical PE ``values`` (row 0 at the top, the west edge at the left), holes grey."""
    data = np.ma.masked_array(np.asarray(values, float), mask=holes if holes is not None else False)
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 5))
    cmap = plt.get_cmap("viridis").with_extremes(bad="lightgrey")
    image = ax.imshow(data, cmap=cmap, interpolation="nearest", aspect="auto", vmin=0)
    fig.colorbar(image, ax=ax, label=label)
    ax.set_xlabel("x (PE column)")
    ax.set_ylabel("y (PE row)")
    ax.set_title(f"Wafer: {title} per PE (holes grey)", fontsize=10)
    return _save(fig, path)


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    pyplot().close(fig)
    return path
