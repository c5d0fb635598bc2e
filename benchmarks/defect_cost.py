"""Cost per usable wafer and throughput per dollar against defects, from a defect sweep.

    wafersim sweep examples/sweeps/defect_throughput.yaml --out defect_throughput.h5
    python benchmarks/defect_cost.py defect_throughput.h5

For each model, repair strategy and defect level: the share of drawn maps whose plan
compiled and ran (the usable yield: a failed point is a map that could not hold the plan),
the cost of one usable wafer (the wafer's price over that share), samples/s per thousand
dollars of usable wafers (mean over the maps), and the chance that the same defect model
leaves a wafer with no defect at all (what a part needing every PE would yield). Prints a
markdown table (the README's).
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict

import numpy as np

from wafersim.sweep_results import read_records

LEVELS = ("wafer.defects.defect_density_per_cm2", "wafer.defects.pe_defect_prob")


def rows(path: str) -> list[list[str]]:
    groups: dict[tuple, list] = defaultdict(list)
    for record in read_records(path):
        config = json.loads(record.config)
        level = next(key for key in LEVELS if key in config)
        key = (config["model"], config["wafer.defects.repair"], level.rsplit(".", 1)[1],
               float(config[level]))  # fmt: skip
        groups[key].append(record)
    out = []
    for (model, repair, level, value), records in sorted(groups.items()):
        ok = [r.metrics for r in records if r.status == "ok"]
        share = len(ok) / len(records)
        price = ok[0]["cost.wafer_usd"] if ok else float("nan")
        usable_usd = price / share if share else float("inf")
        rate = np.mean([m["samples_per_sec"] for m in ok]) if ok else 0.0
        clean = np.mean([m["cost.defect_free_yield"] for m in ok]) if ok else float("nan")
        out.append([model.split("/")[-1].removesuffix(".yaml"), repair, f"{level} {value:g}",
                    f"{len(ok)}/{len(records)}", f"{usable_usd:,.0f}",
                    f"{rate / usable_usd * 1000:.4g}", f"{clean:.3g}"])  # fmt: skip
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sweep", help="a defect sweep's HDF5 results")
    args = parser.parse_args()
    head = ["model", "repair", "defects", "usable maps", "$ per usable wafer",
            "samples/s per k$", "defect-free yield"]  # fmt: skip
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for row in rows(args.sweep):
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
