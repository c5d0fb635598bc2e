"""Plans: SRAM budgets, holes, the cache, the ``compile`` CLI and its defect options, a plan
run on the engine, PE assignment, router colors and the MemoryX tile order."""

from __future__ import annotations

import itertools
import json
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from wafersim.compiler.assignment import assigned_pes, assignment_lines
from wafersim.compiler.colors import fits_palette, kernel_colors
from wafersim.compiler.model_file import load_model
from wafersim.compiler.plan import CompileOptions, compile_cached, compile_plan
from wafersim.compiler.plan_records import (
    GemmPlacement,
    GemmWork,
    Orientation,
    PeAssignment,
    Placement,
    Plan,
)
from wafersim.compiler.single_gemm import place_single_gemm, run_placed_gemm
from wafersim.compiler.strategies import all_strategies
from wafersim.compiler.tile_order import LISTED_TILES, tile_order
from wafersim.compiler.working import WorkingGrid
from wafersim.kernels.gemm_weight_stream import chunk_offsets, weight_stream
from wafersim.kernels.grid import kernel_grid
from wafersim.kernels.registry import algorithm
from wafersim.kernels.wiring import DETOUR_COLORS
from wafersim.wafer.defects import DefectMap, generate
from wafersim.wafer.errors import ConfigError
from wafersim.wafer.geometry import E, N, S, W, mirror_links
from wafersim.wafer.presets import preset
from wafersim.wafer.repair import repair

from wafersim.cli import main

ZOO = Path(__file__).resolve().parents[1] / "examples" / "models"
BOTTLENECKS = {"compute", "SRAM", "fabric", "edge bandwidth"}
STRATEGIES = all_strategies()  # the registered ones, by name


def passes(plan: Plan) -> list[tuple[str, Placement]]:
    return [(layer.name, p) for layer, _, p in plan.placements()]


def json_passes(plan: dict) -> list[dict]:
    """The passes of a plan as ``wafersim compile --json`` prints it."""
    return [p for layer in plan["layers"] for p in layer["passes"].values()]


def placement(algo: str, grid, gemm: GemmWork, orientation=Orientation.WEST, options=None,
              replicas: int = 1) -> GemmPlacement:  # fmt: skip
    """A GEMM placement with what tile orders and route families read set; no costs."""
    return GemmPlacement(algo, algo, options or {}, tuple(grid), orientation, {}, gemm,
                         replicas, 1, 0, {}, 0, 0, 0, 0, 0, {}, "compute")  # fmt: skip


@pytest.mark.parametrize(
    ("model", "batch"), [("fc-digits", 64), pytest.param("gpt2-small", 2, marks=pytest.mark.slow)]
)
def test_every_pass_fits_sram_and_the_working_grid(model, batch, wse2):
    """Each placement fits a PE's SRAM, stays on the working grid and names a bottleneck."""
    spec = wse2
    plan = compile_plan(load_model(ZOO / f"{model}.yaml"), spec, CompileOptions(batch=batch))
    width, height = plan.working["logical_grid"]
    assert plan.working["pes"] == width * height
    for _, p in passes(plan):
        assert 0 < p.sram_bytes_per_pe <= spec.pe.sram_bytes
        assert p.pes <= width * height
        assert p.width_pes <= width
        assert p.height_pes <= height
        assert p.bottleneck in BOTTLENECKS
        assert p.cycles >= p.bound_cycles["edge_bandwidth"]


def test_linear_layers_get_all_three_passes():
    """A matmul has forward, backward-data and backward-weight, except dX of the first."""
    plan = compile_plan(load_model(ZOO / "fc-digits.yaml"), preset("small"), CompileOptions(8))
    by_name = {layer.name: layer.passes for layer in plan.layers}
    assert set(by_name["fc2"]) == {"forward", "backward_data", "backward_weight"}
    assert set(by_name["fc1"]) == {"forward", "backward_weight"}
    assert by_name["fc2"]["forward"].gemm == GemmWork(m=8, k=256, n=128, count=1)
    assert by_name["fc2"]["backward_data"].gemm == GemmWork(m=8, k=128, n=256, count=1)
    assert by_name["fc2"]["backward_weight"].gemm == GemmWork(m=256, k=8, n=128, count=1)


