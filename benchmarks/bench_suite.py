"""The test suite from a clean clone: wall time of the README's test command for this
checkout's HEAD and for another revision, side by side, on that revision's tests.

    python benchmarks/bench_suite.py --against REVISION [--rounds 2]

``--against`` is required: any revision ``git archive`` takes (a tag, a branch, a commit).

Each run gets a fresh copy of the revision's tracked files (``git archive``), so Numba's cache
(in the copy's ``__pycache__``, as in a clean clone) starts empty, and runs ``python -m pytest``
there with this interpreter and its installed packages (``PYTHONPATH`` the copy, in the
installed shape: :func:`bench_startup.import_path`). The tests
timed are the other revision's (the tests it had): that revision runs its whole
suite; this one the tests of its test functions that the other revision had too (under the
same name, or renamed since: :data:`RENAMED`), in the files it had, parameters included, so a
feature added since brings its own tests and they are left out. Rounds alternate which
revision runs first. Prints each run's wall time and pytest's summary line, then the ratios.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_startup import ROOT, copy_tree, import_path
from wafersim.wafer.atomic import write_json

# Test functions renamed since the baseline the start-up work was timed against (the one
# CHANGELOG.md's 0.3.0 measurements name): old name -> this checkout's
RENAMED = {
    "test_a_wafer_with_a_hole_in_every_column_compiles_without_turning":
        "test_a_wafer_with_holes_in_every_row_and_column_compiles",
    "test_holes_take_their_rows_out_of_the_working_grid":
        "test_holes_take_only_themselves_out_of_the_working_grid",
    "test_weight_stream_analytic_within_15_percent": "test_weight_stream_analytic_within_3_percent",
    "test_digits_without_sklearn_names_the_extra":
        "test_digits_are_scikit_learns_and_load_without_it",
    "test_checkpoint_of_another_config_is_refused":
        "test_checkpoint_of_another_config_is_refused_naming_the_key",
}  # fmt: skip


def pytest(tree: Path, *args: str) -> tuple[float, str]:
    """Wall seconds and output of ``python -m pytest ARGS`` in ``tree`` (its code imported)."""
    env = os.environ | {"PYTHONPATH": import_path(tree)}
    start = time.perf_counter()
    argv = [sys.executable, "-P", "-m", "pytest", "-p", "no:cacheprovider", *args]
    done = subprocess.run(argv, cwd=tree, env=env, capture_output=True, text=True, check=False)
    return time.perf_counter() - start, done.stdout


def collected(tree: Path) -> list[str]:
    """The node ids of ``tree``'s suite (collected serially, in a copy of its own: the timed
    runs get fresh ones)."""
    _, out = pytest(tree, "--collect-only", "-q", "-o", "addopts=", "-p", "no:xdist")
    return [line.strip() for line in out.splitlines() if "::" in line]


def function_of(node: str) -> str:
    """``file::test_name`` of a node id (its parameters dropped)."""
    return node.split("[", 1)[0]


def selection(then: list[str], now: list[str]) -> list[str]:
    """The ids of ``now`` whose test function ``then`` had (by its name then or now)."""
    functions = {function_of(node) for node in then}
    for function in list(functions):
        path, _, name = function.partition("::")
        if name in RENAMED:
            functions.add(f"{path}::{RENAMED[name]}")
    return [node for node in now if function_of(node) in functions]


def summary(out: str) -> str:
    """pytest's last line (the counts of passed, failed and skipped tests)."""
    lines = out.strip().splitlines()
    return lines[-1].strip("= ") if lines else ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", required=True, help="the revision timed beside HEAD")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--out", default="out/bench_suite.json")
    args = parser.parse_args()
    revisions = {"HEAD": "HEAD", "against": args.against}
    results = {name: [] for name in revisions}
    with tempfile.TemporaryDirectory() as scratch:
        then = collected(copy_tree(ROOT, Path(scratch) / "collect-then", args.against))
        now = collected(copy_tree(ROOT, Path(scratch) / "collect-now", "HEAD"))
        chosen = selection(then, now)
        print(f"{args.against}: {len(then)} tests; HEAD: {len(now)}, of which {len(chosen)} "
              f"are {args.against}'s", flush=True)  # fmt: skip
        for round_ in range(args.rounds):
            order = list(revisions) if round_ % 2 == 0 else list(revisions)[::-1]
            for name in order:
                tree = copy_tree(ROOT, Path(scratch) / f"{name}-{round_}", revisions[name])
                wall, out = pytest(tree, *(chosen if name == "HEAD" else []))
                results[name].append({"wall_s": wall, "summary": summary(out)})
                print(f"round {round_ + 1} {name:8} {wall:7.1f} s  {summary(out)}", flush=True)
                shutil.rmtree(tree, ignore_errors=True)
    ratios = [now["wall_s"] / then["wall_s"] for now, then in zip(*results.values(), strict=True)]
    print("HEAD / " + args.against + ": " + ", ".join(f"{ratio:.2f}x" for ratio in ratios))
    write_json(args.out, {"against": args.against, "runs": results, "ratios": ratios})
    print(f"saved {args.out}")


if __name__ == "__main__":
    main()
