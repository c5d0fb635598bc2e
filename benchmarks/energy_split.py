"""Where a run's joules go: the energy split per step of a run config, and of the layers
whose names start with a prefix (one GPT-3 block: ``h.0.``). Prints the README's figures.

    python benchmarks/energy_split.py examples/gpt3_175b_layers.yaml --layers h.0.
    python benchmarks/energy_split.py examples/fc_digits.yaml steps=2 tier=fast
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from wafersim.memoryx.energy import segment_events
from wafersim.memoryx.report import performance
from wafersim.memoryx.run import optimizer_of, run
from wafersim.memoryx.run_config import load_run_config
from wafersim.wafer.config_io import parse_overrides
from wafersim.wafer.energy import LABELS, Events, energy, gflop_per_j


def split_row(name: str, split: dict[str, float], flops: float) -> str:
    total = split["total_j"]
    parts = " | ".join(f"{split[key]:.4g} ({split[key] / total:.0%})" for key in LABELS)
    return f"| {name} | {total:.4g} | {parts} | {flops / 1e9 / total:.3g} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("config", help="a run config (YAML)")
    parser.add_argument("overrides", nargs="*", help="key=value overrides")
    parser.add_argument("--layers", help="also the split of the layers named PREFIX...")
    args = parser.parse_args()
    config = load_run_config(args.config, parse_overrides(args.overrides))
    with tempfile.TemporaryDirectory() as out:
        result = run(config, Path(out))
    perf = performance(result)
    print("| what | J a step | " + " | ".join(LABELS.values()) + " | GFLOP/J |")
    print("|" + "---|" * (len(LABELS) + 3))
    report = perf["energy"]
    print(split_row(f"{Path(config['model']).stem} ({perf['tier']} tier), a whole step",
                    report["per_step_j"], report["gflop_per_step"] * 1e9))  # fmt: skip
    if args.layers:
        plan, stream = result.wafers[0].plan, result.streams[0]
        events = segment_events(plan, stream, len(optimizer_of(config).slots))
        picked = sum((e for e, seg in zip(events, stream.segments, strict=True)
                      if seg.layer.startswith(args.layers)), Events())  # fmt: skip
        split = energy(picked, config.spec)
        print(split_row(f"layers {args.layers}* (leakage left out)", split.to_dict(), picked.flops))
        print(f"\n{gflop_per_j(picked, split):.3g} GFLOP/J in those layers")


if __name__ == "__main__":
    main()
