"""Frozen, validated descriptions of the machine: PE, link, router, I/O and the wafer.

Every knob is declared once, with its unit in its name and its allowed range in the field's
metadata; building a spec from a dict (a YAML/TOML file, ``key=value`` overrides) rejects
unknown keys, wrong types and out-of-range values with an error that names the field.
Physical and logical (working) counts are kept apart: the physical grid is the logical grid
plus its spare rows and columns.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from wafersim.wafer.errors import ConfigError, excerpt


def knob(
    low: float, high: float = math.inf, default: Any = dataclasses.MISSING, **meta: Any
) -> Any:
    """A dataclass field with an inclusive allowed range ``[low, high]`` (and a default where
    a section may be left out of a spec file)."""
    return field(default=default, metadata={"low": low, "high": high, **meta})


@dataclass(frozen=True)
class PESpec:
    """One processing element: SRAM, compute unit and the cost of its vector operations."""

    sram_bytes: int = knob(1024)
    fp32_fmac_per_cycle: int = knob(1, 64)
    fp16_fmac_per_cycle: int = knob(1, 64)
    sram_read_bytes_per_cycle: int = knob(1, 1024)
    sram_write_bytes_per_cycle: int = knob(1, 1024)
    op_startup_cycles: int = knob(0, 1000)
    issue_cycles: int = knob(0, 1000)
    task_activation_cycles: int = knob(0, 1000)
    area_mm2: float = knob(1e-6, 100.0)
    # the core's queues between its router and its arithmetic, by queue number: each color
    # the PE reads or sends on is bound to one (``fabric.core_queues``); a spec file may
    # leave them out
    input_queue_01_wavelets: int = knob(1, 64, default=6)
    input_queue_23_wavelets: int = knob(1, 64, default=4)
    input_queue_47_wavelets: int = knob(1, 64, default=2)
    output_queue_01_wavelets: int = knob(1, 64, default=2)
    output_queue_23_wavelets: int = knob(1, 64, default=6)
    output_queue_45_wavelets: int = knob(1, 64, default=2)


@dataclass(frozen=True)
class LinkSpec:
    """One direction of the wire between neighbouring routers."""

    wavelet_bits: int = knob(8, 1024)
    wavelets_per_cycle: int = knob(1, 1)
    hop_latency_cycles: int = knob(1, 64)


@dataclass(frozen=True)
class RouterSpec:
    """The five-port router in each PE (N, E, S, W and the ramp to its own PE)."""

    colors: int = knob(1, 64)
    queue_depth_wavelets: int = knob(1, 1024)


@dataclass(frozen=True)
class IOSpec:
    """The wafer edge, where MemoryX streams weights in and gradients out, and SwarmX.

    SwarmX is the tree of broadcast/reduce nodes between MemoryX and the wafers of a
    data-parallel cluster: each node has ``swarmx_fanout`` children, its links carry
    ``swarmx_link_bits_per_s`` each way, and each level adds ``swarmx_level_latency_cycles``.
    """

    edge_ports: int = knob(1, 4096)
    edge_port_bits_per_s: float = knob(1.0)
    edge_latency_cycles: int = knob(0, 10**7)
    swarmx_fanout: int = knob(2, 64)
    swarmx_link_bits_per_s: float = knob(1.0)
    swarmx_level_latency_cycles: int = knob(0, 10**7)


@dataclass(frozen=True)
class EnergySpec:
    """Energy per event, in picojoules (``wafer.energy`` turns a run's events into joules).

    Sources:
      [MuchiSim] M. Orenes-Vera et al., "MuchiSim: A Simulation Framework for Design
                 Exploration of Multi-Chip Manycore Systems", ISPASS 2024; constants of its
                 public code, ``src/configs/param_energy.h`` (7 nm, 0.7 V, 1 GHz): SRAM read
                 5.8 and write 9.1 pJ a 32-bit word, plus the bank multiplexer tree of
                 ``src/common/calc_energy.h`` (3 pJ a word at 32 KiB, 1.5x per doubling: 3.8 pJ
                 at a PE's 48 KiB); SRAM leakage 625 nW a KiB; an on-die wire 0.150 pJ a bit
                 and mm; a radix-5 router 3 pJ a flit; HBM 3.7 pJ a bit, its I/O included.
      [Horowitz14] M. Horowitz, "Computing's energy problem (and what we can do about it)",
                 ISSCC 2014 (45 nm): fp32 multiply 3.7 and add 0.9 pJ, fp16 1.1 and 0.4.
    A hop's wire is one PE pitch, the square root of ``pe.area_mm2``.
    """

    fp32_fmac_pj: float = knob(0.0, 1e4, default=4.6)  # [Horowitz14] 3.7 + 0.9; 45 nm, a bound
    half_fmac_pj: float = knob(0.0, 1e4, default=1.5)  # [Horowitz14] fp16 1.1 + 0.4; 45 nm
    sram_read_pj_per_word: float = knob(0.0, 1e4, default=9.6)  # [MuchiSim] 5.8 + 3.8 mux
    sram_write_pj_per_word: float = knob(0.0, 1e4, default=12.9)  # [MuchiSim] 9.1 + 3.8 mux
    sram_leakage_nw_per_kib: float = knob(0.0, 1e6, default=625.0)  # [MuchiSim]
    wire_pj_per_bit_mm: float = knob(0.0, 1e3, default=0.15)  # [MuchiSim] on-die wire
    router_pj_per_wavelet: float = knob(0.0, 1e4, default=3.0)  # [MuchiSim] radix-5, a flit
    # assumption: a 100 GbE optical module of SFF-8636 power class 4 (3.5 W) per 100 Gb/s
    edge_io_pj_per_bit: float = knob(0.0, 1e5, default=35.0)
    # assumption: MemoryX's DRAM at [MuchiSim]'s HBM figure (server DDR costs more: a bound)
    memoryx_pj_per_bit: float = knob(0.0, 1e5, default=3.7)


@dataclass(frozen=True)
class CostSpec:
    """What silicon costs. [MuchiSim] ``src/configs/param_cost.h``: a processed 7 nm wafer,
    $6,047 (the silicon alone: no packaging, cooling, system or MemoryX)."""

    wafer_usd: float = knob(0.0, 1e9, default=6047.0)  # [MuchiSim]


@dataclass(frozen=True)
class WaferSpec:
    """The whole wafer. ``logical_*`` is the grid the software sees; spares come on top."""

    name: str
    logical_width_pes: int = knob(1, 100_000)
    logical_height_pes: int = knob(1, 100_000)
    spare_rows: int = knob(0, 10_000)
    spare_cols: int = knob(0, 10_000)
    clock_hz: float = knob(1e6, 1e10)
    max_clock_hz: float = knob(1e6, 1e10)
    pe: PESpec = field(default_factory=PESpec)
    link: LinkSpec = field(default_factory=LinkSpec)
    router: RouterSpec = field(default_factory=RouterSpec)
    io: IOSpec = field(default_factory=IOSpec)
    energy: EnergySpec = field(default_factory=EnergySpec)
    cost: CostSpec = field(default_factory=CostSpec)

    def __post_init__(self) -> None:
        validate(self)
        if self.physical_pes > MAX_PES:
            raise ConfigError(
                f"the wafer has {self.physical_pes:,} PEs ({self.physical_width_pes} x "
                f"{self.physical_height_pes} with spares), at most {MAX_PES:,}: a defect map "
                "and the engine keep arrays per PE in this machine's memory"
            )
        if self.clock_hz > self.max_clock_hz:
            raise ConfigError(
                f"clock_hz={self.clock_hz:g} exceeds max_clock_hz={self.max_clock_hz:g}"
            )

    @property
    def physical_width_pes(self) -> int:
        return self.logical_width_pes + self.spare_cols

    @property
    def physical_height_pes(self) -> int:
        return self.logical_height_pes + self.spare_rows

    @property
    def physical_pes(self) -> int:
        return self.physical_width_pes * self.physical_height_pes

    @property
    def logical_pes(self) -> int:
        return self.logical_width_pes * self.logical_height_pes

    @property
    def edge_bytes_per_cycle(self) -> float:
        """All edge ports together, in bytes per fabric clock cycle."""
        return self.io.edge_ports * self.io.edge_port_bits_per_s / 8.0 / self.clock_hz

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def replace(self, overrides: dict[str, Any]) -> WaferSpec:
        """A new spec with dotted-key overrides applied, e.g. ``{"pe.sram_bytes": 65536}``."""
        merged = self.to_dict()
        for key, value in overrides.items():
            _set_dotted(merged, key, value)
        return spec_from_dict(merged)


MAX_PES = 2**23  # 8.4 M PEs: 9x a WSE-3 (0.9 M); each side may be up to 100,000 on its own


def validate(obj: Any) -> None:
    """Check every field of a spec dataclass, and of its sections, against its type and
    declared range."""
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value):
            validate(value)
            continue
        if "low" not in f.metadata:
            continue
        kind = int if f.type in ("int", int) else float
        label = f"{type(obj).__name__}.{f.name}"
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{label} must be a number, got {excerpt(value)}")
        if kind is int and not isinstance(value, int) and not float(value).is_integer():
            raise ConfigError(f"{label} must be an integer, got {excerpt(value)}")
        low, high = f.metadata["low"], f.metadata["high"]
        if not low <= value <= high:
            raise ConfigError(f"{label}={excerpt(value)} is out of range [{low:g}, {high:g}]")


_SECTIONS = {"pe": PESpec, "link": LinkSpec, "router": RouterSpec, "io": IOSpec}
_OPTIONAL_SECTIONS = {"energy": EnergySpec, "cost": CostSpec}  # missing keys: the defaults


def spec_from_dict(data: dict[str, Any]) -> WaferSpec:
    """Build a :class:`WaferSpec` from nested dicts, rejecting unknown keys."""
    _check_keys("wafer", data, {f.name for f in dataclasses.fields(WaferSpec)})
    kwargs = dict(data)
    for section, cls in _SECTIONS.items():
        if section not in kwargs:
            raise ConfigError(f"wafer spec is missing section {section!r}")
        part = kwargs[section]
        if not isinstance(part, dict):
            raise ConfigError(f"{section} must be a table of keys, got {excerpt(part)}")
        allowed = {f.name for f in dataclasses.fields(cls)}
        _check_keys(section, part, allowed)
        missing = {f.name for f in dataclasses.fields(cls) if _required(f)} - set(part)
        if missing:
            raise ConfigError(f"{section} is missing keys: {', '.join(sorted(missing))}")
        kwargs[section] = cls(**part)
    for section, cls in _OPTIONAL_SECTIONS.items():
        part = kwargs.get(section, {})
        if not isinstance(part, dict):
            raise ConfigError(f"{section} must be a table of keys, got {excerpt(part)}")
        _check_keys(section, part, {f.name for f in dataclasses.fields(cls)})
        kwargs[section] = cls(**part)
    return WaferSpec(**kwargs)  # validates the sections too


def _required(f: dataclasses.Field) -> bool:
    """Whether a section's field has no default: a spec file must give it."""
    return f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING


def _check_keys(where: str, data: dict[str, Any], allowed: set[str]) -> None:
    unknown = set(data) - allowed
    if unknown:
        raise ConfigError(
            f"unknown key(s) in {where}: {', '.join(sorted(unknown))}; "
            f"allowed: {', '.join(sorted(allowed))}"
        )


def _set_dotted(tree: dict[str, Any], key: str, value: Any) -> None:
    parts = key.split(".")
    node = tree
    for part in parts[:-1]:
        if part not in node or not isinstance(node[part], dict):
            raise ConfigError(f"unknown spec key {key!r}")
        node = node[part]
    if parts[-1] not in node:
        allowed = ", ".join(sorted(node))
        raise ConfigError(f"unknown spec key {key!r}; allowed here: {allowed}")
    node[parts[-1]] = value
