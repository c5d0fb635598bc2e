"""fabric.compile_once: processes that start together compile a cached function once between
them; the others load it from Numba's cache (pytest-xdist and Dask workers start together)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numba
import numpy as np
from wafersim.fabric.compile_once import _machine_lock, signature_key

ROOT = Path(__file__).resolve().parents[1]
PROBE = """\
import numba

@numba.njit(cache=True)
def square(v):
    return v * v

@numba.njit(cache=True)
def sum_squares(x):
    total = 0.0
    for i in range(x.size):
        total += square(x[i])
    return total
"""
WORKER = """\
import json, os, sys, time
from pathlib import Path
import numpy as np
from numba.core.caching import IndexDataCacheFile
from wafersim.fabric.compile_once import compile_once
from probe_jit import square, sum_squares
if os.environ.get("SLOW_INDEX"):  # widen the window between reading and writing an index
    load = IndexDataCacheFile._load_index
    IndexDataCacheFile._load_index = lambda self: (load(self), time.sleep(1.0))[0]
go = Path(sys.argv[1])
while not go.exists():  # start the compile together with the other worker
    time.sleep(0.01)
for dtype in sys.argv[2:] or ["float64"]:
    compile_once(sum_squares, (np.ones(4, dtype),))
    compile_once(square, (np.ones(1, dtype)[0],))
print(json.dumps({"hits": sum(sum_squares.stats.cache_hits.values()),
                  "misses": sum(sum_squares.stats.cache_misses.values()),
                  "inner_hits": sum(square.stats.cache_hits.values())}))
"""


def run_workers(tmp_path, dtypes: list[list[str]], wait: float = 3.0, **env) -> list[dict]:
    """Start one worker per entry of ``dtypes`` (the argument types it compiles, in order)
    at the same moment; their outcomes: cache hits and misses of ``sum_squares``, and the hits of
    the function it calls."""
    (tmp_path / "probe_jit.py").write_text(PROBE)
    (tmp_path / "worker.py").write_text(textwrap.dedent(WORKER))
    go = tmp_path / f"go{len(list(tmp_path.glob('go*')))}"
    env = os.environ | {"PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}",
                        "NUMBA_CACHE_DIR": str(tmp_path / "cache")} | env  # fmt: skip
    workers = [
        subprocess.Popen(
            [sys.executable, str(tmp_path / "worker.py"), str(go), *types],
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for types in dtypes
    ]
    time.sleep(wait)  # all have imported numba and wait on the go file
    go.touch()
    return [json.loads(w.communicate(timeout=60)[0]) for w in workers]


def test_two_processes_starting_together_compile_once(tmp_path):
    outcomes = sorted(
        ({"hits": o["hits"], "misses": o["misses"]} for o in run_workers(tmp_path, [[], []])),
        key=lambda o: o["misses"],
    )
    assert outcomes == [{"hits": 1, "misses": 0}, {"hits": 0, "misses": 1}]


def test_another_signature_compiles_while_one_is_being_compiled(tmp_path, monkeypatch):
    """The lock is per signature: while a process holds the float64 one (compiling), another
    compiles the int64 specialization of the same function; a later process loads each."""
    (tmp_path / "probe_jit.py").write_text(PROBE)
    monkeypatch.syspath_prepend(str(tmp_path))
    from probe_jit import sum_squares  # the same function, here not compiled

    float64 = (numba.typeof(np.ones(4)),)
    with _machine_lock(signature_key(sum_squares, float64)):
        (other,) = run_workers(tmp_path, [["int64"]], wait=0.5)
    assert (other["hits"], other["misses"]) == (0, 1)
    (first,) = run_workers(tmp_path, [["float64"]], wait=0.5)
    assert (first["hits"], first["misses"]) == (0, 1)
    (later,) = run_workers(tmp_path, [["float64", "int64"]], wait=0.5)
    assert (later["hits"], later["misses"]) == (2, 0)


def test_two_processes_saving_at_once_keep_every_entry_of_the_cache(tmp_path):
    """Two processes compile two specializations of a function (and of the one it calls) at
    the same time, each reading the cache's index slowly: every save holds the index's lock,
    so neither drops the other's entry nor takes its data file, and a later process loads all
    four (Numba's own save takes no lock: without it one entry of each index was lost)."""
    run_workers(tmp_path, [["float64"], ["int64"]], wait=3.0, SLOW_INDEX="1")
    (later,) = run_workers(tmp_path, [["float64", "int64"]], wait=0.5)
    assert (later["hits"], later["misses"], later["inner_hits"]) == (2, 0, 2)
