"""The first result on a fresh machine: wall times of the README's main job, a
kernel and synthetic traffic, cold (no Numba cache: every kernel compiles) and then warm
(loaded from the cache), for this checkout and, side by side in the same run, for another
one (``--against PATH``, e.g. an older commit's worktree); then the engine's first compile
alone: the wall time of Numba's compile of ``run_cycles`` (its callees included) in a cold
4 x 4 SUMMA job, in the job's own process (the background compile turned off).

Each checkout is copied to a temporary folder (its tracked files: ``git archive``) with an
empty ``NUMBA_CACHE_DIR``, and run with this interpreter (the installed dependencies):

    python benchmarks/bench_startup.py [--against ../old-checkout] [--steps N]
    python benchmarks/bench_startup.py --compile-profile kernel   # where a cold compile goes

``--compile-profile JOB`` runs one job cold in a child process that listens to Numba's
compile events and prints the functions whose compile took longest, each with its own time
(the compiles it set off of other functions taken out) and how many signatures it compiled.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from wafersim.wafer.atomic import write_json

ROOT = Path(__file__).resolve().parents[1]
_SPEC = importlib.util.spec_from_file_location("api_tree", ROOT / "docs" / "api_tree.py")
API_TREE = importlib.util.module_from_spec(_SPEC)  # the installed shape's one home
_SPEC.loader.exec_module(API_TREE)


def jobs(steps: int | None) -> dict[str, list[str]]:
    """The commands timed, as ``python -m <cli> ...`` arguments after the module (the main
    job as each checkout's README runs it unless ``steps`` is given)."""
    steps_word = [f"steps={steps}"] if steps else []
    return {
        "main job": ["run", "examples/fc_digits.yaml", *steps_word],  # --out: per run
        "kernel": [
            "kernel",
            "gemm",
            "--algo",
            "summa",
            "--m",
            "64",
            "--k",
            "64",
            "--n",
            "64",
            "--grid",
            "8x8",
            "--preset",
            "wse2",
        ],  # fmt: skip
        "traffic": [
            "traffic",
            "--preset",
            "tiny",
            "--grid",
            "8x8",
            "--cycles",
            "400",
            "--warmup",
            "100",
        ],  # fmt: skip
    }


def cli_module(tree: Path) -> str:
    """The checkout's command-line module (it moved from ``wafer`` to ``wafersim``)."""
    return "wafersim.cli" if (tree / "wafersim" / "cli.py").exists() else "wafer.cli"


def copy_tree(checkout: Path, into: Path, revision: str = "HEAD") -> Path:
    """The checkout's tracked files at ``revision``, in ``into``."""
    archive = subprocess.run(["git", "-C", str(checkout), "archive", revision], check=True,
                             capture_output=True).stdout  # fmt: skip
    into.mkdir(parents=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def import_path(tree: Path) -> str:
    """Where a copy's code imports from: the copy itself, or, for a revision whose
    ``pyproject.toml`` maps folders into the package, a tree of links in the installed
    shape inside it (``docs/api_tree.py``'s, the docs' and mypy's). The copy's root alone
    would leave those subpackages to this checkout's editable install, mixing two revisions
    in one run (and the commands run with ``python -P``, so the working folder, the copy,
    does not come first either)."""
    if not API_TREE.package_dirs(tree):
        return str(tree)
    return str(API_TREE.link_tree(tree, tree / "build" / "installed"))


def timed(tree: Path, cache: Path, argv: list[str], out: Path) -> float:
    """Wall seconds of one command; a run writes to ``out`` (a fresh folder: a run into its
    own earlier folder would resume from its last checkpoint)."""
    if argv[0] == "run":
        argv = [*argv, "--out", str(out)]
    env = os.environ | {"NUMBA_CACHE_DIR": str(cache), "PYTHONPATH": import_path(tree)}
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-P", "-m", cli_module(tree), *argv, "--json"], cwd=tree,
                          env=env, capture_output=True, text=True, check=False)  # fmt: skip
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{tree}: {' '.join(argv)} failed: {done.stderr.strip()[-500:]}")
    return wall


def measure(checkout: Path, work: Path, steps: int) -> dict[str, dict[str, float]]:
    tree = copy_tree(checkout, work / "tree")
    out = {}
    for name, argv in jobs(steps).items():
        cache = work / f"cache-{name.replace(' ', '-')}"
        cold = timed(tree, cache, argv, work / f"{name}-cold")
        warm = timed(tree, cache, argv, work / f"{name}-warm")
        out[name] = {"cold_s": cold, "warm_s": warm}
        print(f"  {name:9} cold {cold:7.1f} s   warm {warm:7.1f} s", flush=True)
    out["engine compile"] = {"cold_s": engine_compile(tree, work / "cache-engine")}
    print(f"  engine compile {out['engine compile']['cold_s']:7.1f} s", flush=True)
    return out


ENGINE_PROBE = """
import sys, time
from numba.core import event

try:  # no compile in a second process: this one's compile of the engine is what is timed
    try:
        import wafersim.fabric.precompile as precompile
    except ImportError:  # a checkout from before the wafersim namespace
        import fabric.precompile as precompile
    precompile.compile_in_background = lambda *args, **kwargs: None
    from wafersim.cli import main
except ImportError:  # a checkout from before the background compile and the wafersim package
    from wafer.cli import main

span = []

class Engine(event.Listener):
    def on_start(self, ev):
        if ev.data["dispatcher"].py_func.__name__ == "run_cycles" and not span:
            span.append(time.perf_counter())

    def on_end(self, ev):
        if ev.data["dispatcher"].py_func.__name__ == "run_cycles":
            span[1:] = [time.perf_counter()]

with event.install_listener("numba:compile", Engine()):
    main(["kernel", "gemm", "--algo", "summa", "--m", "16", "--k", "16", "--n", "16",
          "--grid", "4x4", "--preset", "tiny", "--json"])
print(span[1] - span[0], file=sys.stderr)
"""


def engine_compile(tree: Path, cache: Path) -> float:
    """Seconds of the engine's first compile (``ENGINE_PROBE``) with an empty cache."""
    env = os.environ | {"NUMBA_CACHE_DIR": str(cache), "PYTHONPATH": import_path(tree)}
    done = subprocess.run([sys.executable, "-P", "-c", ENGINE_PROBE], cwd=tree, env=env,
                          capture_output=True, text=True, check=False)  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"{tree}: the engine compile probe failed: {done.stderr[-500:]}")
    return float(done.stderr.strip().splitlines()[-1])


