"""The options every ``wafersim`` subcommand shares: one meaning of --grid, one default preset
and repair, the same defect flags, key=value anywhere, defaults that work alone, the kernel's
tiers, and a --help that imports only what it shows."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from wafersim.kernels.grid import kernel_grid
from wafersim.kernels.registry import KERNELS, analytic_cycles, run_kernel
from wafersim.wafer.presets import DEFAULT_PRESET, preset
from wafersim.wafer.repair import DEFAULT_REPAIR

from wafersim.cli import main
from wafersim.commands.jobs import JOBS
from wafersim.commands.parser import build_parser

DEFECT_FLAGS = {
    "--defects",
    "--defect-model",
    "--defect-density-per-cm2",
    "--pe-defect-prob",
    "--alpha",
    "--cluster-size-pes",
    "--link-defect-fraction",
    "--defect-list",
}


def run_json(capsys, argv: list[str]) -> dict:
    assert main([*argv, "--json"]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def flags(job: str) -> set[str]:
    sub = build_parser(only=job)._subparsers._group_actions[0].choices[job]
    return {flag for action in sub._actions for flag in action.option_strings}


def help_text(job: str, capsys) -> str:
    with pytest.raises(SystemExit):
        main([job, "--help"])
    return " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize("job", ["defects", "traffic", "kernel", "compile"])
def test_every_command_on_a_wafer_says_the_one_default_preset(job, capsys):
    assert f"default {DEFAULT_PRESET}" in help_text(job, capsys)


@pytest.mark.parametrize("job", ["defects", "compile"])
def test_every_command_that_repairs_says_the_one_default_repair(job, capsys):
    assert f"default {DEFAULT_REPAIR}" in help_text(job, capsys)


def test_defect_options_have_one_name_everywhere():
    """defects, compile and kernel take the same defect flags; the old names are gone."""
    for job in ("defects", "compile", "kernel"):
        assert flags(job) >= DEFECT_FLAGS, job
        assert not {"--model", "--path"} & flags(job), job


def test_grid_is_width_by_height_in_traffic_and_kernel(capsys):
    """--grid 8x4 is 8 PEs wide and 4 high in both, said so in their JSON; the kernel's
    cycles are those of a 4-row, 8-column kernel grid."""
    traffic = run_json(capsys, ["traffic", "--grid", "8x4", "--cycles", "200"])
    kernel_argv = ["kernel", "gemm", "--algo", "summa", "--m", "32", "--k", "16", "--n", "64"]
    kernel = run_json(capsys, [*kernel_argv, "--grid", "8x4"])
    for result in (traffic, kernel):
        assert (result["width_pes"], result["height_pes"]) == (8, 4)
        assert "grid" not in result
    shape = {"m": 32, "k": 16, "n": 64}
    direct = run_kernel("gemm", "summa", shape, kernel_grid(4, 8), preset(DEFAULT_PRESET))
    assert kernel["cycles"] == direct.cycles


def test_key_value_overrides_stand_anywhere_on_the_line(capsys):
    """After the positional, between options or at the end: the spec is overridden."""
    base = ["--algo", "ktree", "--m", "64", "--n", "64", "--grid", "8x4"]
    end = run_json(capsys, ["kernel", "gemv", *base, "clock_hz=1.1e9"])
    middle = run_json(capsys, ["kernel", "gemv", "clock_hz=1.1e9", *base])
    assert end["seconds"] == middle["seconds"] == pytest.approx(end["cycles"] / 1.1e9)
    compiled = run_json(capsys, ["compile", "examples/models/fc-digits.yaml", "pe.sram_bytes=40000",
                                 "--preset", "tiny"])  # fmt: skip
    assert compiled["spec"]["pe"]["sram_bytes"] == 40000


def test_an_option_value_that_looks_like_an_override_stays_the_option_value(capsys):
    """``--defect-list a=b.toml`` is the option's value, not a spec override."""
    code = main(["defects", "--preset", "tiny", "--defect-model", "explicit",
                 "--defect-list", "a=b.toml"])  # fmt: skip
    assert code == 2
    assert "a=b.toml" in capsys.readouterr().err


def test_traffic_cycles_alone_works_with_a_quarter_warmup(capsys):
    result = run_json(capsys, ["traffic", "--preset", "tiny", "--cycles", "300"])
    assert result["warmup"] == 75


def test_defects_defaults_to_the_default_preset_and_repair(capsys):
    result = run_json(capsys, ["defects", "--defect-density-per-cm2", "0.5"])
    assert result["spec"]["name"] == DEFAULT_PRESET
    assert result["repair"] == DEFAULT_REPAIR


