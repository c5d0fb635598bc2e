"""``wafersim sweep SWEEP.yaml``: run a parameter sweep into one HDF5 results table.

Exit status 0 when every point of the table is ``ok``; when any failed, the summary is
printed as usual, each kind of error with its count goes to stderr, and the status is 1
(:data:`FAILED_EXIT`): the table is written, and a rerun retries the failed points.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from typing import Any

from wafersim.bundled import path_of
from wafersim.commands.jobs import Command
from wafersim.commands.progress import progress_for
from wafersim.sweeps.run import MAX_ATTEMPTS, SweepProgress

FAILED_EXIT = 1  # some points failed (2 is a usage or config error: nothing ran)
KINDS_SHOWN = 5  # kinds of error listed on stderr; the rest are counted


def add_sweep_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("sweep_file", metavar="SWEEP", type=path_of("sweep"),
                        help="sweep file (.yaml/.toml) or a bundled sweep's name, e.g. "
                             "defect_tolerance (`wafersim examples` lists them)")  # fmt: skip
    parser.add_argument("--scheduler", help="address of a running Dask scheduler (tcp://...)")
    parser.add_argument("--workers", type=int, help="workers of the embedded Dask cluster")
    parser.add_argument("--serial", action="store_true", help="run the points in-process")
    parser.add_argument(
        "--out", default="sweep_results.h5", help="results table (.h5); re-running resumes it"
    )


def run_sweep_command(args: argparse.Namespace) -> dict[str, Any]:
    from wafersim.sweeps.config import load_sweep
    from wafersim.sweeps.run import run_sweep

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
    result = {**asdict(summary), "sweep": sweep.path, "sweep_sha256": sweep.sha256}
    if summary.failed:
        _exit_failed(result, args.json)
    return result


def _exit_failed(result: dict[str, Any], as_json: bool) -> None:
    """The summary on stdout as the CLI prints it, why points failed on stderr, then exit
    status 1: a sweep whose points all failed had looked like a success to scripts and CI."""
    text = json.dumps(result, indent=2, sort_keys=True) if as_json else sweep_text(result)
    sys.stdout.write(text + "\n")
    sys.stderr.write(failures_text(result) + "\n")
    raise SystemExit(FAILED_EXIT)


def failures_text(r: dict[str, Any]) -> str:
    """The failed points by kind of error: the first error of each kind, with its count."""
    lines = [f"wafersim sweep: {r['failed']} of {r['total']} points failed; the errors, by kind:"]
    lines += [
        f"  {kind['count']} x (first: point {kind['first_point']}) {_first_line(kind['error'])}"
        for kind in r["failures"][:KINDS_SHOWN]
    ]
    hidden = r["failures"][KINDS_SHOWN:]
    if hidden:
        points = sum(kind["count"] for kind in hidden)
        lines.append(f"  and {len(hidden)} more kinds ({points} points): see the error column")
    retry = sum(kind["retryable"] for kind in r["failures"])
    lines.append(
        f"{r['out']} holds every point's error; rerunning retries {retry} of them"
        if retry
        else f"{r['out']} holds every point's error; each had its {MAX_ATTEMPTS} attempts, "
        "so fix the cause and write to a new --out"
    )
    return "\n".join(lines)


def _first_line(text: str) -> str:
    return text.splitlines()[0] if text else text


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
