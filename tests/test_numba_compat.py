"""fabric.numba_compat: every change wafersim makes to Numba is installed only inside the window
of versions it was tested on; outside it, or without the POSIX calls it needs, the engine runs
on stock Numba with the same results, and a debug line says so."""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import numba
import pytest
from wafersim.fabric import compile_once, numba_compat, precompile
from wafersim.kernels.grid import kernel_grid
from wafersim.kernels.registry import run_kernel
from wafersim.wafer import __version__
from wafersim.wafer.presets import preset

ROOT = Path(__file__).resolve().parents[1]
CUDA_PATCHES = {"cuda_cache", "cudasim_fixes"}  # the patches of numba.cuda
# A script's first lines: the versions it sees are ``VERSIONS`` (outside every window)
UNPATCHED = """\
import json, sys
from wafersim.fabric import numba_compat
VERSIONS = {"numba": "0.70.0", "numba-cuda": "0.40.0"}
numba_compat.version_of = VERSIONS.get
"""


def seeing(monkeypatch, **versions: str | None) -> None:
    """Make ``numba_compat`` see ``versions`` (``numba_cuda=None``: not installed) and decide
    every patch afresh."""
    seen = {name.replace("_", "-"): version for name, version in versions.items()}
    monkeypatch.setattr(numba_compat, "version_of", seen.get)
    monkeypatch.setattr(numba_compat, "_DECIDED", {})


def probe(monkeypatch, body) -> numba_compat.Patch:
    """A patch of the tested window whose body is ``body``, registered for this test."""
    monkeypatch.setattr(sys.modules[__name__], "_probe_body", body, raising=False)
    patch = numba_compat.Patch("probe", f"{__name__}:_probe_body", (">=0.60", "<0.69"), "none")
    monkeypatch.setitem(numba_compat.PATCHES, "probe", patch)
    return patch


def test_every_patch_declares_a_window_and_a_patch_of_numba_cuda_one_there_too():
    """Each patch bounds numba both ways; a patch of numba.cuda bounds numba-cuda too."""
    for patch in numba_compat.PATCHES.values():
        low, high = numba_compat._bounds(patch.numba)
        assert low < high, patch.name
        assert (patch.numba_cuda is not None) == (patch.name in CUDA_PATCHES), patch.name
        assert patch.without, patch.name
    with pytest.raises(ValueError, match="'<high'"):
        numba_compat.Patch("open", "m:f", (">=0.60", ">=0.60"), "none")


def test_the_requirements_are_the_tested_windows_and_hold_the_installed_numba():
    """pyproject.toml requires the tested windows, and the installed numba is inside."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert f"numba{','.join(numba_compat.NUMBA)}" in project["dependencies"]
    cuda = f"numba-cuda[cu12]{','.join(numba_compat.NUMBA_CUDA)}"
    assert cuda in project["optional-dependencies"]["cuda"]
    assert numba_compat.in_window(numba.__version__, numba_compat.NUMBA)


@pytest.mark.parametrize("version", ["0.59.2", "0.69.0", "0.69.0rc1", "1.0.0", "unknown"])
def test_a_patch_outside_its_window_is_not_installed_and_a_debug_line_says_so(
    monkeypatch, caplog, version
):
    """Outside its window a patch's body never runs, and a debug line names version and window."""
    calls = []
    patch = probe(monkeypatch, lambda: calls.append(1) or True)
    seeing(monkeypatch, numba=version)
    with caplog.at_level(logging.DEBUG, logger=numba_compat.__name__):
        assert not numba_compat.install(patch)
    assert calls == []
    assert "probe" not in numba_compat.active_patches()
    assert f"numba {version} is outside its tested window >=0.60,<0.69" in caplog.text


def test_a_patch_inside_its_window_is_installed_once_and_listed_as_active(monkeypatch):
    """Inside its window a patch's body runs once, however often the patch is asked for."""
    calls = []
    patch = probe(monkeypatch, lambda: calls.append(1) or True)
    seeing(monkeypatch, numba="0.68.1")
    assert numba_compat.install(patch)
    assert numba_compat.install(patch)
    assert calls == [1]
    assert numba_compat.active_patches() == ("probe",)


@pytest.mark.parametrize("outcome", [False, AttributeError("moved")])
def test_a_body_that_does_not_know_the_internals_leaves_its_patch_out(monkeypatch, caplog, outcome):
    """A body that finds other internals leaves Numba as it is, inside the window too."""

    def body():
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    patch = probe(monkeypatch, body)
    seeing(monkeypatch, numba="0.68.1")
    with caplog.at_level(logging.DEBUG, logger=numba_compat.__name__):
        assert not numba_compat.install(patch)
    assert "probe" not in numba_compat.active_patches()
    assert "internals of numba 0.68.1 are not the ones it was written for" in caplog.text


