"""fabric.precompile: the engine's compile in a second process while a job starts,
with the argument types the job's own first engine run passes, so that the job loads it."""

from __future__ import annotations

import os
import subprocess
import sys

import numba
import pytest
import wafersim.fabric.engine as engine
from wafersim.fabric import _engine_jit as K
from wafersim.fabric import precompile
from wafersim.fabric.traffic import TrafficConfig, run_traffic
from wafersim.wafer.presets import preset

from tests.cuda_cases import fp16_wait_matmul, send_recv


def types_of(args: tuple) -> tuple:
    return tuple(numba.typeof(value) for value in args)


def engine_calls(monkeypatch) -> list[tuple]:
    """The argument types of each first engine compile (``compile_once``) from now on."""
    calls = []
    monkeypatch.setattr(engine, "compile_once", lambda _k, args: calls.append(types_of(args)))
    return calls


def test_the_background_compile_has_the_types_of_a_program_job(monkeypatch):
    calls = engine_calls(monkeypatch)
    send_recv("cpu")  # a 4 x 1 program on the CPU engine, as kernels and runs make them
    assert calls == [types_of(precompile.engine_arguments("programs"))]


def test_a_16_bit_program_job_takes_the_engine_with_the_16_bit_paths(monkeypatch):
    """``half`` is None in an fp32 program job (Numba prunes the 16-bit paths by its type),
    True where some op is fp16 or bf16, as the background compile's ``--half`` passes it."""
    calls = engine_calls(monkeypatch)
    fp16_wait_matmul("cpu")
    send_recv("cpu")
    assert calls == [types_of(precompile.engine_arguments("programs", half=True))] + [
        types_of(precompile.engine_arguments("programs"))
    ]
    assert calls[0][3] == numba.types.boolean
    assert isinstance(calls[1][3], numba.types.NoneType)


def test_the_background_compile_has_the_types_of_a_traffic_job(monkeypatch):
    calls = engine_calls(monkeypatch)
    run_traffic(TrafficConfig(width=3, height=2, cycles=20, warmup=2), preset("tiny"))
    assert calls == [types_of(precompile.engine_arguments("traffic"))]


def test_the_workers_shares_are_every_variant_once_with_a_parallel_traffic_jobs_types(
    monkeypatch,
):
    """``compile_share`` of two workers (the suite's xdist set-up) covers every engine
    variant once between them; the parallel traffic variant has a 2-thread job's types."""
    compiled = []
    monkeypatch.setattr(precompile, "compile_once", lambda _k, args: compiled.append(args))
    precompile.compile_share(0, 2)
    precompile.compile_share(1, 2)
    assert len(compiled) == len(precompile.VARIANTS) == len(set(precompile.VARIANTS))
    calls = engine_calls(monkeypatch)
    run_traffic(TrafficConfig(width=3, height=2, cycles=20, warmup=2, threads=2), preset("tiny"))
    assert calls == [types_of(precompile.engine_arguments("traffic", parallel=True))]
    assert calls[0] in {types_of(args) for args in compiled}


def test_each_mode_passes_the_other_modes_arrays_as_none():
    """The engine compiles one mode's step, pruned by which of ``prog`` and ``tr`` is None
    (Numba prunes an ``is None`` test only where the argument is None)."""
    programs, traffic = (precompile.engine_arguments(mode) for mode in ("programs", "traffic"))
    assert programs[8] is None
    assert programs[7] is not None
    assert traffic[7] is None
    assert traffic[8] is not None
    assert programs[4] is None  # no router filters: their tests are pruned too


def test_program_and_traffic_kernels_share_one_compile_of_the_router_step():
    """``_fabric_step`` is a block (``fabric._engine_jit.engine_function``) with one signature
    for both modes: its ``traffic`` argument a plain bool (typed as a literal, True and False
    would be two signatures, each a compile of the router's step). Read from Numba's cache index,
    which holds what any process compiled (the engine of either mode may have loaded from it):
    of the signatures with this build's fabric and state types (a working tree's index may keep
    an older build's), and no router filters (a filtered run compiles one more, its filters an
    array), one."""
    for mode in ("programs", "traffic"):
        precompile.compile_engine(mode)
    fab, st = types_of(precompile.engine_arguments("programs"))[5:7]
    signatures = [key[0] for key in K._fabric_step._cache._cache_file._load_index()]
    ours = [sig for sig in signatures if sig[3:5] == (fab, st)]
    unfiltered = [sig for sig in ours if isinstance(sig[-1], numba.types.NoneType)]
    assert len(unfiltered) == 1
    assert unfiltered[0][-2] == numba.types.boolean


def test_a_serial_run_passes_no_thread_flag_so_the_parallel_kernel_is_not_compiled(monkeypatch):
    """``parallel`` is None in a serial run (Numba prunes the parallel branch of ``_cycle`` by
    its type), True in a parallel one."""
    calls = engine_calls(monkeypatch)
    send_recv("cpu")
    assert isinstance(calls[0][2], numba.types.NoneType)
    fab, st, prog, tr = (precompile.engine_arguments("programs")[i] for i in (5, 6, 7, 8))
    assert engine._kernel_args(fab, st, prog, tr, 0, 1, True)[2] is True


def test_no_background_compile_for_another_engine_or_a_cached_engine(monkeypatch):
    started = []
    spawn = lambda _path, argv, *_a, **_k: started.append(argv)  # noqa: E731
    monkeypatch.setattr(precompile.os, "posix_spawn", spawn)
    assert precompile.compile_in_background("programs", "cuda") is None
    monkeypatch.setattr(precompile, "_in_cache", lambda _dispatcher, _args: True)
    assert precompile.compile_in_background("programs") is None
    monkeypatch.setattr(precompile, "_in_cache", lambda _dispatcher, _args: False)
    precompile.compile_in_background("programs")
    precompile.compile_in_background("programs", half=True)
    helper = [sys.executable, "-P", "-m", "wafersim.fabric.precompile", "programs"]
    assert started == [helper, [*helper, "--half"]]


CACHED_MODULE = """
from numba import njit

@njit(cache=True)
def plus_one(x):
    return x + 1
"""


def test_the_cache_check_is_per_signature(tmp_path, monkeypatch):
    """An index that holds one specialization (int64) does not stand for another (float64):
    a traffic job's cached engine does not keep a program job's compile from starting."""
    (tmp_path / "cached_once.py").write_text(CACHED_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "cached_once", raising=False)
    import cached_once

    assert not precompile._in_cache(cached_once.plus_one, (1,))
    assert cached_once.plus_one(1) == 2
    assert precompile._in_cache(cached_once.plus_one, (1,))
    assert not precompile._in_cache(cached_once.plus_one, (1.0,))


def test_the_background_process_compiles_quietly_and_exits(tmp_path, monkeypatch):
    """The spawned process runs the helper (here with a mode it refuses, so that it exits at
    once), its output sent nowhere; the job does not wait for it."""
    monkeypatch.setattr(precompile, "_in_cache", lambda _dispatcher, _args: False)
    pid = precompile.compile_in_background("bogus")
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 1


@pytest.mark.parametrize("argv", [[], ["bogus"], ["programs", "traffic"], ["programs", "half"]])
def test_the_helper_names_its_modes_on_a_wrong_command_line(argv):
    done = subprocess.run([sys.executable, "-m", "wafersim.fabric.precompile", *argv],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 1
    usage = "usage: python -m wafersim.fabric.precompile {programs|traffic} [--half]"
    assert done.stderr.strip() == usage