@pytest.mark.slow
def test_batch_one_gpt3_is_edge_bound(wse2):
    """At batch 1 streaming GPT-3 175B's weights through MemoryX bounds every matmul."""
    plan = compile_plan(load_model(ZOO / "gpt3-175b.yaml"), wse2, CompileOptions())
    linear = [p for name, p in passes(plan) if name.endswith(".fc")]
    assert linear
    assert all(p.bottleneck == "edge bandwidth" for p in linear)


def test_holes_take_only_themselves_out_of_the_working_grid():
    """With holes, every other PE can take work: the shallowest line loses the holes it
    holds, not whole rows, and no pass lands on a hole."""
    spec = preset("small")
    holes = np.zeros((64, 64), bool)
    holes[[3, 3, 40], [5, 6, 7]] = True
    model = load_model(ZOO / "fc-digits.yaml")
    plan = compile_plan(model, spec, CompileOptions(batch=64), holes)
    assert plan.working["pes"] == 64 * 64 - 3
    assert plan.working["west edge"] == {"lines": 64, "shallowest": 63, "deepest": 64}
    assert plan.working["north edge"] == {"lines": 64, "shallowest": 62, "deepest": 64}
    assert plan.defects["holes"] == 3
    for _, p in passes(plan):
        pes = assigned_pes(p.pe_assignment, holes)
        assert len(pes) == p.pe_assignment.pes >= p.pes > 0
        assert not holes[pes[:, 0], pes[:, 1]].any()


def test_a_layer_too_big_names_it_and_suggests_micro_batches(tiny, wse2):
    """A layer no candidate fits is a ConfigError with the layer, the bytes and a remedy."""
    model = load_model(ZOO / "gpt2-small.yaml")
    message = r"layer 'wte' does not fit: needs \d+ bytes.*available 49152.*micro-batches"
    with pytest.raises(ConfigError, match=message):
        compile_plan(model, tiny, CompileOptions(batch=8, activations="ignore", micro_batches=1))
    kept = r"activations kept for backward do not fit: 1 sequence\(s\) need \d+ bytes per PE"
    gpt3 = load_model(ZOO / "gpt3-175b.yaml")
    with pytest.raises(ConfigError, match=kept + ".*even with one.*activations=recompute"):
        compile_plan(gpt3, wse2, CompileOptions(activations="keep"))


def test_bad_options_are_clear_errors(wse2):
    """Batch, seq, dtype and strategy names are checked at the door."""
    model = load_model(ZOO / "gpt2-small.yaml")
    for options, message in [
        (CompileOptions(batch=0), r"batch=0 must be an integer in \[1,"),
        (CompileOptions(seq=4096), r"seq=4096 must be an integer in \[1, 1024\]"),
        (CompileOptions(dtype="int8"), "dtype='int8' is not one of"),
        (CompileOptions(strategies=("magic",)), "each must be one of: weight_stream_chain"),
    ]:
        with pytest.raises(ConfigError, match=message):
            compile_plan(model, wse2, options)


def test_cache_hits_when_nothing_changed_and_misses_when_anything_did(tmp_path):
    """Same inputs reuse the saved plan; a changed model, spec, option or hole recompiles."""
    model = tmp_path / "fc.yaml"
    model.write_text((ZOO / "fc-digits.yaml").read_text())
    spec, options = preset("small"), CompileOptions(batch=16)
    out = tmp_path / "plans"
    assert compile_cached(model, spec, options, out)[1] is False
    assert compile_cached(model, spec, options, out)[1] is True
    holes = np.zeros((64, 64), bool)
    holes[1, 1] = True
    changes = [
        (model, spec.replace({"pe.sram_bytes": 32768}), options, None),
        (model, spec, CompileOptions(batch=32), None),
        (model, spec, options, holes),
    ]
    for args in changes:
        assert compile_cached(args[0], args[1], args[2], out, args[3])[1] is False
    model.write_text(model.read_text() + "# edited\n")
    assert compile_cached(model, spec, options, out)[1] is False
    assert compile_cached(model, spec, options, out)[1] is True


