"""``wafersim defects``: draw (or load) a defect map and repair it; ``--study`` sweeps
densities and repair strategies over seeds."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from wafer.config_io import parse_overrides, resolve_spec
from wafer.errors import ConfigError
from wafersim.jobs import Command
from wafersim.options import add_spec_options, defects_summary
from wafersim.progress_line import ProgressLine


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
    return defects_summary(defects, grid, time.perf_counter() - start)


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
    from wafersim.heap import keep_freed_memory
    from wafersim.study import run_study
    from wafersim.study_config import StudyConfig
    from wafersim.study_plot import plot_study

    for name in _NOT_IN_STUDY:
        if getattr(args, name) is not None:
            raise ConfigError(
                f"{_option(name)} cannot be used with --study (it sweeps --densities)"
            )
    if args.densities is None:
        raise ConfigError("--study needs --densities D1 D2 ... (defects per cm^2)")
    spec = resolve_spec(args.preset, args.spec, parse_overrides(args.overrides))
    config = StudyConfig(**_study_fields(args))
    keep_freed_memory()  # one map's tables reuse the last one's pages (wafersim.heap)
    progress = ProgressLine(sys.stderr)
    try:
        result = run_study(spec, config, progress=progress)
    finally:
        progress.close()
    if args.out:
        result.save_hdf5(args.out)
    if args.plot:
        plot_study(result, args.plot)
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


COMMAND = Command(add_defects_arguments, run_defects, _defects_text)
