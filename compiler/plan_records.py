"""The plan's typed records: what :func:`compiler.plan.compile_plan` returns and a run reads.

A :class:`Plan` holds a :class:`LayerPlan` per layer, each with a placement per pass: a
:class:`GemmPlacement` (a kernel of :mod:`kernels` on a grid of PEs) or a
:class:`VectorPlacement` (element-wise work spread over the working grid), with its
:class:`PeAssignment` (where on the wafer its PEs are). JSON is at the edges only:
:meth:`Plan.to_json` gives the plan file's and ``wafersim compile --json``'s dict (fields in
the order declared here) and :meth:`Plan.from_json` reads one back. Parts that only report
(route families, the MemoryX tile order, the working grid's and the defects' summaries,
the bound per resource) stay JSON-ready dicts.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field
from typing import Any

from wafersim.kernels.gemm_shape import GemmShape


class Orientation(enum.StrEnum):
    """The wafer edge a kernel's west edge lies on: a kernel turned a quarter runs its
    columns along wafer rows, fed from the north edge."""

    WEST = "west edge"
    NORTH = "north edge"

    @property
    def turned(self) -> bool:
        return self is Orientation.NORTH

    @classmethod
    def of(cls, turned: bool) -> Orientation:
        return cls.NORTH if turned else cls.WEST


@dataclass(frozen=True)
class GemmWork:
    """``count`` independent GEMMs ``(m x k) @ (k x n)``, ``B`` of ``density`` (pruned)."""

    m: int
    k: int
    n: int
    count: int
    density: float = 1.0

    def options(self) -> dict[str, float]:
        """The kernel option that times its pruned weights (none when dense)."""
        return {} if self.density == 1 else {"density": self.density}

    def shape(self) -> GemmShape:
        """Its sizes, as the kernels take them."""
        return GemmShape(self.m, self.k, self.n)


@dataclass(frozen=True)
class PeAssignment:
    """Where a pass's PEs are (:mod:`compiler.assignment`): the kernel's columns run down
    ``lines`` (``[first, stop)`` ranges of wafer columns, or rows when turned), ``depth``
    working PEs of each; ``rows x cols`` from ``origin`` holds every PE with work."""

    origin: tuple[int, int]
    rows: int
    cols: int
    orientation: Orientation
    lines: list[list[int]]
    depth: int
    pes: int
    holes_skipped: int
    replicas: dict[str, Any]  # count, blocks (down, across), order

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PeAssignment:
        return cls(**{**data, "origin": tuple(data["origin"]),
                      "orientation": Orientation(data["orientation"])})  # fmt: skip


@dataclass(frozen=True)
class GemmPlacement:
    """A pass's GEMM on ``rows_cols`` (the kernel's rows, columns) PEs by ``algorithm``:
    ``replicas`` at once, ``waves`` after each other; its cycles and what bounds them. On the
    wafer it is ``width_pes x height_pes`` (a turned kernel runs its rows along wafer rows)."""

    JSON_EXTRAS = ("width_pes", "height_pes")  # derived, written for readers of the JSON

    algorithm: str
    strategy: str
    options: dict[str, Any]
    rows_cols: tuple[int, int]
    orientation: Orientation
    mapping: dict[str, str]
    gemm: GemmWork
    replicas: int
    waves: int
    colors: int
    detour_hops: dict[str, int]
    pes: int
    sram_bytes_per_pe: int
    kernel_cycles: int
    edge_bytes: int
    cycles: int
    bound_cycles: dict[str, int]
    bottleneck: str
    pe_assignment: PeAssignment | None = None
    memoryx_tile_order: dict[str, Any] | None = None  # None: nothing crosses the edge
    routes: list[dict[str, Any]] = field(default_factory=list)

    @property
    def width_pes(self) -> int:
        """PEs the kernel spans along the wafer's x axis."""
        return self.rows_cols[0] if self.orientation.turned else self.rows_cols[1]

    @property
    def height_pes(self) -> int:
        """PEs the kernel spans along the wafer's y axis."""
        return self.rows_cols[1] if self.orientation.turned else self.rows_cols[0]

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> GemmPlacement:
        data = {key: value for key, value in data.items() if key not in cls.JSON_EXTRAS}
        return cls(**{**data, "rows_cols": tuple(data["rows_cols"]),
                      "gemm": GemmWork(**data["gemm"]),
                      "orientation": Orientation(data["orientation"]),
                      "pe_assignment": PeAssignment.from_json(data["pe_assignment"])})  # fmt: skip


