"""``wafersim kernel``: one kernel on a patch of PEs or a whole wafer, at a fidelity tier.

``--grid WxH`` is W PEs wide (columns) by H high (rows); ``--grid wafer`` is the spec's
whole logical grid. ``--tier cycle`` (default) runs the kernel on the cycle engine and checks
its output against numpy; ``--tier fast`` (GEMMs) fits the engine's per-unit costs on two
reduced grids and scales them to the full one (:mod:`kernels.fast_tier`); ``--tier analytic``
is the closed-form estimate the compiler uses. With defects, the kernel runs on a patch of
``H + --spare-rows`` rows and as many spare columns, drawn (or loaded) as ``wafersim
defects`` draws a map, not repaired: each column skips its own dead PEs and routes detour
around them, and columns left with fewer than H working PEs are left out (the first W
that have enough are used, as the compiler does). ``--repair STRATEGY`` repairs the patch
first (:mod:`wafer.repair`, the spare rows its spares): the kernel then runs on the repaired
patch, its links stretched past skipped PEs, columns with holes left out.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np

from wafersim.commands.energy_text import energy_line
from wafersim.commands.jobs import Command
from wafersim.commands.options import (
    add_defect_options,
    add_grid_option,
    add_spec_options,
    add_timeline_options,
    defect_map,
    parse_grid,
    spec_from,
)
from wafersim.wafer import __version__
from wafersim.wafer.dtypes import DTYPE_NAMES
from wafersim.wafer.errors import ConfigError, DeadlockError
from wafersim.wafer.spec import WaferSpec


def add_kernel_arguments(parser: argparse.ArgumentParser) -> None:
    from wafersim.kernels.registry import DEFAULT_DIMENSION, KERNELS
    from wafersim.kernels.tiers import TIERS
    from wafersim.wafer.repair import REPAIR_STRATEGIES

    parser.add_argument("kernel", choices=list(KERNELS), help="what to run")
    parser.add_argument(
        "--algo", help="algorithm (default: the kernel's first, e.g. weight_stream for gemm)"
    )
    for dim in ("m", "k", "n"):
        parser.add_argument(
            f"--{dim}",
            type=int,
            help=f"matrix dimension {dim} (default {DEFAULT_DIMENSION}); refused by a kernel "
            "that does not take it (gemm: m, k, n; gemv: m, n; the rest: n)",
        )
    add_grid_option(parser, "8x8", "; 'wafer': the spec's whole logical grid")
    parser.add_argument("--dtype", default="fp32", choices=list(DTYPE_NAMES))
    parser.add_argument(
        "--tier",
        default="cycle",
        choices=list(TIERS),
        help="fidelity (default cycle; kernels.tiers)",
    )
    add_spec_options(parser)
    add_defect_options(parser, "on the kernel's patch; a saved map: its corner")
    parser.add_argument("--spare-rows", type=int, default=1,
                        help="patch rows (and columns) kept for holes")  # fmt: skip
    parser.add_argument(
        "--repair", choices=list(REPAIR_STRATEGIES),
        help="repair the patch first (wafer.repair): the strategy maps the kernel's rows onto "
        "the patch, its --spare-rows the spares, and the kernel runs on the repaired patch, "
        "links stretched past skipped PEs; columns left with holes are skipped; default: "
        "not repaired, each kernel column skips its own dead PEs and routes detour round them",
    )  # fmt: skip
    parser.add_argument("--reduce", help="weight_stream partial-sum reduction: chain|tree")
    parser.add_argument(
        "--density", type=float,
        help="gemm weight_stream: share of B's weights kept by magnitude pruning, in (0, 1] "
        "(default 1: dense); the zeros are neither streamed nor multiplied",
    )  # fmt: skip
    parser.add_argument("--scope", help="collectives: row|column|grid (default grid)")
    parser.add_argument(
        "--inputs",
        help="gemv: x streamed in at the edge (default) or resident in the PEs; gemm: the "
        "blocks a kernel holds resident (default; systolic: streamed, by design) or "
        "streamed in from the edge first",
    )  # fmt: skip
    parser.add_argument(
        "--outputs",
        help="gemv, gemm: results left in place (default) or gathered to the west edge ports",
    )
    parser.add_argument(
        "--stop-at", type=int,
        help="cycle tier: simulate only this many cycles of a run too long to finish (a "
        "whole wafer's layer), then project the rest at their pace and compare the fast "
        "tier's and the analytic estimates (kernels.prefix)",
    )  # fmt: skip
    add_timeline_options(parser, regions=True)
    parser.add_argument("--trace-every", type=int, default=100,
                        help="cycles per engine sample of the timeline and the animation "
                             "(default 100)")  # fmt: skip


def run_kernel_command(args: argparse.Namespace) -> dict[str, Any]:
    from wafersim.commands.timelines import write_engine_timeline
    from wafersim.fabric.trace import traced
    from wafersim.kernels.grid import check_grid_size
    from wafersim.kernels.registry import KERNELS, check_dimensions, check_fits, shape_of
    from wafersim.kernels.tiers import check_request, check_tier, estimate
    from wafersim.plots.figures import activity_animation

    spec = spec_from(args)
    args.algo = args.algo or next(iter(KERNELS[args.kernel]))
    width, height = _grid_size(args.grid, spec)
    check_dimensions(args.kernel, {"m": args.m, "k": args.k, "n": args.n})
    shape = shape_of(args.kernel, args.m, args.k, args.n)
    given = ("reduce", "density", "scope", "inputs", "outputs")
    options = {k: v for k in given if (v := getattr(args, k)) is not None}
    check_request(args.kernel, args.algo, args.tier, args.engine, options, args.stop_at)
    check_grid_size(height, width)
    check_fits(args.kernel, args.algo, shape, height, width, spec, args.dtype, options)
    check_tier(args.kernel, args.tier)
    if args.tier != "analytic":  # the engine compiles while the job builds its plan
        from wafersim.fabric.precompile import compile_in_background

        compile_in_background("programs", args.engine, half=args.dtype != "fp32")
    recorder = _timeline_recorder(args)
    grid, hole = _placed(args, height, width, spec)
    holes = 0.0 if hole is None else float(hole.mean())
    start = time.perf_counter()
    name = f"{args.kernel} {args.algo} " + " ".join(f"{k}={v}" for k, v in shape.items())
    try:
        with traced(recorder):
            result = estimate(args.kernel, args.algo, shape, grid, spec, args.tier, args.dtype,
                              args.seed, args.engine, holes, args.stop_at, **options)  # fmt: skip
    except DeadlockError:
        if args.timeline and recorder.cycles:  # the timeline shows where it stuck
            write_engine_timeline(args.timeline, recorder, spec, args.timeline_block, name,
                                  recorder.cycles[-1], {"command": "kernel"})  # fmt: skip
        raise
    summary = result.summary()
    summary.pop("grid", None)  # an engine run's (rows, cols): said as width_pes, height_pes
    if args.timeline:
        write_engine_timeline(args.timeline, recorder, spec, args.timeline_block, name,
                              result.cycles, {"command": "kernel", **summary})  # fmt: skip
    if args.animation:
        activity_animation(recorder.pe, recorder.cycles, args.animation,
                           f"{name}\n{width}x{height} PEs", edge_ports=True)  # fmt: skip
    return {
        **summary,
        "width_pes": width,
        "height_pes": height,
        "holes": int(hole.sum()) if hole is not None else 0,
        "repair": args.repair,  # None: not repaired
        "spec": spec.name,
        "seed": args.seed,
        "options": options,  # reduce, density, scope, inputs, outputs as given
        "engine": args.engine,
        "wafersim_version": __version__,
        "wall_s": time.perf_counter() - start,
    }


def _timeline_recorder(args: argparse.Namespace):
    """The engine samples ``--timeline`` asks for (the cycle tier only), checked before any
    work; None without a timeline."""
    from wafersim.fabric.timeline import check_block
    from wafersim.fabric.trace import TraceRecorder

    if not (args.timeline or args.animation):
        return None
    if args.stop_at is not None:
        raise ConfigError("--timeline and --animation record a whole run: not with --stop-at")
    if args.tier != "cycle":
        raise ConfigError(f"--timeline and --animation record the cycle engine's run: "
                          f"--tier cycle, not {args.tier}")  # fmt: skip
    if args.timeline_block is not None:
        check_block(args.timeline_block)
    return TraceRecorder(args.trace_every)


def _grid_size(text: str, spec: WaferSpec) -> tuple[int, int]:
    if text == "wafer":
        return spec.logical_width_pes, spec.logical_height_pes
    return parse_grid(text)


def _placed(args, rows: int, cols: int, spec: WaferSpec):
    """The kernel grid on its patch (repaired first with ``--repair``) and the patch's
    holes (bool (H, W); None without defects)."""
    from wafersim.kernels.grid import kernel_grid

    dead_pe, dead_link = _patch(args, rows, cols, spec)
    if dead_pe is None:
        if args.repair:
            raise ConfigError("--repair needs a defect map: --defects MAP.h5, or "
                              "--defect-density-per-cm2 D or --pe-defect-prob P")  # fmt: skip
        return kernel_grid(rows, cols), None
    hops = None
    if args.repair:
        dead_pe, dead_link, hops = _repaired(args.repair, dead_pe, dead_link, rows, spec)
    lines = _full_columns(dead_pe, rows, cols, args.repair)
    return kernel_grid(rows, cols, dead_pe, dead_link, lines, hops), dead_pe


def _repaired(strategy: str, dead_pe: np.ndarray, dead_link: np.ndarray, rows: int,
              spec: WaferSpec) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """The patch after ``strategy`` maps the kernel's ``rows`` onto it, the rows below them
    its spares (:func:`wafer.repair.repair`): its holes, dead links and links' hops."""
    from wafersim.wafer.defects import DefectMap
    from wafersim.wafer.repair import repair

    height, width = dead_pe.shape
    patch = spec.replace({"logical_width_pes": width, "logical_height_pes": rows,
                          "spare_rows": height - rows, "spare_cols": 0})  # fmt: skip
    drawn = DefectMap(dead_pe, dead_link, "kernel patch", {}, None, patch)
    logical = repair(drawn, strategy)
    return np.asarray(logical.hole), np.asarray(logical.dead_link), logical.link_hops


