"""What each figure wafersim reports means, its unit and the range it must lie in: one table
for the commands' JSON (``traffic``, ``kernel``, ``defects``, ``compile``, ``run``'s
performance.json), from which docs/fields.md is written and against which every result is
checked before it is printed (a figure outside its range is refused, not shown).

A field's ``path`` is its dotted key in the JSON, ``[]`` standing for any list element and
``*`` for any one key (``fnmatch``). ``high`` may be a function of the whole document (a
count bounded by the PEs times the cycles); ``high_text`` says it in words for the page.
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from wafersim.wafer.errors import FigureError

Bound = float | Callable[[dict[str, Any]], float] | None


@dataclass(frozen=True)
class Field:
    """One reported figure: where it is, its unit, what it means and its range."""

    path: str
    unit: str
    meaning: str
    low: Bound = 0.0
    high: Bound = None
    high_text: str = ""

    def bounds(self, document: dict[str, Any]) -> tuple[float, float]:
        """The inclusive range of this field in ``document`` (None: unbounded)."""
        return _value(self.low, document, -math.inf), _value(self.high, document, math.inf)


def _value(bound: Bound, document: dict[str, Any], otherwise: float) -> float:
    if bound is None:
        return otherwise
    try:
        return float(bound(document)) if callable(bound) else float(bound)
    except (KeyError, TypeError):  # the fields a bound reads are absent: no bound
        return otherwise


def _pe_cycles(document: dict[str, Any]) -> float:
    """PE-cycles of a kernel or traffic run: its grid's PEs times its cycles."""
    return document["width_pes"] * document["height_pes"] * document["cycles"]


# fmt: off
SHARE = "share"  # a fraction of a whole, in [0, 1]
PE_CYCLES = "PE-cycles"

KERNEL: tuple[Field, ...] = (
    Field("cycles", "cycles", "cycles from the first to the last event of the run (cycle tier)"
          " or the tier's estimate", 1),
    Field("analytic_cycles", "cycles", "the analytic tier's estimate of the same run", 1),
    Field("seconds", "s", "cycles at the spec's clock"),
    Field("flops", "FLOP", "the kernel's useful floating-point operations (2 per multiply-add)"),
    Field("utilization", SHARE, "achieved FLOP/s over the peak of the grid's PEs", 0, 1),
    Field("max_abs_error", "value", "largest absolute difference between the engine's output "
          "and numpy's"),
    Field("link_utilization_max", "wavelets/cycle", "busiest link's wavelets a cycle (one a "
          "cycle at most)", 0, 1),
    Field("colors_used", "colors", "router colors the kernel's routes take"),
    Field("sram_peak_bytes", "bytes", "largest SRAM a PE of the patch uses"),
    Field("busy_task_cycles", "task-cycles", "cycles in which a PE task advanced, summed over "
          "the tasks and the patch's PEs (two tasks at once count twice)"),
    Field("patch_working_pes", "PEs", "working PEs of the wafer patch the kernel ran on: the "
          "grid's, and those of columns and rows it skipped round holes", 1),
    Field("pe_cycles_by_reason.*", PE_CYCLES, "each working PE of the patch, every cycle once, "
          "by what it did (computing, waiting_input, waiting_output, waiting_sram, idle); they "
          "sum to patch_working_pes x cycles", 0, lambda d: d["patch_working_pes"] *
          d["cycles"], "patch_working_pes x cycles"),
    Field("wavelet_hops", "wavelet-hops", "wavelets times the links each crossed"),
    Field("width_pes", "PEs", "the grid's width", 1),
    Field("height_pes", "PEs", "the grid's height", 1),
    Field("holes", "PEs", "dead PEs inside the patch"),
    Field("energy.*", "J", "energy of the run by part (compute, SRAM, fabric, edge I/O, "
          "MemoryX) and in total"),
    Field("sim_wall_s", "s", "wall time of the engine's run, its compile left out"),
    Field("wall_s", "s", "wall time of the whole command"),
    Field("compile_s", "s", "wall time of the engine's compile or cache load in this process"),
    Field("seed", "", "the seed the data were drawn from", 0, 2**63 - 1),
    Field("shape.*", "elements", "the kernel's problem size", 0),
    Field("prefix.edge_share", SHARE, "--stop-at: share of the edge ports' wavelets sent by "
          "then", 0, 1),
    Field("prefix.ops_share", SHARE, "--stop-at: share of the PEs' ops done by then", 0, 1),
    Field("prefix.analytic_share", SHARE, "--stop-at: share of the weights the analytic "
          "schedule has in by then", 0, 1),
    Field("prefix.fast_share", SHARE, "--stop-at: the same by the fast tier's schedule", 0, 1),
    Field("prefix.*_error", "ratio", "--stop-at: a tier's share or estimate over the "
          "prefix's, less 1 (either sign)", -1),
    Field("prefix.pace", "share/cycle", "--stop-at: edge share a cycle over the prefix's "
          "second half", 0, 1),
    Field("prefix.*", "", "--stop-at: cycles simulated and projected, the tiers' estimates, "
          "build and run wall times (s), routers, speed (all >= 0)"),
    Field("fit.a", "cycles", "the fast tier's fit, engine - analytic cycles = a + b x units: its"
          " intercept (either sign)", None),
    Field("fit.b", "cycles/unit", "the fit's slope (either sign)", None),
    Field("fit.units", "units", "the estimated kernel's units of the fit (its lines)", 1),
    Field("fit.reduced_runs[].*", "", "the small engine runs the fit comes from: their "
          "rows_cols, shape, units, engine and analytic cycles (all >= 0)"),
)