def run_json(capsys, argv):
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_compile_cli_json_has_layers_totals_and_time(capsys, tmp_path):
    """JSON per layer and pass, totals, compile_time_s; a second run is a cache hit."""
    argv = ["compile", str(ZOO / "fc-digits.yaml"), "--preset", "small", "--batch", "32",
            "--dtype", "fp32", "--out", str(tmp_path)]  # fmt: skip
    first = run_json(capsys, argv)
    assert first.keys() >= {"layers", "totals", "compile_time_s", "cache", "spec", "plan_path"}
    assert first["cache"] == "miss"
    assert first["totals"]["cycles"] > 0
    fc1 = first["layers"][0]["passes"]["forward"]
    assert fc1.keys() >= {"algorithm", "rows_cols", "width_pes", "height_pes", "cycles",
                          "sram_bytes_per_pe", "bottleneck"}  # fmt: skip
    assert run_json(capsys, argv)["cache"] == "hit"
    assert main(argv) == 0
    assert "cache hit" in capsys.readouterr().out


@pytest.mark.slow
def test_compile_cli_validate_only_and_errors(capsys):
    """--validate-only reports the graph; a bad option is one line and exit 2."""
    result = run_json(capsys, ["compile", str(ZOO / "llama-7b.yaml"), "--validate-only"])
    assert result["params"] == 6_738_415_616
    assert result["options"]["seq"] == 2048
    assert main(["compile", str(ZOO / "gpt2-small.yaml"), "--batch", "0"]) == 2
    err = capsys.readouterr().err
    assert "batch=0" in err
    assert err.count("\n") == 1
    tiny = [str(ZOO / "gpt2-small.yaml"), "--preset", "tiny"]
    assert main(["compile", *tiny, "--validate-only"]) == 2
    assert "activations kept for backward do not fit" in capsys.readouterr().err
    argv = ["compile", str(ZOO / "gpt3-175b.yaml"), "--preset", "wse2", "--batch", "4"]
    forced = run_json(capsys, [*argv, "--activations", "recompute", "--micro-batches", "2"])
    assert forced["activations"]["policy"] == "recompute"
    assert forced["activations"]["sequences_per_micro_batch"] == 2
    assert main([*argv, "--micro-batches", "3"]) == 2
    assert "micro_batches=3 must divide batch=4" in capsys.readouterr().err


