"""``wafersim run CONFIG.yaml [--out DIR] [key=value ...]``: the main job, end to end.

The config names the model, the wafer (preset, overrides, defects), the data, the batch, the
optimizer, the steps and the tier (see :mod:`memoryx.run_config`); ``key=value`` overrides
set any config key (``steps=20``, ``optimizer.lr=0.01``). DIR (default
``out/<config name>-<digest>``) is the run's model directory (``memoryx.report``):
performance/performance.json, run.yaml, compile/ (the plans), TensorBoard event files, trace.h5,
PNG plots and checkpoints/; running again on the same DIR resumes from the newest checkpoint.

One run writes DIR at a time: a run holds ``DIR/.run.lock`` while it writes there, and a second
run on DIR is refused at once (exit status 2, as for any refused input), naming DIR.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wafersim.bundled import path_of
from wafersim.commands.energy_text import energy_line
from wafersim.commands.jobs import Command
from wafersim.commands.options import add_timeline_options
from wafersim.commands.progress import progress_for
from wafersim.fields import refuse_out_of_range
from wafersim.wafer.atomic import exclusive
from wafersim.wafer.config_io import parse_overrides
from wafersim.wafer.errors import ConfigError, WaferSimError

if TYPE_CHECKING:
    from wafersim.memoryx.run_config import RunConfig

RUN_LOCK = ".run"  # DIR/.run.lock: held by the run writing DIR


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", type=path_of("run"),
                        help="run config (.yaml/.toml) or a bundled one's name, e.g. fc_digits "
                             "(`wafersim examples` lists them)")  # fmt: skip
    parser.add_argument("--out", help="output folder (default: out/<config name>-<digest>)")
    parser.add_argument(
        "--summary-only",
        action="store_true",
        help="write performance/performance.json and run.yaml only (sweeps)",
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--validate-only", action="store_true",
                      help="check the config and list every layer's passes with their shape "
                           "and kernel; write nothing")  # fmt: skip
    mode.add_argument("--compile-only", action="store_true",
                      help="make and save every wafer's plan (DIR/compile), then stop")  # fmt: skip
    add_timeline_options(parser, regions=False)


def run_run_command(args: argparse.Namespace) -> dict[str, Any]:
    from wafersim.memoryx.run import validate_config
    from wafersim.memoryx.run_config import load_run_config
    from wafersim.memoryx.run_modes import run_mode

    if args.seed:
        raise ConfigError("wafersim run takes its seed from the config: use seed=N")
    config = load_run_config(args.config, parse_overrides(args.overrides))
    if args.engine != "cpu" and config.tier == "analytic":
        raise ConfigError(f"--engine {args.engine} runs the cycle and fast tiers' engine runs; "
                          "tier analytic runs none")  # fmt: skip
    out = Path(args.out) if args.out else default_out(args.config, config.run_digest)
    mode = _mode(args)
    if mode == "validate-only":
        return run_mode(mode, config, out).to_dict()
    validate_config(config)  # a refused config writes nothing in DIR, not even the lock
    with holding(out):
        return run_mode(mode, config, out).to_dict() if mode else _run(args, config, out)


def _mode(args: argparse.Namespace) -> str:
    """``validate-only``, ``compile-only`` or ``""`` (a full run), its options checked."""
    mode = "validate-only" if args.validate_only else "compile-only" if args.compile_only else ""
    if mode:
        if args.engine != "cpu":
            raise ConfigError(f"--engine {args.engine}: --{mode} runs nothing on an engine")
        if args.summary_only:
            raise ConfigError(f"--summary-only: --{mode} writes no performance summary")
        if args.out and mode == "validate-only":
            raise ConfigError("--out: --validate-only writes nothing")
        if args.timeline:
            raise ConfigError(f"--timeline: --{mode} runs no step to draw")
    return mode


@contextlib.contextmanager
def holding(out: Path) -> Iterator[None]:
    """Hold ``out``'s run lock for the block, or refuse at once: two runs writing one folder
    both exited 0 and left one run's results beside the other's config."""
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(exclusive(out / RUN_LOCK, "run"))
        except ConfigError:
            lock = out / f"{RUN_LOCK}.lock"
            holder = lock.read_text().strip() if lock.is_file() else ""
            raise ConfigError(
                f"--out {out}: another run holds this folder (pid {holder or 'unknown'}, "
                f"{lock}); wait for it to end, or give another --out"
            ) from None
        yield


def _run(args: argparse.Namespace, config: RunConfig, out: Path) -> dict[str, Any]:
    """The full run, in ``out`` that this process holds: simulate, then write the outputs."""
    from wafersim.memoryx.report import write_outputs
    from wafersim.memoryx.run import run, validate_config
    from wafersim.plots.run import write_plots

    if config.tier != "analytic":  # the engine compiles while the job starts
        from wafersim.fabric.precompile import compile_in_background

        validate_config(config, out)  # a refused resume starts no compile (run checks again)
        compile_in_background("programs", args.engine, half=config.dtype != "fp32")
    line = progress_for(sys.stderr)
    started = time.perf_counter()

    def progress(stage: str, done: int, total: int, detail: str) -> None:
        elapsed = time.perf_counter() - started
        line.show(f"run: {stage} {done}/{total}, {detail}, {elapsed:.0f} s", done, total)

    try:
        result = run(config, out, progress)
    finally:
        line.close()
    perf = write_outputs(result, out, full=not args.summary_only, plots=write_plots,
                         check=lambda figures: refuse_out_of_range("run", figures))  # fmt: skip
    if args.timeline:
        from wafersim.memoryx.run_timeline import run_timeline

        run_timeline(result).write(args.timeline, {"command": "run", "config": args.config})
        perf["timeline"] = args.timeline
    return {"out": str(out), "engine": args.engine, **perf}


def run_outputs(args: argparse.Namespace) -> dict[str, str]:
    """Where ``run`` writes without ``--out``: its default folder (none for --validate-only,
    nor for a config that does not load: that run is refused before it writes)."""
    from wafersim.memoryx.run_config import load_run_config

    if args.validate_only:
        return {}
    try:
        config = load_run_config(args.config, parse_overrides(args.overrides))
    except WaferSimError:
        return {}
    return {"out": str(default_out(args.config, config.run_digest))}


def default_out(config_path: str, digest: str) -> Path:
    """``out/<config name>-<12 hex of the config's digest>``: a changed config (an override,
    a sweep point) gets its own folder, the same config resumes in its old one."""
    return Path("out") / f"{Path(config_path).stem}-{digest[:12]}"


def run_text(r: dict[str, Any]) -> str:
    """The figures a researcher looks at first; the rest is in performance/performance.json."""
    if "mode" in r:
        from wafersim.memoryx.run_modes import mode_text

        return mode_text(r)
    lines = [
        f"run: {r['config']['model']} on {r['spec']['name']} ({r['tier']} tier, "
        f"{r['wafers']} wafer(s)) -> {r['out']}",
        f"  simulated time {r['total_time_s']:.4g} s for {r['total_samples']} samples: "
        f"{r['samples_per_sec']:.4g} samples/s (the wafer alone {r['wafer_samples_per_sec']:.4g}, "
        f"analytic estimate {r['est_samples_per_sec']:.4g})",
        f"  stall fraction {r['stall_fraction']:.3f}, "
        f"edge utilization {r['edge_utilization']:.3f}, "
        f"MemoryX in {r['memoryx_bytes_in']} B, out {r['memoryx_bytes_out']} B",
        f"  input pipeline {r['input_samples_per_s']:.4g} samples/s"
        + (" (suspected input bottleneck)" if r["suspected_input_bottleneck"] else ""),
        "  "
        + energy_line(r["energy"]["per_step_j"], r["energy"]["gflop_per_step"] * 1e9)
        + (" a step" if r["wafers"] == 1 else " a step, one wafer of the cluster's"),
        f"  compile {r['compile_time_s']:.2f} s, programming {r['programming_time_s']:.3g} s "
        f"(a floor: SRAM images in over the edge), wall {r['sim_wall_s']:.1f} s",
    ]
    kept = r["activations_kept"]
    lines.append(
        f"  activations kept for backward: {kept['policy']}, {kept['micro_batches']} "
        f"micro-batch(es) of {kept['sequences_per_micro_batch']}, {kept['bytes_per_pe']} B/PE"
    )
    if r["losses"]:
        lines.append(f"  loss {r['losses'][0]:.4f} -> {r['losses'][-1]:.4f}"
                     + (f", test accuracy {r['test_accuracy']:.4f}"
                        if r["test_accuracy"] is not None else ""))  # fmt: skip
    return "\n".join(lines)


COMMAND = Command(add_run_arguments, run_run_command, run_text, overrides="run-config",
                  outputs={"out": "folder", "timeline": "file"}, engine=True,
                  default_outputs=run_outputs)  # fmt: skip
