"""``--engine cuda`` through every command that runs the cycle engine: kernel, traffic, run,
defects --study and sweep (and ``engine_used`` in the API).

Bit-identity of the CUDA engine is checked case by case in ``test_fabric_cuda.py``; here the
CLI runs it in Numba's CUDA simulator on tiny grids (traffic, kernel), and for the commands
whose runs are too long for the simulator (a training run, a study's saturation search) every
engine run is shown to reach the CUDA engine's entry point, which then runs the CPU kernels.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from wafersim.fabric import engine as fabric_engine

from wafersim.cli import main
from wafersim.sweeps.config import load_sweep
from wafersim.sweeps.results import read_table
from wafersim.sweeps.run import run_sweep

ROOT = Path(__file__).resolve().parents[1]
SIMULATED = os.environ | {"NUMBA_ENABLE_CUDASIM": "1"}
TRAFFIC = ["traffic", "--grid", "4x4", "--cycles", "60", "--rate", "0.2", "--preset", "tiny"]
# what differs between the engines
TIMES = ("sim_wall_s", "router_cycles_per_s", "compile_s", "engine")


def _cli_json(argv: list[str], env: dict) -> dict:
    command = [sys.executable, "-m", "wafersim.cli", *argv, "--json"]
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=True,
                          timeout=600)  # fmt: skip
    return json.loads(done.stdout)


@pytest.mark.slow
def test_traffic_on_the_cuda_engine_in_the_simulator_matches_the_cpu():
    """``traffic --engine cuda`` gives the CPU engine's summary, field for field."""
    pytest.importorskip("numba.cuda")
    cpu, cuda = (_cli_json([*TRAFFIC, "--engine", e], SIMULATED) for e in ("cpu", "cuda"))
    assert (cpu["engine"], cuda["engine"]) == ("cpu", "cuda")
    assert {k: v for k, v in cpu.items() if k not in TIMES} == {
        k: v for k, v in cuda.items() if k not in TIMES
    }


@pytest.mark.slow
def test_kernel_stop_at_on_the_cuda_engine_in_the_simulator_matches_the_cpu():
    """``kernel --stop-at`` (the first cycles of a long run, such as a whole-wafer layer)
    reads the same prefix from either engine: shares, pace, projection, the fast tier."""
    pytest.importorskip("numba.cuda")
    argv = ["kernel", "gemm", "--m", "8", "--k", "8", "--n", "96", "--grid", "2x2",
            "--preset", "tiny", "--stop-at", "150"]  # fmt: skip
    cpu, cuda = (_cli_json([*argv, "--engine", e], SIMULATED)["prefix"] for e in ("cpu", "cuda"))
    assert not cpu["finished"]
    walls = ("build_s", "sim_wall_s", "router_cycles_per_s")
    assert {k: v for k, v in cpu.items() if k not in walls} == {
        k: v for k, v in cuda.items() if k not in walls
    }


@pytest.fixture
def cuda_calls(monkeypatch) -> list[str]:
    """Every engine run of the test goes through ``fabric.cuda_engine.run_chunks``' place,
    recorded, then runs on the CPU kernels (the check for a GPU passes)."""
    from wafersim.fabric import cuda_engine

    calls: list[str] = []

    def on_cpu(*args, **kwargs):
        calls.append("cuda")
        return fabric_engine.run_chunks(*args[:7], keep=kwargs.get("keep"))

    monkeypatch.setattr(cuda_engine, "check_available", lambda: None)
    monkeypatch.setattr(cuda_engine, "run_chunks", on_cpu)
    return calls


def _run_cli(capsys, argv: list[str]) -> dict:
    assert main([*argv, "--json"]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def test_defects_study_runs_its_traffic_on_the_named_engine(capsys, cuda_calls):
    argv = ["defects", "--study", "--preset", "tiny", "--densities", "0", "--seeds", "1",
            "--window-pes", "4", "--repair", "none", "--engine", "cuda"]  # fmt: skip
    _run_cli(capsys, argv)
    assert cuda_calls


@pytest.mark.slow
def test_run_trains_on_the_named_engine(capsys, cuda_calls, tmp_path):
    config = {"model": str(ROOT / "examples" / "models" / "fc-digits.yaml"),
              "wafer": {"preset": "tiny"}, "data": {"name": "digits"}, "batch": 16,
              "steps": 2, "eval_every": 2}  # fmt: skip
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(config))
    result = _run_cli(capsys, ["run", str(path), "--out", str(tmp_path / "out"),
                               "--engine", "cuda"])  # fmt: skip
    assert result["engine"] == "cuda"
    assert len(cuda_calls) >= 3 * config["steps"]  # each layer's GEMMs, every step