TRAFFIC: tuple[Field, ...] = (
    Field("cycles", "cycles", "cycles simulated", 1),
    Field("offered_rate", "flits/PE/cycle", "flits each PE offers a cycle", 0, 1),
    Field(
        "accepted_rate",
        "flits/PE/cycle",
        "flits delivered per working PE a cycle after warm-up",
        0,
        1,
    ),
    Field("avg_hops", "hops", "mean links a measured packet crossed"),
    Field(
        "avg_network_latency_cycles",
        "cycles",
        "mean cycles from a packet's first flit entering the network to its last flit leaving",
    ),
    Field(
        "avg_packet_latency_cycles",
        "cycles",
        "mean cycles from a packet's creation to its"
        " last flit's delivery, source queueing included",
    ),
    Field("p99_packet_latency_cycles", "cycles", "99th percentile of the packet latency"),
    Field("flits_injected", "flits", "flits that entered the network"),
    Field(
        "flits_ejected",
        "flits",
        "flits delivered",
        0,
        lambda d: d["flits_injected"],
        "flits_injected",
    ),
    Field(
        "flits_in_flight",
        "flits",
        "flits still in the network at the end",
        0,
        lambda d: d["flits_injected"],
        "flits_injected",
    ),
    Field("packets_measured", "packets", "packets created after warm-up and delivered"),
    Field("packet_size", "flits", "flits a packet", 1),
    Field("colors", "colors", "colors the packets spread over (virtual channels)", 1),
    Field(
        "warmup", "cycles", "cycles before packets are measured", 0, lambda d: d["cycles"], "cycles"
    ),
    Field("hotspot_fraction", SHARE, "share of hotspot packets sent to the centre PE", 0, 1),
    Field(
        "pe_cycles_by_reason.*",
        PE_CYCLES,
        "each working source's every cycle by what it "
        "did (computing: injected a flit; waiting_output: its queue was full; idle)",
        0,
        _pe_cycles,
        "width_pes x height_pes x cycles",
    ),
    Field(
        "router_cycles_per_s",
        "router-cycles/s",
        "simulation speed: routers times cycles over the run's wall time, compile left out",
    ),
    Field("sim_wall_s", "s", "wall time of the engine's run, its compile left out"),
    Field("compile_s", "s", "wall time of the engine's compile or cache load"),
    Field(
        "stretched_links_as_one_hop", "links", "links repair stretched that traffic took as one hop"
    ),
    Field("threads", "threads", "engine threads", 1),
    Field("width_pes", "PEs", "the mesh's width", 1),
    Field("height_pes", "PEs", "the mesh's height", 1),
    Field(
        "working_pes",
        "PEs",
        "PEs that work",
        0,
        lambda d: d["width_pes"] * d["height_pes"],
        "width_pes x height_pes",
    ),
    Field("seed", "", "the seed the traffic was drawn from", 0, 2**63 - 1),
)

