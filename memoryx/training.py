"""The functional training loop: batches, GEMMs (on the cycle engine), SwarmX, MemoryX's
optimizer, checkpoints and resume.

Each step, wafer ``w`` of ``N`` takes slice ``w`` of the step's ``N * batch`` samples, runs
forward and backward through its ``matmul`` (one :class:`~memoryx.wafer_gemm.WaferGemm` per
wafer, each with its own defect map), SwarmX sums the gradients in its tree, and MemoryX
applies the mean (sum / N, so the learning rate does not depend on N) with the optimizer.

Checkpoints go to ``DIR/checkpoints/step_XXXXXXXX.h5`` every ``checkpoint_every`` steps and
at the end, each written atomically with the loss history and the training's digest and
config; the ``keep_checkpoints`` newest are kept. A run started on a DIR that holds
checkpoints resumes from the newest, and ends with the same weights, bit for bit, as a run
never stopped (batches are a pure function of the step, the engine is deterministic,
optimizer state is in the checkpoint). It may train on to more steps (or evaluate and save at
other intervals: ``run_config.CONTINUABLE``); any other change is refused, naming the key.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from wafersim.compiler.graph import LayerGraph
from wafersim.memoryx.checkpoint import load_checkpoint, save_checkpoint
from wafersim.memoryx.data import Dataset, batch_indices
from wafersim.memoryx.functional import Matmul, accuracy, loss_and_grads
from wafersim.memoryx.optimizer import Optimizer
from wafersim.memoryx.run_config import CONTINUABLE
from wafersim.memoryx.sparsity import apply_masks
from wafersim.memoryx.store import WeightStore
from wafersim.memoryx.swarmx import reduce_gradients
from wafersim.wafer.config_io import flatten
from wafersim.wafer.errors import ConfigError

LOG = logging.getLogger(__name__)

CHECKPOINT_NAME = re.compile(r"step_(\d{8})\.h5$")


@dataclass(frozen=True)
class Checkpoints:
    """Where a run's checkpoints go, how often, how many stay, and whose they are."""

    out_dir: Path
    every: int  # steps between checkpoints (0: at the end only)
    keep: int  # the newest ones kept
    digest: str  # RunConfig.digest: the training they belong to
    training: dict[str, Any]  # RunConfig.training: to name what a resume changed


@dataclass
class History:
    """What a run has learned so far; saved with every checkpoint."""

    losses: list[float] = field(default_factory=list)  # mean over wafers, per step
    accuracy: list[tuple[int, float]] = field(default_factory=list)  # (step, test accuracy)
    cycles: list[dict[str, int]] = field(default_factory=list)  # per wafer: "layer/pass" ->
    busy: list[list[int]] | None = None  # busy cycles per logical PE of wafer 0
    reasons: list | None = None  # wafer 0's GEMM cycles by stall reason per PE (H, W, 5)
    dense_cycles: dict[str, int] = field(default_factory=dict)  # sparse passes, run dense ...
    sparse_cycles: dict[str, int] = field(default_factory=dict)  # ... and sparse, same step
    stream_bytes: dict[str, int] = field(default_factory=dict)  # sparse passes, compressed

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Trainer:
    """Everything a step needs; ``matmuls`` holds one GEMM callback per wafer."""

    graph: LayerGraph
    data: Dataset
    optimizer: Optimizer
    matmuls: Sequence[Matmul]
    batch: int
    seed: int
    fanout: int
    masks: dict[str, np.ndarray] = field(default_factory=dict)  # pruned weights stay zero

    def step(self, store: WeightStore, step: int) -> float:
        """Run optimizer step ``step`` (0-based) and return the mean loss over wafers."""
        wafers = len(self.matmuls)
        index = batch_indices(len(self.data.y_train), self.batch * wafers, step, self.seed)
        weights = {name: store.get(name) for name in store.names}
        losses, grads = [], []
        for w, matmul in enumerate(self.matmuls):
            part = index[w * self.batch : (w + 1) * self.batch]
            x, y = self.data.x_train[part], self.data.y_train[part]
            loss, grad = loss_and_grads(self.graph, weights, x, y, matmul)
            losses.append(loss)
            grads.append(grad)
        total = reduce_gradients(grads, self.fanout)
        for name in store.names:
            self.optimizer.apply(store, name, total[name] / np.float32(wafers), step + 1)
        apply_masks(store, self.masks)
        return float(np.mean(losses))

    def test_accuracy(self, store: WeightStore) -> float:
        weights = {name: store.get(name) for name in store.names}
        return accuracy(self.graph, weights, self.data.x_test, self.data.y_test)


