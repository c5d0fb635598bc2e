"""Built-in wafer presets, each hardware number next to its public source.

Sources:
  [Rocki20]  K. Rocki et al., "Fast Stencil-Code Computation on a Wafer-Scale Processor",
             SC20. PE: 48 KB SRAM, SRAM reads 2x64 bit and writes 1x64 bit per cycle,
             FP16 SIMD-4 FMAC and FP32 1 FMAC per cycle, 32-bit wavelets, one wavelet per link
             per direction per cycle, one cycle per hop, 1.1 GHz maximum clock.
  [Jacq22]   M. Jacquelin et al., "Scalable Distributed High-Order Stencil Computations",
             SC22. WSE-2 user grid of 750 x 994 PEs, 850 MHz clock.
  [SDK]      Cerebras SDK documentation (sdk.cerebras.net), "A conceptual view": 24
             routable colors per router, 32-bit wavelets. "Data Structure Descriptors",
             Fabric Queues: the core's input queues 0-1 / 2-3 / 4-7 hold 6 / 4 / 2 wavelets
             on WSE-2 and 8 / 4 / 4 on WSE-3; its output queues 0-1 / 2-3 / 4-5 hold 2 / 6 / 2
             on WSE-2, 8 each on WSE-3 (the default: configurable there).
  [HC33]     S. Lie, "Multi-Million Core, Multi-Wafer AI Cluster", Hot Chips 33 (2021).
             WSE-2: 850,000 cores on 46,225 mm^2 (7 nm); CS-2 system I/O 1.2 Tb/s over
             12 x 100 GbE. SwarmX: a tree of broadcast/reduce nodes between MemoryX and
             up to 192 CS-2s; weights broadcast down, gradients reduced on the way up.
  [Lau21]    G. Lauterbach, "The Path to Successful Wafer-Scale Integration: The Cerebras
             Story", IEEE Micro 41(6), 2021. About 1 % of cores are redundant spares.
  [SDK-EX]   github.com/Cerebras/sdk-examples, benchmarks/benchmark-libs/allreduce/pe.csl: "Queues
             0,1: input depth 6 wavelets / Queues 2,3: input depth 4 wavelets / Queues 4-7:
             input depth 2 wavelets" (the core's input queues of a WSE-2 PE).
  [HC24]     S. Lie, "Wafer-Scale AI: GPU Impossible Performance", Hot Chips 2024. WSE-3:
             900,000 cores, 44 GB SRAM, 46,225 mm^2 (5 nm), FP16 SIMD-8.

Numbers no public source gives are marked ``assumption`` and are model parameters, not
hardware facts; change them with ``key=value`` overrides.
"""

from __future__ import annotations

from wafersim.wafer.errors import ConfigError, excerpt
from wafersim.wafer.spec import IOSpec, LinkSpec, PESpec, RouterSpec, WaferSpec

WSE2_DIE_AREA_MM2 = 46_225.0  # [HC33]
WSE2_PHYSICAL_CORES = 850_000  # [HC33]
WSE3_PHYSICAL_CORES = 900_000  # [HC24]