def test_compile_cli_searches_only_the_strategies_named(capsys):
    """--strategies restricts the GEMM placements searched (the weight-streaming dataflow
    alone, say); an unknown name is one line naming the valid ones."""
    argv = ["compile", str(ZOO / "fc-digits.yaml"), "--preset", "small", "--batch", "32",
            "--dtype", "fp32"]  # fmt: skip
    named = run_json(capsys, [*argv, "--strategies", "weight_stream_chain", "weight_stream_tree"])
    algorithms = {p["algorithm"] for layer in named["layers"] for p in layer["passes"].values()
                  if p.get("algorithm") in {s.algo for s in STRATEGIES.values()}}  # fmt: skip
    assert algorithms == {"weight_stream"}
    everything = run_json(capsys, argv)
    assert "systolic" in {p["algorithm"] for layer in everything["layers"]
                          for p in layer["passes"].values()}  # fmt: skip
    assert everything["totals"]["cycles"] <= named["totals"]["cycles"]  # a superset searched
    assert main([*argv, "--strategies", "bogus"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "strategies=['bogus']" in err
    assert "weight_stream_chain" in err


def test_sram_estimates_bound_what_the_kernels_allocate(tiny):
    """Each strategy's SRAM estimate is at least the engine's peak for the same tiling."""
    spec = tiny
    for name, strategy in STRATEGIES.items():
        rows, cols = (3, 3) if strategy.square else (3, 4)
        shape = {"m": 13, "k": 10, "n": 11}
        result = algorithm("gemm", strategy.algo).run(
            shape, kernel_grid(rows, cols), spec, "fp16", 0, **strategy.options
        )
        estimate = strategy.sram_bytes(13, 10, 11, rows, cols, spec, "fp16")
        assert result.sram_peak_bytes <= estimate, name
        assert estimate <= 2 * result.sram_peak_bytes + 64, name


def test_first_layer_plan_runs_on_the_cycle_engine(tiny):
    """The plan for the FC digits net's first layer runs on the engine and matches numpy."""
    spec = tiny
    plan = compile_plan(load_model(ZOO / "fc-digits.yaml"), spec, CompileOptions(batch=16))
    placed = plan.layers[0].passes["forward"]
    gemm = placed.gemm
    rows, cols = placed.rows_cols
    rng = np.random.default_rng(1)
    x = rng.standard_normal((gemm.m, gemm.k)).astype(np.float32)
    w = rng.standard_normal((gemm.k, gemm.n)).astype(np.float32)
    result = algorithm("gemm", placed.algorithm).run(
        gemm.shape(), kernel_grid(rows, cols), spec, "fp16", 1, **placed.options
    )
    assert result.max_abs_error < 0.05
    assert result.analytic_cycles == placed.kernel_cycles
    assert result.sram_peak_bytes <= placed.sram_bytes_per_pe
    direct = weight_stream(x, w, kernel_grid(rows, cols), spec, "fp32")
    np.testing.assert_allclose(direct.output, x.astype(np.float64) @ w, rtol=1e-4, atol=1e-4)


# ---- defects on the command line, PE assignment, colors, MemoryX tile order


def saved_map(path: Path, dead: list[tuple[int, int]], spec_name: str = "small") -> Path:
    """A defect map of ``spec_name`` with dead PEs at ``(row, col)``, saved to ``path``."""
    spec = preset(spec_name)
    dead_pe = np.zeros((spec.physical_height_pes, spec.physical_width_pes), bool)
    for row, col in dead:
        dead_pe[row, col] = True
    DefectMap(dead_pe, np.zeros((*dead_pe.shape, 4), bool), "explicit", {}, None, spec).save(path)
    return path


def engine_pes(assignment: PeAssignment, holes: np.ndarray) -> np.ndarray:
    """(row, col) on the logical grid of every PE the engine's column-shift placement
    (``kernels.grid.kernel_grid``) gives work, for the kernel frame the assignment names."""
    turned = assignment.orientation.turned
    lines = assignment_lines(assignment)
    patch = (holes.T if turned else holes)[:, : lines[-1] + 1]
    placed = kernel_grid(assignment.depth, len(lines), patch, lines=lines)
    xy = np.array([placed.xy(int(pe)) for pe in placed.pe.T.ravel()])  # (x, y) in the patch
    return xy if turned else xy[:, ::-1]


@pytest.mark.parametrize(
    ("model", "extra"),
    [
        ("fc-digits.yaml", ["--batch", "64"]),
        pytest.param("gpt2-small.yaml", ["--seq", "32"], marks=pytest.mark.slow),
    ],
)
def test_holes_of_a_saved_map_get_no_work(capsys, tmp_path, model, extra):
    """Every pass's PEs, placed as the engine places them, miss the holes of --defects and
    fill exactly the rectangle its pe_assignment names."""
    path = saved_map(tmp_path / "map.h5", [(3, 5), (3, 6), (40, 7), (10, 60)])
    holes = repair(DefectMap.load(path), "none").hole
    argv = ["compile", str(ZOO / model), "--preset", "small", "--defects", str(path),
            "--repair", "none", *extra]  # fmt: skip
    plan = run_json(capsys, argv)
    assert plan["defects"]["holes"] == 4
    assert plan["defects"]["source"] == str(path)
    assert plan["defects"]["dead_pes"] == 4
    for p in json_passes(plan):
        a = PeAssignment.from_json(p["pe_assignment"])
        pes = engine_pes(a, holes)
        np.testing.assert_array_equal(pes, assigned_pes(a, holes))
        assert not holes[pes[:, 0], pes[:, 1]].any()
        assert a.origin == (0, 0)
        assert [pes[:, 0].max() + 1, pes[:, 1].max() + 1] == [a.rows, a.cols]
        assert holes[: a.rows, : a.cols].sum() == a.holes_skipped
        assert a.replicas["count"] == p.get("replicas", 1)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--defects", "m.h5", "--pe-defect-prob", "0.1"], "--defects loads a saved map"),
        (["--defects", "m.h5", "--defect-model", "poisson"], "--defects loads a saved map"),
        (["--repair", "row"], "--repair needs a defect map"),
        (["--defect-model", "clustered"], "--defect-model clustered needs a rate"),
        (["--pe-defect-prob", "0.1", "--defect-density-per-cm2", "1"], "not allowed with"),
        (["--pe-defect-prob", "2"], r"pe_defect_prob=2.0 is out of range"),
        (["--defects", "missing.h5"], "no such file"),
        (["--defect-model", "explicit"], "--defect-model explicit needs --defect-list"),
        (
            ["--defect-model", "explicit", "--defect-list", "x.toml", "--pe-defect-prob", "0.1"],
            "unknown parameter",
        ),
    ],
)
def test_compile_cli_rejects_bad_defect_options(capsys, options, message):
    """Conflicting or bad defect options are a one-line error and exit status 2."""
    try:
        status = main(["compile", str(ZOO / "fc-digits.yaml"), "--preset", "small", *options])
    except SystemExit as usage_error:  # argparse's own checks exit at once
        status = usage_error.code
    assert status == 2
    err = capsys.readouterr().err
    assert re.search(message, err)
    assert err.count("\n") == 1


