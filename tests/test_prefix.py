"""The first cycles of a long run (kernels.prefix, ``wafersim kernel --stop-at``)."""

from __future__ import annotations

import json

import pytest
from wafersim.kernels.grid import kernel_grid
from wafersim.kernels.prefix import run_prefix
from wafersim.kernels.tiers import estimate

from wafersim.cli import main

SHAPE = {"m": 24, "k": 40, "n": 640}  # 40 chunks of 16 columns on 4 grid rows


def test_a_prefix_projects_the_whole_run_from_its_pace(wse2):
    grid = kernel_grid(4, 4)
    whole = estimate("gemm", "weight_stream", SHAPE, grid, wse2, "cycle", "fp16").cycles
    half = run_prefix("gemm", "weight_stream", SHAPE, grid, wse2, "fp16", 0, whole // 2)
    assert not half.finished
    assert half.cycles == whole // 2
    assert 0.4 < half.edge_share < 0.6  # the rows stream at one pace from the start
    assert 0.4 < half.ops_share < 0.6
    # the drain is not projected: the last reductions' adds, which no multiply slows
    assert abs(half.projected_cycles / whole - 1) < 0.06
    assert half.steady
    assert half.fast_cycles > 0
    assert half.summary()["fast_error"] == half.fast_cycles / half.projected_cycles - 1
    done = run_prefix("gemm", "weight_stream", SHAPE, grid, wse2, "fp16", 0, whole + 100)
    assert done.finished
    assert done.edge_share == 1.0
    assert done.projected_cycles == done.cycles == whole


@pytest.mark.slow
def test_a_prefix_is_measured_against_the_models_schedule_of_chunks(wse2):
    """The first 150 cycles of a 16 x 16 weight stream are not steady (the pace of their
    last quarter is not their second half's: the first chunk's fill); the analytic schedule
    says how much should be in by then, and at 8,000 cycles it is within 5 points of the
    engine's."""
    grid = kernel_grid(16, 16)
    shape = {"m": 32, "k": 64, "n": 2048}
    early = run_prefix("gemm", "weight_stream", shape, grid, wse2, "fp16", 0, 150)
    assert not early.finished
    assert not early.steady
    unsteady = estimate("gemm", "weight_stream", shape, grid, wse2, "cycle", "fp16", stop_at=150)
    assert unsteady.cycles is None  # no steady pace: no whole-run cycles claimed
    assert unsteady.prefix.projected_cycles == early.projected_cycles
    later = run_prefix("gemm", "weight_stream", shape, grid, wse2, "fp16", 0, 8000)
    assert abs(later.analytic_share - later.edge_share) < 0.05
    assert abs(later.fast_share - later.edge_share) < 0.06
    assert later.summary()["analytic_share_error"] == later.analytic_share / later.edge_share - 1


def test_kernel_stop_at_reports_the_prefix(capsys):
    argv = ["kernel", "gemm", "--m", "24", "--k", "40", "--n", "640", "--grid", "4x4"]
    assert main([*argv, "--stop-at", "3000", "--json"]) == 0
    prefix = json.loads(capsys.readouterr().out)["prefix"]
    assert prefix["cycles"] == 3000
    assert not prefix["finished"]
    assert {"edge_share", "pace", "steady", "projected_cycles", "fast_error"} <= prefix.keys()
    assert main([*argv, "--stop-at", "3000"]) == 0
    assert "stopped at cycle 3000: edge ports' wavelets sent" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--stop-at", "1"], "stop_at=1 must be an integer >= 2"),
        (["--stop-at", "50", "--tier", "fast"], "stop_at stops the cycle tier's engine run"),
        (["--stop-at", "50", "--timeline", "t.json"], "not with --stop-at"),
    ],
)
def test_kernel_stop_at_refuses_in_one_line(capsys, extra, message):
    assert main(["kernel", "gemm", *extra]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert len(err.strip().splitlines()) == 1