PROFILER = """
import sys, time
from collections import defaultdict
from numba.core import event
try:
    import wafersim.fabric.precompile as precompile
except ImportError:  # a checkout from before the wafersim namespace
    import fabric.precompile as precompile
from wafersim.cli import main

precompile.compile_in_background = lambda *args, **kwargs: None  # the engine here too

own, count, stack = defaultdict(float), defaultdict(int), []

class Compiles(event.Listener):
    def on_start(self, ev):
        stack.append([ev.data["dispatcher"].py_func.__qualname__, time.perf_counter(), 0.0])

    def on_end(self, ev):
        name, start, inner = stack.pop()
        took = time.perf_counter() - start
        own[name] += took - inner
        count[name] += 1
        if stack:
            stack[-1][2] += took

with event.install_listener("numba:compile", Compiles()):
    start = time.perf_counter()
    main(sys.argv[1:] + ["--json"])
    wall = time.perf_counter() - start
top = sorted(own.items(), key=lambda item: -item[1])[:15]
print(f"wall {wall:.1f} s, compiling {sum(own.values()):.1f} s in {len(own)} functions",
      file=sys.stderr)
for name, seconds in top:
    print(f"  {seconds:7.1f} s  {count[name]:3d} signature(s)  {name}", file=sys.stderr)
"""


def compile_profile(job: str, steps: int) -> None:
    """One job cold, with the compile time of each Numba function (see the docstring)."""
    with tempfile.TemporaryDirectory() as scratch:
        tree = copy_tree(ROOT, Path(scratch) / "tree")
        argv = jobs(steps)[job]
        if argv[0] == "run":
            argv = [*argv, "--out", str(Path(scratch) / "run")]
        env = os.environ | {"NUMBA_CACHE_DIR": str(Path(scratch) / "cache"),
                            "PYTHONPATH": import_path(tree)}  # fmt: skip
        done = subprocess.run([sys.executable, "-P", "-c", PROFILER, *argv], cwd=tree, env=env,
                              capture_output=True, text=True, check=False)  # fmt: skip
        print(done.stderr.strip()[-6000:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", type=Path, help="another checkout, timed side by side")
    parser.add_argument("--steps", type=int,
                        help="main job steps (default: each checkout's own config)")  # fmt: skip
    parser.add_argument("--out", default="out/bench_startup.json")
    parser.add_argument("--compile-profile", choices=list(jobs(1)), help="profile one job")
    args = parser.parse_args()
    if args.compile_profile:
        compile_profile(args.compile_profile, args.steps)
        return
    results = {}
    with tempfile.TemporaryDirectory() as scratch:
        for label, checkout in (("this", ROOT), ("against", args.against)):
            if checkout is None:
                continue
            print(f"{label}: {checkout}", flush=True)
            results[label] = measure(checkout.resolve(), Path(scratch) / label, args.steps)
    if "against" in results:
        for name, now in results["this"].items():
            then = results["against"][name]
            ratios = [f"{key[:-2]} {now[key] / then[key]:.2f}x" for key in now]
            print(f"{name:14} {'   '.join(ratios)} the other checkout's")
    write_json(args.out, results)
    print(f"saved {args.out}")


if __name__ == "__main__":
    main()
