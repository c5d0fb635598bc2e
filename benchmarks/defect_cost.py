"""Cost per usable wafer and throughput per dollar against defects, from a defect sweep.

    wafersim sweep examples/sweeps/defect_throughput.yaml --out defect_throughput.h5
    python benchmarks/defect_cost.py defect_throughput.h5

For each model and defect level: the share of drawn maps whose plan compiled and ran (the
usable yield: a failed point is a map that could not hold the plan), the cost of one usable
wafer (the wafer's price over that share), samples/s per thousand dollars of usable wafers
for each repair strategy (mean over its maps), and the chance that the same defect model
leaves a wafer with no defect at all, with the price of such a wafer (what a part needing
every PE and wire would cost). Prints markdown tables, a table a model (the README's keeps
their defect-density rows, both models in one).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict

import numpy as np
from wafersim.wafer.errors import ConfigError

from wafersim.sweeps.results import read_records

LEVELS = ("wafer.defects.defect_density_per_cm2", "wafer.defects.pe_defect_prob")


def groups(path: str) -> dict[tuple, dict[str, list]]:
    """Records by (model, defect level, value), then by repair strategy."""
    out: dict[tuple, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    for record in read_records(path):
        config = json.loads(record.config)
        level = next(key for key in LEVELS if key in config)
        key = (config["model"], level.rsplit(".", 1)[1], float(config[level]))
        out[key][config["wafer.defects.repair"]].append(record)
    return out


def row(level: str, value: float, by_repair: dict[str, list], repairs: list[str]) -> list[str]:
    records = [r for rs in by_repair.values() for r in rs]
    ok = [r.metrics for r in records if r.status == "ok"]
    share = len(ok) / len(records)
    price = ok[0]["cost.wafer_usd"] if ok else float("nan")
    usable_usd = price / share if share else float("inf")
    rates = []
    for repair in repairs:
        good = [r.metrics["samples_per_sec"] for r in by_repair[repair] if r.status == "ok"]
        rates.append(f"{np.mean(good) / usable_usd * 1000:.4g}" if good else "-")
    clean = float(np.mean([m["cost.defect_free_yield"] for m in ok])) if ok else float("nan")
    clean_usd = f"{price / clean:,.3g}" if clean > 0 else "unbounded"
    return [f"{level} {value:g}", f"{len(ok)}/{len(records)}", f"{usable_usd:,.0f}", *rates,
            f"{clean:.3g}" if clean > 0 else "< 1e-300", clean_usd]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sweep", help="a defect sweep's HDF5 results")
    args = parser.parse_args()
    try:
        table = groups(args.sweep)
    except ConfigError as error:
        print(f"defect_cost.py: error: {error}", file=sys.stderr)
        raise SystemExit(2) from None
    repairs = sorted({repair for by_repair in table.values() for repair in by_repair})
    for model in sorted({key[0] for key in table}):
        print(f"\n{model}\n")
        head = ["defects", "usable maps", "$ per usable wafer",
                *(f"samples/s per k$ ({repair})" for repair in repairs),
                "defect-free yield", "$ per defect-free wafer"]  # fmt: skip
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for (name, level, value), by_repair in sorted(table.items()):
            if name == model:
                print("| " + " | ".join(row(level, value, by_repair, repairs)) + " |")


if __name__ == "__main__":
    main()
