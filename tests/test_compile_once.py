"""fabric.compile_once: processes that start together compile a cached kernel once between
them; the others load it from Numba's cache (issue 28: pytest-xdist and Dask workers)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KERNEL = """\
import numba

@numba.njit(cache=True)
def kernel(x):
    total = 0.0
    for i in range(x.size):
        total += x[i] * x[i]
    return total
"""
WORKER = """\
import json, sys, time
from pathlib import Path
import numpy as np
from fabric.compile_once import compile_once
from probe_kernel import kernel
go = Path(sys.argv[1])
while not go.exists():  # start the compile together with the other worker
    time.sleep(0.01)
compile_once(kernel, (np.ones(4),))
print(json.dumps({"hits": sum(kernel.stats.cache_hits.values()),
                  "misses": sum(kernel.stats.cache_misses.values())}))
"""


def test_two_processes_starting_together_compile_once(tmp_path):
    (tmp_path / "probe_kernel.py").write_text(KERNEL)
    (tmp_path / "worker.py").write_text(textwrap.dedent(WORKER))
    go = tmp_path / "go"
    env = os.environ | {"PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}",
                        "NUMBA_CACHE_DIR": str(tmp_path / "cache")}  # fmt: skip
    workers = [
        subprocess.Popen(
            [sys.executable, str(tmp_path / "worker.py"), str(go)],
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for _ in range(2)
    ]
    time.sleep(3)  # both have imported numba and wait on the go file
    go.touch()
    outcomes = sorted((json.loads(w.communicate(timeout=120)[0]) for w in workers),
                      key=lambda o: o["misses"])  # fmt: skip
    assert outcomes == [{"hits": 1, "misses": 0}, {"hits": 0, "misses": 1}]
