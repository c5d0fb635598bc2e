"""Options that several ``wafersim`` subcommands share, with one meaning, one name and one
default each: the wafer (``--preset`` / ``--spec``, default
:data:`wafer.presets.DEFAULT_PRESET`), its defects and their repair (default
:data:`wafer.repair.DEFAULT_REPAIR`), the mesh (``--grid WxH``: W PEs
wide, H high), and ``--json``, ``--seed`` and ``key=value`` overrides (anywhere on the line).
"""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wafersim.wafer import __version__
from wafersim.wafer.config_io import parse_overrides, resolve_spec
from wafersim.wafer.errors import ConfigError, excerpt
from wafersim.wafer.presets import DEFAULT_PRESET
from wafersim.wafer.spec import WaferSpec

if TYPE_CHECKING:
    from wafersim.wafer.defects import DefectMap
    from wafersim.wafer.repair import LogicalGrid

OVERRIDE = re.compile(r"[A-Za-z_][\w.]*=")  # a key=value word
MAX_SEED = 2**63 - 1  # seeds are kept as signed 64-bit integers (HDF5 attributes, numpy)
SEED_CHARS = 40  # characters of a bad seed an error quotes at most
SEED_TEXT = re.compile(r"0*[0-9]{1,19}")  # 2^63 - 1 has 19 digits; '٣' and '1_0' are not seeds
GRID_SIDE_DIGITS = 9  # far past any wafer's side, short enough that int() is instant
GRID_TEXT = re.compile(rf"([0-9]{{1,{GRID_SIDE_DIGITS}}})[xX]([0-9]{{1,{GRID_SIDE_DIGITS}}})")
# A map's model and its parameters, by option dest (random models draw from --seed).
MODEL_OPTIONS = (
    "pe_defect_prob",
    "defect_density_per_cm2",
    "alpha",
    "cluster_size_pes",
    "link_defect_fraction",
    "defect_list",
)
MODEL_PARAMS = {"defect_list": "path"}  # option dest -> the defect model's parameter name


def add_common_options(
    parser: argparse.ArgumentParser, seed: bool, overrides: str, engine: bool = False
) -> None:
    """``--json`` (every subcommand), ``--seed`` (those that draw anything), ``--engine``
    (those that run the cycle engine) and a word on the ``key=value`` overrides the
    subcommand takes (:func:`split_overrides` finds them)."""
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    if engine:
        add_engine_option(parser)
    if seed:
        parser.add_argument("--seed", type=seed_value, default=0,
                            help="seed for every random stream (an integer >= 0)")  # fmt: skip
    if overrides:
        parser.epilog = f"key=value words anywhere on the line set {overrides} keys"


def add_engine_option(parser: argparse.ArgumentParser) -> None:
    """``--engine``: where the command's cycle-engine runs go (``fabric.engine.engine_used``)."""
    from wafersim.fabric.engine import ENGINES

    parser.add_argument("--engine", default="cpu", choices=ENGINES,
                        help="cycle engine: cpu (default) or cuda (an NVIDIA GPU, extra "
                             "'cuda')")  # fmt: skip


def add_timeline_options(parser: argparse.ArgumentParser, regions: bool) -> None:
    """``--timeline PATH`` and, for commands whose timeline samples the cycle engine,
    ``--timeline-block`` (the samples' interval is ``--trace-every``)."""
    parser.add_argument(
        "--timeline",
        help="write a timeline to this JSON file (Chrome trace events: open it in "
        "ui.perfetto.dev or chrome://tracing)",
    )
    if regions:
        parser.add_argument(
            "--animation",
            help="write an animated GIF of per-PE activity over the run (a frame a "
            "--trace-every sample; extra 'plot')",
        )
        parser.add_argument("--timeline-block", type=int,
                            help="PEs a side of a timeline region, a counter track each "
                                 "(default: at most 8 x 8 regions; 1: a track per PE)")  # fmt: skip