def _patch(args, rows: int, cols: int, spec) -> tuple[np.ndarray | None, np.ndarray | None]:
    """Dead PE and wire masks of the kernel's patch, or (None, None) without defects."""
    if args.spare_rows < 0:
        raise ConfigError(f"--spare-rows={args.spare_rows} must be >= 0")
    height, width = rows + args.spare_rows, cols + args.spare_rows
    patch = spec.replace({"logical_width_pes": width, "logical_height_pes": height,
                          "spare_rows": 0})  # fmt: skip
    defects = defect_map(args, patch)
    if defects is None:
        return None, None
    if defects.dead_pe.shape[0] < height or defects.dead_pe.shape[1] < cols:
        raise ConfigError(
            f"defect map {defects.dead_pe.shape[1]}x{defects.dead_pe.shape[0]} is smaller "
            f"than the kernel patch {cols}x{height}"
        )
    width = min(width, defects.dead_pe.shape[1])
    return defects.dead_pe[:height, :width], defects.dead_link[:height, :width]


def _full_columns(dead_pe: np.ndarray, rows: int, cols: int, repair: str | None) -> np.ndarray:
    """The first ``cols`` patch columns with ``rows`` working PEs (``repair``: the
    strategy the patch was repaired with, None: not repaired)."""
    full = np.flatnonzero((~dead_pe).sum(axis=0) >= rows)
    if len(full) < cols:
        after = f" after repair {repair}" if repair else ""
        raise ConfigError(
            f"the patch has {len(full)} columns with {rows} working PEs{after}, the kernel "
            f"needs {cols}: use a smaller grid or more --spare-rows (spare rows and columns)"
        )
    return full[:cols]


