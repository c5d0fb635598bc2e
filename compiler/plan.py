"""Model file + wafer spec (+ holes) -> the plan (a typed :class:`compiler.plan_records.Plan`,
JSON only in the plan file and on the command line): per layer and pass, the chosen algorithm,
tiling, SRAM use per PE, estimated cycles and bottleneck, and where its PEs lie on the
logical grid (``pe_assignment``, :mod:`compiler.assignment`); per GEMM pass also the router
colors its kernel uses (``colors``, :mod:`compiler.colors`), its families of routes
(``routes``, :mod:`compiler.routes`) and the order in which its weight tiles cross the wafer
edge (``memoryx_tile_order``, :mod:`compiler.tile_order`; None where nothing does). The
activations kept for backward are reserved in every PE's SRAM first (``activations``,
:mod:`compiler.activations`: keep or recompute, in micro-batches). Saved as JSON and reused
while a content hash of every input (model file bytes, resolved spec, defect summary,
compiler version, options) is unchanged.

Weight streaming maps each layer, one at a time, onto the whole working grid: every working
PE of the repaired logical grid that can reach the wafer edge (:mod:`compiler.working`).
Kernel rows skip the holes of each wafer column (or, turned a quarter, of each wafer row), and
lines with too few working PEs for a kernel are left out; the estimates add the detours and
the physical hops of links that repair stretched.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from wafersim.compiler import activations
from wafersim.compiler.assignment import pe_assignment
from wafersim.compiler.graph import Layer, LayerGraph
from wafersim.compiler.model_file import ModelFile, load_model
from wafersim.compiler.passes import Gemm, Work, layer_passes
from wafersim.compiler.placement import Target, place_gemm, place_vector
from wafersim.compiler.plan_records import (
    GemmPlacement,
    KeptActivations,
    LayerPlan,
    Placement,
    Plan,
    Totals,
)
from wafersim.compiler.routes import route_families
from wafersim.compiler.strategies import strategies
from wafersim.compiler.tile_order import IN_PASSES, tile_order
from wafersim.compiler.working import WorkingGrid
from wafersim.fabric.program import value_bytes
from wafersim.kernels.sparse_weights import check_density
from wafersim.kernels.wiring import detour_colors
from wafersim.wafer import __version__
from wafersim.wafer.atomic import write_json
from wafersim.wafer.dtypes import DType
from wafersim.wafer.errors import ConfigError, excerpt
from wafersim.wafer.spec import WaferSpec

COMPILER_VERSION = "15"  # bump whenever a plan for the same inputs would change
PASSES = ("forward", "backward_data", "backward_weight")
RECOMPUTE = "recompute"  # a block's forward run again before its backward (a stream segment)


@dataclass(frozen=True)
class CompileOptions:
    """What to compile for: ``batch`` sequences of ``seq`` tokens (default: the model's
    context) in ``dtype``, searching ``strategies`` (default: all); how activations kept
    for backward fit (:mod:`compiler.activations`: ``auto`` or a policy, and
    ``micro_batches``, None: the fewest that fit)."""

    batch: int = 1
    seq: int | None = None
    dtype: DType = "fp16"
    strategies: tuple[str, ...] | None = None
    activations: str = "auto"
    micro_batches: int | None = None
    weight_density: float = 1.0  # pruned weights: the share kept (kernels.sparse_weights)

    def resolved(self, context: int) -> CompileOptions:
        """Checked options with ``seq`` filled in."""
        value_bytes(self.dtype)  # an unknown dtype names the valid ones
        seq = context if self.seq is None else self.seq
        for key, value, high in (("batch", self.batch, 10**9), ("seq", seq, context)):
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
                raise ConfigError(f"{key}={excerpt(value)} must be an integer in [1, {high}]")
        strategies(None if self.strategies is None else list(self.strategies))
        activations.check_options(self.activations, self.micro_batches)
        check_density(self.weight_density, "weight_density (--weight-density)")
        return replace(self, seq=seq)


def _seq(options: CompileOptions) -> int:
    """``seq`` of options :meth:`CompileOptions.resolved` filled in."""
    assert options.seq is not None, "options not resolved"
    return options.seq


def working_grid(spec: WaferSpec, defects=None) -> WorkingGrid:
    """The working grid of the spec's logical grid with ``defects``: None (no defect), a hole
    mask (H, W), a repaired :class:`wafer.repair.LogicalGrid` (its holes, dead links and
    stretched links) or a :class:`WorkingGrid`."""
    shape = (spec.logical_height_pes, spec.logical_width_pes)
    if defects is None:
        return WorkingGrid.clean(*shape)
    if isinstance(defects, WorkingGrid):
        working = defects
    elif hasattr(defects, "link_hops"):
        working = WorkingGrid.from_logical(defects)
    else:
        working = WorkingGrid.of(defects)
    if working.shape != shape:
        raise ConfigError(f"hole mask shape {working.shape} must be the logical grid {shape}")
    return working


def working_summary(working: WorkingGrid) -> dict[str, Any]:
    """The plan's ``working``: PEs that can take work, and per orientation the depth of the
    shallowest and deepest line (the shallowest line bounds a kernel on every line)."""
    return {
        "logical_grid": [working.shape[1], working.shape[0]],  # width, height
        "pes": working.working_pes,
        **{
            name: {
                "lines": lines.count,
                "shallowest": lines.shallowest,
                "deepest": lines.deepest,
            }  # fmt: skip
            for name, lines in (
                ("west edge", working.lines(False)),
                ("north edge", working.lines(True)),
            )  # fmt: skip
        },
    }


def cache_key(model: ModelFile, spec: WaferSpec, defects: dict, options: CompileOptions) -> str:
    """SHA-256 over everything a plan depends on."""
    content = {
        "model_sha256": model.sha256,
        "spec": spec.to_dict(),
        "defects": defects,
        "compiler_version": COMPILER_VERSION,
        "options": asdict(options),
    }
    return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()


def compile_plan(model: ModelFile, spec: WaferSpec, options: CompileOptions, defects=None) -> Plan:
    """Place every layer and pass on the working grid of ``defects`` (see
    :func:`working_grid`); a layer that fits no candidate raises ConfigError."""
    options = options.resolved(model.graph.context)
    working = working_grid(spec, defects)
    target = Target(working, spec, options.dtype)
    summary = working.summary
    layers, memory = _fit_activations(model.graph, options, target)
    return Plan(
        model=model.graph.name,
        params=model.graph.params,
        options=asdict(options),
        working=working_summary(working),
        defects=summary,
        detour_colors=list(detour_colors(spec.router.colors)),
        spec=spec.to_dict(),
        cache_key=cache_key(model, spec, summary, options),
        compiler_version=COMPILER_VERSION,
        wafersim_version=__version__,
        layers=layers,
        totals=totals(layers, spec, memory),
        activations=memory,
    )


def _fit_activations(graph: LayerGraph, options: CompileOptions,
                     target: Target) -> tuple[list[LayerPlan], KeptActivations]:  # fmt: skip
    """The layers placed around the activations kept for backward: per policy the fewest
    micro-batches whose reserve leaves every layer room; of those, the fewest step cycles
    (the first policy on a tie)."""
    kept = activations.kept_per_sequence(graph, _seq(options), value_bytes(options.dtype))
    pes, sram = target.pes, target.spec.pe.sram_bytes
    chosen = strategies(None if options.strategies is None else list(options.strategies))
    found, considered = {}, []
    tries = activations.candidates(kept, options.batch, options.activations,
                                   options.micro_batches)  # fmt: skip
    for policy, micro in tries:
        sequences = options.batch // micro
        reserve = activations.reserved_per_pe(kept, policy, sequences, pes)
        if policy in found or reserve >= sram:
            continue
        budget = replace(target, reserved_bytes=reserve)
        try:
            layers = _place_layers(graph, options, sequences, budget, chosen)
        except ConfigError:
            continue  # more micro-batches, or the next policy, may fit
        memory = _memory(kept, policy, micro, sequences, reserve, options)
        memory = replace(memory, step_cycles=totals(layers, target.spec, memory).cycles)
        found[policy] = layers, memory
        considered.append({"policy": policy, "micro_batches": micro,
                           "step_cycles": memory.step_cycles})  # fmt: skip
    if not found:
        raise _nothing_fits(graph, options, kept, target, chosen)
    layers, memory = min(found.values(), key=lambda item: item[1].step_cycles)
    return layers, replace(memory, considered=considered)


def _place_layers(graph: LayerGraph, options: CompileOptions, sequences: int, target: Target,
                  chosen: dict) -> list[LayerPlan]:  # fmt: skip
    """Every layer's passes for ``sequences`` sequences; ConfigError if one does not fit."""
    place = _Placer(target, chosen)
    return [
        _layer_entry(layer, {name: place(layer.name, name, work) for name, work in
                             layer_passes(layer, sequences, _seq(options), options.dtype,
                                          options.weight_density).items()})
        for layer in graph.layers
    ]  # fmt: skip