DEFECTS: tuple[Field, ...] = (
    Field("dead_pes", "PEs", "dead PEs of the physical wafer"),
    Field("dead_links", "links", "dead wires of the physical wafer"),
    Field("working_pes", "PEs", "working PEs of the repaired logical grid"),
    Field("unrepaired_pes", "PEs", "holes left in the logical grid after repair"),
    Field("unrepaired_links", "links", "logical links repair could not realise"),
    Field("max_neighbour_hops", "hops", "longest working path between logical neighbours", 1),
    Field(
        "spare_rows_used",
        "rows",
        "spare rows repair used",
        0,
        lambda d: d["spec"]["spare_rows"],
        "the spec's spare rows",
    ),
    Field(
        "spare_cols_used",
        "columns",
        "spare columns repair used",
        0,
        lambda d: d["spec"]["spare_cols"],
        "the spec's spare columns",
    ),
    Field("params.*", "", "the defect model's parameters as given (each checked at the door)"),
    Field("logical_grid[]", "PEs", "the repaired logical grid, width then height", 1),
    Field("physical_grid[]", "PEs", "the physical wafer, width then height", 1),
    Field("wall_s", "s", "wall time of the command"),
    Field("seed", "", "the seed the map was drawn from", 0, 2**63 - 1),
    Field("points", "rows", "--study: rows of its table, one a density, seed and repair "
          "strategy", 1),
    Field("traffic_window.*", "", "--study: how traffic was measured: window side (PEs), "
          "windows a map, packet size (flits), rates (flits/PE/cycle), positions (all >= 0)"),
)

RUN: tuple[Field, ...] = (
    Field(
        "samples_per_sec", "samples/s", "training samples a second, input starvation included"
    ),
    Field("wafer_samples_per_sec", "samples/s", "samples a second the wafers alone reach"),
    Field(
        "est_samples_per_sec",
        "samples/s",
        "the analytic estimate (no overlap of compute and streaming)",
    ),
    Field("input_samples_per_s", "samples/s", "what the input pipeline delivers"),
    Field("input_stall_fraction", SHARE, "share of the run waiting for input", 0, 1),
    Field("stall_fraction", SHARE, "share of the wafer's cycles waiting for weights", 0, 1),
    Field("edge_utilization", SHARE, "edge bandwidth used over the run, of the spec's", 0, 1),
    Field("working_fraction", SHARE, "working PEs of the slowest wafer over a clean one's", 0, 1),
    Field("test_accuracy", SHARE, "share of test samples classified right", 0, 1),
    Field(
        "test_accuracy_history[][]",
        "",
        "(step, test accuracy) at each evaluation: a step >= 0 and a share in [0, 1]",
    ),
    Field("losses[]", "nats", "training loss of each step (cross-entropy)"),
    Field("total_cycles", "cycles", "wafer cycles of the whole run"),
    Field("total_samples", "samples", "samples trained on, every wafer"),
    Field("total_time_s", "s", "simulated time of the run, input starvation included"),
    Field("wafer_time_s", "s", "simulated time of the wafers alone"),
    Field("compile_time_s", "s", "wall time of compiling the plans"),
    Field("programming_time_s", "s", "loading every working PE's SRAM over the edge (a floor)"),
    Field("sim_wall_s", "s", "wall time of the simulation"),
    Field(
        "stall_cycles",
        "cycles",
        "cycles compute waited for weights",
        0,
        lambda d: d["total_cycles"],
        "total_cycles",
    ),
    Field(
        "buffer_wait_cycles", "cycles", "cycles streaming waited for room in the prefetch buffer"
    ),
    Field("update_wait_cycles", "cycles", "cycles waiting for the optimizer's update"),
    Field(
        "closed_form_stream_to_compute",
        "ratio",
        "the worst layer's weight-stream time over its compute time (no stall where <= 1)",
    ),
    Field("memoryx_bytes_in", "bytes", "bytes MemoryX sent in (weights)"),
    Field("memoryx_bytes_out", "bytes", "bytes MemoryX took out (gradients)"),
    Field("measured_cycles.*", "cycles", "each pass's cycles on the tier that ran it"),
    Field(
        "pe_cycles_by_reason.*", PE_CYCLES, "the cycle tier's PE-cycles of the GEMMs by reason"
    ),
    Field("layers[].*", "", "per layer and pass: cycles (>= 0), bytes (>= 0), energy (J)"),
    Field(
        "activations_kept.*",
        "",
        "activations kept for backward: bytes, micro-batches, cycles (>= 0)",
    ),
    Field("energy.*", "", "energy per step and in total (J), power (W), GFLOP/J (all >= 0)"),
    Field("cost.defect_free_yield", SHARE, "share of wafers without a defect", 0, 1),
    Field("cost.*", "", "wafer cost (USD), samples/s per thousand USD (all >= 0)"),
    Field("swarmx.scaling_efficiency", SHARE, "speed-up over wafers", 0, 1),
    Field("swarmx.est_scaling_efficiency", SHARE, "the analytic speed-up over wafers", 0, 1),
    Field(
        "swarmx.speedup", "x", "samples/s over one wafer's", 0, lambda d: d["wafers"], "wafers"
    ),
    Field("swarmx.*", "", "the SwarmX tree: wafers, levels, one wafer's time (s)"),
    Field("wafers", "wafers", "data-parallel wafers", 1),
    Field("working_pes", "PEs", "working PEs of the slowest wafer"),
    Field(
        "slowest_wafer",
        "index",
        "the wafer that set the pace",
        0,
        lambda d: d["wafers"] - 1,
        "wafers - 1",
    ),
    Field(
        "sparsity.*", "", "pruned weights: densities and streamed fractions in [0, 1], cycles saved"
    ),
    Field("seed", "", "the run's seed", 0, 2**63 - 1),
)

