"""The suite's set-up: with pytest-xdist, the workers compile the CPU engine's specializations
between them before their first test (``fabric.precompile.compile_share``).

On a fresh clone every worker soon needs the engine, and its compile lock let one process
compile at a time while the others waited (issue 28). Each worker now compiles its share at
the same time as the others, then loads the rest from Numba's cache; once cached, the share
is a load (about a second).
"""

import os


def pytest_sessionstart(session):
    worker = os.environ.get("PYTEST_XDIST_WORKER")  # gw0, gw1, ... (None: no xdist)
    if worker is None:
        return
    from fabric.precompile import compile_share

    compile_share(int(worker.removeprefix("gw")), int(os.environ["PYTEST_XDIST_WORKER_COUNT"]))
