"""The command line: JSON output, one-line errors, non-zero exits."""

import io
import json
import os
import shlex
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from wafersim.cli import main
from wafersim.commands.progress import ProgressBar, ProgressLine, progress_for, study_line
from wafersim.studies.result import StudyResult
from wafersim.studies.run import StudyProgress

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


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
    """`defects --json` holds every documented field, consistent with each other."""
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
        (["defects", "--study", "--preset", "tiny", "--densities", "1", "-1"], "-1.0"),
        (["defects", "--study", "--preset", "tiny", "--densities", "1", "--seeds", "0"], "seeds=0"),
        (["defects", "--study", "--preset", "tiny"], "--study needs --densities"),
        (["defects", "--preset", "tiny", "--densities", "1"], "--densities needs --study"),
        (["defects", "--preset", "tiny", "--repair", "row", "none"], "one strategy"),
        (
            [
                "defects",
                "--study",
                "--preset",
                "tiny",
                "--densities",
                "1",
                "--pe-defect-prob",
                "0.1",
            ],
            "--pe-defect-prob cannot be used with --study",
        ),
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


@pytest.mark.slow
def test_readme_main_job_runs(tmp_path):
    """The README's first command (the main job) runs as written (text out), shortened to
    two steps; performance.json holds the result."""
    done = subprocess.run(
        [sys.executable, "-m", "wafersim.cli", *readme_main_job(), "steps=2",
         "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "samples/s" in done.stdout
    assert "activations kept for backward: keep" in done.stdout
    result = json.loads((tmp_path / "performance" / "performance.json").read_text())
    assert result["total_samples"] == 2 * result["config"]["batch"]
    assert len(result["losses"]) == 2


def test_traffic_json_has_the_documented_fields(capsys):
    """`traffic --json` reports the documented fields for the run it made."""
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
    assert (r["width_pes"], r["height_pes"]) == (6, 4)
    assert "grid" not in r
    assert r["seed"] == 4
    assert r["offered_rate"] == 0.05
    assert 0 < r["accepted_rate"] < 0.1


def test_traffic_bad_grid_is_one_line(capsys):
    """A malformed --grid is a one-line error naming the field."""
    code, _, err = run(capsys, ["traffic", "--grid", "16"])
    assert code == 2
    assert "grid='16'" in err


STUDY_ARGV = [
    "defects",
    "--study",
    "--preset",
    "small",
    "--densities",
    "0",
    "20",
    "--repair",
    "none",
    "column_shift",
    "--seeds",
    "2",
    "--window-pes",
    "8",
]


@pytest.mark.slow
def test_defects_study_keeps_freed_memory_for_the_next_map(capsys, monkeypatch):
    """A study builds every map's tables in one process: it sets the malloc thresholds
    (wafersim.sweeps.heap) first, as sweep workers do."""
    import wafersim.sweeps.heap

    calls = []
    monkeypatch.setattr(wafersim.sweeps.heap, "keep_freed_memory", lambda: calls.append(1))
    code, _, _ = run(capsys, [*STUDY_ARGV, "--json"])
    assert code == 0
    assert calls == [1]


@pytest.mark.slow
def test_defects_study_json_has_aggregates_and_config_and_saves(capsys, tmp_path):
    """`defects --study --json` prints the config and one aggregate per density and repair,
    writes the table to --out and the plot to --plot, and reports progress on stderr."""
    out, plot = tmp_path / "study.h5", tmp_path / "study.png"
    argv = [*STUDY_ARGV, "--seed", "4", "--json", "--out", str(out), "--plot", str(plot)]
    code, stdout, err = run(capsys, argv)
    r = json.loads(stdout)
    assert code == 0
    assert r["config"]["densities_per_cm2"] == [0.0, 20.0]
    assert r["config"]["strategies"] == ["none", "column_shift"]
    assert r["config"]["seeds"] == 2
    assert r["seed"] == 4
    assert r["traffic_window"]["side_pes"] == 8
    keys = [(a["defect_density_per_cm2"], a["strategy"]) for a in r["aggregates"]]
    assert keys == [(0.0, "none"), (0.0, "column_shift"), (20.0, "none"), (20.0, "column_shift")]
    assert len(StudyResult.load_hdf5(out)) == 2 * 2 * 2
    assert plot.read_bytes()[:4] == b"\x89PNG"
    assert err.strip().splitlines()[-1].startswith("study: 8/8 points")


@pytest.mark.slow
def test_defects_study_text_is_a_table(capsys):
    """Without --json the study prints one table line per density and repair."""
    code, stdout, _ = run(capsys, STUDY_ARGV)
    lines = stdout.splitlines()
    assert code == 0
    assert any("D /cm2" in line and "stretch" in line for line in lines)
    assert sum(line.split()[:2] in (["0", "none"], ["20", "column_shift"]) for line in lines) == 2


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_rewrites_one_line_on_a_terminal():
    """On a TTY progress rewrites one line with \\r; close() ends it, once."""
    stream = _Terminal()
    show = ProgressLine(stream)
    for done in range(1, 4):
        show.show(*study_line(StudyProgress(done, 3, float(done))))
    assert "\n" not in stream.getvalue()
    show.close()
    show.close()
    text = stream.getvalue()
    assert text.count("\r") == 3
    assert text.count("\n") == 1
    assert text.endswith("study: 3/3 points, 3.0 s elapsed, ~0 s left\n")


def test_progress_prints_a_line_per_tenth_elsewhere():
    """Off a terminal progress prints one line per tenth of the points, the last included."""
    stream = io.StringIO()
    show = ProgressLine(stream)
    for done in range(1, 101):
        show.show(*study_line(StudyProgress(done, 100, done / 10)))
    lines = stream.getvalue().splitlines()
    assert len(lines) == 10
    assert "\r" not in stream.getvalue()
    assert lines[0].startswith("study: 10/100 points")
    assert lines[-1].startswith("study: 100/100 points")


def test_a_one_job_parser_parses_as_the_whole_cli_and_knows_no_other_job():
    """A sweep worker builds only its job's subcommand; a point parses the same with it."""
    from wafersim.commands.parser import build_parser, parse_command_line

    argv = ["defects", "--preset", "tiny", "--repair", "row", "--seed", "3", "--", "clock_hz=1e9"]
    alone, whole = (parse_command_line(argv, parser) for parser in (build_parser("defects"),
                                                                     build_parser()))  # fmt: skip
    assert alone == whole
    assert alone.overrides == ["clock_hz=1e9"]
    with pytest.raises(SystemExit):
        build_parser(only="defects").parse_args(["traffic", "--grid", "4x4"])


def test_progress_draws_a_tqdm_bar_on_a_terminal_where_tqdm_is_installed(monkeypatch):
    """tqdm (the progress extra) draws the job's line beside a bar on a terminal; off a
    terminal, or without tqdm, the plain line is used."""
    pytest.importorskip("tqdm")
    stream = _Terminal()
    show = progress_for(stream)
    assert isinstance(show, ProgressBar)
    show.show(*study_line(StudyProgress(2, 4, 1.0)))
    show.close()
    assert "study: 2/4 points, 1.0 s elapsed, ~1 s left |" in stream.getvalue()
    assert isinstance(progress_for(io.StringIO()), ProgressLine)
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    assert isinstance(progress_for(_Terminal()), ProgressLine)


BROKEN = {
    "unclosed.yaml": ("a: [1, 2\nb: 3\n", "2:2"),
    "braces.yaml": ("{{{{\n", "2:1"),
    "tab.yaml": ("a: 1\n\tb: 2\n", "2:1"),
    "bad.toml": ("a = 1\nb = = 2\n", "2:5"),
    "bad.json": ('{"dead_pes": [1, 2\n', "2:1"),
}


READERS = ("run", "compile", "sweep", "spec", "defect-list")  # only defect lists take JSON
MALFORMED = [(reader, name) for reader in READERS for name in sorted(BROKEN)
             if reader == "defect-list" or not name.endswith(".json")]  # fmt: skip


@pytest.mark.parametrize(("reader", "name"), MALFORMED)
def test_a_malformed_file_is_one_line_naming_file_line_and_column(capsys, tmp_path, reader, name):
    """Every text file the CLI reads (run config, model, sweep file, spec, defect list):
    a parse error is one line with the file, line and column, exit 2 (a traceback would hide
    where the file is wrong)."""
    text, where = BROKEN[name]
    path = tmp_path / name
    path.write_text(text)
    argv = {
        "run": ["run", str(path), "--out", str(tmp_path / "out")],
        "compile": ["compile", str(path)],
        "sweep": ["sweep", str(path), "--out", str(tmp_path / "s.h5")],
        "spec": ["defects", "--spec", str(path), "--pe-defect-prob", "0.1"],
        "defect-list": ["defects", "--preset", "tiny", "--defect-model", "explicit",
                        "--defect-list", str(path)],
    }[reader]  # fmt: skip
    with pytest.raises(SystemExit) as exit_info:
        sys.exit(main(argv))
    _, err = capsys.readouterr()
    assert exit_info.value.code == 2
    assert f"{path}:{where}: cannot parse" in err, err
    assert len(err.strip().splitlines()) == 1


def test_outputs_of_the_wrong_kind_are_refused_before_any_work(capsys, tmp_path):
    """A file where a folder goes, a folder where a file goes, an empty or foreign results
    file: one line, exit 2, before the job runs (a traceback after the work would lose it)."""
    a_file, a_folder = tmp_path / "x.txt", tmp_path / "d"
    a_file.write_text("x")
    a_folder.mkdir()
    empty, foreign = tmp_path / "empty.h5", tmp_path / "foreign.h5"
    empty.write_bytes(b"")
    import h5py

    with h5py.File(foreign, "w") as f:
        f["x"] = [1, 2]
    sweep = tmp_path / "s.yaml"
    sweep.write_text("job: defects\nbase: {preset: tiny, pe_defect_prob: 0.1}\n"
                     "axes: {seed: [0]}\nmetrics: [working_pes]\n")  # fmt: skip
    cases = [
        (["run", "examples/fc_digits.yaml", "--out", str(a_file)], "is a file; give a folder"),
        (["compile", "examples/models/fc-digits.yaml", "--out", str(a_file)], "is a file"),
        (["defects", "--preset", "tiny", "--pe-defect-prob", "0.1", "--out", str(a_folder)],
         "is a folder; give a file name"),
        (["traffic", "--grid", "4x4", "--trace", str(a_folder)], "--trace"),
        (["defects", "--defects", str(a_folder)], "is a folder, not a defect map file"),
        (["sweep", str(sweep), "--out", str(empty), "--serial"], "not HDF5"),
        (["sweep", str(sweep), "--out", str(foreign), "--serial"], "not a wafersim sweep"),
        (["plot", str(empty), "--x", "seed", "--y", "working_pes"], "not HDF5"),
    ]  # fmt: skip
    for argv, message in cases:
        with pytest.raises(SystemExit) as exit_info:
            sys.exit(main(argv))
        err = capsys.readouterr().err
        assert exit_info.value.code == 2, (argv, err)
        assert message in err, (argv, err)
        assert len(err.strip().splitlines()) == 1, (argv, err)


def test_a_saved_map_takes_no_spec_or_defect_options(capsys, tmp_path):
    """``defects --defects MAP`` reports the map as saved; a --preset, --spec, override or
    defect option beside it is refused, not ignored (a map reported under options it was
    not made with would mislead)."""
    path = tmp_path / "map_tiny.h5"
    assert main(["defects", "--preset", "tiny", "--pe-defect-prob", "0.1", "--out", str(path),
                 "--json"]) == 0  # fmt: skip
    capsys.readouterr()
    for extra, message in ((["--preset", "small"], "drop --preset"),
                           (["pe.sram_bytes=65536"], "drop --preset, --spec and overrides"),
                           (["--pe-defect-prob", "0.2"], "takes no --pe-defect-prob")):  # fmt: skip
        assert main(["defects", "--defects", str(path), *extra]) == 2
        assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["kernel", "gemm", "--seed", "-5"], "--seed=-5 must be an integer >= 0"),
        (["kernel", "gemm", "--grid", "50000x50000"], "at most 8,388,608"),
        (["defects", "--preset", "tiny", "logical_width_pes=100000",
          "logical_height_pes=100000", "--pe-defect-prob", "0.1"], "at most 8,388,608"),
        (["run", "examples/fc_digits.yaml", "steps=1", "sparsity=3"], "sparsity=3 must be a table"),
        (["sweep", "examples/sweeps/defect_tolerance.yaml", "--scheduler", "nonsense"],
         "--scheduler nonsense: cannot connect"),
    ],
)  # fmt: skip
def test_inputs_an_independent_review_found_are_one_line(capsys, tmp_path, argv, message):
    """Each of these once raised a traceback, hung or ate the machine's memory (an
    independent review found them): now one line and exit 2, at once."""
    if argv[0] in ("run", "sweep"):
        argv = [*argv, "--out", str(tmp_path / ("out" if argv[0] == "run" else "s.h5"))]
    with pytest.raises(SystemExit) as exit_info:
        sys.exit(main(argv))
    err = capsys.readouterr().err
    assert exit_info.value.code == 2, err
    assert message in err, err
    assert len(err.strip().splitlines()) == 1, err