def kernel_text(r: dict[str, Any]) -> str:
    shape = " ".join(f"{k}={v}" for k, v in {**r["shape"], **r.get("options", {})}.items())
    repair = f" after repair {r['repair']}" if r.get("repair") else ""
    head = (
        f"{r['kernel']} {r['algo']} {shape} {r['dtype']} on {r['width_pes']}x{r['height_pes']} "
        f"PEs (WxH, {r['holes']} holes{repair}), {r['spec']}, {r['tier']} tier"
    )
    if "prefix" in r:
        return f"{head}\n{prefix_text(r['prefix'], r['wall_s'])}"
    if r["tier"] != "cycle":
        flops = 2 * r["shape"].get("m", 0) * r["shape"].get("k", 0) * r["shape"].get("n", 0)
        energy = f"\n{energy_line(r['energy'], flops)}" if "energy" in r else ""
        return (
            f"{head}\n{r['cycles']} cycles ({r['seconds'] * 1e6:.1f} us), analytic "
            f"{r['analytic_cycles']} ({r['wall_s']:.2f} s){energy}"
        )
    return "\n".join(
        [
            head,
            f"{r['cycles']} cycles ({r['seconds'] * 1e6:.1f} us), analytic "
            f"{r['analytic_cycles']}, utilization {r['utilization']:.1%}",
            f"max abs error {r['max_abs_error']:.3g}, colors {r['colors_used']}, "
            f"SRAM peak {r['sram_peak_bytes']} B, busiest link {r['link_utilization_max']:.2f}",
            energy_line(r["energy"], r["flops"]),
            f"simulated in {r['sim_wall_s']:.2f} s",
        ]
    )


