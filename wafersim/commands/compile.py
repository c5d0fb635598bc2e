"""``wafersim compile``: a model file -> a per-layer, per-pass placement plan on a wafer.

``--validate-only`` reads the model and the spec and reports the layer graph, placing
nothing. ``--compile-only`` (what ``compile`` does by default: no run follows yet) places every
layer. With ``--out DIR`` the plan is saved as ``DIR/MODEL.plan.json`` and reused while its
inputs are unchanged (``cache: hit``).

Defects: ``--defects MAP.h5`` (a map saved by ``wafersim defects --out``, drawn for the same
spec) or a map drawn from ``--seed`` by ``--defect-model`` (default poisson) at
``--defect-density-per-cm2`` or ``--pe-defect-prob``, repaired by ``--repair`` (default
column_shift): the holes left in the logical grid get no work. The output's ``defects`` adds
the map's summary (as ``wafersim defects`` reports it) to the plan's.
"""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING, Any

from wafersim.bundled import path_of
from wafersim.commands.jobs import Command
from wafersim.commands.options import (
    add_defect_options,
    add_repair_option,
    add_spec_options,
    defects_summary,
    repaired_grid,
    spec_from,
)
from wafersim.compiler.activations import CHOICES as ACTIVATION_CHOICES
from wafersim.wafer import __version__

if TYPE_CHECKING:
    from wafersim.wafer.repair import LogicalGrid


def add_compile_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", type=path_of("model"),
                        help="model file (.yaml/.toml) or a bundled model's name, e.g. "
                             "gpt3-175b (`wafersim examples` lists them)")  # fmt: skip
    add_spec_options(parser)
    parser.add_argument("--batch", type=int, default=1, help="sequences per step")
    parser.add_argument("--seq", type=int, help="tokens per sequence (default: model context)")
    parser.add_argument("--dtype", default="fp16", choices=["fp16", "bf16", "fp32"])
    parser.add_argument(
        "--activations",
        default="auto",
        choices=list(ACTIVATION_CHOICES),
        help="activations kept for backward: keep them all, recompute repeated blocks, ignore "
        "them (streaming studies), or auto: the fewest step cycles that fit (default)",
    )
    parser.add_argument(
        "--micro-batches", type=int, help="split the batch in parts (default: the fewest that fit)"
    )
    parser.add_argument(
        "--strategies", nargs="+", metavar="NAME",
        help="GEMM placement strategies to search (default: all), e.g. weight_stream_chain "
        "weight_stream_tree for the weight-streaming dataflow alone",
    )  # fmt: skip
    parser.add_argument(
        "--weight-density", type=float, default=1.0,
        help="share of each weight matrix kept by pruning, in (0, 1] (default 1: dense): the "
        "weights stream compressed and their zeros are skipped",
    )  # fmt: skip
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--validate-only", action="store_true", help="check inputs, place nothing")
    mode.add_argument("--compile-only", action="store_true", help="place every layer (default)")
    parser.add_argument("--out", help="folder for the plan JSON (and its cache)")
    add_defect_options(parser, "the holes left after repair get no work")
    add_repair_option(parser)


def run_compile_command(args: argparse.Namespace) -> dict[str, Any]:
    from wafersim.compiler.model_file import load_model
    from wafersim.compiler.plan import CompileOptions, check_activations_fit, compile_cached

    start = time.perf_counter()
    spec = spec_from(args)
    strategies = None if args.strategies is None else tuple(args.strategies)
    options = CompileOptions(args.batch, args.seq, args.dtype, strategies, args.activations,
                             args.micro_batches, args.weight_density)  # fmt: skip
    logical = repaired_grid(args, spec)
    if args.validate_only:
        model = load_model(args.model)
        resolved = options.resolved(model.graph.context)
        check_activations_fit(model, spec, resolved, logical)
        return {
            "mode": "validate-only",
            "model": model.graph.name,
            "params": model.graph.params,
            "layers": len(model.graph.layers),
            "options": {"batch": resolved.batch, "seq": resolved.seq, "dtype": resolved.dtype},
            "spec": spec.name,
            "defects": _map_summary(args, logical),
            "seed": args.seed,
            "wafersim_version": __version__,
            "compile_time_s": time.perf_counter() - start,
        }
    plan, hit = compile_cached(args.model, spec, options, args.out, logical)
    path = None
    if args.out:
        from wafersim.compiler.plan import plan_path

        path = str(plan_path(args.out, plan.model))
    defects = {**plan.defects, **_map_summary(args, logical)}
    return {**plan.to_json(), "defects": defects, "seed": args.seed, "mode": "compile-only",
            "cache": "hit" if hit else "miss", "plan_path": path,
            "compile_time_s": time.perf_counter() - start}  # fmt: skip


def _map_summary(args: argparse.Namespace, logical: LogicalGrid | None) -> dict[str, Any]:
    """The defect map's summary as ``wafersim defects`` reports it (spec left out: the plan
    has it), and where it came from."""
    if logical is None:
        return {"source": None}

    summary = defects_summary(logical.defects, logical, 0.0)
    for key in ("spec", "wafersim_version", "wall_s"):
        del summary[key]
    return {**summary, "source": args.defects or "drawn from --seed"}


def compile_text(r: dict[str, Any]) -> str:
    if r["mode"] == "validate-only":
        return (
            f"{r['model']}: {r['layers']} layers, {r['params']:,} parameters; valid on "
            f"{r['spec']} ({r['compile_time_s']:.2f} s)"
        ) + _defects_line(r["defects"])
    lines = [f"{'layer':28} {'pass':16} {'algorithm':14} {'W x H':>10} {'SRAM B':>7} "
             f"{'cycles':>11}  bottleneck"]  # fmt: skip
    for layer in r["layers"]:
        for name, p in layer["passes"].items():
            grid = f"{p['width_pes']}x{p['height_pes']}"
            lines.append(
                f"{layer['name'][:28]:28} {name:16} {p['algorithm'][:14]:14} {grid:>10} "
                f"{p['sram_bytes_per_pe']:>7} {p['cycles']:>11}  {p['bottleneck']}"
            )
    t, kept = r["totals"], r["activations"]
    lines.append(
        f"activations kept for backward: {kept['policy']}, {kept['micro_batches']} "
        f"micro-batch(es) of {kept['sequences_per_micro_batch']} sequence(s), "
        f"{kept['bytes_per_pe']} B/PE reserved"
    )
    lines.append(
        f"{r['model']} on {r['spec']['name']} ({r['working']['pes']:,} working PEs): "
        f"{t['cycles']:,} cycles ({t['seconds'] * 1e3:.2f} ms) per step, "
        f"SRAM peak {t['sram_peak_bytes_per_pe']} B/PE; cache {r['cache']}; "
        f"compiled in {r['compile_time_s']:.2f} s"
    )
    return "\n".join(lines) + _defects_line(r["defects"])


def _defects_line(d: dict[str, Any]) -> str:
    if d.get("source") is None:
        return ""
    cut = f", {d['cut_off_pes']} more cut off by dead links" if d.get("cut_off_pes") else ""
    return (
        f"\ndefects ({d['source']}): {d['model']}, seed {d['seed']}, {d['dead_pes']} dead PEs, "
        f"repair {d['repair']}: {d['unrepaired_pes']} holes left{cut}, given no work"
    )


COMMAND = Command(add_compile_arguments, run_compile_command, compile_text,
                  outputs={"out": "folder"})  # fmt: skip
