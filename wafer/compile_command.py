"""``wafersim compile``: a model file -> a per-layer, per-pass placement plan on a wafer.

``--validate-only`` reads the model and the spec and reports the layer graph, placing
nothing. ``--compile-only`` (what ``compile`` does by default: no run follows yet) places every
layer. With ``--out DIR`` the plan is saved as ``DIR/MODEL.plan.json`` and reused while its
inputs are unchanged (``cache: hit``).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from wafer import __version__
from wafer.config_io import parse_overrides, resolve_spec

DEFAULT_COMPILE_PRESET = "wse2"


def add_compile_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", help="model file (.yaml/.toml), e.g. examples/models/*.yaml")
    parser.add_argument("--preset", default=DEFAULT_COMPILE_PRESET, help="wafer preset")
    parser.add_argument("--spec", help="wafer spec file (.toml/.yaml)")
    parser.add_argument("--batch", type=int, default=1, help="sequences per step")
    parser.add_argument("--seq", type=int, help="tokens per sequence (default: model context)")
    parser.add_argument("--dtype", default="fp16", choices=["fp16", "fp32"])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--validate-only", action="store_true", help="check inputs, place nothing")
    mode.add_argument("--compile-only", action="store_true", help="place every layer (default)")
    parser.add_argument("--out", help="folder for the plan JSON (and its cache)")


def run_compile_command(args: argparse.Namespace) -> dict[str, Any]:
    from compiler.model_file import load_model
    from compiler.plan import CompileOptions, compile_cached

    start = time.perf_counter()
    spec = resolve_spec(args.preset, args.spec, parse_overrides(args.overrides))
    options = CompileOptions(batch=args.batch, seq=args.seq, dtype=args.dtype)
    if args.validate_only:
        model = load_model(args.model)
        resolved = options.resolved(model.graph.context)
        return {
            "mode": "validate-only",
            "model": model.graph.name,
            "params": model.graph.params,
            "layers": len(model.graph.layers),
            "options": {"batch": resolved.batch, "seq": resolved.seq, "dtype": resolved.dtype},
            "spec": spec.name,
            "wafersim_version": __version__,
            "compile_time_s": time.perf_counter() - start,
        }
    plan, hit = compile_cached(args.model, spec, options, args.out)
    path = None
    if args.out:
        from compiler.plan import plan_path

        path = str(plan_path(args.out, plan["model"]))
    return {**plan, "mode": "compile-only", "cache": "hit" if hit else "miss", "plan_path": path,
            "compile_time_s": time.perf_counter() - start}  # fmt: skip


def compile_text(r: dict[str, Any]) -> str:
    if r["mode"] == "validate-only":
        return (
            f"{r['model']}: {r['layers']} layers, {r['params']:,} parameters; valid on "
            f"{r['spec']} ({r['compile_time_s']:.2f} s)"
        )
    lines = [f"{'layer':28} {'pass':16} {'algorithm':14} {'grid':>10} {'SRAM B':>7} "
             f"{'cycles':>11}  bottleneck"]  # fmt: skip
    for layer in r["layers"]:
        for name, p in layer["passes"].items():
            grid = "x".join(map(str, p["grid"]))
            lines.append(
                f"{layer['name'][:28]:28} {name:16} {p['algorithm'][:14]:14} {grid:>10} "
                f"{p['sram_bytes_per_pe']:>7} {p['cycles']:>11}  {p['bottleneck']}"
            )
    t = r["totals"]
    lines.append(
        f"{r['model']} on {r['spec']['name']} ({r['working_grid'][0]}x{r['working_grid'][1]} "
        f"working PEs): {t['cycles']:,} cycles ({t['seconds'] * 1e3:.2f} ms) per step, "
        f"SRAM peak {t['sram_peak_bytes_per_pe']} B/PE; cache {r['cache']}; "
        f"compiled in {r['compile_time_s']:.2f} s"
    )
    return "\n".join(lines)
