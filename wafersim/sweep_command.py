"""``wafersim sweep SWEEP.yaml``: run a parameter sweep into one HDF5 results table."""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict
from typing import Any

from wafersim.jobs import Command
from wafersim.progress import progress_for
from wafersim.sweep import SweepProgress


def add_sweep_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("sweep_file", metavar="SWEEP", help="sweep file (.yaml/.toml)")
    parser.add_argument("--scheduler", help="address of a running Dask scheduler (tcp://...)")
    parser.add_argument("--workers", type=int, help="workers of the embedded Dask cluster")
    parser.add_argument("--serial", action="store_true", help="run the points in-process")
    parser.add_argument(
        "--out", default="sweep_results.h5", help="results table (.h5); re-running resumes it"
    )


def run_sweep_command(args: argparse.Namespace) -> dict[str, Any]:
    from wafersim.sweep import run_sweep
    from wafersim.sweep_config import load_sweep

    sweep = load_sweep(args.sweep_file)
    show = progress_for(sys.stderr)
    try:
        summary = run_sweep(
            sweep,
            args.out,
            scheduler=args.scheduler,
            workers=args.workers,
            serial=args.serial,
            progress=lambda p: show.show(*sweep_line(p)),
        )
    finally:
        show.close()
    return {**asdict(summary), "sweep": sweep.path, "sweep_sha256": sweep.sha256}


def sweep_line(p: SweepProgress) -> tuple[str, int, int]:
    """The sweep's progress line: points done and failed, time spent and left."""
    left = "?" if p.eta_s is None else f"{p.eta_s:.0f}"
    line = (
        f"sweep: {p.done}/{p.total} points done, {p.failed} failed, "
        f"{p.elapsed_s:.1f} s elapsed, ~{left} s left"
    )
    return line, p.done, p.total


def sweep_text(r: dict[str, Any]) -> str:
    rate = "" if r["points_per_s"] is None else f", {r['points_per_s']:.2f} points/s"
    return (
        f"{r['sweep']}: {r['total']} points, {r['ok']} ok, {r['failed']} failed "
        f"({r['ran']} run now, {r['skipped']} already done) on {r['executor']}; "
        f"{r['wall_s']:.1f} s{rate} -> {r['out']}"
    )


COMMAND = Command(add_sweep_arguments, run_sweep_command, sweep_text, seed=False, overrides="",
                  outputs={"out": "file"})  # fmt: skip
