"""Hostile input files and words: duplicate YAML keys, alias bombs, huge bad values, digits
that are not ASCII, and seeds past what an HDF5 file holds are refused in one short line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from wafersim.memoryx.run_config import load_run_config
from wafersim.wafer.atomic import write_json
from wafersim.wafer.config_io import MAX_YAML_NODES, load_mapping, load_spec
from wafersim.wafer.defects import generate
from wafersim.wafer.errors import ConfigError, excerpt

MODEL = Path(__file__).resolve().parents[1] / "examples" / "models" / "fc-digits.yaml"
SHORT = 200  # the most characters a one-line error about a bad value should take


def _alias_bomb(levels: int) -> str:
    """A flow list whose aliases expand to ``10 ** levels`` leaves: small text, huge value."""
    parts = ["&a0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"]
    parts += [f"&a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, levels)]
    return f"[{', '.join(parts)}]"


def _read_run(path: Path) -> None:
    load_run_config(path, {})


def _written(tmp_path: Path, text: str, name: str = "c.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_duplicate_key_is_refused_naming_both_lines(tmp_path):
    """A key given twice in one mapping is refused naming it and both lines (YAML keeps the
    last silently); a ``<<`` merge that a key overrides is not a duplicate."""
    top = _written(tmp_path, "steps: 3\nseed: 1\nsteps: 4\n")
    with pytest.raises(ConfigError, match=r"c.yaml:3:1: .*duplicate key 'steps' at lines 1 and 3"):
        load_mapping(top)
    nested = _written(tmp_path, "preset: tiny\nrouter:\n  colors: 8\n  colors: 9\n", "w.yaml")
    with pytest.raises(ConfigError, match="duplicate key 'colors' at lines 3 and 4"):
        load_spec(nested)
    merged = _written(tmp_path, "base: &b {x: 1, y: 2}\nmore:\n  <<: *b\n  x: 3\n", "m.yaml")
    assert load_mapping(merged)["more"] == {"x": 3, "y": 2}


@pytest.mark.slow
def test_an_alias_bomb_is_refused_in_one_line_at_once(tmp_path):
    """A billion-laughs file under a numeric key is refused in one line naming the bound,
    by a process that ends (it hung, quoting the whole value in its range error)."""
    config = _written(tmp_path, f"model: {MODEL}\nsteps: {_alias_bomb(9)}\n")
    code = "import sys; from wafersim.cli import main; sys.exit(main())"
    done = subprocess.run(
        [sys.executable, "-c", code, "run", str(config), "--validate-only"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert f"{MAX_YAML_NODES:,} nodes" in lines[0]
    assert len(lines[0]) < SHORT


def test_an_alias_that_holds_itself_is_refused(tmp_path):
    """A recursive alias (an infinite value) is refused, naming where it is."""
    path = _written(tmp_path, "a: 1\nsteps: &s [1, *s]\n")
    with pytest.raises(ConfigError, match="c.yaml:2:8: .*refers to a node that holds it"):
        load_mapping(path)


@pytest.mark.parametrize(
    ("text", "read"),
    [
        (f"model: {MODEL}\nsteps: {_alias_bomb(4)}\n", _read_run),
        pytest.param(
            f"model: {MODEL}\nsteps: [{', '.join(['1'] * 50_000)}]\n",
            _read_run,
            marks=pytest.mark.slow,
        ),  # a 50,000-item list: seconds
        (f"preset: tiny\npe:\n  sram_bytes: {_alias_bomb(4)}\n", load_spec),
        (f"preset: tiny\nrouter: {_alias_bomb(4)}\n", load_spec),
        (f"model: {MODEL}\nwafer:\n  defects: {_alias_bomb(4)}\n", _read_run),
    ],
)
def test_a_huge_bad_value_is_quoted_in_a_short_excerpt(tmp_path, text, read):
    """The error about a huge bad value quotes an excerpt of it, not all of it."""
    with pytest.raises(ConfigError) as info:
        read(_written(tmp_path, text))
    assert len(str(info.value)) < SHORT, str(info.value)[:SHORT]


def test_excerpt_is_short_and_one_line_for_any_value():
    """``excerpt`` cuts long text, deep lists, multi-line reprs and ints too long for text."""
    deep = [1] * 10
    for _ in range(8):
        deep = [deep] * 10
    for value in ("x" * 1000, deep, 10**5000, {"a": "b\nc" * 500}, [[1, 2]] * 100):
        shown = excerpt(value)
        assert len(shown) <= 80
        assert "\n" not in shown
    assert excerpt(3) == "3"
    assert excerpt("pe") == "'pe'"


@pytest.mark.parametrize("seed", [2**63, 2**64 + 1])
def test_a_defect_seed_past_int64_is_refused_before_drawing(seed, tiny):
    """A seed a map's int64 attribute cannot hold is refused naming the range, before any
    work (it failed at the HDF5 save, after drawing the map)."""
    with pytest.raises(ConfigError, match=r"seed=\d+ is out of range \[0, 2\*\*63 - 1\]"):
        generate(tiny, "poisson", seed=seed, pe_defect_prob=0.01)


def test_a_temporary_named_with_a_non_ascii_digit_does_not_break_a_write(tmp_path):
    """A ``.name.².*.tmp`` beside the target is no writer's pid: the write goes on."""
    (tmp_path / ".a.json.².xyz.tmp").write_text("not ours")
    write_json(tmp_path / "a.json", {"x": 1})
    assert (tmp_path / "a.json").read_text() == '{\n  "x": 1\n}\n'
