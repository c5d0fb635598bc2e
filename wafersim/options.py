"""Options that several ``wafersim`` subcommands share, with one meaning and one help each."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from wafer import __version__
from wafer.errors import ConfigError

if TYPE_CHECKING:
    from wafer.defects import DefectMap
    from wafer.repair import LogicalGrid


def add_common_options(parser: argparse.ArgumentParser) -> None:
    """``--json``, ``--seed`` and ``key=value`` overrides: every subcommand takes them."""
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument("--seed", type=int, default=0, help="seed for every random stream")
    parser.add_argument("overrides", nargs="*", metavar="key=value", help="spec overrides")


def add_spec_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--preset", help="built-in wafer (see `wafersim presets`)")
    parser.add_argument("--spec", help="wafer spec file (.toml/.yaml)")


def parse_grid(text: str) -> tuple[int, int]:
    """``"64x32"`` -> ``(64, 32)``."""
    width, sep, height = text.lower().partition("x")
    if not sep or not width.isdigit() or not height.isdigit():
        raise ConfigError(f"grid={text!r} must look like WxH, e.g. 64x64")
    return int(width), int(height)


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
