"""What each ``wafersim`` subcommand does: its options, its job, and its text output.

A job takes the parsed arguments and returns a JSON-ready dict; ``wafer.cli`` prints it.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import Any

from wafer import __version__
from wafer.compile_command import add_compile_arguments, compile_text, run_compile_command
from wafer.config_io import parse_overrides, resolve_spec
from wafer.errors import ConfigError
from wafer.kernel_command import add_kernel_arguments, kernel_text, run_kernel_command
from wafer.plot_command import add_plot_arguments, plot_text, run_plot_command
from wafer.presets import PRESETS, preset
from wafer.progress_line import ProgressLine
from wafer.run_command import add_run_arguments, run_run_command, run_text
from wafer.spec import WaferSpec
from wafer.sweep_command import add_sweep_arguments, run_sweep_command, sweep_text


def add_spec_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--preset", help="built-in wafer (see `wafersim presets`)")
    parser.add_argument("--spec", help="wafer spec file (.toml/.yaml)")


def add_presets_arguments(parser: argparse.ArgumentParser) -> None:
    """``presets`` takes only the common options."""


def run_presets(args: argparse.Namespace) -> dict[str, Any]:
    overrides = parse_overrides(args.overrides)
    specs = {name: preset(name) for name in PRESETS}
    if overrides:
        specs = {name: spec.replace(overrides) for name, spec in specs.items()}
    return {name: _spec_summary(spec) for name, spec in specs.items()}


def _spec_summary(spec: WaferSpec) -> dict[str, Any]:
    summary = spec.to_dict()
    summary["physical_grid"] = [spec.physical_width_pes, spec.physical_height_pes]
    summary["logical_grid"] = [spec.logical_width_pes, spec.logical_height_pes]
    summary["edge_bytes_per_cycle"] = spec.edge_bytes_per_cycle
    return summary


def _presets_text(result: dict[str, Any]) -> str:
    lines = [f"{'preset':8} {'logical':>11} {'physical':>11} {'SRAM/PE':>8} {'clock':>9}"]
    for name, s in result.items():
        logical = "x".join(map(str, s["logical_grid"]))
        physical = "x".join(map(str, s["physical_grid"]))
        sram = f"{s['pe']['sram_bytes'] // 1024} KiB"
        clock = f"{s['clock_hz'] / 1e9:.2f} GHz"
        lines.append(f"{name:8} {logical:>11} {physical:>11} {sram:>8} {clock:>9}")
    return "\n".join(lines)


def add_defects_arguments(parser: argparse.ArgumentParser) -> None:
    from wafer.defects import DEFECT_MODELS
    from wafer.repair import REPAIR_STRATEGIES

    add_spec_options(parser)
    parser.add_argument("--model", default="poisson", choices=sorted(DEFECT_MODELS))
    rate = parser.add_mutually_exclusive_group()
    rate.add_argument("--pe-defect-prob", type=float, help="probability a PE is dead")
    rate.add_argument("--defect-density-per-cm2", type=float, help="defects per cm^2")
    parser.add_argument("--alpha", type=float, help="clustering parameter (clustered model)")
    parser.add_argument("--cluster-size-pes", type=int, help="cluster block side (clustered)")
    parser.add_argument("--link-defect-fraction", type=float, help="share of defects on wires")
    parser.add_argument("--path", help="defect list file (explicit model)")
    parser.add_argument("--defects", help="load a saved defect map (.h5) instead")
    parser.add_argument(
        "--repair",
        nargs="+",
        choices=list(REPAIR_STRATEGIES),
        help="repair strategy (default row); with --study one or more (default all)",
    )
    parser.add_argument("--out", help="save the defect map (--study: the study) to this .h5")
    add_study_arguments(parser)


def add_study_arguments(parser: argparse.ArgumentParser) -> None:
    study = parser.add_argument_group("defect study (--study)")
    study.add_argument(
        "--study",
        action="store_true",
        help="for each density, repair and seed: working PEs, holes, route stretch, and "
        "uniform traffic on a window of the repaired mesh, with 95%% confidence intervals",
    )
    study.add_argument("--densities", nargs="+", type=float, metavar="D", help="defects per cm^2")
    study.add_argument("--seeds", type=int, help="maps per density and repair (default 3)")
    study.add_argument(
        "--window-pes", type=int, help="side of the centred traffic window in PEs (default 16)"
    )
    study.add_argument("--plot", help="save throughput and stretch against density to this PNG")


_MODEL_OPTIONS = (
    "pe_defect_prob",
    "defect_density_per_cm2",
    "alpha",
    "cluster_size_pes",
    "link_defect_fraction",
    "path",
)


_STUDY_ONLY = ("densities", "seeds", "window_pes", "plot")
_NOT_IN_STUDY = ("defects", "pe_defect_prob", "defect_density_per_cm2", "path")


def _option(name: str) -> str:
    return "--" + name.replace("_", "-")


def run_defects(args: argparse.Namespace) -> dict[str, Any]:
    from wafer.defects import DefectMap, generate
    from wafer.repair import repair

    if args.study:
        return run_defects_study(args)
    for name in _STUDY_ONLY:
        if getattr(args, name) is not None:
            raise ConfigError(f"{_option(name)} needs --study")
    strategies = args.repair or ["row"]
    if len(strategies) > 1:
        raise ConfigError(f"--repair takes one strategy without --study, got {len(strategies)}")
    start = time.perf_counter()
    if args.defects:
        defects = DefectMap.load(args.defects)
    else:
        spec = resolve_spec(args.preset, args.spec, parse_overrides(args.overrides))
        params = {k: getattr(args, k) for k in _MODEL_OPTIONS if getattr(args, k) is not None}
        defects = generate(spec, args.model, args.seed, **params)
    grid = repair(defects, strategies[0])
    if args.out:
        defects.save(args.out)
    return _defects_summary(defects, grid, time.perf_counter() - start)


def _defects_summary(defects: Any, grid: Any, wall_s: float) -> dict[str, Any]:
    spec = defects.spec
    return {
        "physical_grid": [spec.physical_width_pes, spec.physical_height_pes],
        "logical_grid": [spec.logical_width_pes, spec.logical_height_pes],
        "dead_pes": defects.dead_pes,
        "dead_links": defects.dead_links,
        "spare_rows_used": grid.spare_rows_used,
        "spare_cols_used": grid.spare_cols_used,
        "unrepaired_pes": grid.unrepaired_pes,
        "unrepaired_links": grid.unrepaired_links,
        "working_pes": grid.working_pes,
        "max_neighbour_hops": grid.max_neighbour_hops,
        "repair": grid.strategy,
        "model": defects.model,
        "params": defects.params,
        "seed": defects.seed,
        "spec": spec.to_dict(),
        "wafersim_version": __version__,
        "wall_s": wall_s,
    }


def _defects_text(r: dict[str, Any]) -> str:
    if "aggregates" in r:
        return _study_text(r)
    pw, ph = r["physical_grid"]
    lw, lh = r["logical_grid"]
    return "\n".join(
        [
            f"{r['spec']['name']}: physical {pw}x{ph}, logical {lw}x{lh} "
            f"({r['model']} defects, seed {r['seed']}, repair {r['repair']})",
            f"dead PEs {r['dead_pes']}, dead links {r['dead_links']}",
            f"spare rows used {r['spare_rows_used']} of {r['spec']['spare_rows']}",
            f"working logical PEs {r['working_pes']} of {lw * lh}; "
            f"unrepaired holes {r['unrepaired_pes']}, unrepaired links {r['unrepaired_links']}",
            f"longest path between logical neighbours: {r['max_neighbour_hops']} hops",
            f"({r['wall_s']:.2f} s)",
        ]
    )


def run_defects_study(args: argparse.Namespace) -> dict[str, Any]:
    """``defects --study``: the study's aggregates and config; --out and --plot save it."""
    from wafer.heap import keep_freed_memory
    from wafer.study import run_study
    from wafer.study_config import StudyConfig

    for name in _NOT_IN_STUDY:
        if getattr(args, name) is not None:
            raise ConfigError(
                f"{_option(name)} cannot be used with --study (it sweeps --densities)"
            )
    if args.densities is None:
        raise ConfigError("--study needs --densities D1 D2 ... (defects per cm^2)")
    spec = resolve_spec(args.preset, args.spec, parse_overrides(args.overrides))
    config = StudyConfig(**_study_fields(args))
    keep_freed_memory()  # one map's tables reuse the last one's pages (wafer.heap)
    progress = ProgressLine(sys.stderr)
    try:
        result = run_study(spec, config, progress=progress)
    finally:
        progress.close()
    if args.out:
        result.save_hdf5(args.out)
    if args.plot:
        result.plot(args.plot)
    return {**result.to_json(), "out": args.out, "plot": args.plot}


