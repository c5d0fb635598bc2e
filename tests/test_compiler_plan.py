"""Plans: SRAM budgets, holes, the cache, the ``compile`` CLI, and a plan run on the engine."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from compiler.model_file import load_model
from compiler.plan import CompileOptions, compile_cached, compile_plan
from compiler.strategies import STRATEGIES
from kernels.gemm_weight_stream import weight_stream
from kernels.grid import kernel_grid
from kernels.registry import algorithm
from wafer import commands
from wafer.cli import main
from wafer.compile_command import add_compile_arguments, compile_text, run_compile_command
from wafer.errors import ConfigError
from wafer.presets import preset

ZOO = Path(__file__).resolve().parents[1] / "examples" / "models"
BOTTLENECKS = {"compute", "SRAM", "fabric", "edge bandwidth"}


def passes(plan):
    return [(layer["name"], p) for layer in plan["layers"] for p in layer["passes"].values()]


@pytest.mark.parametrize(("model", "batch"), [("fc-digits", 64), ("gpt2-small", 2)])
def test_every_pass_fits_sram_and_the_working_grid(model, batch):
    """Each placement fits a PE's SRAM, stays on the working grid and names a bottleneck."""
    spec = preset("wse2")
    plan = compile_plan(load_model(ZOO / f"{model}.yaml"), spec, CompileOptions(batch=batch))
    rows, cols = plan["working_grid"]
    for _, p in passes(plan):
        assert 0 < p["sram_bytes_per_pe"] <= spec.pe.sram_bytes
        assert p["pes"] <= rows * cols
        assert max(p["grid"]) <= max(rows, cols)
        assert min(p["grid"]) <= min(rows, cols)
        assert p["bottleneck"] in BOTTLENECKS
        assert p["cycles"] >= p["bound_cycles"]["edge_bandwidth"]


def test_linear_layers_get_all_three_passes():
    """A matmul has forward, backward-data and backward-weight, except dX of the first."""
    plan = compile_plan(load_model(ZOO / "fc-digits.yaml"), preset("small"), CompileOptions(8))
    by_name = {layer["name"]: layer["passes"] for layer in plan["layers"]}
    assert set(by_name["fc2"]) == {"forward", "backward_data", "backward_weight"}
    assert set(by_name["fc1"]) == {"forward", "backward_weight"}
    assert by_name["fc2"]["forward"]["gemm"] == {"m": 8, "k": 256, "n": 128, "count": 1}
    assert by_name["fc2"]["backward_data"]["gemm"] == {"m": 8, "k": 128, "n": 256, "count": 1}
    assert by_name["fc2"]["backward_weight"]["gemm"] == {"m": 256, "k": 8, "n": 128, "count": 1}


def test_batch_one_gpt3_is_edge_bound():
    """At batch 1 streaming GPT-3 175B's weights through MemoryX bounds every matmul."""
    plan = compile_plan(load_model(ZOO / "gpt3-175b.yaml"), preset("wse2"), CompileOptions())
    linear = [p for name, p in passes(plan) if name.endswith(".fc")]
    assert linear
    assert all(p["bottleneck"] == "edge bandwidth" for p in linear)


def test_holes_take_their_rows_out_of_the_working_grid():
    """With holes, no placement uses more rows than the hole-free ones."""
    spec = preset("small")
    holes = np.zeros((64, 64), bool)
    holes[[3, 3, 40], [5, 6, 7]] = True
    model = load_model(ZOO / "fc-digits.yaml")
    plan = compile_plan(model, spec, CompileOptions(batch=64), holes)
    assert plan["working_grid"] == [62, 64]
    assert plan["defects"]["holes"] == 3
    assert plan["defects"]["rows_left_out"] == [3, 40]
    assert all(p["pes"] <= 62 * 64 for _, p in passes(plan))


def test_a_layer_too_big_names_it_and_suggests_micro_batches():
    """A layer no candidate fits is a ConfigError with the layer, the bytes and a remedy."""
    model = load_model(ZOO / "gpt2-small.yaml")
    message = r"layer 'wte' does not fit: needs \d+ bytes.*available 49152.*micro-batches"
    with pytest.raises(ConfigError, match=message):
        compile_plan(model, preset("tiny"), CompileOptions(batch=8))