@pytest.mark.slow
def test_kernel_tiers_are_one_command(capsys):
    """--tier analytic is the closed form the compiler uses; --tier fast fits engine runs;
    the default is the cycle engine."""
    argv = ["kernel", "gemm", "--algo", "summa", "--m", "256", "--k", "256", "--n", "256",
            "--grid", "32x16"]  # fmt: skip
    analytic = run_json(capsys, [*argv, "--tier", "analytic"])
    shape = {"m": 256, "k": 256, "n": 256}
    expected = analytic_cycles("gemm", "summa", shape, 16, 32, preset(DEFAULT_PRESET))
    assert analytic["cycles"] == analytic["analytic_cycles"] == expected
    fast = run_json(capsys, [*argv, "--tier", "fast"])
    assert fast["tier"] == "fast"
    assert len(fast["fit"]["reduced_runs"]) == 2
    cycle = run_json(capsys, argv)
    assert cycle["tier"] == "cycle"
    assert cycle["max_abs_error"] < 1e-3
    assert abs(fast["cycles"] - cycle["cycles"]) < 0.05 * cycle["cycles"]


def test_whole_wafer_estimate_is_one_command(capsys):
    argv = ["kernel", "gemm", "--algo", "weight_stream", "--m", "4096", "--k", "4096",
            "--n", "4096", "--grid", "wafer", "--tier", "analytic"]  # fmt: skip
    result = run_json(capsys, argv)
    spec = preset(DEFAULT_PRESET)
    assert (result["width_pes"], result["height_pes"]) == (
        spec.logical_width_pes,
        spec.logical_height_pes,
    )
    assert result["cycles"] > 0


@pytest.mark.slow
def test_kernel_runs_on_the_cuda_engine_in_the_simulator():
    """--engine cuda runs the kernel on the CUDA engine (here Numba's simulator): the same
    cycles and output as the CPU engine."""
    pytest.importorskip("numba.cuda")
    argv = ["kernel", "gemv", "--algo", "chain", "--m", "8", "--n", "8", "--grid", "2x2",
            "--preset", "tiny", "--json"]  # fmt: skip
    env = os.environ | {"NUMBA_ENABLE_CUDASIM": "1"}
    results = [
        subprocess.run([sys.executable, "-m", "wafersim.cli", *argv, "--engine", engine],
                       capture_output=True, text=True, env=env, check=True, timeout=600)
        for engine in ("cpu", "cuda")
    ]  # fmt: skip
    cpu, cuda = (json.loads(r.stdout) for r in results)
    assert cpu["cycles"] == cuda["cycles"]
    assert cpu["max_abs_error"] == cuda["max_abs_error"]


@pytest.mark.slow
def test_help_imports_no_engine_and_each_command_only_its_own():
    """``wafersim --help`` loads none of the simulator's packages (nor numba); ``presets``
    loads no engine, compiler or run."""
    probe = (
        "import sys\nfrom wafersim.cli import main\n"
        "try:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
        "heavy = {'numba', 'fabric', 'kernels', 'compiler', 'memoryx', 'h5py'}\n"
        "loaded = {m.removeprefix('wafersim.').split('.')[0] for m in sys.modules}\n"
        "print(sorted(heavy & loaded), file=sys.stderr)"
    )
    for argv, allowed in ((["--help"], []), (["presets"], [])):
        done = subprocess.run([sys.executable, "-c", probe, *argv], capture_output=True,
                              text=True, check=True, timeout=120)  # fmt: skip
        assert done.stderr.strip().splitlines()[-1] == str(allowed)
    assert set(JOBS) == {"presets", "defects", "traffic", "kernel", "compile", "run", "plot",
                         "sweep", "examples"}  # fmt: skip


@pytest.mark.parametrize(
    "argv",
    [["presets"], ["traffic"], ["kernel", "gemm"], ["kernel", "gemv"], ["kernel", "allreduce"],
     ["compile", "examples/models/fc-digits.yaml"]],
)  # fmt: skip
def test_every_command_runs_on_its_defaults_alone(argv, capsys):
    """Nothing but what the command needs to name (a kernel, a model file): the defaults
    make a run (the kernel's first algorithm, 64 x 64 x 64 on 8 x 8 PEs of wse2)."""
    result = run_json(capsys, argv)
    if argv[0] == "kernel":
        assert result["algo"] == next(iter(KERNELS[argv[1]]))
        assert result["max_abs_error"] < 1e-3


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["plot", "x.h5", "--x", "a", "--y", "b", "pe.sram_bytes=1"], "plot takes no key=value"),
        (["sweep", "s.yaml", "seed=1"], "sweep takes no key=value"),
        (["plot", "x.h5", "--x", "a", "--y", "b", "--seed", "3"], "unrecognized arguments"),
        (["presets", "--seed", "3"], "unrecognized arguments"),
        (["kernel", "gemm", "--algo", "summa", "--reduce", "tree"], "does not apply"),
        (["kernel", "gemm", "--scope", "row"], "does not apply to gemm weight_stream"),
    ],
)
def test_an_option_a_command_would_ignore_is_a_one_line_error(argv, message, capsys):
    """Overrides or --seed where a command has no use for them, and kernel options of
    another algorithm, are refused, not ignored."""
    try:
        code = main(argv)
    except SystemExit as usage:  # argparse's own checks
        code = usage.code
    err = capsys.readouterr().err
    assert code == 2
    assert message in err
    assert err.count("\n") == 1