def prefix_text(p: dict[str, Any], wall_s: float) -> str:
    """The lines of a ``--stop-at`` run (:class:`kernels.prefix.Prefix`)."""
    state = "finished" if p["finished"] else "stopped"
    edge = "none" if p["edge_share"] is None else f"{p['edge_share']:.2%}"
    lines = [
        f"{state} at cycle {p['cycles']}: edge ports' wavelets sent {edge}, PE ops done "
        f"{p['ops_share']:.2%}",
        f"whole run at that pace: {p['projected_cycles'] or 'unknown'} cycles (to its last "
        "wavelet in)"
        + ("" if p["steady"] else " (not steady: its pace still varies; a longer --stop-at)"),
    ]
    for name in ("fast", "analytic"):
        if p.get(f"{name}_cycles") is not None:
            error = p.get(f"{name}_error")
            against = "" if error is None else f" ({error:+.1%} against the pace)"
            lines.append(f"{name} tier's estimate: {p[f'{name}_cycles']} cycles{against}")
        if p.get(f"{name}_share") is not None:
            lines.append(f"  its schedule's weights streamed in by cycle {p['cycles']}: "
                         f"{p[f'{name}_share']:.2%}")  # fmt: skip
    lines.append(
        f"plan built in {p['build_s']:.1f} s, {p['cycles']} cycles of {p['routers']:,} routers "
        f"simulated in {p['sim_wall_s']:.1f} s ({p['router_cycles_per_s'] / 1e6:.1f} M "
        f"router-cycles/s), {wall_s:.1f} s in all"
    )
    return "\n".join(lines)


COMMAND = Command(add_kernel_arguments, run_kernel_command, kernel_text,
                  outputs={"timeline": "file", "animation": "file"}, engine=True)  # fmt: skip
