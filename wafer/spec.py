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

from wafer.errors import ConfigError


def knob(low: float, high: float = math.inf, **meta: Any) -> Any:
    """A dataclass field with an inclusive allowed range ``[low, high]``."""
    return field(metadata={"low": low, "high": high, **meta})


@dataclass(frozen=True)
class PESpec:
    """One processing element: SRAM, compute unit and the cost of its vector operations."""

    sram_bytes: int = knob(1024)
    fp32_fmac_per_cycle: int = knob(1, 64)
    fp16_fmac_per_cycle: int = knob(1, 64)
    sram_read_bytes_per_cycle: int = knob(1, 1024)
    sram_write_bytes_per_cycle: int = knob(1, 1024)
    op_startup_cycles: int = knob(0, 1000)
    area_mm2: float = knob(1e-6, 100.0)


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
            raise ConfigError(f"{label} must be a number, got {value!r}")
        if kind is int and not float(value).is_integer():
            raise ConfigError(f"{label} must be an integer, got {value!r}")
        low, high = f.metadata["low"], f.metadata["high"]
        if not low <= value <= high:
            raise ConfigError(f"{label}={value!r} is out of range [{low:g}, {high:g}]")


_SECTIONS = {"pe": PESpec, "link": LinkSpec, "router": RouterSpec, "io": IOSpec}


def spec_from_dict(data: dict[str, Any]) -> WaferSpec:
    """Build a :class:`WaferSpec` from nested dicts, rejecting unknown keys."""
    _check_keys("wafer", data, {f.name for f in dataclasses.fields(WaferSpec)})
    kwargs = dict(data)
    for section, cls in _SECTIONS.items():
        if section not in kwargs:
            raise ConfigError(f"wafer spec is missing section {section!r}")
        part = kwargs[section]
        if not isinstance(part, dict):
            raise ConfigError(f"{section} must be a table of keys, got {part!r}")
        allowed = {f.name for f in dataclasses.fields(cls)}
        _check_keys(section, part, allowed)
        missing = allowed - set(part)
        if missing:
            raise ConfigError(f"{section} is missing keys: {', '.join(sorted(missing))}")
        kwargs[section] = cls(**part)
    return WaferSpec(**kwargs)  # validates the sections too


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
