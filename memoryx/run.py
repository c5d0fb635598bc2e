"""``wafersim run``: a model trains (tier ``cycle``) or is timed (tier ``fast`` or
``analytic``) on one or more simulated wafers in weight-streaming mode, and it is reported.

The chain: config -> the checks that need no plan (:func:`validate_config`) -> the data set
-> per-wafer defect map and repair -> plan (compiled per wafer, cached in DIR, each checked
by :func:`validate_plan` before the next is made) -> functional training on the cycle engine
(small models) -> the tile-level MemoryX stream of every step with the measured (or,
timing-only, the plan's) compute cycles -> the report in DIR (:mod:`memoryx.report`). With
several wafers the slowest one sets the pace.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wafersim.compiler.graph import LayerGraph
from wafersim.compiler.model_file import load_model
from wafersim.compiler.plan import CompileOptions, compile_cached
from wafersim.compiler.plan_records import GemmPlacement, Plan
from wafersim.kernels.fast_tier import fast_cycles
from wafersim.kernels.gemm_algorithms import sparse_strategies
from wafersim.memoryx import _stream_jit as K
from wafersim.memoryx.data import Dataset, DatasetSize, dataset_size, load_dataset
from wafersim.memoryx.functional import check_functional, weight_shapes
from wafersim.memoryx.optimizer import Optimizer
from wafersim.memoryx.run_config import RunConfig
from wafersim.memoryx.sparsity import apply_masks, prune_masks
from wafersim.memoryx.store import WeightStore
from wafersim.memoryx.streaming import (
    DEFAULT_TILE_BYTES,
    Edge,
    StreamResult,
    kept_on_wafer,
    prefetch_buffer_bytes,
    segments,
    simulate_stream,
    weight_bytes,
)
from wafersim.memoryx.swarmx import effective_edge
from wafersim.memoryx.training import Checkpoints, History, Trainer, check_resume, train
from wafersim.memoryx.wafer_gemm import WaferGemm
from wafersim.wafer.defects import generate
from wafersim.wafer.dtypes import DType
from wafersim.wafer.errors import ConfigError
from wafersim.wafer.repair import LogicalGrid, repair

MIN_TILE_BYTES = 4096  # default tiles never get smaller (the stream sim keeps one per tile)
# float64 values the stream simulation of a run may hold (2 GiB): every wafer's event times
# and one wafer's tiles in flight; a run times a few steps, it does not replay a whole training
MAX_STREAM_VALUES = 2**28
Progress = Callable[[str, int, int, str], None]  # (stage, done, total, detail)


@dataclass(frozen=True)
class Wafer:
    """One wafer of the run: its repaired grid (None: defect-free) and its plan."""

    logical: LogicalGrid | None
    plan: Plan


@dataclass(frozen=True)
class RunResult:
    """What :mod:`memoryx.report` writes out."""

    config: RunConfig
    wafers: list[Wafer]
    streams: list[StreamResult]
    baseline: StreamResult  # wafer 0 alone, MemoryX attached directly (SwarmX's yardstick)
    history: History | None
    data: Dataset  # also for timing-only runs: its bytes per sample feed the input model
    compile_time_s: float
    sim_wall_s: float


def run(config: RunConfig, out_dir: Path, progress: Progress | None = None) -> RunResult:
    """Run ``config``, keeping plans and checkpoints in ``out_dir``."""
    validate_config(config, out_dir)  # before the costly parts and anything written in DIR
    out_dir.mkdir(parents=True, exist_ok=True)
    data = load_dataset(config.data, config.seed)
    compile_start = time.perf_counter()
    wafers = compile_wafers(config, out_dir)
    compile_time = time.perf_counter() - compile_start
    start = time.perf_counter()  # sim_wall_s counts the simulation, not the compile
    tier = RUN_TIERS[config.tier]
    history, matmuls = tier.measure(config, wafers, data, out_dir, progress)
    count = len(wafers)
    streams = [_stream(config, wafers, i, history, matmuls[i], count) for i in range(count)]
    baseline = _stream(config, wafers, 0, history, matmuls[0], 1) if count > 1 else streams[0]
    wall = time.perf_counter() - start
    return RunResult(config, wafers, streams, baseline, history, data, compile_time, wall)


def count_wafers(config: RunConfig) -> int:
    return config.swarmx.wafers


def compile_wafers(config: RunConfig, out_dir: Path) -> list[Wafer]:
    """Every wafer of the run, each with its own defects and plan (:func:`compile_wafer`),
    each plan checked (:func:`validate_plan`) before the next is made."""
    wafers = []
    for index in range(count_wafers(config)):
        wafer = compile_wafer(config, index, out_dir)
        validate_plan(config, wafer.plan)
        wafers.append(wafer)
    return wafers


def compile_wafer(config: RunConfig, index: int, out_dir: Path) -> Wafer:
    """Wafer ``index``'s repaired grid and plan, saved under ``out_dir/compile/wafer_<index>``
    (each wafer's defects: its own plan) and reused while its inputs are unchanged."""
    logical = logical_grid(config, index)
    plan, _ = compile_cached(config.model_path, config.spec, compile_options(config),
                             compile_folder(out_dir, index), logical)  # fmt: skip
    return Wafer(logical, plan)


def compile_folder(out_dir: Path, index: int) -> Path:
    return out_dir / "compile" / f"wafer_{index}"


def validate_config(config: RunConfig, out_dir: Path | None = None) -> None:
    """The run's checks that need no plan (the loader checked every key: the optimizer and
    the initial weights' spread among them), all cheap, so a run and ``--validate-only`` make
    them before compiling or loading anything big: the compile options against the model,
    the data set's keys and sizes and, for a functional run, the model and data fitting each
    other and a resume from ``out_dir``."""
    graph = load_model(config.model_path).graph
    compile_options(config).resolved(graph.context)
    size = dataset_size(config.data, config.seed)
    if RUN_TIERS[config.tier].functional:
        check_trainable(config, graph, size)
        if out_dir is not None:
            check_resume(checkpoints_of(config, out_dir), config.steps)


def check_trainable(config: RunConfig, graph: LayerGraph, size: DatasetSize) -> None:
    """ConfigError unless ``graph`` trains on the cycle engine on the data set of ``size``:
    a supported chain, feature data of its input width, a batch for every wafer each step."""
    check_functional(graph)
    wafers, batch = count_wafers(config), config.batch
    if batch * wafers > size.train_samples:
        raise ConfigError(
            f"batch={batch} x swarmx.wafers={wafers} is {batch * wafers} samples a step; "
            f"allowed: at most the {size.train_samples} training samples of data {size.name!r}"
        )
    if size.tokens:
        raise ConfigError(f"data.name={size.name!r} holds token ids, not features; allowed "
                          "for tier cycle: digits or mnist")  # fmt: skip
    if graph.input_features != size.features:
        raise ConfigError(
            f"model {graph.name!r} has input_features={graph.input_features} but data "
            f"{size.name!r} has {size.features} features a sample; allowed: {size.features}"
        )
    logits = graph.layers[-1].in_features
    if logits < size.classes:
        raise ConfigError(f"model {graph.name!r} ends in {logits} logits but data "
                          f"{size.name!r} has {size.classes} classes; allowed: at least "
                          f"{size.classes}")  # fmt: skip


def validate_plan(config: RunConfig, plan: Plan) -> None:
    """The run's checks of one wafer's plan, before anything is simulated: a functional run's
    batch kept whole, the MemoryX buffer and tiles, and the stream simulation's size."""
    micro = plan.activations.micro_batches
    if RUN_TIERS[config.tier].functional and micro > 1:
        raise ConfigError(
            f"tier=cycle runs each step's batch whole, but the plan splits batch="
            f"{config.batch} into {micro} micro-batches to fit the activations kept for "
            "backward; use tier fast or analytic, or a smaller batch"
        )
    count = count_wafers(config)
    edge, kept = stream_edge(config, plan, count)  # its Edge checks buffer and tile
    check_stream_size(config, plan, edge, kept, count)


def check_stream_size(config: RunConfig, plan: Plan, edge: Edge, kept: frozenset[str],
                      count: int) -> None:  # fmt: skip
    """ConfigError where the stream simulation of ``count`` wafers (and wafer 0 alone, the
    baseline) would hold more than :data:`MAX_STREAM_VALUES` values: its event times per
    step, segment and wafer, and the tiles of one wafer's steps."""
    segs = segments(plan, kept=kept)
    tiles = sum(max(1, math.ceil(max(s.in_bytes, s.out_bytes) / edge.tile_bytes)) for s in segs)
    streams = count + 1 if count > 1 else 1
    per_step = streams * len(segs) * K.COLUMNS + 2 * tiles
    steps, most = config.steps, MAX_STREAM_VALUES // per_step
    if steps > most:
        allowed = f"steps in [1, {most:,}] here" if most else "fewer swarmx.wafers"
        raise ConfigError(
            f"steps={steps} x swarmx.wafers={count}: the stream simulation would hold "
            f"{steps * per_step:,} values ({per_step:,} a step), more than "
            f"{MAX_STREAM_VALUES:,}; allowed: {allowed}"
        )


def compile_options(config: RunConfig) -> CompileOptions:
    return CompileOptions(config.batch, config.seq, config.dtype, _strategies(config),
                          config.activations, config.micro_batches,
                          _weight_density(config))  # fmt: skip


def _weight_density(config: RunConfig) -> float:
    """The pruned weights' density the plan is timed with: ``sparsity.density``, else dense
    (a ``threshold`` gives the density only once the weights are drawn)."""
    rule = config.sparsity
    return rule.value if rule is not None and rule.kind == "density" else 1.0


class FastCycles:
    """A wafer's GEMM cycles by the fast tier (:mod:`kernels.fast_tier`): each distinct
    placement of the plan is estimated once, with the wafer's share of holes."""

    def __init__(self, wafer: Wafer, spec, progress: Progress | None = None) -> None:
        logical, plan = wafer.logical, wafer.plan
        holes = 0.0 if logical is None else logical.unrepaired_pes / spec.logical_pes
        passes = [(layer.name, name, placed) for layer, name, placed in plan.placements()
                  if isinstance(placed, GemmPlacement)]  # fmt: skip
        memo: dict[tuple, int] = {}
        self.cycles: dict[tuple[str, str], int] = {}
        for done, (layer, name, placed) in enumerate(passes, 1):
            key = _placement_key(placed)
            if key not in memo:
                memo[key] = _fast(placed, spec, plan.options["dtype"], holes)
            self.cycles[(layer, name)] = placed.waves * memo[key]
            if progress is not None:
                progress("fast tier: GEMM pass", done, len(passes), f"{len(memo)} distinct")


def _placement_key(placed: GemmPlacement) -> tuple:
    g = placed.gemm
    options = tuple(sorted(placed.options.items()))
    return (placed.algorithm, g.m, g.k, g.n, g.density, *placed.rows_cols, options)


def _fast(placed: GemmPlacement, spec, dtype: DType, holes: float) -> int:
    rows, cols = placed.rows_cols
    options: dict[str, Any] = {**placed.options, **placed.gemm.options()}
    return fast_cycles(placed.algorithm, placed.gemm.shape(), rows, cols, spec, dtype, holes,
                       **options).cycles  # fmt: skip


def _strategies(config: RunConfig) -> tuple[str, ...] | None:
    """The GEMM strategies to search. Pruning by ``density``: the compiler gives the pruned
    layers' weight passes an algorithm that skips zero weights (weight streaming); by
    ``threshold``, whose density the plan cannot know, every GEMM gets one, and only the
    cycle tier (which draws the weights) can time it."""
    names, rule = config.strategies, config.sparsity
    if rule is None or rule.kind == "density":
        return names
    if not RUN_TIERS[config.tier].functional:
        raise ConfigError("sparsity.threshold is measured on the cycle engine (tier: cycle); "
                          "the fast and analytic tiers take sparsity.density")  # fmt: skip
    sparse = sparse_strategies()
    if names is not None and not set(names) <= set(sparse):
        raise ConfigError(f"sparsity needs strategies among {', '.join(sparse)}")
    return sparse if names is None else names


def logical_grid(config: RunConfig, index: int) -> LogicalGrid | None:
    """Wafer ``index``'s repaired grid: its defects are drawn from ``seed + index * stride``."""
    defects = config.wafer.defects
    if defects is None:
        return None
    seed = defects.seed + index * config.swarmx.defect_seed_stride
    return repair(generate(config.spec, defects.model, seed, **defects.params), defects.repair)


def _train(config: RunConfig, wafers: list[Wafer], data: Dataset, out_dir: Path, progress):
    """Train on the cycle engine; :func:`validate_config` and :func:`validate_plan` checked
    the batch against the data and the plans."""
    graph = load_model(config.model_path).graph
    optimizer = optimizer_of(config)
    shapes, seed = weight_shapes(graph), config.seed
    store = WeightStore.materialised(shapes, seed, init_std=config.init_std)
    masks = prune_masks(store, None if config.sparsity is None else config.sparsity.to_dict())
    apply_masks(store, masks)
    matmuls = [WaferGemm(w.plan, config.spec, w.logical, frozenset(masks)) for w in wafers]
    fanout = config.spec.io.swarmx_fanout
    trainer = Trainer(graph, data, optimizer, matmuls, config.batch, seed, fanout, masks)
    saved = checkpoints_of(config, out_dir)

    def step_progress(done: int, total: int, loss: float) -> None:
        if progress is not None:
            progress("train step", done, total, f"loss {loss:.4f}")

    _, history = train(trainer, store, config.steps, config.eval_every, saved, step_progress)
    return history, matmuls


def checkpoints_of(config: RunConfig, out_dir: Path) -> Checkpoints:
    return Checkpoints(out_dir, config.checkpoint_every, config.keep_checkpoints, config.digest,
                       config.training)  # fmt: skip


def _fast_tier(config: RunConfig, wafers: list[Wafer], data, out_dir, progress):
    return None, [FastCycles(w, config.spec, progress) for w in wafers]


def _analytic_tier(config: RunConfig, wafers: list[Wafer], data, out_dir, progress):
    return None, [None] * len(wafers)  # the plans' own cycles


@dataclass(frozen=True)
class RunTier:
    """How a run finds its GEMM cycles: ``measure(config, wafers, data, out_dir, progress)``
    gives the training history (None unless ``functional``: the model trains on the cycle
    engine, which measures every GEMM) and, per wafer, what holds its measured cycles
    (None: the plan's analytic ones)."""

    functional: bool
    measure: Callable[..., tuple[History | None, list]]


RUN_TIERS: dict[str, RunTier] = {  # kernels.tiers.TIERS' names, for a whole run
    "cycle": RunTier(True, _train),
    "fast": RunTier(False, _fast_tier),
    "analytic": RunTier(False, _analytic_tier),
}


def optimizer_of(config: RunConfig) -> Optimizer:
    """The optimizer the config names, with its parameters (built when the config loaded)."""
    return config.optimizer


def _stream(config: RunConfig, wafers: list[Wafer], index: int, history: History | None,
            matmul, count: int):  # fmt: skip
    """The MemoryX stream of every step of wafer ``index``, with its measured cycles where
    known (a resumed run reads them from the history), as one of ``count`` wafers behind
    SwarmX."""
    wafer = wafers[index]
    recorded = history.cycles[index] if history is not None and history.cycles else {}
    measured = getattr(matmul, "cycles", None) or _by_pass(recorded)
    streamed = getattr(matmul, "stream_bytes", None) or _by_pass(
        {} if history is None else history.stream_bytes
    )
    edge, kept = stream_edge(config, wafer.plan, count)
    return simulate_stream(segments(wafer.plan, measured, streamed, kept), edge, config.steps)


def stream_edge(config: RunConfig, plan: Plan, count: int) -> tuple[Edge, frozenset[str]]:
    """The edge a wafer of ``count`` streams through (its prefetch buffer less the weights
    kept on the wafer for the backward), and the layers that keep them
    (:func:`memoryx.streaming.kept_on_wafer`; none where the buffer left would not hold a
    tile: a buffer and tile the user sets are not made to clash)."""
    spec = config.spec
    bandwidth, latency = effective_edge(spec, count)
    buffer = config.memoryx.prefetch_buffer_bytes
    buffer = prefetch_buffer_bytes(plan, spec) if buffer is None else buffer
    tile = config.memoryx.tile_bytes
    tile = min(DEFAULT_TILE_BYTES, max(MIN_TILE_BYTES, buffer // 2)) if tile is None else tile
    kept = kept_on_wafer(plan, buffer)
    if buffer - weight_bytes(plan, kept) < tile:  # a tile must still fit beside them
        kept = frozenset()
    buffer -= weight_bytes(plan, kept)
    return Edge(bandwidth, latency, buffer, tile), kept


def _by_pass(record: dict[str, int]) -> dict[tuple[str, str], int]:
    """A history record keyed ``layer/pass`` keyed by (layer, pass) again."""
    pairs = ((key.rsplit("/", 1), value) for key, value in record.items())
    return {(layer, name): value for (layer, name), value in pairs}
