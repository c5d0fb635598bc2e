"""Interrupts (SIGINT, SIGTERM) and failed writes (a full disk, a closed pipe, a name too long)
end a command with one line on stderr, a documented exit status and no partial output."""

from __future__ import annotations

import contextlib
import errno
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from wafersim.cli import main
from wafersim.commands.jobs import Command

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "wafersim.cli"]
# a short run that saves a checkpoint after every step, so that an interrupted one resumes
RUN = ["run", str(ROOT / "examples" / "fc_digits.yaml"), "steps=3", "checkpoint_every=1"]


def _own_lines(stderr: str) -> list[str]:
    """stderr without the progress lines of ``wafersim run``."""
    return [line for line in stderr.splitlines() if line and not line.startswith("run: ")]


def _leftovers(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.name.endswith((".tmp", ".image"))]


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _signalled_run(out: Path, signum: int, after: str | None, delay: float):
    """``wafersim run`` sent ``signum`` ``delay`` seconds after its stderr shows ``after``
    (None: after its start); its exit status and stderr."""
    # SIGINT at its default, as a shell leaves it (pytest-xdist's workers ignore it, and an
    # ignored SIGINT stays ignored in wafersim, as in any tool started with it ignored)
    proc = subprocess.Popen([*CLI, *RUN, "--out", str(out)], cwd=out.parent, text=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            preexec_fn=_default_sigint)  # fmt: skip
    seen = []
    if after is not None:
        for line in proc.stderr:
            seen.append(line)
            if after in line:
                break
    time.sleep(delay)
    assert proc.poll() is None, "the run ended before the signal: " + "".join(seen)
    proc.send_signal(signum)
    rest = proc.stderr.read()
    return proc.wait(timeout=120), "".join(seen) + rest


@pytest.mark.slow
def test_sigint_ends_a_run_with_130_and_one_line_and_the_rerun_resumes(tmp_path):
    """Ctrl-C after a checkpoint: 130, one line, no temporary; the same command resumes."""
    out = tmp_path / "out"
    status, stderr = _signalled_run(out, signal.SIGINT, "train step 1/3",
                                    random.uniform(0.0, 0.3))  # fmt: skip
    assert status == 130, stderr
    assert _own_lines(stderr) == ["wafersim: interrupted by SIGINT"], stderr
    assert not _leftovers(out)
    again = subprocess.run([*CLI, *RUN, "--out", str(out)], cwd=tmp_path, text=True,
                           capture_output=True, timeout=300)  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert "train step 1/3" not in again.stderr  # resumed, not started over
    assert (out / "performance" / "performance.json").is_file()
    assert not _leftovers(out)


@pytest.mark.slow
def test_sigterm_ends_a_run_with_143_and_one_line(tmp_path):
    """SIGTERM at a random point after the start: status 143, one line, no traceback."""
    status, stderr = _signalled_run(tmp_path / "out", signal.SIGTERM, None,
                                    random.uniform(0.5, 1.5))  # fmt: skip
    assert status == 143, stderr
    assert _own_lines(stderr) == ["wafersim: interrupted by SIGTERM"], stderr
    assert not _leftovers(tmp_path)


def _job(run) -> Command:
    return Command(lambda parser: None, run, str, seed=False, overrides="")


def _numba_lost_it(args):
    """What Numba code does with a KeyboardInterrupt raised in a callback: a SystemError."""
    try:
        raise KeyboardInterrupt
    except KeyboardInterrupt as interrupt:
        raise SystemError("<function> returned a result with an exception set") from interrupt


def test_a_system_error_raised_from_an_interrupt_is_the_interrupt(monkeypatch, capsys):
    """A SystemError whose cause is the KeyboardInterrupt ends the command as SIGINT does."""
    monkeypatch.setattr("wafersim.cli.command", lambda name: _job(_numba_lost_it))
    assert main(["presets"]) == 130
    assert capsys.readouterr().err == "wafersim: interrupted by SIGINT\n"


