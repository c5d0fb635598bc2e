"""``wafersim plot RESULTS.h5 --x KEY --y METRIC [--series KEY ...] [--ideal METRIC]
[--out PNG]``: a plot.

Reads a ``wafersim sweep`` results table and draws the metric against a config key, one
line per combination of ``--series`` values, repeated points (seeds) averaged with a 95 % confidence
band; points without the key (another panel of the sweep) are left out. ``--ideal
working_fraction`` adds each series' ideal line: its point at ``x = 0`` (a clean wafer) times
that metric; ``--relative`` divides each series by its ``x = 0`` point. Prints the plotted
numbers as well (JSON with ``--json``), and names the points of the key it left out (failed,
without a value, not run yet) on stderr, in the summary and in a footnote on the figure.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from wafersim.commands.jobs import Command


def add_plot_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("results", help="a wafersim sweep results file (.h5)")
    parser.add_argument("--x", required=True, help="config key on the x axis")
    parser.add_argument("--y", required=True, help="metric on the y axis")
    parser.add_argument("--series", nargs="*", default=[], help="config keys: a line per value")
    parser.add_argument(
        "--ideal", help="metric scaling each series' x = 0 point into an ideal line (dashed)"
    )
    parser.add_argument(
        "--relative", action="store_true", help="divide each series by its x = 0 point"
    )
    parser.add_argument("--logx", action="store_true", help="logarithmic x axis")
    parser.add_argument("--title", help="plot title (default: the results file name)")
    parser.add_argument("--out", help="PNG path (default: RESULTS with -Y.png)")


def run_plot_command(args: argparse.Namespace) -> dict[str, Any]:
    from wafersim.plots.sweep import curves, left_out, left_out_note, plot

    data = curves(args.results, args.x, args.y, args.series, args.ideal, args.relative)
    left = left_out(args.results, args.x, args.y, args.ideal)
    note = left_out_note(left)
    if note:  # on stderr too, where --json output does not hide it
        sys.stderr.write(f"wafersim plot: {note}\n")
    results = Path(args.results)
    out = Path(args.out) if args.out else results.with_name(f"{results.stem}-{args.y}.png")
    label = f"{args.y} / its x = 0 value" if args.relative else args.y
    plot(data, args.x, label, args.title or results.name, out, args.logx, note)
    return {"out": str(out), "x": args.x, "y": args.y, "series": args.series,
            "ideal": args.ideal, "curves": data, "left_out": left}  # fmt: skip


def plot_text(r: dict[str, Any]) -> str:
    lines = [f"plot: {r['y']} vs {r['x']} -> {r['out']}"]
    for label, c in r["curves"].items():
        points = ", ".join(
            f"{x:g}: {m:.4g} ± {b:.2g}"
            for x, m, b in zip(c["x"], c["mean"], c["ci95"], strict=True)
        )
        lines.append(f"  {label or r['y']}: {points}")
        if "ideal" in c:
            ideal = ", ".join(f"{x:g}: {v:.4g}" for x, v in zip(c["x"], c["ideal"], strict=True))
            lines.append(f"    ideal: {ideal}")
    return "\n".join(lines)


COMMAND = Command(add_plot_arguments, run_plot_command, plot_text, seed=False, overrides="",
                  outputs={"out": "file"})  # fmt: skip
