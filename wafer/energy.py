"""Energy: what a run did (its :class:`Events`), priced by the spec's ``energy`` section.

The split follows where the joules go in weight streaming: the PEs' multiply-adds
(``compute``), their SRAM (reads and writes, and its leakage over the time the run took),
the fabric (each wavelet's 32 bits over one PE pitch of wire, and the router it leaves),
the wafer edge (every byte in or out) and MemoryX (its DRAM reading weights out, writing
gradients in, reading and writing the optimizer's state). Logic leakage, clocking, cooling
and power delivery are left out, so a total is what the events cost, not the wall power.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from wafersim.wafer.spec import WaferSpec

PJ = 1e-12
BITS_PER_WAVELET = 32
KIB = 1024
LABELS = {
    "compute_j": "compute",
    "sram_j": "SRAM",
    "fabric_j": "fabric",
    "edge_io_j": "edge I/O",
    "memoryx_j": "MemoryX",
}  # fmt: skip (EnergySplit's parts)


@dataclass(frozen=True)
class Events:
    """Counts of what costs energy (floats: averages and estimates are fine)."""

    fp32_fmacs: float = 0.0
    half_fmacs: float = 0.0  # fp16 and bf16 multiply-adds
    sram_read_words: float = 0.0
    sram_write_words: float = 0.0
    wavelet_hops: float = 0.0  # a wavelet crossing one link
    edge_bytes: float = 0.0  # in and out of the wafer
    memoryx_bytes: float = 0.0  # read or written in MemoryX's memory

    def __add__(self, other: Events) -> Events:
        return Events(*(a + b for a, b in zip(_values(self), _values(other), strict=True)))

    def times(self, factor: float) -> Events:
        return Events(*(a * factor for a in _values(self)))

    @property
    def flops(self) -> float:
        """Floating-point operations (a multiply-add is two)."""
        return 2.0 * (self.fp32_fmacs + self.half_fmacs)


@dataclass(frozen=True)
class EnergySplit:
    """Joules by where they went."""

    compute_j: float
    sram_j: float
    fabric_j: float
    edge_io_j: float
    memoryx_j: float

    @property
    def total_j(self) -> float:
        return self.compute_j + self.sram_j + self.fabric_j + self.edge_io_j + self.memoryx_j

    def to_dict(self) -> dict[str, float]:
        return {**dataclasses.asdict(self), "total_j": self.total_j}


def hop_mm(spec: WaferSpec) -> float:
    """One link's wire: a PE pitch, the side of a square PE of ``pe.area_mm2``."""
    return math.sqrt(spec.pe.area_mm2)


def energy(events: Events, spec: WaferSpec, pe_seconds: float = 0.0) -> EnergySplit:
    """The joules of ``events`` on ``spec``; ``pe_seconds`` (PEs times seconds powered) adds
    the SRAM's leakage."""
    e = spec.energy
    wavelet_pj = BITS_PER_WAVELET * e.wire_pj_per_bit_mm * hop_mm(spec) + e.router_pj_per_wavelet
    leakage_w_per_pe = e.sram_leakage_nw_per_kib * 1e-9 * spec.pe.sram_bytes / KIB
    return EnergySplit(
        compute_j=PJ * (events.fp32_fmacs * e.fp32_fmac_pj + events.half_fmacs * e.half_fmac_pj),
        sram_j=PJ
        * (
            events.sram_read_words * e.sram_read_pj_per_word
            + events.sram_write_words * e.sram_write_pj_per_word
        )
        + leakage_w_per_pe * pe_seconds,  # fmt: skip
        fabric_j=PJ * events.wavelet_hops * wavelet_pj,
        edge_io_j=PJ * 8 * events.edge_bytes * e.edge_io_pj_per_bit,
        memoryx_j=PJ * 8 * events.memoryx_bytes * e.memoryx_pj_per_bit,
    )


def gflop_per_j(events: Events, split: EnergySplit) -> float:
    """GFLOP a joule (0 where nothing was spent)."""
    return events.flops / 1e9 / split.total_j if split.total_j > 0 else 0.0


def _values(events: Events) -> tuple[float, ...]:
    return tuple(getattr(events, f.name) for f in dataclasses.fields(events))