def _swallows_sigterm(args):
    """A job whose code catches the signal's exception and drops it (as C code may)."""
    assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL, "SIGTERM would kill"
    with contextlib.suppress(BaseException):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(1)  # the handler runs here
    return {}


@pytest.mark.skipif(signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL,
                    reason="the test runner handles SIGTERM itself")  # fmt: skip
def test_a_signal_whose_exception_was_lost_still_ends_the_command(monkeypatch, capsys):
    """SIGTERM that a job swallowed: status 143, not 0, and the handler is restored after."""
    monkeypatch.setattr("wafersim.cli.command", lambda name: _job(_swallows_sigterm))
    assert main(["presets"]) == 143
    assert capsys.readouterr() == ("", "wafersim: interrupted by SIGTERM\n")
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


KILLED_WRITING = """
import os, signal, sys, time
import wafersim.cli as cli
from wafersim.commands.jobs import Command
from wafersim.wafer.atomic import atomic_path

def job(args):
    with atomic_path(sys.argv[1]) as tmp:
        tmp.write_text("half a file")
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(30)
    return {}

cli.command = lambda name: Command(lambda parser: None, job, str, seed=False, overrides="")
sys.exit(cli.main(["presets"]))
"""


@pytest.mark.slow
def test_sigterm_in_the_middle_of_a_write_leaves_no_temporary(tmp_path):
    """A job killed while it writes a file: status 143, no temporary, no file."""
    done = subprocess.run([sys.executable, "-c", KILLED_WRITING, str(tmp_path / "a.json")],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert (done.returncode, done.stderr) == (143, "wafersim: interrupted by SIGTERM\n")
    assert list(tmp_path.iterdir()) == []


def test_no_space_for_a_defect_map_is_one_line_74_and_no_file(monkeypatch, capsys, tmp_path):
    """ENOSPC while HDF5 writes the map: one line naming it, status 74, nothing left."""

    def full_disk(name, mode="r", **kwargs):
        if kwargs.get("backing_store", True):  # an image in memory has no file to leave half
            Path(name).write_bytes(b"\x89HDF\r\n\x1a\n half a file")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr("h5py.File", full_disk)
    out = tmp_path / "map.h5"
    status = main(["defects", "--preset", "tiny", "--pe-defect-prob", "0.05", "--out", str(out)])
    assert status == 74
    assert capsys.readouterr().err == (
        f"wafersim defects: error: cannot write {out}: No space left on device\n"
    )
    assert list(tmp_path.iterdir()) == []


@pytest.fixture
def full_fs(tmp_path):
    """A 64 KiB tmpfs: a file system that fills up."""
    where = tmp_path / "fs"
    where.mkdir()
    try:
        mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(where)],
                                 capture_output=True, text=True)  # fmt: skip
    except OSError as error:
        pytest.skip(f"no mount command: {error}")
    if mounted.returncode:
        pytest.skip(f"cannot mount a small tmpfs here (root only): {mounted.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=False)


@pytest.mark.slow
def test_a_full_file_system_under_a_plan_is_one_line_74_and_no_file(full_fs, capsys):
    """A real full disk under ``compile --out``: one line naming the plan, 74, no file."""
    status = main(["compile", "gpt3-175b", "--out", str(full_fs / "plans")])
    plan = full_fs / "plans" / "gpt3-175b.plan.json"
    assert status == 74
    assert capsys.readouterr().err == (
        f"wafersim compile: error: cannot write {plan}: No space left on device\n"
    )
    assert [p for p in full_fs.rglob("*") if not p.is_dir()] == []


HDF5_INTO = """
import sys
import numpy as np
from wafersim.wafer.atomic import atomic_hdf5
from wafersim.wafer.errors import OutputError
try:
    with atomic_hdf5(sys.argv[1]) as f:
        f.create_dataset("x", data=np.random.default_rng(0).random(40000), compression="gzip")
except OutputError as error:
    print(error)
"""


@pytest.mark.slow
def test_a_full_file_system_under_an_hdf5_file_is_an_error_not_a_crash(full_fs):
    """HDF5 output into a real full disk: one OutputError, no segfault at exit, no file."""
    done = subprocess.run([sys.executable, "-c", HDF5_INTO, str(full_fs / "x.h5")],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == f"cannot write {full_fs / 'x.h5'}: No space left on device\n"
    assert list(full_fs.iterdir()) == []


@pytest.mark.slow
def test_json_into_a_closed_pipe_ends_quietly_with_141():
    """``presets --json | head -c 0``: status 141, as SIGPIPE gives a C tool, and no output."""
    proc = subprocess.Popen([*CLI, "presets", "--json"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    proc.stdout.close()  # the reader is gone before the command writes
    stderr = proc.stderr.read()
    assert (proc.wait(timeout=60), stderr) == (141, "")


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full on this system")
@pytest.mark.slow
def test_json_into_a_full_device_is_one_line_and_74():
    """``presets --json > /dev/full``: one line saying stdout could not be written, 74."""
    with open("/dev/full", "w") as full:
        done = subprocess.run([*CLI, "presets", "--json"], stdout=full, stderr=subprocess.PIPE,
                              text=True, timeout=60)  # fmt: skip
    assert (done.returncode, done.stderr) == (
        74,
        "wafersim presets: error: cannot write to stdout: No space left on device\n",
    )


def test_an_output_name_at_the_file_systems_limit_is_written(capsys, tmp_path):
    """A 250-byte name fits the file system; its temporary's longer name must not refuse it."""
    out = tmp_path / ("m" * 247 + ".h5")
    assert main(["defects", "--preset", "tiny", "--pe-defect-prob", "0.05", "--out", str(out)]) == 0
    assert out.is_file()
    assert [p.name for p in tmp_path.iterdir()] == [out.name]


def test_an_output_name_past_the_limit_is_one_line_74(capsys, tmp_path):
    """A name longer than the file system allows: one line naming why, status 74."""
    out = tmp_path / ("m" * 300 + ".h5")
    assert (
        main(["defects", "--preset", "tiny", "--pe-defect-prob", "0.05", "--out", str(out)]) == 74
    )
    err = capsys.readouterr().err
    assert err.startswith("wafersim defects: error: ")
    assert err.count("\n") == 1
    assert err.endswith(": File name too long\n")


def test_a_folder_where_a_lock_file_goes_is_one_line_74(capsys, tmp_path):
    """A folder named as a sweep's lock file: one line naming the lock, status 74."""
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text("job: defects\nbase: {preset: tiny}\naxes:\n  seed: [0, 1]\n"
                     "metrics: [working_pes]\n")  # fmt: skip
    (tmp_path / "r.h5.lock").mkdir()
    assert main(["sweep", str(sweep), "--serial", "--out", str(tmp_path / "r.h5")]) == 74
    assert capsys.readouterr().err == (
        f"wafersim sweep: error: cannot write {tmp_path / 'r.h5.lock'}: Is a directory\n"
    )


def test_a_signal_dropped_by_python_is_sent_again_not_printed(monkeypatch):
    """A signal whose exception lands where Python drops exceptions (a weakref callback, a
    __del__) is sent again a moment later instead of printing 'Exception ignored in'."""
    import threading
    import types

    from wafersim.wafer.errors import Terminated

    from wafersim import cli

    sent = []
    monkeypatch.setattr(cli.os, "kill", lambda pid, signum: sent.append(signum))
    printed = []
    monkeypatch.setattr(sys, "unraisablehook", lambda info: printed.append(info))
    with cli._signals_raise():
        info = types.SimpleNamespace(exc_value=Terminated(), exc_type=Terminated)
        sys.unraisablehook(info)
        for thread in threading.enumerate():
            if isinstance(thread, threading.Timer):
                thread.join(timeout=5)
        sys.unraisablehook(types.SimpleNamespace(exc_value=ValueError("x"), exc_type=ValueError))
    assert sent == [signal.SIGTERM]
    assert [type(i.exc_value) for i in printed] == [ValueError]  # others still reported