def test_a_patch_of_numba_cuda_is_judged_by_numba_cuda_where_that_is_installed(monkeypatch):
    """Where numba-cuda is installed its version decides the CUDA patches; numba's the others."""
    seeing(monkeypatch, numba="0.68.1", numba_cuda="0.31.0")
    refusal = numba_compat.refusal_of(numba_compat.CUDASIM_FIXES)
    assert refusal == "numba-cuda 0.31.0 is outside its tested window >=0.4,<0.31"
    assert numba_compat.refusal_of(numba_compat.SCOPE_COPY) is None
    seeing(monkeypatch, numba="0.68.1", numba_cuda="0.30.4")
    assert numba_compat.refusal_of(numba_compat.CUDA_CACHE) is None
    seeing(monkeypatch, numba="0.70.0", numba_cuda=None)
    assert numba_compat.refusal_of(numba_compat.CUDA_CACHE).startswith("numba 0.70.0")


def test_active_patches_lists_the_installed_ones():
    """Once the engine is imported, active_patches() lists its patches, each of them in place."""
    import wafersim.fabric.engine  # noqa: F401 (installs the engine's patches)
    from numba.core import caching, inline_closurecall, ir
    from numba.core.cpu import CPUTargetOptions
    from wafersim.fabric import _numba_scope_copy

    active = numba_compat.active_patches()
    assert {"scope_copy", "noalias", "locked_cache_saves"} <= set(active)
    assert "cudasim_fixes" not in active
    assert set(active) <= set(numba_compat.applicable_patches())
    assert vars(ir.Scope)["__deepcopy__"] is _numba_scope_copy._copy_scope
    assert inline_closurecall.copy is _numba_scope_copy._SHARED
    assert hasattr(CPUTargetOptions, "noalias")
    assert caching.IndexDataCacheFile.save.locked


VERSION = """\
import sys
from wafersim.cli import main
try:
    main(["--version"])
except SystemExit as done:
    assert done.code in (0, None), done.code
print(sorted(m for m in sys.modules if m == "numba" or m.startswith("numba.")))
"""


def test_version_names_numba_and_the_patches_without_importing_numba():
    """``wafersim --version`` names numba and the patches that apply, importing no numba."""
    done = subprocess.run([sys.executable, "-c", VERSION], capture_output=True, text=True,
                          check=True, timeout=120, cwd=ROOT)  # fmt: skip
    line, imported = done.stdout.splitlines()
    names = ", ".join(numba_compat.applicable_patches())
    assert line == f"wafersim {__version__} (numba {numba.__version__}; patches: {names})"
    assert {"scope_copy", "noalias", "cache_index"} <= set(numba_compat.applicable_patches())
    assert imported == "[]"


def test_version_says_when_no_patch_applies(monkeypatch, capsys):
    """Outside every window ``--version`` says ``patches: none``."""
    from wafersim.cli import main

    seeing(monkeypatch, numba="0.70.0")
    with pytest.raises(SystemExit):
        main(["--version"])
    assert capsys.readouterr().out.endswith("(numba 0.70.0; patches: none)\n")


def without_fcntl(monkeypatch) -> None:
    """A platform without ``fcntl``: its import fails, and a call of the real one raises."""
    fcntl = pytest.importorskip("fcntl")

    def refused(*_args):
        raise AssertionError("fcntl.flock called")

    monkeypatch.setattr(fcntl, "flock", refused)
    monkeypatch.setitem(sys.modules, "fcntl", None)
    monkeypatch.setattr(numba_compat, "_TOLD", set())
    monkeypatch.setattr(numba_compat, "_DECIDED", {})


def test_without_fcntl_a_compile_takes_no_machine_lock_and_says_so(monkeypatch, caplog):
    """Without fcntl, compile_once compiles with no machine lock, and a debug line says so."""
    without_fcntl(monkeypatch)

    @numba.njit
    def doubled(x):
        return 2 * x

    with caplog.at_level(logging.DEBUG, logger=numba_compat.__name__):
        compile_once.compile_once(doubled, (3,))
        assert not numba_compat.install(numba_compat.LOCKED_CACHE_SAVES)
    assert doubled(3) == 6
    assert (numba.types.int64,) in doubled.overloads
    assert "no fcntl.flock on this platform (compile_lock)" in caplog.text
    assert "locked_cache_saves not installed: this platform has no fcntl.flock" in caplog.text
    assert "locked_cache_saves" not in numba_compat.applicable_patches()