@dataclass(frozen=True)
class VectorPlacement:
    """Element-wise work (``shape``: tokens, features) on ``rows_cols`` (rows, columns) PEs of
    the working grid: ``width_pes x height_pes`` on the wafer."""

    JSON_EXTRAS = ("width_pes", "height_pes")  # derived, written for readers of the JSON

    algorithm: str
    rows_cols: tuple[int, int]
    mapping: dict[str, str]
    shape: dict[str, int]
    pes: int
    sram_bytes_per_pe: int
    kernel_cycles: int
    edge_bytes: int
    cycles: int
    bound_cycles: dict[str, int]
    bottleneck: str
    pe_assignment: PeAssignment | None = None
    orientation = Orientation.WEST  # element-wise work is never turned
    replicas = 1

    @property
    def width_pes(self) -> int:
        """PEs the work spans along the wafer's x axis (its columns: element-wise work is
        never turned)."""
        return self.rows_cols[1]

    @property
    def height_pes(self) -> int:
        """PEs the work spans along the wafer's y axis."""
        return self.rows_cols[0]

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> VectorPlacement:
        data = {key: value for key, value in data.items() if key not in cls.JSON_EXTRAS}
        return cls(**{**data, "rows_cols": tuple(data["rows_cols"]),
                      "pe_assignment": PeAssignment.from_json(data["pe_assignment"])})  # fmt: skip


Placement = GemmPlacement | VectorPlacement


def placement_from_json(data: dict[str, Any]) -> Placement:
    return GemmPlacement.from_json(data) if "gemm" in data else VectorPlacement.from_json(data)


@dataclass(frozen=True)
class LayerPlan:
    """One layer of the model and the placement of each of its passes."""

    name: str
    op: str
    inputs: list[str]
    block: str | None
    features: int
    params: int
    passes: dict[str, Placement]

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LayerPlan:
        passes = {name: placement_from_json(p) for name, p in data["passes"].items()}
        return cls(**{**data, "passes": passes})


@dataclass(frozen=True)
class KeptActivations:
    """The activations kept for backward (:mod:`compiler.activations`): the policy, the
    micro-batches, the SRAM they take, and the step cycles of each policy considered."""

    policy: str
    micro_batches: int
    sequences_per_micro_batch: int
    bytes: int
    bytes_per_pe: int
    keep_all_bytes: int
    checkpoint_bytes: int
    largest_layer: dict[str, Any]
    step_cycles: int = 0
    considered: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class Totals:
    """The step: cycles per pass and per bottleneck, seconds, the SRAM peak per PE."""

    cycles: int
    seconds: float
    cycles_per_pass: dict[str, int]
    cycles_per_bottleneck: dict[str, int]
    sram_peak_bytes_per_pe: int
    layers: int


@dataclass(frozen=True)
class Plan:
    """A model compiled for a wafer: its layers' placements, totals and what made it."""

    model: str
    params: int
    options: dict[str, Any]  # the resolved CompileOptions
    working: dict[str, Any]  # the working grid's summary (compiler.plan.working_summary)
    defects: dict[str, Any]  # the defects' summary (compiler.working.WorkingGrid.summary)
    detour_colors: list[int]
    spec: dict[str, Any]
    cache_key: str
    compiler_version: str
    wafersim_version: str
    layers: list[LayerPlan]
    totals: Totals
    activations: KeptActivations

    def placements(self):
        """``(layer, pass name, placement)`` of every pass, layer by layer."""
        for layer in self.layers:
            for name, placed in layer.passes.items():
                yield layer, name, placed

    def to_json(self) -> dict[str, Any]:
        """The plan as JSON-ready dicts and lists, fields in declared order."""
        return to_json(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Plan:
        return cls(**{**data, "layers": [LayerPlan.from_json(lay) for lay in data["layers"]],
                      "totals": Totals(**data["totals"]),
                      "activations": KeptActivations(**data["activations"])})  # fmt: skip


def to_json(value: Any) -> Any:
    """Records as dicts (declared field order, then what a record derives for readers:
    ``JSON_EXTRAS``), enums as their values, tuples as lists."""
    if dataclasses.is_dataclass(value):
        names = [f.name for f in dataclasses.fields(value)]
        names += list(getattr(type(value), "JSON_EXTRAS", ()))
        return {name: to_json(getattr(value, name)) for name in names}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, dict):
        return {key: to_json(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [to_json(item) for item in value]
    return value