def _study_fields(args: argparse.Namespace) -> dict[str, Any]:
    """StudyConfig keywords from the options given (the rest keep the config's defaults)."""
    from wafer.repair import REPAIR_STRATEGIES

    fields: dict[str, Any] = {
        "densities_per_cm2": tuple(args.densities),
        "strategies": tuple(args.repair or REPAIR_STRATEGIES),
        "seed": args.seed,
        "model": args.model,
        "model_params": {
            name: getattr(args, name)
            for name in ("alpha", "cluster_size_pes", "link_defect_fraction")
            if getattr(args, name) is not None
        },
    }
    if args.seeds is not None:
        fields["seeds"] = args.seeds
    if args.window_pes is not None:
        fields["window_pes"] = args.window_pes
    return fields


def _study_text(r: dict[str, Any]) -> str:
    config, window = r["config"], r["traffic_window"]
    side = window["side_pes"]
    lines = [
        f"{r['spec']['name']}: {config['model']} defects, {config['seeds']} seeds from seed "
        f"{r['seed']}; mean +- 95% CI half-width",
        f"traffic: uniform on the {side}x{side} window at ({window['x0']}, {window['y0']}) "
        f"of the repaired mesh, {window['routing_without_faults']} routing, "
        f"{window['routing_with_faults']} where the window has faults",
        f"{'D /cm2':>7} {'repair':>12} {'working PEs':>16} {'holes':>14} {'stretch hops':>13} "
        f"{'max stretch':>12} {'0-load lat':>12} {'sat thr':>15} {'rel thr':>12}",
    ]
    for a in r["aggregates"]:
        cells = [_ci_text(a[name], digits) for name, digits in _STUDY_COLUMNS]
        widths = (16, 14, 13, 12, 12, 15, 12)
        lines.append(
            f"{a['defect_density_per_cm2']:7g} {a['strategy']:>12} "
            + " ".join(f"{c:>{w}}" for c, w in zip(cells, widths, strict=True))
        )
    lines.append(f"({r['points']} points, {r['wall_s']:.1f} s)")
    return "\n".join(lines)


