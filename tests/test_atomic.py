"""Atomic writes: the file's mode, and what a killed writer leaves behind."""

import os
import subprocess
import sys

from wafersim.wafer.atomic import write_json


def test_a_written_file_has_the_mode_open_would_give_it(tmp_path):
    """Not mkstemp's 0600 (issue 27: output files were private to their writer)."""
    old = os.umask(0o022)
    try:
        write_json(tmp_path / "a.json", {"x": 1})
    finally:
        os.umask(old)
    assert (tmp_path / "a.json").stat().st_mode & 0o777 == 0o644


def test_a_killed_writers_temporary_is_removed_by_the_next_write(tmp_path):
    """A ``.name.<pid>.*.tmp`` whose writer no longer runs goes; a running one's stays."""
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    dead = tmp_path / f".a.json.{done.stdout.strip()}.xyz.tmp"
    alive = tmp_path / f".a.json.{os.getpid()}.abc.tmp"
    for tmp in (dead, alive):
        tmp.write_text("half written")
    write_json(tmp_path / "a.json", {"x": 1})
    assert not dead.exists()
    assert alive.exists()
