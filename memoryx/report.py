"""The outputs of ``wafersim run`` in its model directory DIR, laid out as the documented
system lays out its own (its ``performance`` folder, compile folder, event files beside)::

    DIR/performance/performance.json   the summary (units in the key names)
    DIR/run.yaml                       the run's resolved config (run.json without the yaml extra)
    DIR/compile/wafer_<i>/*.plan.json  each wafer's plan (compile artifacts, cached)
    DIR/events.out.tfevents.*          TensorBoard curves (extra tensorboard)
    DIR/trace.h5, timeline.png, wafer.png, checkpoints/

Simulated time is the slowest wafer's stream (compute with measured or analytic cycles, weights
in and gradients out through MemoryX); ``est_samples_per_sec`` is the analytic estimate of the
plan alone (each layer's cycles as the larger of its kernel and its edge transfer, no overlap).
``samples_per_sec`` is the run as it went: the wafer's rate (``wafer_samples_per_sec``)
unless the input pipeline supplies fewer (then the wafer waits for input).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import h5py
import numpy as np
from wafersim.compiler.assignment import assigned_pes
from wafersim.compiler.plan import working_grid
from wafersim.compiler.plan_records import GemmPlacement, Plan, to_json
from wafersim.compiler.tile_order import IN_PASSES
from wafersim.fabric.engine import REASON_NAMES
from wafersim.fabric.program import value_bytes
from wafersim.memoryx.data import input_bound
from wafersim.memoryx.energy import cost_report, energy_report, layer_energy, segment_events
from wafersim.memoryx.run import RunResult, Wafer, optimizer_of, stream_edge
from wafersim.memoryx.run_config import RunConfig, write_config
from wafersim.memoryx.run_events import write_events
from wafersim.memoryx.streaming import no_stall_threshold
from wafersim.memoryx.swarmx import scaling, tree_levels
from wafersim.wafer.atomic import atomic_hdf5, write_json

from wafersim import wafer

TRACE_COLUMNS = ("in_start", "in_end", "compute_start", "compute_end", "stall",
                 "buffer_wait", "update_wait", "out_end")  # fmt: skip


def performance(result: RunResult) -> dict[str, Any]:
    """The summary a researcher compares runs by (units in the key names)."""
    config, spec = result.config, result.config.spec
    slowest = max(range(len(result.streams)), key=lambda w: result.streams[w].total_cycles)
    stream = result.streams[slowest]
    summary = stream.summary()
    steps, wafers = config.steps, len(result.wafers)
    samples = steps * config.batch * wafers
    seconds = summary["total_cycles"] / spec.clock_hz
    est_step_s = result.wafers[slowest].plan.totals.seconds
    fed = _input(result, samples / seconds)
    rate = samples / run_seconds(result)
    plan = result.wafers[slowest].plan
    events = segment_events(plan, stream, len(optimizer_of(config).slots))  # one step's
    out = {
        "compile_time_s": result.compile_time_s,
        "programming_time_s": programming_time_s(result.wafers[slowest].plan, spec),
        "est_samples_per_sec": config.batch * wafers / est_step_s,
        "samples_per_sec": rate,
        "wafer_samples_per_sec": samples / seconds,
        "total_samples": samples,
        "total_time_s": samples / rate,
        "wafer_time_s": seconds,
        "sim_wall_s": result.sim_wall_s,
        "stall_fraction": summary["stall_fraction"],
        "edge_utilization": summary["edge_utilization"],
        "memoryx_bytes_in": summary["memoryx_bytes_in"],
        "memoryx_bytes_out": summary["memoryx_bytes_out"],
        "closed_form_stream_to_compute": no_stall_threshold(stream.segments, stream.edge),
        "weights_kept_for_backward": sorted(
            stream_edge(config, result.wafers[slowest].plan, wafers)[1]
        ),
        "total_cycles": summary["total_cycles"],
        "stall_cycles": summary["stall_cycles"],
        "buffer_wait_cycles": summary["buffer_wait_cycles"],
        "update_wait_cycles": summary["update_wait_cycles"],
        "wafers": wafers,
        "slowest_wafer": slowest,
        **_working(result.wafers[slowest].plan, spec),
        "tier": config.tier,
        "activations_kept": to_json(result.wafers[slowest].plan.activations),
        "swarmx": _swarmx(result, summary["total_cycles"]),
        "sparsity": _sparsity(result),
        "pe_cycles_by_reason": _reasons(result),
        "energy": energy_report(plan, events, spec, steps, samples / rate),
        "cost": cost_report(spec, _defects(config), rate, wafers),
        "layers": _layers(stream, layer_energy(events, spec, steps)),
        **fed,
        **_training(result),
        "config": config.raw,
        "spec": spec.to_dict(),
        "seed": config.seed,
        "wafersim_version": wafer.__version__,
    }
    return out


def _defects(config: RunConfig) -> dict[str, Any] | None:
    """The run's defect model as :func:`memoryx.energy.cost_report` reads it (None: the
    wafers are defect-free)."""
    defects = config.wafer.defects
    return None if defects is None else defects.to_dict()


def _layers(stream, energies: list[dict[str, float]]) -> list[dict[str, Any]]:
    """Per segment, over all steps: the stream's cycles and bytes, with its joules."""
    return [{**row, **joules} for row, joules in zip(stream.per_layer(), energies, strict=True)]


