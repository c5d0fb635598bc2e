"""Energy and cost of a weight-streaming run: performance.json's ``energy`` and ``cost``.

Energy. Each segment of a step (a layer's pass on one micro-batch, as the stream ran it)
costs its placement's events (:func:`compiler.plan_energy.placement_events`: the same in
every tier), its bytes through the wafer edge, and MemoryX's memory: it reads the weights it
sends and writes the gradients it takes, and its optimizer reads and writes each weight's
fp32 state once a step (counted on the layer's last gradient segment). SRAM leakage runs
over every working PE for the whole step. A data-parallel run reports one wafer with its
own share of MemoryX; multiply by ``wafers`` for the cluster.

Cost. ``spec.cost.wafer_usd`` is the silicon of one wafer. wafersim's compiler places work
on every working PE around the dead ones, so a wafer whose plan compiles is usable: its cost
is the wafer's, and a defect study's share of maps that compile is the usable yield (a
sweep's failed points). Beside it, ``defect_free_yield`` is the chance that the same defect
model leaves the wafer with no defect at all, what a part that needs every PE and wire
would yield, and the price of such a wafer.
"""

from __future__ import annotations

from typing import Any

from wafersim.compiler.plan import RECOMPUTE
from wafersim.compiler.plan_energy import placement_events
from wafersim.compiler.plan_records import Plan
from wafersim.memoryx.optimizer import STATE_BYTES_PER_ELEMENT
from wafersim.memoryx.streaming import StreamResult
from wafersim.wafer.defects import defect_free_probability
from wafersim.wafer.energy import Events, energy, gflop_per_j
from wafersim.wafer.spec import WaferSpec


def segment_events(plan: Plan, stream: StreamResult, state_slots: int) -> list[Events]:
    """The events of each segment of one step of ``stream`` (``plan``'s), with an optimizer
    of ``state_slots`` fp32 values a weight."""
    dtype = plan.options["dtype"]
    layers = {layer.name: layer for layer in plan.layers}
    last_out = {seg.layer: j for j, seg in enumerate(stream.segments) if seg.out_bytes}
    out = []
    for j, seg in enumerate(stream.segments):
        layer = layers[seg.layer]
        placed = layer.passes["forward" if seg.pass_name == RECOMPUTE else seg.pass_name]
        moved = seg.in_bytes + seg.out_bytes
        update = last_out.get(seg.layer) == j
        state = 2 * layer.params * state_slots * STATE_BYTES_PER_ELEMENT if update else 0
        edge = Events(edge_bytes=moved, memoryx_bytes=moved + state)
        out.append(placement_events(placed, dtype) + edge)
    return out


def energy_report(
    plan: Plan, events: list[Events], spec: WaferSpec, steps: int, run_s: float
) -> dict[str, Any]:
    """performance.json's ``energy`` from each segment's ``events`` of a step
    (:func:`segment_events`): joules per step split by where they went, the run's total of
    ``steps``, the mean power and GFLOP/J (leakage over the run's ``run_s``, waits for input
    included)."""
    step_s = run_s / steps
    step = sum(events, Events())
    split = energy(step, spec, pe_seconds=plan.working["pes"] * step_s)
    return {
        "per_step_j": split.to_dict(),
        "total_j": split.total_j * steps,
        "mean_power_w": split.total_j / step_s if step_s else 0.0,
        "gflop_per_step": step.flops / 1e9,
        "gflop_per_j": gflop_per_j(step, split),
        "note": "one wafer; leakage of logic, clocks, cooling and power delivery left out",
    }


def segment_joules(plan: Plan, stream: StreamResult, spec: WaferSpec, state_slots: int,
                   run_s: float):  # fmt: skip
    """Each segment's joules in one step (leakage left out), and one step's SRAM leakage
    over ``plan``'s working PEs for a run of ``run_s``: what the timeline's energy counter
    adds up."""
    joules = [energy(e, spec).total_j for e in segment_events(plan, stream, state_slots)]
    step_s = run_s / stream.times.shape[0]
    leakage = energy(Events(), spec, pe_seconds=plan.working["pes"] * step_s).total_j
    return joules, leakage


def layer_energy(events: list[Events], spec: WaferSpec, steps: int) -> list[dict[str, float]]:
    """Per segment (its ``events`` of a step), over ``steps``: joules (leakage left out) and
    GFLOP/J."""
    out = []
    for segment in events:
        split = energy(segment, spec)
        out.append({"energy_j": steps * split.total_j, "gflop_per_j": gflop_per_j(segment, split)})
    return out


def cost_report(spec: WaferSpec, defects: dict[str, Any] | None, samples_per_sec: float,
                wafers: int = 1):  # fmt: skip
    """performance.json's ``cost``: a (usable) wafer's price, the cluster's samples/s per
    thousand dollars of its ``wafers``, and what a wafer without any defect would cost under
    the run's defect model."""
    price = spec.cost.wafer_usd
    params = dict(defects or {})
    model = params.pop("model", "poisson")
    for key in ("seed", "repair"):
        params.pop(key, None)
    clean = defect_free_probability(spec, model, params) if defects else 1.0
    return {
        "wafer_usd": price,
        "usable_wafer_usd": price,
        "wafers": wafers,
        "samples_per_sec_per_kusd": samples_per_sec / (price * wafers) * 1000 if price else None,
        "defect_free_yield": clean,
        "defect_free_wafer_usd": price / clean if clean > 0 else None,
    }
