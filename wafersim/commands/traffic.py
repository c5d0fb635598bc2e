"""``wafersim traffic``: synthetic traffic on a mesh of the fabric."""

from __future__ import annotations

import argparse
from typing import Any

from wafersim.commands.jobs import Command
from wafersim.commands.options import (
    add_grid_option,
    add_spec_options,
    add_timeline_options,
    parse_grid,
    spec_from,
)
from wafersim.wafer import __version__


def add_traffic_arguments(parser: argparse.ArgumentParser) -> None:
    from wafersim.fabric.traffic import HOTSPOT_FRACTION, PATTERNS, ROUTINGS

    add_spec_options(parser)
    add_grid_option(parser, "8x8")
    parser.add_argument("--pattern", default="uniform", choices=list(PATTERNS))
    parser.add_argument(
        "--hotspot-fraction", type=float,
        help=f"--pattern hotspot: share of packets sent to the centre PE, the rest uniform, "
        f"in [0, 1] (default {HOTSPOT_FRACTION}); refused with other patterns",
    )  # fmt: skip
    parser.add_argument("--rate", type=float, default=0.1, help="flits offered per PE per cycle")
    parser.add_argument("--packet-size", type=int, default=4, help="flits per packet")
    parser.add_argument("--queue-depth", type=int, help="flits per input queue (default: spec)")
    parser.add_argument("--routing", default="xy", choices=list(ROUTINGS))
    parser.add_argument(
        "--colors",
        type=int,
        default=1,
        help="colors the packets spread over, like virtual "
        "channels, each with its own queues (default 1)",
    )
    parser.add_argument("--cycles", type=int, default=2000)
    parser.add_argument(
        "--warmup", type=int, help="cycles before packets count (default: a quarter of --cycles)"
    )
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--trace", help="write link/PE utilization samples to this HDF5 file")
    parser.add_argument("--trace-every", type=int, default=100, help="cycles per trace sample")
    parser.add_argument("--plot", help="save a heatmap of link utilization to this PNG")
    add_timeline_options(parser, regions=True)


def run_traffic_command(args: argparse.Namespace) -> dict[str, Any]:
    from wafersim.commands.timelines import write_engine_timeline
    from wafersim.fabric.engine import compiles_noted
    from wafersim.fabric.timeline import check_block
    from wafersim.fabric.trace import TraceRecorder
    from wafersim.fabric.traffic import run_traffic
    from wafersim.plots.figures import activity_animation, wafer_heatmap

    width, height = parse_grid(args.grid)
    spec = spec_from(args)
    config = traffic_config(args, width, height)
    if args.timeline_block is not None:
        check_block(args.timeline_block)
    wants_trace = args.trace or args.plot or args.timeline or args.animation
    trace = TraceRecorder(args.trace_every, width, height) if wants_trace else None
    with compiles_noted() as compiles:
        result = {**run_traffic(config, spec, trace=trace), "spec": spec.name}
    # the engine's compile (or cache load) apart from the run's rate; the CUDA engine's
    # compile is not timed apart
    result["compile_s"] = sum(compiles) if result["engine"] == "cpu" else None
    del result["grid"]  # [width, height]: said by name below, as every command says it
    result.update(width_pes=width, height_pes=height)
    result["wafersim_version"] = __version__
    if args.trace:
        trace.save(args.trace, {"command": "traffic", **result, "spec": spec.to_dict()})
    if args.timeline:
        name = f"traffic {args.pattern} {width}x{height}, rate {args.rate}"
        write_engine_timeline(args.timeline, trace, spec, args.timeline_block, name,
                              config.cycles, {"command": "traffic", **result})  # fmt: skip
    if args.animation:
        name = f"{args.pattern} traffic, rate {args.rate}"
        activity_animation(trace.pe, trace.cycles, args.animation, name, label=INJECTED)
    if args.plot:
        title = f"{width}x{height} {args.pattern}, rate {args.rate}: link utilization"
        wafer_heatmap(trace.mean_link_utilization(), args.plot, title, "wavelets/cycle/link")
    return result


INJECTED = "share of the sample's cycles the source injected a flit"


def traffic_config(args: argparse.Namespace, width: int, height: int):
    """The run's :class:`fabric.traffic.TrafficConfig`; ``--hotspot-fraction`` given with
    another pattern than hotspot is refused (it would change nothing)."""
    from wafersim.fabric.traffic import HOTSPOT_FRACTION, TrafficConfig
    from wafersim.wafer.errors import ConfigError

    fraction = args.hotspot_fraction
    if fraction is not None and args.pattern != "hotspot":
        raise ConfigError(f"--hotspot-fraction={fraction} applies to --pattern hotspot only, "
                          f"not {args.pattern}")  # fmt: skip
    return TrafficConfig(
        width=width,
        height=height,
        pattern=args.pattern,
        rate=args.rate,
        packet_size=args.packet_size,
        queue_depth=args.queue_depth,
        routing=args.routing,
        cycles=args.cycles,
        warmup=args.cycles // 4 if args.warmup is None else args.warmup,
        seed=args.seed,
        threads=args.threads,
        colors=args.colors,
        hotspot_fraction=HOTSPOT_FRACTION if fraction is None else fraction,
    )


def _traffic_text(r: dict[str, Any]) -> str:
    w, h = r["width_pes"], r["height_pes"]
    latency = r["avg_packet_latency_cycles"]
    latency_text = "n/a" if latency is None else f"{latency:.1f}"
    return "\n".join(
        [
            f"{w}x{h} mesh, {_pattern_text(r)} traffic, {r['routing']} routing, seed {r['seed']}",
            f"offered {r['offered_rate']:.4f}, accepted {r['accepted_rate']:.4f} flits/PE/cycle"
            + (" (saturated)" if r["saturated"] else ""),
            f"packet latency {latency_text} cycles (p99 {r['p99_packet_latency_cycles']}), "
            f"avg hops {r['avg_hops'] or 0:.2f}",
            f"{r['router_cycles_per_s'] / 1e6:.2f} M router-cycles/s ({r['sim_wall_s']:.2f} s"
            + _compile_text(r["compile_s"])
            + ")",
        ]
    )


def _pattern_text(r: dict[str, Any]) -> str:
    fraction = r.get("hotspot_fraction")
    return r["pattern"] if fraction is None else f"{r['pattern']} ({fraction:g} to the centre)"


def _compile_text(compile_s: float | None) -> str:
    if compile_s is None:
        return ", its engine compile included"
    return f"; engine compile or cache load {compile_s:.2f} s, not counted"


OUTPUTS = {"trace": "file", "plot": "file", "timeline": "file", "animation": "file"}
COMMAND = Command(add_traffic_arguments, run_traffic_command, _traffic_text, outputs=OUTPUTS,
                  engine=True)  # fmt: skip