def train(
    trainer: Trainer,
    store: WeightStore,
    steps: int,
    eval_every: int,
    saved: Checkpoints,
    progress: Callable[[int, int, float], None] | None = None,
) -> tuple[WeightStore, History]:
    """Train to ``steps`` steps, resuming from the newest checkpoint in ``saved.out_dir`` if
    any; evaluate every ``eval_every`` steps (0: only at the end)."""
    store, start, history = resume(saved, store, steps)
    # an evaluation at the last run's end, off the interval: a run not stopped there has none
    ended_there = history.accuracy and history.accuracy[-1][0] == start < steps
    if ended_there and not step_due(start, eval_every, steps):
        history.accuracy.pop()
    base = np.array(history.busy or 0, np.int64)  # busy cycles before a resume
    base_reasons = np.array(history.reasons or 0, np.int64)
    for step in range(start, steps):
        loss = trainer.step(store, step)
        if not math.isfinite(loss):
            raise ConfigError(
                f"training diverged: step {step + 1} has loss {loss}; lower optimizer.lr or "
                "check the data (the last checkpoint is kept)"
            )
        history.losses.append(loss)
        done = step + 1
        if step_due(done, eval_every, steps) and len(trainer.data.y_test):
            history.accuracy.append((done, trainer.test_accuracy(store)))
        if step_due(done, saved.every, steps):
            _record_engine(trainer, history, base, base_reasons)
            save(saved, store, done, trainer.optimizer, history)
        if progress is not None:
            progress(done, steps, loss)
    _record_engine(trainer, history, base, base_reasons)
    return store, history


def step_due(done: int, interval: int, steps: int) -> bool:
    """Whether step ``done`` (1-based) of ``steps`` is due for what runs every ``interval``
    steps (an evaluation, a checkpoint) and at the last."""
    return done == steps or (interval > 0 and done % interval == 0)


def _record_engine(trainer: Trainer, history: History, base: np.ndarray,
                   base_reasons: np.ndarray) -> None:  # fmt: skip
    """Copy every wafer's measured cycles, and wafer 0's sparse-pass records, busy counts
    and stall reasons (when the matmuls are the engine), added to a resumed run's."""
    history.cycles = history.cycles or [{} for _ in trainer.matmuls]
    for record, matmul in zip(history.cycles, trainer.matmuls, strict=True):
        record.update(_keyed(getattr(matmul, "cycles", {})))
    first = trainer.matmuls[0]
    history.stream_bytes.update(_keyed(getattr(first, "stream_bytes", {})))
    for name in ("dense_cycles", "sparse_cycles"):  # the first run's pair: resumes keep it
        record = getattr(history, name)
        for key, value in _keyed(getattr(first, name, {})).items():
            record.setdefault(key, value)
    busy = getattr(first, "busy", None)
    if busy is not None:
        history.busy = (busy + base).tolist()
    reasons = getattr(first, "reasons", None)
    if reasons is not None:
        history.reasons = (reasons + base_reasons).tolist()


def _keyed(measured: dict[tuple[str, str], int]) -> dict[str, int]:
    """(layer, pass) keys as ``layer/pass`` text (JSON object keys)."""
    return {f"{layer}/{p}": value for (layer, p), value in measured.items()}