WSE2_PE = PESpec(
    sram_bytes=48 * 1024,  # [Rocki20] 48 KB per PE
    fp32_fmac_per_cycle=1,  # [Rocki20]
    fp16_fmac_per_cycle=4,  # [Rocki20] SIMD-4
    sram_read_bytes_per_cycle=16,  # [Rocki20] two 64-bit reads per cycle
    sram_write_bytes_per_cycle=8,  # [Rocki20] one 64-bit write per cycle
    op_startup_cycles=2,  # assumption: dispatch of one vector (DSD) operation
    issue_cycles=66,  # derived: benchmarks/derive_pe_costs.py fits a scalar loop's iteration
    # around one @fmacs at 68 cycles (start-up included) on the SDK simulator's Cannon counts
    task_activation_cycles=2,  # assumption: the core's scheduler picks a wavelet's data task
    # and hands it the wavelet in hardware; its scalar is the wavelet, no load, no loop
    area_mm2=WSE2_DIE_AREA_MM2 / WSE2_PHYSICAL_CORES,  # [HC33] die area / cores
    input_queue_01_wavelets=6,  # [SDK], [SDK-EX] queues 0 and 1
    input_queue_23_wavelets=4,  # [SDK], [SDK-EX] queues 2 and 3
    input_queue_47_wavelets=2,  # [SDK], [SDK-EX] queues 4 to 7
    output_queue_01_wavelets=2,  # [SDK], [SDK-EX] output queues 0 and 1
    output_queue_23_wavelets=6,  # [SDK], [SDK-EX] output queues 2 and 3
    output_queue_45_wavelets=2,  # [SDK], [SDK-EX] output queues 4 and 5
)
WSE_LINK = LinkSpec(
    wavelet_bits=32,  # [Rocki20], [SDK]
    wavelets_per_cycle=1,  # [Rocki20] per link per direction
    hop_latency_cycles=1,  # [Rocki20]
)
WSE_ROUTER = RouterSpec(
    colors=24,  # [SDK] routable colors
    queue_depth_wavelets=4,  # assumption: per-color input buffer depth is not published
)
CS2_IO = IOSpec(
    edge_ports=12,  # [HC33] 12 x 100 GbE
    edge_port_bits_per_s=100e9,  # [HC33] 12 x 100 Gb/s = 1.2 Tb/s system I/O
    edge_latency_cycles=1000,  # assumption: MemoryX round trip of ~1.2 us at 850 MHz
    swarmx_fanout=4,  # assumption: SwarmX node fan-out is not published
    swarmx_link_bits_per_s=1.2e12,  # [HC33] one link carries a CS-2's 1.2 Tb/s system I/O
    swarmx_level_latency_cycles=850,  # assumption: ~1 us per SwarmX level at 850 MHz
)
WSE2_CLOCK_HZ = 0.85e9  # [Jacq22]
WSE_MAX_CLOCK_HZ = 1.1e9  # [Rocki20]
WSE2_SPARE_ROWS = 10  # [Lau21] ~1 % spares: 10 rows over 994


def _wse_like(name: str, width: int, height: int, spare_rows: int) -> WaferSpec:
    """A small wafer with WSE-2 PEs, links, router and I/O, for tests and quick studies."""
    return WaferSpec(
        name=name,
        logical_width_pes=width,
        logical_height_pes=height,
        spare_rows=spare_rows,
        spare_cols=0,
        clock_hz=WSE2_CLOCK_HZ,
        max_clock_hz=WSE_MAX_CLOCK_HZ,
        pe=WSE2_PE,
        link=WSE_LINK,
        router=WSE_ROUTER,
        io=CS2_IO,
    )


def _wse2() -> WaferSpec:
    return _wse_like("wse2", 750, 994, WSE2_SPARE_ROWS)  # [Jacq22] 750 x 994 user grid


def _wse3() -> WaferSpec:
    base = _wse_like("wse3", 762, 1170, 12)
    # assumption: the WSE-3 user grid is not published; 762 x 1170 plus ~1 % spare rows
    # [Lau21] gives ~900,000 physical cores [HC24] at the WSE-2 aspect ratio.
    return base.replace(
        {
            "pe.fp16_fmac_per_cycle": 8,  # [HC24] SIMD-8
            "pe.area_mm2": WSE2_DIE_AREA_MM2 / WSE3_PHYSICAL_CORES,  # [HC24]
            "pe.input_queue_01_wavelets": 8,  # [SDK] WSE-3 queues 0 and 1
            "pe.input_queue_47_wavelets": 4,  # [SDK] WSE-3 queues 4 to 7 (2 and 3: 4, as WSE-2)
            "pe.output_queue_01_wavelets": 8,  # [SDK] WSE-3 output queues, the default
            "pe.output_queue_23_wavelets": 8,  # [SDK]
            "pe.output_queue_45_wavelets": 8,  # [SDK]
            "clock_hz": WSE_MAX_CLOCK_HZ,  # assumption: WSE-3 clock not published; 1.1 GHz
        }
    )


DEFAULT_PRESET = "wse2"  # what every command and run config uses when none is named
PRESETS = {
    "tiny": lambda: _wse_like("tiny", 8, 8, 1),
    "small": lambda: _wse_like("small", 64, 64, 1),
    "wse2": _wse2,
    "wse3": _wse3,
}


def preset(name: str) -> WaferSpec:
    """The preset called ``name``; an unknown name lists the valid ones."""
    try:
        return PRESETS[name]()
    except KeyError:
        raise ConfigError(
            f"unknown preset {excerpt(name)}; valid presets: {', '.join(PRESETS)}"
        ) from None
