"""The bundled examples: commands take them by name from any folder, ``wafersim examples``
lists and copies them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from wafersim.wafer.errors import ConfigError

from wafersim.bundled import KINDS, bundled, copy_examples, examples_root, resolve

ROOT = Path(__file__).resolve().parent.parent


def test_the_bundled_examples_are_the_repositorys():
    """The package's examples are the checkout's examples/ folder (one copy)."""
    assert examples_root().resolve() == (ROOT / "examples").resolve()
    assert set(bundled("run")) == {p.stem for p in (ROOT / "examples").glob("*.yaml")}
    assert "gpt3-175b" in bundled("model")
    assert "defect_tolerance" in bundled("sweep")


@pytest.mark.parametrize(("kind", "name"), [("run", "fc_digits"), ("model", "gpt3-175b"),
                                            ("sweep", "kernel_placement")])  # fmt: skip
def test_a_name_resolves_to_its_kinds_file(kind, name, tmp_path, monkeypatch):
    """A bundled name resolves from any folder to the file of that command's kind."""
    monkeypatch.chdir(tmp_path)
    path = Path(resolve(kind, name))
    assert path.is_file()
    assert path.stem == name
    assert path.parent.name in (KINDS[kind], "examples")


def test_a_path_wins_over_a_name_and_other_kinds_are_not_looked_up(tmp_path, monkeypatch):
    """A file that exists is taken as given; a model's name is no run config."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "fc_digits").write_text("mine")
    assert resolve("run", "fc_digits") == "fc_digits"
    with pytest.raises(ConfigError, match="no such file: gpt3-175b .*bundled run file"):
        resolve("run", "gpt3-175b")


def test_copy_writes_every_example_and_never_overwrites(tmp_path):
    """--copy copies the whole tree into a folder, and refuses to overwrite a file there."""
    copied = copy_examples(tmp_path / "ex")
    assert (tmp_path / "ex" / "models" / "gpt3-175b.yaml") in copied
    assert not any(p.name == "__init__.py" or "__pycache__" in p.parts for p in copied)
    with pytest.raises(ConfigError, match="exists"):
        copy_examples(tmp_path / "ex")


def _wafersim(*argv, cwd):
    return subprocess.run([sys.executable, "-m", "wafersim.cli", *argv], cwd=cwd,
                          capture_output=True, text=True, timeout=300)  # fmt: skip


@pytest.mark.slow
def test_commands_take_bundled_names_from_another_folder(tmp_path):
    """compile, run --validate-only and examples work by name outside the checkout."""
    done = _wafersim("compile", "fc-digits", "--preset", "tiny", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["model"]
    done = _wafersim("run", "fc_digits", "--validate-only", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    listed = json.loads(_wafersim("examples", "--json", cwd=tmp_path).stdout)
    assert "scaling" in listed["sweep"]


@pytest.mark.slow
def test_an_unknown_name_is_one_line_listing_the_bundled_ones(tmp_path):
    """A name that is neither a file nor bundled: exit 2, one line naming what exists."""
    done = _wafersim("sweep", "no_such_sweep", cwd=tmp_path)
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1
    assert "defect_tolerance" in done.stderr