def test_bad_options_are_clear_errors():
    """Batch, seq, dtype and strategy names are checked at the door."""
    model = load_model(ZOO / "gpt2-small.yaml")
    for options, message in [
        (CompileOptions(batch=0), r"batch=0 must be an integer in \[1,"),
        (CompileOptions(seq=4096), r"seq=4096 must be an integer in \[1, 1024\]"),
        (CompileOptions(dtype="int8"), "dtype='int8' is not one of"),
        (CompileOptions(strategies=("magic",)), "each must be one of: weight_stream_chain"),
    ]:
        with pytest.raises(ConfigError, match=message):
            compile_plan(model, preset("wse2"), options)


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


@pytest.fixture
def compile_cli(monkeypatch):
    """``wafersim compile`` registered as wafer/commands.py will register it."""
    monkeypatch.setitem(
        commands.COMMANDS, "compile", (add_compile_arguments, run_compile_command, "compile")
    )
    monkeypatch.setitem(commands.TEXT_FORMATTERS, "compile", compile_text)


def run_json(capsys, argv):
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_compile_cli_json_has_layers_totals_and_time(compile_cli, capsys, tmp_path):
    """JSON per layer and pass, totals, compile_time_s; a second run is a cache hit."""
    argv = ["compile", str(ZOO / "fc-digits.yaml"), "--preset", "small", "--batch", "32",
            "--dtype", "fp32", "--out", str(tmp_path)]  # fmt: skip
    first = run_json(capsys, argv)
    assert first.keys() >= {"layers", "totals", "compile_time_s", "cache", "spec", "plan_path"}
    assert first["cache"] == "miss"
    assert first["totals"]["cycles"] > 0
    fc1 = first["layers"][0]["passes"]["forward"]
    assert fc1.keys() >= {"algorithm", "grid", "sram_bytes_per_pe", "cycles", "bottleneck"}
    assert run_json(capsys, argv)["cache"] == "hit"
    assert main(argv) == 0
    assert "cache hit" in capsys.readouterr().out


def test_compile_cli_validate_only_and_errors(compile_cli, capsys):
    """--validate-only reports the graph; a bad option is one line and exit 2."""
    result = run_json(capsys, ["compile", str(ZOO / "llama-7b.yaml"), "--validate-only"])
    assert result["params"] == 6_738_415_616
    assert result["options"]["seq"] == 2048
    assert main(["compile", str(ZOO / "gpt2-small.yaml"), "--batch", "0"]) == 2
    err = capsys.readouterr().err
    assert "batch=0" in err
    assert err.count("\n") == 1


def test_sram_estimates_bound_what_the_kernels_allocate():
    """Each strategy's SRAM estimate is at least the engine's peak for the same tiling."""
    spec = preset("tiny")
    for name, strategy in STRATEGIES.items():
        rows, cols = (3, 3) if strategy.square else (3, 4)
        shape = {"m": 13, "k": 10, "n": 11}
        result = algorithm("gemm", strategy.algo).run(
            shape, kernel_grid(rows, cols), spec, "fp16", 0, **strategy.options
        )
        estimate = strategy.sram_bytes(13, 10, 11, rows, cols, spec, "fp16")
        assert result.sram_peak_bytes <= estimate, name
        assert estimate <= 2 * result.sram_peak_bytes + 64, name


def test_first_layer_plan_runs_on_the_cycle_engine():
    """The plan for the FC digits net's first layer runs on the engine and matches numpy."""
    spec = preset("tiny")
    plan = compile_plan(load_model(ZOO / "fc-digits.yaml"), spec, CompileOptions(batch=16))
    placed = plan["layers"][0]["passes"]["forward"]
    gemm = placed["gemm"]
    rows, cols = placed["grid"]
    rng = np.random.default_rng(1)
    x = rng.standard_normal((gemm["m"], gemm["k"])).astype(np.float32)
    w = rng.standard_normal((gemm["k"], gemm["n"])).astype(np.float32)
    result = algorithm("gemm", placed["algorithm"]).run(
        gemm, kernel_grid(rows, cols), spec, "fp16", 1, **placed["options"]
    )
    assert result.max_abs_error < 0.05
    assert result.analytic_cycles == placed["kernel_cycles"]
    assert result.sram_peak_bytes <= placed["sram_bytes_per_pe"]
    direct = weight_stream(x, w, kernel_grid(rows, cols), spec, "fp32")
    np.testing.assert_allclose(direct.output, x.astype(np.float64) @ w, rtol=1e-4, atol=1e-4)
