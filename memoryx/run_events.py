"""TensorBoard event files of a run (extra ``tensorboard``: tensorboardX, a maintained writer
that needs neither TensorFlow nor PyTorch): per training step the loss, the test accuracy at
each evaluation, the wafer's samples/s and the stall fraction of the step as simulated, so
that ``tensorboard --logdir DIR`` shows a run's curves beside other runs'. Each write holds
the whole run (a resumed one's history included) and replaces the folder's older files.

The file is written whole in a temporary folder inside DIR, then moved into place, so that DIR
never holds a part-written file. It is written in this thread with tensorboardX's record
writer, not its ``SummaryWriter``: that one writes from a thread of its own, which dies on a
full disk and leaves ``close()`` waiting on its queue forever. A failed write is one
:class:`~wafer.errors.OutputError` naming the file; the folder keeps its older events file.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from wafersim.memoryx import _stream_jit as K
from wafersim.wafer.atomic import output_errors

if TYPE_CHECKING:  # annotations only: the writer needs none of the run's machinery
    from wafersim.memoryx.run import RunResult

EVENTS_GLOB = "events.out.tfevents.*"  # TensorBoard reads the files whose name holds tfevents
EVENTS_NAME = "events.out.tfevents"  # what an error names before the file has its full name
FILE_VERSION = "brain.Event:2"  # the first event of every events file, TensorBoard's format
TMP_GLOB = ".events.*.tmp"  # the temporary folder in DIR


def write_events(result: RunResult, out_dir: Path) -> str:
    """Event files in ``out_dir``; returns what was written, or why not (no extra)."""
    try:
        import tensorboardX  # noqa: F401
    except ImportError:
        return "not written: pip install 'wafersim[tensorboard]'"
    scalars = list(event_scalars(result))
    folder = _temporary_folder(out_dir)
    try:
        _replace(_write_file(folder, scalars, out_dir), out_dir)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return "written"


def _temporary_folder(out_dir: Path) -> Path:
    """A new temporary folder in ``out_dir``; those a killed writer left are removed first
    (one run at a time writes a run folder: it holds the folder's lock)."""
    with output_errors(out_dir / EVENTS_NAME):
        out_dir.mkdir(parents=True, exist_ok=True)
        for orphan in out_dir.glob(TMP_GLOB):
            shutil.rmtree(orphan, ignore_errors=True)
        return Path(tempfile.mkdtemp(prefix=".events.", suffix=".tmp", dir=out_dir))


def event_scalars(result: RunResult) -> Iterator[tuple[str, float, int]]:
    """``(tag, value, step)`` of every scalar the run's events hold, in writing order."""
    samples, per_step_s, stalls = step_rates(result)
    for step, (seconds, stall) in enumerate(zip(per_step_s, stalls, strict=True), 1):
        yield "wafer_samples_per_sec", samples / seconds, step
        yield "stall_fraction", stall, step
    if result.history is not None:
        for step, loss in enumerate(result.history.losses, 1):
            yield "loss", loss, step
        for step, accuracy in result.history.accuracy:
            yield "test_accuracy", accuracy, step


def _write_file(folder: Path, scalars: list, out_dir: Path) -> Path:
    """The events file, written and closed in ``folder`` (closed also when a write fails, so
    that a full disk gets its space back); a failed write names the file it was to be."""
    from tensorboardX.proto.event_pb2 import Event
    from tensorboardX.record_writer import RecordWriter
    from tensorboardX.summary import scalar

    name = f"events.out.tfevents.{int(time.time())}.{socket.gethostname()}"  # as tensorboardX
    with output_errors(out_dir / name):
        writer = RecordWriter(str(folder / name))
        try:
            writer.write(
                Event(wall_time=time.time(), file_version=FILE_VERSION).SerializeToString()
            )
            for tag, value, step in scalars:
                event = Event(summary=scalar(tag, value), step=int(step), wall_time=time.time())
                writer.write(event.SerializeToString())
        finally:
            writer.close()  # the flush, where a full disk shows; the file is closed anyway
    return folder / name


def _replace(written: Path, out_dir: Path) -> None:
    """Move ``written`` into ``out_dir`` in place of the folder's older event files."""
    target = out_dir / written.name
    with output_errors(target):
        for old in out_dir.glob(EVENTS_GLOB):
            if old != target:
                old.unlink()
        os.replace(written, target)


def step_rates(result: RunResult) -> tuple[int, np.ndarray, np.ndarray]:
    """Samples a step (all wafers), each step's simulated seconds and stall fraction (the
    slowest wafer's stream)."""
    config = result.config
    stream = max(result.streams, key=lambda s: s.total_cycles)
    t = stream.times
    ends = np.maximum(t[:, :, K.COMPUTE_END].max(axis=1), t[:, :, K.OUT_END].max(axis=1))
    cycles = np.diff(np.concatenate([[0.0], ends]))
    stalls = t[:, :, K.STALL].sum(axis=1) / np.maximum(cycles, 1.0)
    return config.batch * len(result.wafers), cycles / config.spec.clock_hz, stalls