def _nothing_fits(graph, options: CompileOptions, kept, target: Target,
                  chosen: dict) -> ConfigError:  # fmt: skip
    """Why no candidate fits: a layer's own working set, even with nothing kept aside (the
    layer's error), or else the activations kept for backward."""
    forced = options.micro_batches
    sequences = options.batch // forced if forced else 1
    try:
        _place_layers(graph, options, sequences, target, chosen)
    except ConfigError as error:
        return error
    return activations.too_big(kept, sequences, target.pes,
                               target.spec.pe.sram_bytes, options.activations, forced)  # fmt: skip


def check_activations_fit(model: ModelFile, spec: WaferSpec, options: CompileOptions,
                          defects=None) -> None:  # fmt: skip
    """ConfigError unless the activations one micro-batch keeps for backward (one sequence,
    or what a forced micro-batch count leaves), under the best policy allowed, fit the
    working grid's SRAM (``--validate-only``: places nothing)."""
    options = options.resolved(model.graph.context)
    pes = working_grid(spec, defects).working_pes
    kept = activations.kept_per_sequence(model.graph, _seq(options), value_bytes(options.dtype))
    tries = activations.candidates(kept, options.batch, options.activations,
                                   options.micro_batches)  # fmt: skip
    forced = options.micro_batches
    sequences = options.batch // forced if forced else 1
    need = min(activations.reserved_per_pe(kept, policy, sequences, pes) for policy, _ in tries)
    if need >= spec.pe.sram_bytes:
        raise activations.too_big(kept, sequences, pes, spec.pe.sram_bytes, options.activations,
                                  forced)  # fmt: skip