def test_a_saved_map_must_be_of_the_compile_spec(capsys, tmp_path):
    """A map drawn for another wafer is refused, naming both specs."""
    path = saved_map(tmp_path / "tiny.h5", [(1, 1)], "tiny")
    assert main(["compile", str(ZOO / "fc-digits.yaml"), "--preset", "small",
                 "--defects", str(path)]) == 2  # fmt: skip
    assert "defect map of spec 'tiny', this command's spec is 'small'" in capsys.readouterr().err


def test_a_drawn_map_follows_the_seed(capsys):
    """--defect-model draws its map from --seed: the same seed, the same holes."""
    argv = ["compile", str(ZOO / "fc-digits.yaml"), "--preset", "small", "--batch", "16",
            "--defect-model", "clustered", "--defect-density-per-cm2", "200"]  # fmt: skip
    first, again = (
        run_json(capsys, [*argv, "--seed", "3"]),
        run_json(capsys, [*argv, "--seed", "3"]),
    )
    other = run_json(capsys, [*argv, "--seed", "4"])
    assert first["defects"]["repair"] == "column_shift"
    assert first["defects"]["model"] == "clustered"
    assert first["defects"]["mask_sha256"] == again["defects"]["mask_sha256"]
    assert first["defects"]["mask_sha256"] != other["defects"]["mask_sha256"]


def test_cache_key_changes_with_the_defect_map(capsys, tmp_path):
    """Another map's holes recompile under a new cache key; the same map hits the cache."""
    out = tmp_path / "plans"
    argv = ["compile", str(ZOO / "fc-digits.yaml"), "--preset", "small", "--batch", "16",
            "--repair", "none", "--out", str(out), "--defects"]  # fmt: skip
    one = saved_map(tmp_path / "one.h5", [(3, 5)])
    two = saved_map(tmp_path / "two.h5", [(3, 6)])
    first = run_json(capsys, [*argv, str(one)])
    second = run_json(capsys, [*argv, str(two)])
    assert (first["cache"], second["cache"]) == ("miss", "miss")
    assert first["cache_key"] != second["cache_key"]
    again = run_json(capsys, [*argv, str(two)])
    assert (again["cache"], again["cache_key"]) == ("hit", second["cache_key"])


@pytest.mark.parametrize("name", list(STRATEGIES))
def test_colors_are_those_the_kernels_route(name, tiny):
    """A strategy's colors are what its kernel routes on the engine (defect-free grids)."""
    strategy, spec = STRATEGIES[name], tiny
    options = tuple(sorted(strategy.options.items()))
    grids = (
        [(3, 3), (1, 1), (2, 2)] if strategy.square else [(1, 3), (3, 1), (2, 2), (5, 3), (8, 2)]
    )
    for rows, cols in grids:
        for n in (3, 11, 70):
            result = algorithm("gemm", strategy.algo).run(
                {"m": 9, "k": 12, "n": n}, kernel_grid(rows, cols), spec, "fp16", 0,
                **strategy.options,
            )  # fmt: skip
            assert len(kernel_colors(strategy.algo, rows, cols, n, options)) == result.colors_used