def seed_value(text: str) -> int:
    """``--seed``: ASCII digits for an integer in [0, 2^63 - 1], refused before any work: numpy's
    generators take no negative seed, and the seed is kept as a signed 64-bit integer."""
    if not SEED_TEXT.fullmatch(text) or int(text) > MAX_SEED:
        raise argparse.ArgumentTypeError(
            f"--seed={_as_typed(text)} must be an integer >= 0 and <= 2^63 - 1 (ASCII digits)"
        )
    return int(text)


def _as_typed(text: str) -> str:
    """``text`` as the user typed it when short and printable, else its bounded excerpt (a
    seed has 19 digits at most, so a short one shows enough)."""
    return text if len(text) <= SEED_CHARS and text.isprintable() else excerpt(text, SEED_CHARS)


def split_overrides(argv: list[str], parser: argparse.ArgumentParser) -> tuple[list, list]:
    """``argv`` without its ``key=value`` words, and those words: an override may stand
    anywhere, except as the value of an option that takes one."""
    takes_value = {
        flag
        for action in parser._actions  # the subcommand's own options
        if action.option_strings and action.nargs != 0
        for flag in action.option_strings
    }
    rest, overrides = [], []
    for i, word in enumerate(argv):
        after_option = i > 0 and argv[i - 1] in takes_value
        if OVERRIDE.match(word) and not after_option:
            overrides.append(word)
        else:
            rest.append(word)
    if rest and rest[-1] == "--":  # an end of options with nothing left after it
        rest.pop()
    return rest, overrides


def add_spec_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--preset", help=f"built-in wafer (default {DEFAULT_PRESET}; see `wafersim presets`)"
    )
    parser.add_argument("--spec", help="wafer spec file (.toml/.yaml) instead of a preset")


def spec_from(args: argparse.Namespace) -> WaferSpec:
    """The spec the options name: a preset or a file, then the ``key=value`` overrides."""
    return resolve_spec(args.preset, args.spec, parse_overrides(args.overrides))


def add_grid_option(parser: argparse.ArgumentParser, default: str, more: str = "") -> None:
    parser.add_argument(
        "--grid", default=default, help=f"WxH: W PEs wide by H PEs high (default {default}){more}"
    )


def parse_grid(text: str) -> tuple[int, int]:
    """``"64x32"`` -> ``(64, 32)``: width, height, in ASCII digits only (``str.isdigit``
    passes ``'²'``, which ``int`` refuses)."""
    found = GRID_TEXT.fullmatch(text)
    if found is None:
        raise ConfigError(
            f"grid={excerpt(text)} must look like WxH (width x height in PEs, each at most "
            f"{GRID_SIDE_DIGITS} ASCII digits), e.g. 64x32"
        )
    return int(found[1]), int(found[2])


def add_defect_options(parser: argparse.ArgumentParser, title: str) -> None:
    """A saved map (``--defects``) or one drawn from ``--seed`` by a defect model."""
    from wafersim.wafer.defects import DEFECT_MODELS

    group = parser.add_argument_group(f"defects ({title})")
    group.add_argument("--defects", help="a saved defect map (.h5, from `wafersim defects --out`)")
    group.add_argument(
        "--defect-model",
        choices=list(DEFECT_MODELS),
        help="draw a map from --seed (default poisson when a rate is given)",
    )
    rate = group.add_mutually_exclusive_group()
    rate.add_argument("--defect-density-per-cm2", type=float, help="defects per cm^2")
    rate.add_argument("--pe-defect-prob", type=float, help="probability a PE is dead")
    group.add_argument("--alpha", type=float, help="clustering parameter (clustered model)")
    group.add_argument("--cluster-size-pes", type=int, help="cluster block side (clustered)")
    group.add_argument("--link-defect-fraction", type=float, help="share of defects on wires")
    group.add_argument("--defect-list", help="defect list file (explicit model)")


def add_repair_option(parser: argparse.ArgumentParser, many: str = "") -> None:
    """``--repair``, one strategy (``many``: the help for taking one or more)."""
    from wafersim.wafer.repair import DEFAULT_REPAIR, REPAIR_STRATEGIES

    parser.add_argument(
        "--repair",
        nargs="+" if many else None,
        choices=list(REPAIR_STRATEGIES),
        help=f"repair strategy (default {DEFAULT_REPAIR}){many}",
    )


