"""TensorBoard event files of a run (extra ``tensorboard``: tensorboardX, a maintained writer
that needs neither TensorFlow nor PyTorch): per training step the loss, the test accuracy at
each evaluation, the wafer's samples/s and the stall fraction of the step as simulated, so
that ``tensorboard --logdir DIR`` shows a run's curves beside other runs'. Each write holds
the whole run (a resumed one's history included) and replaces the folder's older files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from wafersim.memoryx import _stream_kernel as K


def write_events(result, out_dir: Path) -> str:
    """Event files in ``out_dir``; returns what was written, or why not (no extra)."""
    try:
        from tensorboardX import SummaryWriter
    except ImportError:
        return "not written: pip install 'wafersim[tensorboard]'"
    samples, per_step_s, stalls = step_rates(result)
    for old in out_dir.glob("events.out.tfevents.*"):
        old.unlink()
    with SummaryWriter(logdir=str(out_dir)) as writer:
        for step, (seconds, stall) in enumerate(zip(per_step_s, stalls, strict=True), 1):
            writer.add_scalar("wafer_samples_per_sec", samples / seconds, step)
            writer.add_scalar("stall_fraction", stall, step)
        if result.history is not None:
            for step, loss in enumerate(result.history.losses, 1):
                writer.add_scalar("loss", loss, step)
            for step, accuracy in result.history.accuracy:
                writer.add_scalar("test_accuracy", accuracy, step)
    return "written"


def step_rates(result) -> tuple[int, np.ndarray, np.ndarray]:
    """Samples a step (all wafers), each step's simulated seconds and stall fraction (the
    slowest wafer's stream)."""
    config = result.config
    stream = max(result.streams, key=lambda s: s.total_cycles)
    t = stream.times
    ends = np.maximum(t[:, :, K.COMPUTE_END].max(axis=1), t[:, :, K.OUT_END].max(axis=1))
    cycles = np.diff(np.concatenate([[0.0], ends]))
    stalls = t[:, :, K.STALL].sum(axis=1) / np.maximum(cycles, 1.0)
    return config["batch"] * len(result.wafers), cycles / config.spec.clock_hz, stalls