@pytest.mark.slow
def test_no_placement_needs_more_colors_than_the_routers_have(tiny):
    """Placements keep within the kernels' colors (router.colors less the detour ones); a
    grid whose kernel would need more is not a candidate, as the kernel cannot build it."""
    spec = tiny.replace({"router.colors": 8})  # 4 kernel colors
    tree = (("reduce", "tree"),)
    assert fits_palette("weight_stream", 2, 2, 8, tree, spec)
    assert not fits_palette("weight_stream", 4, 2, 8, tree, spec)
    with pytest.raises(ConfigError, match="kernel needs color 4"):
        algorithm("gemm", "weight_stream").run(
            {"m": 4, "k": 8, "n": 8}, kernel_grid(4, 2), spec, "fp16", 0, reduce="tree"
        )
    options = CompileOptions(batch=16, strategies=("weight_stream_tree",))
    plan = compile_plan(load_model(ZOO / "fc-digits.yaml"), spec, options)
    for _, p in passes(plan):
        assert getattr(p, "colors", 0) <= spec.router.colors - DETOUR_COLORS
    wse2 = compile_plan(load_model(ZOO / "gpt2-small.yaml"), preset("wse2"), CompileOptions())
    assert all(getattr(p, "colors", 0) <= 20 for _, p in passes(wse2))


def covered(tiles: list[dict], rows: int, cols: int) -> np.ndarray:
    count = np.zeros((rows, cols), np.int64)
    for tile in tiles:
        r, c = tile.get("k", tile.get("m")), tile["n"]
        count[r[0] : r[1], c[0] : c[1]] += 1
    return count


@pytest.mark.parametrize("name", list(STRATEGIES))
@pytest.mark.parametrize("pass_name", ["forward", "backward_weight"])
def test_tile_order_covers_the_operand_exactly_once(name, pass_name, wse2):
    """Streamed in, the tiles cover B (k x n) once; streamed out, C (m x n); bytes add up."""
    strategy, spec = STRATEGIES[name], wse2
    grids = [(7, 7), (1, 1)] if strategy.square else [(7, 5), (1, 6), (16, 1)]
    for rows, cols in grids:
        gemm = GemmWork(m=29, k=23, n=300, count=1)
        side = gemm.k if pass_name == "forward" else gemm.m
        placed = replace(placement(strategy.algo, (rows, cols), gemm), edge_bytes=side * 300 * 2)
        order = tile_order(placed, pass_name, spec, "fp16", limit=None)
        assert (covered(order["order"], side, gemm.n) == 1).all()
        assert order["tiles"] == len(order["order"])
        assert sum(t["bytes"] for t in order["order"]) == order["total_bytes"] == side * 300 * 2
        assert max(t["bytes"] for t in order["order"]) == order["tile_bytes"]


def test_weight_streaming_tiles_are_the_kernels_column_chunks():
    """Weight streaming sends B's column chunks in order, every row's port at once; the
    plan lists the first LISTED_TILES of them and counts all."""
    gemm = GemmWork(m=8, k=64, n=4096, count=1)
    placed = placement("weight_stream", (4, 2), gemm, Orientation.NORTH)
    order = tile_order(placed, "backward_data", preset("small"), "fp32")
    chunks = chunk_offsets(4096, 4)
    assert order["tiles"] == len(chunks) - 1 > LISTED_TILES == len(order["order"])
    listed = [list(c) for c in itertools.pairwise(chunks)][:LISTED_TILES]
    assert [t["n"] for t in order["order"]] == listed
    assert all(t["k"] == [0, 64] for t in order["order"])
    assert order["moved_by"].startswith("every kernel row's north port")


@pytest.mark.slow
def test_plan_passes_carry_assignment_colors_and_tile_order(wse2):
    """GEMM passes with edge bytes list their tiles; attention's (no weights) list none."""
    plan = compile_plan(load_model(ZOO / "gpt2-small.yaml"), wse2, CompileOptions())
    for name, p in passes(plan):
        assert p.pe_assignment is not None
        if not isinstance(p, GemmPlacement):
            continue
        tiles = p.memoryx_tile_order
        if ".attn." in name:
            assert tiles is None
            continue
        assert tiles["total_bytes"] == p.edge_bytes
        assert len(tiles["order"]) == min(tiles["tiles"], LISTED_TILES)