def _newest_intact(found: list[Path]):
    """The newest checkpoint that reads back whole, what it holds, and why newer ones did not."""
    damaged = []
    for path in reversed(found):
        try:
            return path, load_checkpoint(path), damaged
        except ConfigError as error:
            damaged.append(str(error))
    raise ConfigError(f"no intact checkpoint in {found[0].parent}: {'; '.join(damaged)}")


def checkpoint_dir(out_dir: Path) -> Path:
    return out_dir / "checkpoints"


def save(saved: Checkpoints, store, step, optimizer, history: History) -> None:
    """Write step ``step``'s checkpoint, then drop all but the newest ones."""
    meta = {"config_sha256": saved.digest, "config": saved.training, **history.to_dict()}
    folder = checkpoint_dir(saved.out_dir)
    save_checkpoint(folder / f"step_{step:08d}.h5", store, step, optimizer, meta=meta)
    for old in checkpoints(saved.out_dir)[: -saved.keep]:
        old.unlink()


def checkpoints(out_dir: Path) -> list[Path]:
    """Checkpoint files in ``out_dir``, oldest first."""
    folder = checkpoint_dir(out_dir)
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if CHECKPOINT_NAME.search(p.name))


def resume(saved: Checkpoints, store: WeightStore, steps: int) -> tuple[WeightStore, int, History]:
    """The newest intact checkpoint's store, step and history, or ``store`` at step 0.

    A damaged checkpoint (unreadable, or a dataset failing its checksum) is skipped for the
    next older one, saying so on stderr; none intact, one of another training or one past
    ``steps`` is an error (:func:`check_resume`): nothing is deleted, so the user decides
    what to keep."""
    found = checkpoints(saved.out_dir)
    if not found:
        return store, 0, History()
    newest, loaded, damaged = _newest_intact(found)
    if damaged:
        LOG.warning("wafersim: skipped damaged checkpoint(s): %s; resuming from %s",
                    "; ".join(damaged), newest.name)  # fmt: skip
    _check_resumable(newest, loaded, saved, steps)
    if not damaged:  # a kill between a save and its pruning left one too many
        for old in found[: -saved.keep]:
            old.unlink()
    fields = {f.name for f in dataclasses.fields(History)}
    meta = loaded.meta or {}
    history = History(**{key: value for key, value in meta.items() if key in fields})
    history.accuracy = [tuple(a) for a in history.accuracy]
    return loaded.store, loaded.step, history


def check_resume(saved: Checkpoints, steps: int) -> None:
    """The checks of :func:`resume` alone, before a run compiles anything into its folder."""
    found = checkpoints(saved.out_dir)
    if found:
        newest, loaded, _ = _newest_intact(found)
        _check_resumable(newest, loaded, saved, steps)


def _check_resumable(path: Path, loaded, saved: Checkpoints, steps: int) -> None:
    meta = loaded.meta or {}
    if meta.get("config_sha256") != saved.digest:
        raise ConfigError(f"{path} is a checkpoint of another training: "
                          f"{_changed(meta.get('config'), saved.training)}; use a new --out "
                          "folder (or delete the old checkpoints) to start this one")  # fmt: skip
    if loaded.step > steps:
        raise ConfigError(
            f"steps={steps}: {saved.out_dir} holds a checkpoint of step {loaded.step}, further "
            "than that; ask for at least as many steps or use a new --out folder"
        )


def _changed(then: dict[str, Any] | None, now: dict[str, Any]) -> str:
    """What differs between the training a checkpoint saved and this one, by dotted key."""
    if then is None:
        return "its config is not in it (an older wafersim wrote it)"
    before, after = flatten(then), flatten(now)
    keys = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    if not keys:
        return "the model file changed since"
    key = keys[0]
    more = f" (and {len(keys) - 1} more)" if len(keys) > 1 else ""
    return (f"{key} was {before.get(key)!r}, now {after.get(key)!r}{more}; only "
            f"{', '.join(CONTINUABLE)} may change when a run resumes")  # fmt: skip