def _memory(kept, policy: str, micro: int, sequences: int, reserve: int,
            options) -> KeptActivations:  # fmt: skip
    layer, largest = kept.largest()
    return KeptActivations(
        policy=policy,
        micro_batches=micro,
        sequences_per_micro_batch=sequences,
        bytes=sequences * kept.peak(policy),
        bytes_per_pe=reserve,
        keep_all_bytes=options.batch * kept.peak("keep"),
        checkpoint_bytes=sequences * kept.checkpoint_bytes() * (policy == "recompute"),
        largest_layer={"name": layer, "bytes": sequences * largest},
    )


@dataclass
class _Placer:
    """Places each distinct piece of work once (GEMMs once per edge direction: the tile
    order differs) and adds where its PEs are, its colors and its MemoryX tile order."""

    target: Target
    chosen: dict
    memo: dict = field(default_factory=dict)

    def __call__(self, layer: str, pass_name: str, work: Work) -> Placement:
        gemm = isinstance(work, Gemm)
        key = (work, pass_name in IN_PASSES) if gemm and work.edge_bytes else work
        if key not in self.memo:
            if isinstance(work, Gemm):
                self.memo[key] = self._gemm(layer, pass_name, work)
            else:
                placed = place_vector(layer, work, self.target)
                self.memo[key] = replace(placed, pe_assignment=pe_assignment(placed, self.target))
        return self.memo[key]

    def _gemm(self, layer: str, pass_name: str, work: Gemm) -> GemmPlacement:
        """A GEMM placed, with its PEs, its MemoryX tile order and its route families."""
        placed = place_gemm(layer, work, self.target, self.chosen)
        placed = replace(placed, pe_assignment=pe_assignment(placed, self.target))
        return replace(placed, memoryx_tile_order=self._tiles(placed, pass_name, work),
                       routes=route_families(placed))  # fmt: skip

    def _tiles(self, placed: GemmPlacement, pass_name: str, work: Gemm) -> dict[str, Any] | None:
        if not work.edge_bytes:
            return None  # nothing of this GEMM crosses the wafer edge
        return tile_order(placed, pass_name, self.target.spec, self.target.dtype)


