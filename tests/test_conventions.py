"""One grid convention: what users type and read is width x height; the API's rows and
columns say so by name."""

from __future__ import annotations

import json

import pytest

from wafersim.cli import main


def reported(capsys, argv: list[str]) -> dict:
    assert main([*argv, "--json"]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def test_a_kernels_grid_is_width_by_height(capsys):
    """``kernel --grid 8x4`` is 8 PEs wide and 4 high, in the JSON and in the per-PE arrays."""
    argv = ["kernel", "gemm", "--algo", "summa", "--m", "32", "--k", "32", "--n", "32",
            "--grid", "8x4", "--preset", "wse2"]  # fmt: skip
    r = reported(capsys, argv)
    assert (r["width_pes"], r["height_pes"]) == (8, 4)


def test_traffic_grid_is_width_by_height(capsys):
    """``traffic --grid 8x4`` is 8 PEs wide and 4 high."""
    r = reported(capsys, ["traffic", "--grid", "8x4", "--preset", "tiny", "--cycles", "100"])
    assert (r["width_pes"], r["height_pes"]) == (8, 4)


@pytest.mark.parametrize("command", [["presets"], ["defects", "--pe-defect-prob", "0.001"]])
def test_every_logical_grid_is_width_then_height(capsys, command):
    """presets, defects and compile give wse2's logical grid as [750, 994]: width first."""
    r = reported(capsys, command if command == ["presets"] else [*command, "--preset", "wse2"])
    grid = r["wse2"]["logical_grid"] if command == ["presets"] else r["logical_grid"]
    assert grid == [750, 994]
    plan = reported(capsys, ["compile", "fc-digits", "--preset", "wse2"])
    assert plan["working"]["logical_grid"] == [750, 994]


@pytest.mark.slow
def test_every_pass_states_its_footprint_width_first(capsys):
    """A plan's passes say their footprint on the wafer as width_pes x height_pes, within the
    logical grid, and their kernel's rows and columns as rows_cols."""
    plan = reported(capsys, ["compile", "gpt3-125m", "--preset", "wse2"])
    width, height = plan["working"]["logical_grid"]
    for layer in plan["layers"]:
        for p in layer["passes"].values():
            assert p["width_pes"] <= width
            assert p["height_pes"] <= height
            assert sorted(p["rows_cols"]) == sorted([p["width_pes"], p["height_pes"]])
