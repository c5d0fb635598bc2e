"""``wafersim defects``: draw (or load) a defect map and repair it; ``--study`` sweeps
densities and repair strategies over seeds."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from wafersim.commands.jobs import Command
from wafersim.commands.options import (
    add_defect_options,
    add_repair_option,
    add_spec_options,
    defect_map,
    defects_summary,
    flag,
    spec_from,
)
from wafersim.commands.progress import progress_for, study_line
from wafersim.wafer.errors import ConfigError
from wafersim.wafer.repair import DEFAULT_REPAIR


def add_defects_arguments(parser: argparse.ArgumentParser) -> None:
    add_spec_options(parser)
    add_defect_options(parser, "one of them, or with --study a model and its parameters")
    add_repair_option(parser, many="; with --study one or more (default all)")
    parser.add_argument("--out", help="save the defect map (--study: the study) to this .h5")
    add_study_arguments(parser)


def add_study_arguments(parser: argparse.ArgumentParser) -> None:
    study = parser.add_argument_group("defect study (--study)")
    study.add_argument(
        "--study",
        action="store_true",
        help="for each density, repair and seed: working PEs, holes, route stretch, and "
        "uniform traffic on random windows of the repaired mesh, with 95%% confidence "
        "intervals (docs/defect_study.md)",
    )
    study.add_argument("--densities", nargs="+", type=float, metavar="D", help="defects per cm^2")
    study.add_argument("--seeds", type=int, help="maps per density and repair (default 3)")
    study.add_argument(
        "--window-pes", type=int, help="side of each traffic window in PEs (default 16)"
    )
    study.add_argument(
        "--windows-per-map",
        type=int,
        help="traffic windows drawn at random on each map; its figure is their mean (default 16)",
    )
    study.add_argument("--plot", help="save throughput and stretch against density to this PNG")


_STUDY_ONLY = ("densities", "seeds", "window_pes", "windows_per_map", "plot")
_NOT_IN_STUDY = ("defects", "pe_defect_prob", "defect_density_per_cm2", "defect_list")


def run_defects(args: argparse.Namespace) -> dict[str, Any]:
    from wafersim.wafer.repair import repair

    if args.study:
        return run_defects_study(args)
    for name in _STUDY_ONLY:
        if getattr(args, name) is not None:
            raise ConfigError(f"{flag(name)} needs --study")
    if args.engine != "cpu":
        raise ConfigError("--engine needs --study (the study's traffic runs on the engine)")
    strategies = args.repair or [DEFAULT_REPAIR]
    if len(strategies) > 1:
        raise ConfigError(f"--repair takes one strategy without --study, got {len(strategies)}")
    if args.defects and (args.preset or args.spec or args.overrides):
        raise ConfigError(
            "--defects loads a map drawn for its own spec: drop --preset, --spec and overrides"
        )
    start = time.perf_counter()
    defects = defect_map(args, spec_from(args))
    if defects is None:
        raise ConfigError(
            "defects needs a map: --defects MAP.h5, --defect-density-per-cm2 D, "
            "--pe-defect-prob P, or --defect-model explicit --defect-list FILE"
        )
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
    from wafersim.plots.study import plot_study
    from wafersim.studies.config import StudyConfig
    from wafersim.studies.run import run_study
    from wafersim.sweeps.heap import keep_freed_memory

    for name in _NOT_IN_STUDY:
        if getattr(args, name) is not None:
            raise ConfigError(f"{flag(name)} cannot be used with --study (it sweeps --densities)")
    if args.densities is None:
        raise ConfigError("--study needs --densities D1 D2 ... (defects per cm^2)")
    spec = spec_from(args)
    config = StudyConfig(**_study_fields(args))
    keep_freed_memory()  # one map's tables reuse the last one's pages (wafersim.sweeps.heap)
    show = progress_for(sys.stderr)
    try:
        result = run_study(spec, config, progress=lambda p: show.show(*study_line(p)))
    finally:
        show.close()
    if args.out:
        result.save_hdf5(args.out)
    if args.plot:
        plot_study(result, args.plot)
    return {**result.to_json(), "out": args.out, "plot": args.plot}


def _study_fields(args: argparse.Namespace) -> dict[str, Any]:
    """StudyConfig keywords from the options given (the rest keep the config's defaults)."""
    from wafersim.wafer.repair import REPAIR_STRATEGIES

    fields: dict[str, Any] = {
        "densities_per_cm2": tuple(args.densities),
        "strategies": tuple(args.repair or REPAIR_STRATEGIES),
        "seed": args.seed,
        "model": args.defect_model or "poisson",
        "model_params": {
            name: getattr(args, name)
            for name in ("alpha", "cluster_size_pes", "link_defect_fraction")
            if getattr(args, name) is not None
        },
    }
    if args.seeds is not None:
        fields["seeds"] = args.seeds
    for name in ("window_pes", "windows_per_map"):
        if getattr(args, name) is not None:
            fields[name] = getattr(args, name)
    return fields


def _study_text(r: dict[str, Any]) -> str:
    config, window = r["config"], r["traffic_window"]
    side = window["side_pes"]
    lines = [
        f"{r['spec']['name']}: {config['model']} defects, {config['seeds']} seeds from seed "
        f"{r['seed']}; mean (95% CI, clipped to each column's range)",
        f"traffic: uniform, mean over {window['windows_per_map']} random {side}x{side} windows "
        f"per map, {window['routing_without_faults']} routing, "
        f"{window['routing_with_faults']} where a window has faults",
        "rel thr: saturation throughput over the defect-free window's under the same routing; "
        f"fault-routed: share of windows routed {window['routing_with_faults']}",
        f"{'D /cm2':>7} {'repair':>12} "
        + " ".join(f"{title:>{width}}" for title, _, _, width in _STUDY_COLUMNS),
    ]
    for a in r["aggregates"]:
        cells = [f"{_ci_text(a[name], digits):>{w}}" for _, name, digits, w in _STUDY_COLUMNS]
        lines.append(f"{a['defect_density_per_cm2']:7g} {a['strategy']:>12} " + " ".join(cells))
    lines.append(f"({r['points']} points, {r['wall_s']:.1f} s)")
    return "\n".join(lines)


_STUDY_COLUMNS = (  # title, aggregate, decimals, width
    ("working PEs", "working_pes", 0, 24),
    ("holes", "unrepaired_pes", 0, 18),
    ("stretch hops", "mean_route_stretch_hops", 3, 21),
    ("max stretch", "max_route_stretch_hops", 1, 17),
    ("0-load lat", "zero_load_latency_cycles", 1, 17),
    ("rel thr", "relative_saturation_throughput", 2, 16),
    ("fault-routed", "fault_routed_windows", 2, 16),
)


def _ci_text(ci: dict[str, Any], digits: int) -> str:
    if ci["mean"] is None:
        return "n/a"
    if ci["ci95_low"] is None:
        return f"{ci['mean']:.{digits}f}"
    return f"{ci['mean']:.{digits}f} ({ci['ci95_low']:.{digits}f}-{ci['ci95_high']:.{digits}f})"


COMMAND = Command(add_defects_arguments, run_defects, _defects_text,
                  outputs={"out": "file", "plot": "file"}, engine=True)  # fmt: skip