def _layer_entry(layer: Layer, passes: dict[str, Placement]) -> LayerPlan:
    return LayerPlan(layer.name, layer.op, list(layer.inputs), layer.block, layer.features,
                     layer.params, passes)  # fmt: skip


def totals(layers: list[LayerPlan], spec: WaferSpec, memory: KeptActivations) -> Totals:
    """Cycles per pass and per bottleneck, the step's cycles and seconds, SRAM peak: every
    micro-batch runs every pass, and under ``recompute`` a block's forward runs again."""
    micro, again = memory.micro_batches, memory.policy == "recompute"
    per_pass = dict.fromkeys((*PASSES, RECOMPUTE), 0)
    per_bottleneck: dict[str, int] = {}
    for layer in layers:
        runs = list(layer.passes.items())
        if again and layer.block and "forward" in layer.passes:
            runs.append((RECOMPUTE, layer.passes["forward"]))
        for name, placed in runs:
            per_pass[name] += micro * placed.cycles
            kind = placed.bottleneck
            per_bottleneck[kind] = per_bottleneck.get(kind, 0) + micro * placed.cycles
    cycles = sum(per_pass.values())
    peak = max((p.sram_bytes_per_pe for lay in layers for p in lay.passes.values()), default=0)
    return Totals(
        cycles=cycles,
        seconds=cycles / spec.clock_hz,
        cycles_per_pass=per_pass,
        cycles_per_bottleneck=per_bottleneck,
        sram_peak_bytes_per_pe=peak + memory.bytes_per_pe,
        layers=len(layers),
    )


def plan_path(out_dir: str | Path, model_name: str) -> Path:
    return Path(out_dir) / f"{model_name}.plan.json"


def compile_cached(
    model_path: str | Path,
    spec: WaferSpec,
    options: CompileOptions,
    out_dir: str | Path | None = None,
    defects=None,
) -> tuple[Plan, bool]:
    """The plan, and whether it came from ``out_dir``'s saved plan (same cache key);
    ``defects`` as :func:`compile_plan` takes them."""
    model = load_model(model_path)
    working = working_grid(spec, defects)
    if out_dir is None:
        return compile_plan(model, spec, options, working), False
    path = plan_path(out_dir, model.graph.name)
    resolved = options.resolved(model.graph.context)
    key = cache_key(model, spec, working.summary, resolved)
    if path.is_file():
        try:
            saved = json.loads(path.read_text())
        except json.JSONDecodeError:
            saved = {}
        if saved.get("cache_key") == key:
            return Plan.from_json(saved), True
    plan = compile_plan(model, spec, options, working)
    write_json(path, plan.to_json())
    return plan, False