def defect_map(args: argparse.Namespace, spec: WaferSpec) -> DefectMap | None:
    """The map the defect options ask for: loaded, drawn for ``spec`` from ``--seed``, or
    None when no option names one (a defect-free wafer)."""
    from wafersim.wafer.defects import DefectMap, generate

    given = {name: getattr(args, name) for name in MODEL_OPTIONS}
    given = {name: value for name, value in given.items() if value is not None}
    if args.defects:
        if given or args.defect_model:
            named = flag(next(iter(given))) if given else "--defect-model"
            raise ConfigError(f"--defects loads a saved map: it takes no {named}")
        return DefectMap.load(args.defects)
    if not given and args.defect_model is None:
        return None
    model = args.defect_model or "poisson"
    if model == "explicit" and args.defect_list is None:
        raise ConfigError("--defect-model explicit needs --defect-list FILE (.toml/.yaml/.json)")
    if model != "explicit" and args.pe_defect_prob is None and args.defect_density_per_cm2 is None:
        raise ConfigError(
            f"--defect-model {model} needs a rate: --defect-density-per-cm2 D or --pe-defect-prob P"
        )
    params = {MODEL_PARAMS.get(name, name): value for name, value in given.items()}
    return generate(spec, model, args.seed, **params)


def repaired_grid(args: argparse.Namespace, spec: WaferSpec) -> LogicalGrid | None:
    """The repaired logical grid the defect options ask for (None: a defect-free wafer)."""
    from wafersim.wafer.repair import DEFAULT_REPAIR, repair

    defects = defect_map(args, spec)
    if defects is None:
        if args.repair:
            raise ConfigError(
                "--repair needs a defect map: --defects MAP.h5, or "
                "--defect-density-per-cm2 D or --pe-defect-prob P"
            )
        return None
    if args.defects:
        check_map_spec(args.defects, defects.spec, spec)
    return repair(defects, args.repair or DEFAULT_REPAIR)


def check_map_spec(path: str, drawn_for: WaferSpec, spec: WaferSpec) -> None:
    """A saved map must be of the wafer the command runs on."""
    if drawn_for != spec:
        ours, theirs = spec.to_dict(), drawn_for.to_dict()
        keys = sorted(
            key for key in ours.keys() | theirs.keys() if ours.get(key) != theirs.get(key)
        )
        raise ConfigError(
            f"{path} is a defect map of spec {drawn_for.name!r}, this command's spec is "
            f"{spec.name!r} (they differ in: {', '.join(keys)}); pass the map's --preset, "
            "--spec and overrides"
        )


def flag(dest: str) -> str:
    """An option's flag from its dest name: ``pe_defect_prob`` -> ``--pe-defect-prob``."""
    return "--" + dest.replace("_", "-")


def defects_summary(defects: DefectMap, grid: LogicalGrid, wall_s: float) -> dict[str, Any]:
    """A repaired defect map as ``wafersim defects`` reports it."""
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


def check_output(path: str | None, option: str, kind: str) -> None:
    """ConfigError before any work when output ``path`` (a ``"file"`` or a ``"folder"``)
    cannot be written: a folder given for a file or the reverse, or a place this process
    may not write (found after the simulation ran, they would lose its work)."""
    if path is None:
        return
    target = Path(path)
    if kind == "file" and target.is_dir():
        raise ConfigError(f"{option} {path} is a folder; give a file name")
    if kind == "folder" and target.exists() and not target.is_dir():
        raise ConfigError(f"{option} {path} is a file; give a folder")
    if target.exists() and not (target.is_file() or target.is_dir()):
        raise ConfigError(f"{option} {path} is not a regular file (a device or a pipe)")
    place = target if kind == "folder" and target.is_dir() else target.parent  # written into
    existing = next(p for p in (place, *place.parents) if p.exists())
    if not existing.is_dir():
        raise ConfigError(f"{option} {path}: {existing} is a file, not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(f"{option} {path}: {existing} is not writable")