def test_a_pipe_or_device_is_never_replaced_by_an_output(capsys, tmp_path):
    """A FIFO given as --trace is refused, not renamed over (as root this replaced
    /dev/null with a regular file)."""
    fifo = tmp_path / "ff"
    os.mkfifo(fifo)
    assert main(["traffic", "--grid", "2x2", "--cycles", "50", "--trace", str(fifo)]) == 2
    assert "is not a regular file" in capsys.readouterr().err
    assert stat.S_ISFIFO(fifo.stat().st_mode)


def test_deep_nesting_and_huge_repeats_are_one_line(capsys, tmp_path):
    """A file nested thousands deep, or a model repeating a block 2^24 times, is refused
    at once (RecursionError; a compile that never ended)."""
    deep = tmp_path / "deep.yaml"
    deep.write_text("a: " + "[" * 100_000 + "]" * 100_000 + "\n")
    model = tmp_path / "m.yaml"
    text = (Path(__file__).resolve().parents[1] / "examples/models/gpt2-small.yaml").read_text()
    model.write_text(text.replace("layers: 12", "layers: 16777216"))
    cases = [(["compile", str(deep)], "nested too deeply"),
             (["compile", str(model)], "must be an integer in [1, 16384]")]  # fmt: skip
    for argv, message in cases:
        assert main(argv) == 2
        assert message in capsys.readouterr().err