COMPILE: tuple[Field, ...] = (
    Field("totals.cycles", "cycles", "one training step's cycles", 0),
    Field("totals.seconds", "s", "one step at the spec's clock"),
    Field(
        "totals.sram_peak_bytes_per_pe",
        "bytes",
        "largest SRAM a PE holds in a step",
        0,
        lambda d: d["spec"]["pe"]["sram_bytes"],
        "the spec's SRAM",
    ),
    Field("totals.*", "", "cycles by pass and by bottleneck (>= 0), layers"),
    Field(
        "layers[].passes.*.sram_bytes_per_pe",
        "bytes",
        "SRAM a PE of the pass holds",
        0,
        lambda d: d["spec"]["pe"]["sram_bytes"],
        "the spec's SRAM",
    ),
    Field("layers[].*", "", "per layer and pass: cycles, bytes, PEs, colors, hops (all >= 0)"),
    Field("activations.*", "", "activations kept for backward: bytes, cycles (>= 0)"),
    Field("defects.*", "PEs", "the wafer's holes, cut-off and working PEs, stretched links"),
    Field("working.*", "PEs", "the working grid and each edge's lines and depths"),
    Field("compile_time_s", "s", "wall time of the compile"),
    Field(
        "detour_colors[]",
        "color",
        "the colors kept for detours round holes",
        0,
        lambda d: d["spec"]["router"]["colors"] - 1,
        "the spec's colors - 1",
    ),
    Field("params", "parameters", "the model's parameters"),
    Field("layers", "layers", "--validate-only: the model's layers", 1),
    Field("compiler_version", "", "the plan format's version", 1),
    Field("seed", "", "the defect map's seed", 0, 2**63 - 1),
)

DOCUMENTS: dict[str, tuple[Field, ...]] = {
    "kernel": KERNEL,
    "traffic": TRAFFIC,
    "defects": DEFECTS,
    "run": RUN,
    "compile": COMPILE,
}
# Yes/no answers a result holds beside its figures: true or false in the JSON (a sweep's
# metric keeps them as 1 and 0), so no unit or range
FLAGS: dict[str, dict[str, str]] = {
    "traffic": {"saturated": "the accepted rate fell short of the offered one (below "
                "fabric.traffic's SATURATION_RATIO of it): the fabric saturated"},
    "run": {"suspected_input_bottleneck": "the input pipeline supplies fewer samples a second "
            "than the wafers take"},
}
# fmt: on
ECHOED = ("spec.", "config.", "options.")  # inputs echoed back, checked when they came in