def run_seconds(result: RunResult) -> float:
    """The run's simulated time: its samples at the rate it went, the slowest wafer's or
    the input pipeline's where that is slower (performance.json's ``total_time_s``)."""
    config, spec = result.config, result.config.spec
    cycles = max(stream.total_cycles for stream in result.streams)
    samples = config.steps * config.batch * len(result.wafers)
    wafer_rate = samples / (cycles / spec.clock_hz)
    return samples / min(wafer_rate, _input(result, wafer_rate)["input_samples_per_s"])


def programming_time_s(plan: Plan, spec) -> float:
    """Loading the wafer before its first step: every working PE's whole SRAM image (code,
    constants, buffers) written in over all edge ports at their full rate. An assumption
    chosen from the design (the edge is the wafer's only way in; a PE's image is at most its
    SRAM); the host's own work before the transfer (the vendor's loader, its checks) is not
    modelled, so this is the transfer's floor."""
    return plan.working["pes"] * spec.pe.sram_bytes / (spec.edge_bytes_per_cycle * spec.clock_hz)


def _working(plan: Plan, spec) -> dict[str, Any]:
    """The slowest wafer's PEs that can take work, and their share of its logical grid:
    a defect study's ideal is the clean wafer's samples/s times that share."""
    pes = plan.working["pes"]
    return {"working_pes": pes, "working_fraction": pes / spec.logical_pes}


def _swarmx(result: RunResult, cycles: int) -> dict[str, Any]:
    """Data-parallel scaling: simulated (the slowest wafer against wafer 0 alone, MemoryX
    attached directly) and the analytic model of :func:`memoryx.swarmx.scaling`."""
    wafers, spec = len(result.wafers), result.config.spec
    alone = result.baseline.total_cycles
    segs = result.baseline.segments
    est = scaling(
        [w.plan.totals.cycles for w in result.wafers],
        sum(s.in_bytes for s in segs),
        sum(s.out_bytes for s in segs),
        spec,
    )
    return {
        "wafers": wafers,
        "tree_levels": tree_levels(wafers, spec.io.swarmx_fanout),
        "single_wafer_time_s": alone / spec.clock_hz,
        "speedup": wafers * alone / cycles,
        "scaling_efficiency": alone / cycles,
        "est_scaling_efficiency": est["efficiency"],
    }


def _sparsity(result: RunResult) -> dict[str, Any] | None:
    """What pruned weights saved over all steps in the passes that stream them in: bytes
    (the compressed stream, indices included, against the dense one) and, on the cycle tier,
    cycles (each sparse pass also ran once with its dense program); on the other tiers the
    plan's compressed bytes (its cycles already count the skipped zeros)."""
    if result.config.sparsity is None:
        return None
    history, wafer_plan = result.history, result.wafers[0].plan
    size = value_bytes(wafer_plan.options["dtype"])
    steps = result.config.steps * wafer_plan.activations.micro_batches
    passes = {f"{lay.name}/{p}": placed for lay, p, placed in wafer_plan.placements()}
    if history is not None:
        streamed = history.stream_bytes
    else:
        streamed = {
            key: placed.edge_bytes
            for key, placed in passes.items()
            if key.split("/")[1] in IN_PASSES
            and isinstance(placed, GemmPlacement)
            and placed.edge_bytes
        }  # fmt: skip (the weights' passes)
    dense = sum(passes[key].gemm.k * passes[key].gemm.n * size for key in streamed) * steps
    sent = sum(streamed.values()) * steps
    out = {
        "config": result.config.raw["sparsity"],  # the section as written
        "dense_bytes": dense,
        "streamed_bytes": sent,
        "streamed_fraction": sent / dense if dense else 1.0,
        "bytes_saved": dense - sent,
    }
    if history is not None:
        sparse_cycles = history.sparse_cycles  # the dense's twin: same step and operands
        out["cycles_saved"] = steps * sum(
            history.dense_cycles[k] - c for k, c in sparse_cycles.items()
        )
        out["dense_cycles"], out["sparse_cycles"] = history.dense_cycles, sparse_cycles
    return out