def test_kernel_and_traffic_run_on_the_named_engine(capsys, cuda_calls):
    argv = ["kernel", "gemv", "--algo", "chain", "--m", "8", "--n", "8", "--grid", "2x2",
            "--preset", "tiny", "--engine", "cuda"]  # fmt: skip
    assert _run_cli(capsys, argv)["engine"] == "cuda"
    assert len(cuda_calls) == 1
    assert _run_cli(capsys, [*TRAFFIC, "--engine", "cuda"])["engine"] == "cuda"
    assert len(cuda_calls) == 2


@pytest.mark.slow
def test_sweep_points_run_on_the_engine_their_file_names(cuda_calls, tmp_path):
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        textwrap.dedent("""\
        job: traffic
        base: {preset: tiny, grid: 4x4, cycles: 60, engine: cuda}
        axes:
          rate: [0.1, 0.2]
        metrics: [accepted_rate]
        """)
    )
    summary = run_sweep(load_sweep(sweep), tmp_path / "r.h5", serial=True)
    assert (summary.ok, summary.failed) == (2, 0)
    assert len(cuda_calls) == 2
    assert all(json.loads(c)["engine"] == "cuda" for c in read_table(tmp_path / "r.h5")["config"])


def test_cuda_engine_without_a_gpu_is_one_line_before_any_work(capsys, tmp_path):
    """Where no GPU (nor the simulator) can run it, ``--engine cuda`` is one clear error."""
    from wafersim.fabric import cuda_engine

    try:
        cuda_engine.check_available()
    except Exception:  # noqa: BLE001 (this machine has no GPU: the case under test)
        pass
    else:
        pytest.skip("a GPU (or the simulator) is here")
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text("job: traffic\nbase: {preset: tiny, grid: 4x4, cycles: 60, engine: cuda}\n"
                     "axes:\n  rate: [0.1, 0.2]\nmetrics: [accepted_rate]\n")  # fmt: skip
    for argv in (
        [*TRAFFIC, "--engine", "cuda"],
        ["defects", "--study", "--engine", "cuda"],
        ["sweep", str(sweep), "--out", str(tmp_path / "r.h5"), "--serial"],
    ):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1
        assert "needs an NVIDIA GPU" in err
    assert not (tmp_path / "r.h5").exists()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["defects", "--preset", "tiny", "--pe-defect-prob", "0.1", "--engine", "cuda"],
         "--engine needs --study"),
        (["run", str(ROOT / "examples" / "gpt3_175b_layers.yaml"), "--engine", "cuda"],
         "tier analytic runs none"),
    ],
)  # fmt: skip
def test_engine_where_nothing_runs_on_it_is_refused(capsys, cuda_calls, argv, message):
    assert main(argv) == 2
    assert message in capsys.readouterr().err
    assert not cuda_calls


def test_engine_used_sets_the_engine_of_runs_that_name_none(cuda_calls, tiny):
    """The API: ``engine_used("cuda")`` around a kernel run (``wafersim.engine_used``)."""
    import numpy as np
    from wafersim.kernels.grid import kernel_grid
    from wafersim.kernels.tiers import estimate

    import wafersim

    with wafersim.engine_used("cuda"):
        result = wafersim.run_kernel("gemv", "chain", {"m": 8, "n": 8}, kernel_grid(2, 2),
                                     tiny, seed=0)  # fmt: skip
        estimate("gemv", "chain", {"m": 8, "n": 8}, kernel_grid(2, 2), tiny)
    assert cuda_calls == ["cuda", "cuda"]
    assert np.isfinite(result.max_abs_error)