_STUDY_COLUMNS = (
    ("working_pes", 0),
    ("unrepaired_pes", 0),
    ("mean_route_stretch_hops", 3),
    ("max_route_stretch_hops", 1),
    ("zero_load_latency_cycles", 1),
    ("saturation_throughput_flits_per_pe_cycle", 4),
    ("relative_saturation_throughput", 2),
)


def _ci_text(ci: dict[str, Any], digits: int) -> str:
    if ci["mean"] is None:
        return "n/a"
    half = "" if ci["ci95_half_width"] is None else f"+-{ci['ci95_half_width']:.{digits}f}"
    return f"{ci['mean']:.{digits}f}{half}"


def add_traffic_arguments(parser: argparse.ArgumentParser) -> None:
    from fabric.traffic import PATTERNS, ROUTINGS

    add_spec_options(parser)
    parser.add_argument("--grid", default="8x8", help="mesh size WxH")
    parser.add_argument("--pattern", default="uniform", choices=list(PATTERNS))
    parser.add_argument("--rate", type=float, default=0.1, help="flits offered per PE per cycle")
    parser.add_argument("--packet-size", type=int, default=4, help="flits per packet")
    parser.add_argument("--queue-depth", type=int, help="flits per input queue (default: spec)")
    parser.add_argument("--routing", default="xy", choices=list(ROUTINGS))
    parser.add_argument("--cycles", type=int, default=2000)
    parser.add_argument("--warmup", type=int, default=500)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--trace", help="write link/PE utilization samples to this HDF5 file")
    parser.add_argument("--trace-every", type=int, default=100, help="cycles per trace sample")
    parser.add_argument("--plot", help="save a heatmap of link utilization to this PNG")