def test_a_wafer_with_holes_in_every_row_and_column_compiles(tiny):
    """Holes in every row and every column (the old rule kept hole-free rows only) still
    leave every line all but one of its PEs."""
    spec = tiny.replace({"logical_width_pes": 16, "logical_height_pes": 16})
    holes = np.zeros((16, 16), bool)
    holes[np.arange(16), 5 * np.arange(16) % 16] = True  # no two touch, even diagonally
    plan = compile_plan(load_model(ZOO / "fc-digits.yaml"), spec,
                        CompileOptions(batch=8, dtype="fp32"), holes)  # fmt: skip
    assert plan.working["pes"] == 240
    for edge in ("west edge", "north edge"):
        assert plan.working[edge] == {"lines": 16, "shallowest": 15, "deepest": 15}
    for _, p in passes(plan):
        pes = assigned_pes(p.pe_assignment, holes)
        assert not holes[pes[:, 0], pes[:, 1]].any()


def test_pes_cut_off_by_dead_links_get_no_work(tiny):
    """Working PEs walled off by dead links (and the smaller part of a wafer that holes cut
    in two) count as holes: they take no work."""
    spec = tiny.replace({"logical_width_pes": 16, "logical_height_pes": 16})
    holes, dead = np.zeros((16, 16), bool), np.zeros((16, 16, 4), bool)
    dead[5:7, 5, W] = dead[5:7, 6, E] = dead[5, 5:7, N] = dead[6, 5:7, S] = True  # a box
    plan = compile_plan(load_model(ZOO / "fc-digits.yaml"), spec,
                        CompileOptions(batch=8, dtype="fp32"),
                        WorkingGrid.of(holes, dead))  # fmt: skip
    assert plan.defects["cut_off_pes"] == 4
    assert plan.working["pes"] == 252
    cut = np.zeros((16, 16), bool)
    cut[5:7, 5:7] = True
    for _, p in passes(plan):
        pes = assigned_pes(p.pe_assignment, cut)
        assert not cut[pes[:, 0], pes[:, 1]].any()
    split = np.eye(16, dtype=bool)[::-1]  # an anti-diagonal of holes halves the wafer
    assert WorkingGrid.of(split).cut_off == 120


def compiled_or_error(spec, logical) -> tuple[Plan | None, str]:
    """The digits model's plan on ``logical``, or None and the compiler's error."""
    try:
        options = CompileOptions(batch=4, dtype="fp32")
        return compile_plan(load_model(ZOO / "fc-digits.yaml"), spec, options, logical), ""
    except ConfigError as error:
        return None, str(error)


@pytest.mark.slow
@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 2**16), rate=st.sampled_from([0.02, 0.1, 0.3]))
def test_random_maps_give_no_work_to_dead_or_cut_off_pes(seed, rate, tiny):
    """On random maps of dead PEs and wires, repaired by each strategy, every pass's PEs
    (as its pe_assignment lists them, which is where the engine's placement puts them)
    work and reach the rest; each line holds the depth it is given."""
    spec = tiny.replace({"logical_width_pes": 12, "logical_height_pes": 12,
                                   "spare_rows": 2})  # fmt: skip
    rng = np.random.default_rng(seed)
    shape = (spec.physical_height_pes, spec.physical_width_pes)
    dead_pe = rng.random(shape) < rate
    dead_link = mirror_links(rng.random((*shape, 4)) < rate / 4)
    defects = DefectMap(dead_pe, dead_link, "explicit", {}, seed, spec)
    for strategy in ("none", "row", "column_shift"):
        logical = repair(defects, strategy)
        working = WorkingGrid.from_logical(logical)
        assert not (working.hole < logical.hole).any()  # holes stay holes
        plan, error = compiled_or_error(spec, logical)
        if plan is None:  # too little left: the error says which layer and why
            assert re.search(r"layer '\w+' does not fit: .* of SRAM per PE", error), error
            continue
        for _, p in passes(plan):
            a = p.pe_assignment
            pes = assigned_pes(a, working.hole)
            assert not working.hole[pes[:, 0], pes[:, 1]].any()
            assert len(pes) == a.pes == a.depth * len(assignment_lines(a))


def _family(algo: str, owner) -> str:
    """The route family of a kernel's ``Wiring.connect`` (or ``chain``) owner."""
    if algo == "weight_stream":
        return "weights" if owner[0] == "weights" else "partial sums"
    if algo.startswith("cannon"):
        return "AB"[owner[1]]
    return owner[0][-1]  # "systolic A", ("summa A", i, flow)


