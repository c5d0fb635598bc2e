"""The command line: JSON output, one-line errors, non-zero exits."""

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from wafer.cli import main

README = Path(__file__).resolve().parents[1] / "README.md"


def readme_main_job() -> list[str]:
    """The arguments of the `wafersim ...` call in the README's first set-up command."""
    first = next(line for line in README.read_text().splitlines() if "wafersim " in line)
    return shlex.split(first.split("&& wafersim ", 1)[1])


def run(capsys, argv):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_presets_json_lists_every_preset(capsys):
    """`presets --json` lists the four presets with their grids."""
    code, out, _ = run(capsys, ["presets", "--json"])
    data = json.loads(out)
    assert code == 0
    assert set(data) == {"tiny", "small", "wse2", "wse3"}
    assert data["wse2"]["logical_grid"] == [750, 994]


def test_defects_json_has_the_documented_fields(capsys):
    """`defects --json` holds every field the issue names, consistent with each other."""
    code, out, _ = run(
        capsys,
        ["defects", "--preset", "small", "--pe-defect-prob", "0.01", "--seed", "3", "--json"],
    )
    r = json.loads(out)
    assert code == 0
    for key in (
        "physical_grid",
        "logical_grid",
        "dead_pes",
        "dead_links",
        "spare_rows_used",
        "unrepaired_pes",
        "working_pes",
        "max_neighbour_hops",
        "seed",
        "spec",
    ):
        assert key in r
    assert r["physical_grid"] == [64, 65]
    assert r["logical_grid"] == [64, 64]
    assert r["working_pes"] + r["unrepaired_pes"] == 64 * 64
    assert r["seed"] == 3
    assert r["spec"]["name"] == "small"


def test_defects_is_deterministic_for_a_seed(capsys):
    """The same seed gives the same map and repair; another seed a different map."""
    argv = ["defects", "--preset", "small", "--pe-defect-prob", "0.02", "--json"]
    first = json.loads(run(capsys, [*argv, "--seed", "5"])[1])
    again = json.loads(run(capsys, [*argv, "--seed", "5"])[1])
    other = json.loads(run(capsys, [*argv, "--seed", "6"])[1])
    first.pop("wall_s"), again.pop("wall_s"), other.pop("wall_s")
    assert first == again
    assert first != other


def test_defects_saves_and_reloads_a_map(capsys, tmp_path):
    """A map saved with --out loads back with --defects and repairs the same way."""
    path = tmp_path / "map.h5"
    argv = ["defects", "--preset", "tiny", "--pe-defect-prob", "0.05", "--seed", "2", "--json"]
    saved = json.loads(run(capsys, [*argv, "--out", str(path)])[1])
    loaded = json.loads(run(capsys, ["defects", "--defects", str(path), "--json"])[1])
    for key in ("dead_pes", "dead_links", "working_pes", "unrepaired_pes", "spare_rows_used"):
        assert saved[key] == loaded[key]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["defects", "--preset", "nope"], "unknown preset 'nope'"),
        (["defects", "--preset", "tiny", "--pe-defect-prob", "-0.1"], "pe_defect_prob"),
        (["defects", "--preset", "tiny", "--defect-density-per-cm2", "-1"], "defect_density"),
        (
            ["defects", "--preset", "tiny", "--pe-defect-prob", "0.1", "pe.sram_bytes=0"],
            "sram_bytes",
        ),
        (["defects", "--preset", "tiny", "--pe-defect-prob", "0.1", "bogus=1"], "bogus"),
        (["defects", "--preset", "tiny", "--repair", "magic"], "invalid choice"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(capsys, argv, message):
    """Bad input prints one line naming the problem and exits with status 2."""
    with pytest.raises(SystemExit) as exit_info:
        sys.exit(main(argv))
    _, err = capsys.readouterr()
    assert exit_info.value.code == 2
    assert message in err
    assert len(err.strip().splitlines()) == 1
    assert "Traceback" not in err


def test_a_file_that_is_not_a_defect_map_is_an_error(capsys, tmp_path):
    """--defects on a text file or a foreign HDF5 file is a one-line error."""
    text = tmp_path / "x.h5"
    text.write_text("hello")
    code, _, err = run(capsys, ["defects", "--defects", str(text)])
    assert code == 2
    assert "not" in err
    assert len(err.strip().splitlines()) == 1


def test_readme_main_job_runs():
    """The README's first command (the main job) runs and reports the wse2 grid."""
    done = subprocess.run(
        [sys.executable, "-m", "wafer.cli", *readme_main_job(), "--json"],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["logical_grid"] == [750, 994]
    assert result["working_pes"] > 0.99 * 750 * 994


def test_traffic_json_has_the_documented_fields(capsys):
    """`traffic --json` reports the issue's fields for the run it made."""
    argv = [
        "traffic",
        "--grid",
        "6x4",
        "--rate",
        "0.05",
        "--cycles",
        "800",
        "--warmup",
        "200",
        "--seed",
        "4",
        "--json",
    ]
    code, out, _ = run(capsys, argv)
    r = json.loads(out)
    assert code == 0
    for key in (
        "offered_rate",
        "accepted_rate",
        "avg_packet_latency_cycles",
        "avg_network_latency_cycles",
        "p99_packet_latency_cycles",
        "avg_hops",
        "saturated",
        "router_cycles_per_s",
        "sim_wall_s",
        "seed",
    ):
        assert key in r
    assert r["grid"] == [6, 4]
    assert r["seed"] == 4
    assert r["offered_rate"] == 0.05
    assert 0 < r["accepted_rate"] < 0.1


def test_traffic_bad_grid_is_one_line(capsys):
    """A malformed --grid is a one-line error naming the field."""
    code, _, err = run(capsys, ["traffic", "--grid", "16"])
    assert code == 2
    assert "grid='16'" in err