def run_traffic_command(args: argparse.Namespace) -> dict[str, Any]:
    from fabric.plot import wafer_heatmap
    from fabric.trace import TraceRecorder
    from fabric.traffic import TrafficConfig, run_traffic

    width, height = parse_grid(args.grid)
    spec = resolve_spec(args.preset, args.spec, parse_overrides(args.overrides))
    config = TrafficConfig(
        width=width,
        height=height,
        pattern=args.pattern,
        rate=args.rate,
        packet_size=args.packet_size,
        queue_depth=args.queue_depth,
        routing=args.routing,
        cycles=args.cycles,
        warmup=args.warmup,
        seed=args.seed,
        threads=args.threads,
    )
    wants_trace = args.trace or args.plot
    trace = TraceRecorder(args.trace_every, width, height) if wants_trace else None
    result = {**run_traffic(config, spec, trace=trace), "spec": spec.name}
    result["wafersim_version"] = __version__
    if args.trace:
        trace.save(args.trace, {"command": "traffic", **result, "spec": spec.to_dict()})
    if args.plot:
        title = f"{width}x{height} {args.pattern}, rate {args.rate}: link utilization"
        wafer_heatmap(trace.mean_link_utilization(), args.plot, title, "wavelets/cycle/link")
    return result


def parse_grid(text: str) -> tuple[int, int]:
    """``"64x32"`` -> ``(64, 32)``."""
    width, sep, height = text.lower().partition("x")
    if not sep or not width.isdigit() or not height.isdigit():
        raise ConfigError(f"grid={text!r} must look like WxH, e.g. 64x64")
    return int(width), int(height)


def _traffic_text(r: dict[str, Any]) -> str:
    w, h = r["grid"]
    latency = r["avg_packet_latency_cycles"]
    latency_text = "n/a" if latency is None else f"{latency:.1f}"
    return "\n".join(
        [
            f"{w}x{h} mesh, {r['pattern']} traffic, {r['routing']} routing, seed {r['seed']}",
            f"offered {r['offered_rate']:.4f}, accepted {r['accepted_rate']:.4f} flits/PE/cycle"
            + (" (saturated)" if r["saturated"] else ""),
            f"packet latency {latency_text} cycles (p99 {r['p99_packet_latency_cycles']}), "
            f"avg hops {r['avg_hops'] or 0:.2f}",
            f"{r['router_cycles_per_s'] / 1e6:.2f} M router-cycles/s ({r['sim_wall_s']:.2f} s)",
        ]
    )


Command = tuple[Callable[[argparse.ArgumentParser], None], Callable[..., dict], str]
COMMANDS: dict[str, Command] = {
    "presets": (add_presets_arguments, run_presets, "list the built-in wafer presets"),
    "defects": (
        add_defects_arguments,
        run_defects,
        "generate a defect map and repair it, or (--study) sweep densities and repairs",
    ),
    "traffic": (add_traffic_arguments, run_traffic_command, "synthetic traffic on the fabric"),
    "kernel": (
        add_kernel_arguments,
        run_kernel_command,
        "run a kernel (GEMM, GEMV, collective) on the cycle engine",
    ),
    "compile": (
        add_compile_arguments,
        run_compile_command,
        "compile a model into a per-layer placement plan",
    ),
    "run": (
        add_run_arguments,
        run_run_command,
        "train (or time) a model on simulated wafers with MemoryX weight streaming",
    ),
    "plot": (
        add_plot_arguments,
        run_plot_command,
        "plot a sweep's metric against a config key (study plots, PNG)",
    ),
    "sweep": (
        add_sweep_arguments,
        run_sweep_command,
        "run a parameter sweep of defects/traffic/kernel into one HDF5 table (resumable)",
    ),
}
TEXT_FORMATTERS: dict[str, Callable[[dict], str]] = {
    "presets": _presets_text,
    "defects": _defects_text,
    "traffic": _traffic_text,
    "kernel": kernel_text,
    "compile": compile_text,
    "run": run_text,
    "plot": plot_text,
    "sweep": sweep_text,
}