def _reasons(result: RunResult) -> dict[str, int] | None:
    """Cycle tier: wafer 0's GEMM PE-cycles by stall reason (``fabric.engine.REASON_NAMES``),
    over all steps and PEs."""
    if result.history is None or result.history.reasons is None:
        return None
    totals = np.array(result.history.reasons, np.int64).sum(axis=(0, 1))
    return dict(zip(REASON_NAMES, map(int, totals), strict=True))


def _input(result: RunResult, wafer_samples_per_s: float) -> dict[str, Any]:
    return input_bound(result.config.input, result.data.bytes_per_sample, wafer_samples_per_s)


def _training(result: RunResult) -> dict[str, Any]:
    history = result.history
    if history is None:
        return {"losses": [], "test_accuracy": None}
    final = history.accuracy[-1][1] if history.accuracy else None
    return {
        "losses": history.losses,
        "test_accuracy": final,
        "test_accuracy_history": [list(a) for a in history.accuracy],
        "measured_cycles": history.cycles[0] if history.cycles else {},
    }


def write_outputs(
    result: RunResult, out_dir: Path, full: bool = True,
    plots: Callable[[RunResult, Path], list[str] | str] | None = None,
    check: Callable[[dict[str, Any]], Any] | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Write performance/performance.json and the resolved config and, if ``full``,
    trace.h5, TensorBoard events and what ``plots(result, out_dir)`` draws (the
    application's PNGs, listed under ``plots``); returns the performance summary.
    ``check(perf)`` (the application's range check) may refuse the figures first."""
    perf = performance(result)
    if check is not None:
        check(perf)
    perf["config_path"] = str(write_config(result.config, out_dir))
    if full:
        write_trace(result, out_dir / "trace.h5")
        perf["tensorboard_events"] = write_events(result, out_dir)
        if plots is not None:
            perf["plots"] = plots(result, out_dir)
    write_json(performance_path(out_dir), perf)
    return perf


def performance_path(out_dir: Path) -> Path:
    return out_dir / "performance" / "performance.json"


def write_trace(result: RunResult, path: Path) -> None:
    """Per wafer: event times (steps, segments, columns), segment names, busy and holes."""
    with atomic_hdf5(path) as f:  # built in memory: HDF5 never meets a full disk
        f.attrs["wafersim_version"] = wafer.__version__
        f.attrs["columns"] = list(TRACE_COLUMNS)
        if result.history is not None:
            f.create_dataset("loss", data=np.array(result.history.losses, np.float64))
            if result.history.busy is not None:
                f.create_dataset("pe_busy_cycles", data=np.array(result.history.busy, np.int64))
            if result.history.reasons is not None:
                reasons = np.array(result.history.reasons, np.int64)
                f.create_dataset("pe_cycle_reasons", data=reasons, compression="gzip")
                f.attrs["reasons"] = ",".join(REASON_NAMES)
        for w, (stream, wafer_) in enumerate(zip(result.streams, result.wafers, strict=True)):
            group = f.create_group(f"wafer_{w}")
            group.create_dataset("times_cycles", data=stream.times, compression="gzip")
            names = [f"{s.layer}/{s.pass_name}" for s in stream.segments]
            group.create_dataset("segments", data=np.array(names, dtype=h5py.string_dtype()))
            if wafer_.logical is not None:
                group.create_dataset("holes", data=np.asarray(wafer_.logical.hole))


def assigned_cycles(placed_on: Wafer, result: RunResult) -> np.ndarray:
    """Per logical PE of a wafer, the kernel cycles of the layers placed on it in one step
    (timing-only runs have no measured busy counts): each pass on the PEs its
    ``pe_assignment`` gives work (:func:`compiler.assignment.assigned_pes`), once per
    micro-batch, and a recomputed forward twice."""
    spec, plan = result.config.spec, placed_on.plan
    shape = (spec.logical_height_pes, spec.logical_width_pes)
    hole = working_grid(spec, placed_on.logical).hole
    out = np.zeros(shape, np.int64)
    memory = plan.activations
    masks: dict[str, np.ndarray] = {}
    for layer, name, placed in plan.placements():
        again = memory.policy == "recompute" and bool(layer.block)
        where = placed.pe_assignment
        key = json.dumps(to_json(where), sort_keys=True)
        if key not in masks:
            masks[key] = np.zeros(shape, bool)
            rows, cols = assigned_pes(where, hole).T
            masks[key][rows, cols] = True
        runs = memory.micro_batches * (1 + (again and name == "forward"))
        out[masks[key]] += runs * placed.kernel_cycles
    return out