def leaves(document: Any, prefix: str = "") -> Iterator[tuple[str, float]]:
    """(path, value) of every number in ``document``, lists' elements under ``[]``."""
    if isinstance(document, dict):
        for key, value in document.items():
            yield from leaves(value, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(document, list | tuple):
        for value in document:
            yield from leaves(value, f"{prefix}[]" if prefix else "[]")
    elif isinstance(document, int | float) and not isinstance(document, bool):
        yield prefix, float(document)


def field_of(kind: str, path: str) -> Field | None:
    """The first field of ``kind`` whose pattern matches ``path``."""
    return next((f for f in DOCUMENTS[kind] if fnmatch.fnmatchcase(path, _pattern(f))), None)


def _pattern(field: Field) -> str:
    """The field's path as an fnmatch pattern: ``[]`` is a list, not a character set."""
    return field.path.replace("[]", "[[][]]")


def out_of_range(kind: str, document: dict[str, Any]) -> list[str]:
    """Every figure of ``document`` outside its field's range, NaN, or a negative number no
    field declares, as ``path=value (allowed [low, high])``."""
    found = []
    for path, value in leaves(document):
        if path.startswith(ECHOED):
            continue
        field = field_of(kind, path)
        low, high = field.bounds(document) if field else (0.0, math.inf)
        if math.isnan(value) or not low <= value <= high:
            found.append(f"{path}={value:g} (allowed [{low:g}, {high:g}])")
    found.extend(_sums(kind, document))
    return found


def refuse_out_of_range(kind: str, document: dict[str, Any]) -> dict[str, Any]:
    """``document`` if every figure lies in its range; else FigureError naming the first."""
    found = out_of_range(kind, document)
    if found:
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise FigureError(f"a figure outside its range, refused: {found[0]}{more}; "
                          "see docs/fields.md (a bug: please report it)")  # fmt: skip
    return document


def checked(command: str, document: dict[str, Any]) -> dict[str, Any]:
    """A command's result, refused where a figure the table documents is out of its range
    (``defects --study`` reports a study, checked by its own table)."""
    if command in DOCUMENTS and (command != "defects" or "dead_pes" in document):
        refuse_out_of_range(command, document)
    return document


def undocumented(kind: str, document: dict[str, Any]) -> list[str]:
    """Numeric paths of ``document`` that no field of ``kind`` documents."""
    return sorted(
        {p for p, _ in leaves(document) if not p.startswith(ECHOED) and field_of(kind, p) is None}
    )


def _sums(kind: str, document: dict[str, Any]) -> list[str]:
    """Figures that must add up: a kernel's or traffic run's PE-cycles by reason."""
    reasons = document.get("pe_cycles_by_reason")
    if kind not in ("kernel", "traffic") or not isinstance(reasons, dict):
        return []
    pes = document["patch_working_pes"] if kind == "kernel" else document["working_pes"]
    expected = pes * document["cycles"]
    total = sum(reasons.values())
    return (
        []
        if total == expected
        else [f"pe_cycles_by_reason sums to {total}, not the working PEs x cycles = {expected}"]
    )


def page() -> str:
    """docs/fields.md: every field of every command's JSON, with its unit and range."""
    lines = [
        "# What each field means",
        "",
        "Every figure a command's `--json` reports (and `run`'s performance.json), its unit and",
        "the range it must lie in. wafersim checks every result against this table before it",
        "prints it: a figure outside its range is refused with one line (exit 70), not shown.",
        "Keys under `spec.`, `config.` and `options.` echo the inputs, checked when they came",
        "in. `[]` is any element of a list, `*` any key. Written by `python -m",
        "wafersim.fields --doc docs/fields.md` from `wafersim/fields.py`.",
    ]
    for kind, fields in DOCUMENTS.items():
        lines += [
            "",
            f"## `wafersim {kind}`",
            "",
            "| field | unit | range | meaning |",
            "|---|---|---|---|",
        ]
        lines += [f"| `{f.path}` | {f.unit} | {_range_text(f)} | {f.meaning} |" for f in fields]
        if kind in FLAGS:
            lines += ["", "Flags, `true` or `false` (a sweep's metric keeps them as 1 and 0):", ""]
            lines += [f"- `{name}`: {meaning}" for name, meaning in FLAGS[kind].items()]
    return "\n".join(lines) + "\n"


def _range_text(field: Field) -> str:
    low = "" if field.low is None else f"{field.low:g}"
    if field.high_text:
        return f"[{low}, {field.high_text}]"
    return f"[{low}, {'∞' if field.high is None else format(field.high, 'g')}]"


if __name__ == "__main__":
    import sys

    from wafersim.wafer.atomic import atomic_path

    if sys.argv[1:2] != ["--doc"] or len(sys.argv) != 3:
        sys.exit("usage: python -m wafersim.fields --doc docs/fields.md")
    with atomic_path(sys.argv[2]) as tmp:
        tmp.write_text(page())