@pytest.mark.parametrize("name", list(STRATEGIES))
def test_route_families_are_what_the_kernels_wire(name, monkeypatch, tiny):
    """Each family's colors and route count are those of the routes the kernel really asks
    the wiring for, grouped by the stream that owns them."""
    from wafersim.compiler.routes import route_families
    from wafersim.kernels.wiring import Wiring

    calls = set()  # a kernel may ask for the same route again: it is built once
    connect, chain, connect_lines = Wiring.connect, Wiring.chain, Wiring.connect_lines

    def record(self, color, src, dsts, owner):
        calls.add((color, src, tuple(dsts), owner))
        return connect(self, color, src, dsts, owner)

    def record_lines(self, group, streams):
        for line, owner in zip(group.lines.tolist(), group.owners, strict=True):
            for src, dst, color in np.asarray(streams).tolist():
                calls.add((color, line[src], (line[dst],), (owner, color, src, dst)))
        return connect_lines(self, group, streams)

    def record_chain(self, color, line, owner):
        calls.add((color, line[0], tuple(line[1:]), owner))
        return chain(self, color, line, owner)

    monkeypatch.setattr(Wiring, "connect", record)
    monkeypatch.setattr(Wiring, "chain", record_chain)
    monkeypatch.setattr(Wiring, "connect_lines", record_lines)
    strategy = STRATEGIES[name]
    for rows, cols in [(3, 3), (2, 2)] if strategy.square else [(3, 4), (4, 3), (1, 5)]:
        calls.clear()
        algorithm("gemm", strategy.algo).run(
            {"m": 9, "k": 12, "n": 11}, kernel_grid(rows, cols), tiny, "fp16", 0,
            **strategy.options,
        )  # fmt: skip
        placed = placement(strategy.algo, (rows, cols), GemmWork(9, 12, 11, 1),
                           options=strategy.options)  # fmt: skip
        wired: dict[str, list] = {}
        for color, _, dsts, owner in calls:
            wired.setdefault(_family(strategy.algo, owner), []).append((color, len(dsts)))
        families = {f["carries"]: f for f in route_families(placed)}
        assert set(families) == set(wired), (rows, cols)
        for family, routes in wired.items():
            assert families[family]["colors"] == sorted({c for c, _ in routes}), family
            if family != "partial sums":
                assert families[family]["routes"] == len(routes), (family, rows, cols)
            if family == "weights" or strategy.algo == "systolic":  # multicast along a line
                assert families[family]["hops_max"] == max(reach for _, reach in routes)


def test_plan_names_the_detour_colors(tiny):
    """Routes that meet a hole detour on the router's top colors, which kernels leave free."""
    spec = tiny.replace({"router.colors": 10})
    plan = compile_plan(load_model(ZOO / "fc-digits.yaml"), spec, CompileOptions(batch=8))
    assert plan.detour_colors == list(range(10 - DETOUR_COLORS, 10))
    assert all(max(p.routes[0]["colors"]) < 10 - DETOUR_COLORS
               for _, p in passes(plan) if isinstance(p, GemmPlacement))  # fmt: skip


@pytest.mark.parametrize("strategy", list(STRATEGIES))
@pytest.mark.parametrize("fraction", [0.0, 0.03, 0.1])
def test_placed_gemms_run_as_estimated(strategy, fraction, tiny):
    """A GEMM the compiler places on a 16 x 16 patch with dead PEs (holes and dead wires,
    no spares), run where its pe_assignment says, equals numpy, takes no dead PE and takes
    the compiler's cycles within 10 %."""
    spec = tiny.replace({"logical_width_pes": 16, "logical_height_pes": 16})
    defects = None
    if fraction:
        defects = repair(generate(spec, "poisson", 3, pe_defect_prob=fraction), "none")
    shape = {"m": 128, "k": 128, "n": 128}
    placed, working = place_single_gemm(shape, spec, "fp32", defects, [strategy])
    result = run_placed_gemm(placed, working, spec, "fp32", seed=1)
    assert result.max_abs_error < 1e-3
    pes = assigned_pes(placed.pe_assignment, working.hole)
    assert not working.hole[pes[:, 0], pes[:, 1]].any()
    assert abs(placed.kernel_cycles / result.cycles - 1) <= 0.10


def test_single_gemm_docstring_example_runs():
    """The example in compiler.single_gemm's docstring runs as written."""
    import doctest

    from wafersim.compiler import single_gemm

    assert doctest.testmod(single_gemm).failed == 0
