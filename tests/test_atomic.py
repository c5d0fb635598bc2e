"""Atomic writes: the file's mode, what a killed writer leaves behind, and failed writes."""

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
from wafersim.wafer.atomic import atomic_hdf5, atomic_path, write_json
from wafersim.wafer.errors import OutputError


def test_a_written_file_has_the_mode_open_would_give_it(tmp_path):
    """Not mkstemp's 0600, which would make output files private to their writer."""
    old = os.umask(0o022)
    try:
        write_json(tmp_path / "a.json", {"x": 1})
    finally:
        os.umask(old)
    assert (tmp_path / "a.json").stat().st_mode & 0o777 == 0o644


@pytest.mark.slow
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


def test_a_failed_write_is_one_output_error_naming_the_target(tmp_path, monkeypatch):
    """ENOSPC half-way: an OutputError naming the file; the old file stays, no temporary."""
    target = tmp_path / "a.json"
    write_json(target, {"x": 1})

    def full_disk(self, text):
        with open(self, "w") as f:
            f.write(text[:3])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(Path, "write_text", full_disk)
    with pytest.raises(OutputError, match=f"^cannot write {target}: No space left on device$"):
        write_json(target, {"x": 2})
    monkeypatch.undo()
    assert json.loads(target.read_text()) == {"x": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["a.json"]


def _raise_as_h5py(message: str, filename: str) -> None:
    """Raise RuntimeError(message) from a frame of a file named ``filename``."""
    exec(compile(f"raise RuntimeError({message!r})", filename, "exec"))


def test_hdf5s_failed_flush_is_an_output_error_and_other_runtime_errors_are_not(tmp_path):
    """h5py's failed flush is an OutputError naming the target; others' RuntimeError stays."""
    flush = "Disable slist on flush dest failure failed (file write failed: errno = 28, ...)"
    in_h5py = os.path.join("site-packages", "h5py", "_hl", "files.py")
    no_space = "^cannot write .*b.h5: No space left on device$"
    with pytest.raises(OutputError, match=no_space), atomic_path(tmp_path / "b.h5"):
        _raise_as_h5py(flush, in_h5py)
    with pytest.raises(RuntimeError, match="^a bug$"), atomic_path(tmp_path / "c.h5"):
        _raise_as_h5py("a bug", "elsewhere.py")
    assert list(tmp_path.iterdir()) == []


def test_atomic_hdf5_writes_a_file_h5py_reads_with_the_mode_open_gives(tmp_path):
    """The file built in memory lands whole at the target, mode 0666 less the umask."""
    old = os.umask(0o022)
    try:
        with atomic_hdf5(tmp_path / "t.h5") as f:
            f.create_dataset("x", data=np.arange(1000), compression="gzip")
            f.attrs["k"] = "v"
    finally:
        os.umask(old)
    with h5py.File(tmp_path / "t.h5", "r") as f:
        assert (f["x"][:] == np.arange(1000)).all()
        assert f.attrs["k"] == "v"
    assert (tmp_path / "t.h5").stat().st_mode & 0o777 == 0o644
    assert [p.name for p in tmp_path.iterdir()] == ["t.h5"]
