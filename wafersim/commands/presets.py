"""``wafersim presets``: the built-in wafers and their main figures."""

from __future__ import annotations

import argparse
from typing import Any

from wafersim.commands.jobs import Command
from wafersim.wafer.config_io import parse_overrides
from wafersim.wafer.presets import PRESETS, preset
from wafersim.wafer.spec import WaferSpec


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


COMMAND = Command(add_presets_arguments, run_presets, _presets_text, seed=False)
