"""Time to plan every row and column multicast of a `wse2` map with holes, per defect density.

Run: python benchmarks/bench_routes.py [--seed N] [--out out/bench_routes.json]
Target: routing for a full wse2 map (all routes a 750 x 994 row/column-
multicast kernel needs) in under 10 s on one core. Rows use color 0 and columns color 1;
each multicast starts at the first working PE of its row or column. Repair is ``none`` so
every dead PE stays a hole that routes must detour around.
"""

import argparse
import time

import numba
from wafersim.fabric.mesh import Mesh
from wafersim.fabric.reroute import check_connected, multicast_requests, plan_routes, warm_up
from wafersim.wafer.atomic import write_json
from wafersim.wafer.defects import generate
from wafersim.wafer.errors import ConnectivityError
from wafersim.wafer.presets import preset
from wafersim.wafer.repair import repair

DENSITIES_PER_CM2 = (0.1, 1.0, 10.0)


def run_case(spec, density, seed):
    grid = repair(generate(spec, "poisson", seed, defect_density_per_cm2=density), "none")
    mesh = Mesh.from_logical_grid(grid)
    try:
        check_connected(mesh)
        connected = True
    except ConnectivityError as error:
        connected = str(error)
    t0 = time.perf_counter()
    requests = multicast_requests(mesh)
    t1 = time.perf_counter()
    plan = plan_routes(mesh, requests)
    t2 = time.perf_counter()
    return {
        "defect_density_per_cm2": density,
        "holes": int((~mesh.alive).sum()),
        "dead_links": int(mesh.dead_link.sum() // 2),
        "connected": connected,
        "requests_s": t1 - t0,
        "plan_s": t2 - t1,
        "total_s": t2 - t0,
        **plan.summary(),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="out/bench_routes.json")
    args = parser.parse_args()
    numba.set_num_threads(1)
    t0 = time.perf_counter()
    warm_up()
    compile_s = time.perf_counter() - t0
    print(f"JIT warm-up (compile or cache load): {compile_s:.2f} s")
    spec = preset("wse2")
    print(
        f"{'D /cm2':>6} {'holes':>6} {'routes':>6} {'plan s':>7} {'total s':>7} "
        f"{'mean +hops':>10} {'max +hops':>9} {'detoured':>8} {'shared':>6} {'same color':>10}"
    )
    cases = []
    for density in DENSITIES_PER_CM2:
        case = run_case(spec, density, args.seed)
        cases.append(case)
        print(
            f"{density:6.1f} {case['holes']:6d} {case['routes']:6d} {case['plan_s']:7.2f} "
            f"{case['total_s']:7.2f} {case['mean_added_hops_per_route']:10.3f} "
            f"{case['max_added_hops_per_route']:9d} {case['routes_with_detour']:8d} "
            f"{case['shared_links']:6d} {case['shared_links_same_color']:10d}"
        )
    summary = {"preset": "wse2", "repair": "none", "seed": args.seed, "compile_s": compile_s}
    write_json(args.out, {**summary, "cases": cases})
    print(f"saved {args.out}")


if __name__ == "__main__":
    main()