def test_without_posix_spawn_the_job_compiles_the_engine_itself(monkeypatch, caplog):
    """Without os.posix_spawn no second process starts, and a debug line says so."""
    monkeypatch.delattr(os, "posix_spawn", raising=False)
    monkeypatch.setattr(numba_compat, "_TOLD", set())
    monkeypatch.setattr(precompile, "_in_cache", lambda _dispatcher, _args: False)
    with caplog.at_level(logging.DEBUG, logger=numba_compat.__name__):
        assert precompile.compile_in_background("programs") is None
    assert "no os.posix_spawn on this platform (background_compile)" in caplog.text


CACHED_MODULE = """
from numba import njit

@njit(cache=True)
def plus_one(x):
    return x + 1
"""


def test_outside_its_window_the_cache_index_is_not_read(tmp_path, monkeypatch):
    """Outside cache_index's window a cached function counts as not cached."""
    (tmp_path / "cached_for_compat.py").write_text(CACHED_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "cached_for_compat", raising=False)
    import cached_for_compat

    assert cached_for_compat.plus_one(1) == 2
    assert precompile._in_cache(cached_for_compat.plus_one, (1,))
    seeing(monkeypatch, numba="0.70.0")
    assert not precompile._in_cache(cached_for_compat.plus_one, (1,))


UNPATCHED_GEMM = (
    UNPATCHED
    + """\
from numba.core import caching, ir
from numba.core.cpu import CPUTargetOptions
from wafersim.kernels.grid import kernel_grid
from wafersim.kernels.registry import run_kernel
from wafersim.wafer.presets import preset

result = run_kernel("gemm", "summa", {"m": 16, "k": 16, "n": 16}, kernel_grid(2, 2),
                    preset("tiny"))
print(json.dumps({"active": numba_compat.active_patches(), "cycles": result.cycles,
                  "output": result.output.tobytes().hex(), "busy": result.pe_busy_cycles.tolist(),
                  "in_place": ["__deepcopy__" in vars(ir.Scope),
                               hasattr(CPUTargetOptions, "noalias"),
                               hasattr(caching.IndexDataCacheFile.save, "locked")]}))
"""
)


@pytest.mark.slow
def test_the_engine_compiled_without_any_patch_gives_the_same_result(tmp_path):
    """Compiled with no patch (every window missed), the engine gives the same GEMM bit for bit."""
    env = os.environ | {"NUMBA_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", UNPATCHED_GEMM], capture_output=True,
                          text=True, check=False, timeout=900, env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    unpatched = json.loads(done.stdout.splitlines()[-1])
    assert unpatched["active"] == []
    assert unpatched["in_place"] == [False, False, False]
    patched = run_kernel("gemm", "summa", {"m": 16, "k": 16, "n": 16}, kernel_grid(2, 2),
                         preset("tiny"))  # fmt: skip
    assert unpatched["cycles"] == patched.cycles
    assert unpatched["busy"] == patched.pe_busy_cycles.tolist()
    assert unpatched["output"] == patched.output.tobytes().hex()


UNPATCHED_SIMULATOR = (
    UNPATCHED
    + """\
import numpy as np
import wafersim.fabric._cuda_device  # where the engine installs the simulator's fixes
from numba import cuda
from numba.cuda.simulator import kernel as simulator

@cuda.jit
def rotate(values, rounds):
    i = cuda.threadIdx.x
    for _ in range(rounds):
        mine = values[(i - 1) % cuda.blockDim.x]
        cuda.syncthreads()
        values[i] = mine
        cuda.syncthreads()

values = np.arange(8.0)
rotate[1, 8](values, 3)
print(numba_compat.active_patches(), simulator.BlockManager.__name__,
      list(values) == list(np.roll(np.arange(8.0), 3)))
"""
)


@pytest.mark.skipif(importlib.util.find_spec("numba.cuda") is None, reason="no numba.cuda")
def test_outside_their_window_the_simulators_fixes_are_not_installed_and_it_still_runs():
    """Outside its window the simulator keeps its own barrier, and still computes right."""
    env = os.environ | {"NUMBA_ENABLE_CUDASIM": "1", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", UNPATCHED_SIMULATOR], capture_output=True,
                          text=True, check=False, timeout=300, env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["()", "BlockManager", "True"]
