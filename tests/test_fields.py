"""Every figure the commands report has a documented meaning, unit and range, and real runs
keep it there: kernels of every family on a clean and a holed patch, traffic patterns, a
defect map, a compile and runs on both tiers."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from wafersim.fabric.mesh import Mesh
from wafersim.fabric.traffic import TrafficConfig, run_traffic

from wafersim.cli import main
from wafersim.fields import out_of_range, page, undocumented

ROOT = Path(__file__).resolve().parent.parent
HOLED = ["--defect-density-per-cm2", "100", "--seed", "3", "--spare-rows", "3"]
KERNELS = [
    ["gemm", "--algo", "weight_stream", "--m", "32", "--k", "32", "--n", "32"],
    ["gemm", "--algo", "summa", "--m", "32", "--k", "32", "--n", "32"],
    ["gemm", "--algo", "cannon_interleaved", "--m", "32", "--k", "32", "--n", "32"],
    ["gemm", "--algo", "systolic", "--m", "32", "--k", "32", "--n", "32"],
    ["gemv", "--algo", "tree", "--m", "64", "--n", "64"],
    ["allreduce", "--algo", "ktree", "--n", "64"],
    ["stencil", "--algo", "star7", "--n", "16"],
]
TRAFFIC = [
    ["--pattern", p, "--rate", r]
    for p, r in (("uniform", "0.3"), ("transpose", "0.1"), ("hotspot", "0.05"), ("neighbor", "0.6"))
]


def reported(capsys, argv: list[str]) -> dict:
    assert main([*argv, "--json"]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def assert_in_range(kind: str, document: dict) -> None:
    assert out_of_range(kind, document) == []
    assert undocumented(kind, document) == []


def test_the_fields_page_is_the_tables():
    """docs/fields.md is what wafersim/fields.py writes (never edited by hand)."""
    assert (ROOT / "docs" / "fields.md").read_text() == page()


@pytest.mark.parametrize("argv", KERNELS, ids=lambda a: f"{a[0]}-{a[2]}")
@pytest.mark.parametrize("patch", [[], HOLED], ids=["clean", "holed"])
def test_kernel_figures_stay_in_range(capsys, argv, patch):
    """A kernel's figures, on a clean patch and on one with holes, lie in their ranges."""
    grid = ["--grid", "8x8", "--preset", "wse2", *patch]
    document = reported(capsys, ["kernel", *argv, *grid])
    if patch:
        assert document["holes"] > 0
    assert_in_range("kernel", document)


@pytest.mark.parametrize("argv", TRAFFIC, ids=lambda a: a[1])
def test_traffic_figures_stay_in_range(capsys, argv):
    """Traffic's figures, every pattern, lie in their ranges."""
    base = ["traffic", "--grid", "8x8", "--preset", "tiny", "--cycles", "400"]
    assert_in_range("traffic", reported(capsys, [*base, *argv]))


@pytest.mark.parametrize("rate", [0.05, 0.6])
def test_traffic_figures_on_a_mesh_with_holes_stay_in_range(rate, tiny):
    """Uniform traffic round dead PEs (up*/down*), light and saturated, keeps its figures in
    range, reasons summing to the working PEs times the cycles."""
    alive = np.ones((8, 8), bool)
    alive[2, 5] = alive[6, 1] = False
    mesh = Mesh(8, 8, alive, np.zeros((8, 8, 4), bool))
    config = TrafficConfig(8, 8, rate=rate, cycles=400, warmup=100,
                           routing="updown")  # fmt: skip
    document = run_traffic(config, tiny, mesh=mesh)
    del document["grid"]  # as the command reports it: by name
    document.update(width_pes=8, height_pes=8)
    assert document["working_pes"] == 62
    assert_in_range("traffic", document)


def test_defect_map_and_compile_figures_stay_in_range(capsys):
    """A repaired map's and a compiled plan's figures lie in their ranges."""
    defects = ["defects", "--preset", "small", "--pe-defect-prob", "0.02", "--repair", "row"]
    assert_in_range("defects", reported(capsys, defects))
    plan = ["compile", "fc-digits", "--preset", "small", "--pe-defect-prob", "0.02"]
    assert_in_range("compile", reported(capsys, plan))


@pytest.mark.parametrize("argv", [["fc_digits", "steps=2"],
                                  ["gpt3_175b_layers", "steps=2", "swarmx.wafers=2"]],
                         ids=["cycle", "analytic"])  # fmt: skip
@pytest.mark.slow
def test_run_figures_stay_in_range(capsys, tmp_path, argv):
    """performance.json of a run on each tier lies in its ranges."""
    reported(capsys, ["run", *argv, "--out", str(tmp_path / "r")])
    performance = json.loads((tmp_path / "r" / "performance" / "performance.json").read_text())
    assert_in_range("run", performance)


def test_an_out_of_range_figure_is_named():
    """A share above 1, a count below 0 and reasons that do not add up are each named."""
    document = {"cycles": 10, "width_pes": 1, "height_pes": 1, "patch_working_pes": 1,
                "utilization": 1.5,
                "flops": -1, "pe_cycles_by_reason": {"computing": 4, "idle": 5}}  # fmt: skip
    found = out_of_range("kernel", document)
    assert any(f.startswith("utilization=1.5") for f in found)
    assert any(f.startswith("flops=-1") for f in found)
    assert any("sums to 9, not" in f for f in found)


def test_the_cli_refuses_a_figure_out_of_range(capsys, monkeypatch):
    """A result with a figure outside its range is one line and exit 70, not printed."""
    from wafersim.commands import presets  # noqa: F401 (the command the table maps)
    from wafersim.commands.jobs import Command

    bad = {"cycles": 5, "width_pes": 2, "height_pes": 2, "flits_injected": 3,
           "flits_ejected": 4, "working_pes": 4}  # fmt: skip
    fake = Command(lambda parser: None, lambda args: bad, str, seed=False)
    monkeypatch.setattr("wafersim.cli.command", lambda name: fake)
    assert main(["traffic", "--json"]) == 70
    out, err = capsys.readouterr()
    assert out == ""
    assert "flits_ejected=4 (allowed [0, 3])" in err
    assert len(err.strip().splitlines()) == 1
