"""``wafersim kernel``: the documented JSON fields, defects, and one-line errors."""

from __future__ import annotations

import json

import pytest
from wafersim.kernels.grid import kernel_grid
from wafersim.kernels.registry import run_kernel
from wafersim.wafer.repair import REPAIR_STRATEGIES

from wafersim.cli import main

FIELDS = {
    "cycles", "seconds", "flops", "utilization", "analytic_cycles", "max_abs_error",
    "link_utilization_max", "colors_used", "sram_peak_bytes", "sim_wall_s",
}  # fmt: skip


def run_json(capsys, argv):
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize(
    "argv",
    [
        ["gemm", "--algo", "weight_stream", "--m", "16", "--k", "12", "--n", "20", "--grid", "3x4"],
        ["gemv", "--algo", "ktree", "--m", "24", "--n", "30", "--grid", "2x5", "--dtype", "fp16"],
        ["allreduce", "--algo", "chain", "--n", "16", "--grid", "3x3"],
    ],
)
def test_kernel_json_has_the_documented_fields(capsys, argv):
    """Every run reports the documented fields, with the result checked against numpy."""
    result = run_json(capsys, ["kernel", *argv])
    assert result.keys() >= FIELDS
    assert result["cycles"] > 0
    assert 0 < result["utilization"] <= 1
    assert result["max_abs_error"] < 0.05


def test_kernel_with_defects_is_deterministic(capsys):
    """A random defect patch is drawn from the seed: same seed, same holes and cycles."""
    argv = ["kernel", "gemv", "--algo", "chain", "--m", "32", "--n", "32", "--grid", "4x4",
            "--defect-density-per-cm2", "300", "--spare-rows", "2", "--seed", "1"]  # fmt: skip
    first, second = run_json(capsys, argv), run_json(capsys, argv)
    assert first["holes"] > 0
    assert (first["cycles"], first["holes"]) == (second["cycles"], second["holes"])
    assert first["max_abs_error"] < 1e-4


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["gemm", "--algo", "nope"], "algo='nope' is not one of the gemm algorithms"),
        (["gemm", "--algo", "summa", "--grid", "4by4"], "must look like WxH"),
        (["gemv", "--algo", "chain", "--m", "0"], "m=0 must be an integer >= 1"),
        (["gemv", "--algo", "chain", "--m", "400", "--n", "400", "--grid", "1x1"], "SRAM"),
        # sizes that cannot fit are refused before any input is drawn (drawing them would
        # ask numpy for tens or hundreds of GiB)
        (
            ["gemm", "--m", "100000", "--k", "100000", "--n", "100000", "--grid", "2x2"],
            "needs at least 20016000000 bytes of SRAM",
        ),
        (["gemv", "--m", "100000000", "--grid", "2x2"], "bytes of SRAM on its busiest PE"),
        (["allreduce", "--n", "10000000000", "--grid", "2x2"], "(pe.sram_bytes)"),
        (
            ["stencil", "--algo", "star25", "--n", "7000", "--grid", "9x9"],
            "n=7000: the z column must be in",
        ),
    ],
)
def test_kernel_bad_input_is_one_line(capsys, argv, message):
    """Bad input exits 2 with one line naming the field."""
    assert main(["kernel", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert err.count("\n") == 1


def test_the_readme_defect_example_runs_for_any_seed(capsys):
    """The README's GEMV on a patch with 100 defects/cm^2 runs whatever the map: columns
    short of working PEs are left out for spare ones, so no seed's map makes it fail."""
    for seed in (1, 3):
        argv = ["kernel", "gemv", "--algo", "ktree", "--m", "64", "--n", "64", "--grid",
                "16x16", "--defect-density-per-cm2", "100", "--spare-rows", "3",
                "--seed", str(seed)]  # fmt: skip
        result = run_json(capsys, argv)
        assert result["holes"] > 0
        assert result["max_abs_error"] < 1e-4


def test_kernel_takes_every_repair_strategy(capsys):
    """``--repair`` takes every strategy the other commands take: the patch is repaired
    first (no repair leaves its holes, column shifting uses the spare rows for them) and
    the kernel still equals numpy; without a defect map it is a one-line error."""
    argv = ["kernel", "gemv", "--algo", "chain", "--m", "32", "--n", "32", "--grid", "4x4",
            "--pe-defect-prob", "0.05", "--spare-rows", "2", "--seed", "3"]  # fmt: skip
    holes = {}
    for strategy in REPAIR_STRATEGIES:
        result = run_json(capsys, [*argv, "--repair", strategy])
        assert result["repair"] == strategy
        assert result["max_abs_error"] < 1e-4
        holes[strategy] = result["holes"]
    assert holes["none"] > 0
    assert holes["column_shift"] == 0
    assert main(["kernel", "gemv", "--grid", "4x4", "--repair", "row"]) == 2
    err = capsys.readouterr().err
    assert "--repair needs a defect map" in err
    assert err.count("\n") == 1


def test_pe_cycles_by_reason_is_the_summary_s_key(tiny):
    """``KernelResult.pe_cycles_by_reason`` is the summary's ``pe_cycles_by_reason``: the
    totals of the per-PE ``pe_cycle_reasons``."""
    result = run_kernel("gemv", "chain", {"m": 16, "n": 16}, kernel_grid(2, 2), tiny)
    assert result.pe_cycles_by_reason == result.summary()["pe_cycles_by_reason"]
    assert sum(result.pe_cycles_by_reason.values()) == int(result.pe_cycle_reasons.sum())
