"""The suite's set-up: with pytest-xdist, the workers compile the CPU engine's specializations
between them before their first test (``fabric.precompile.compile_share``).

On a fresh clone every worker soon needs the engine, and its compile lock let one process
compile at a time while the others waited. Each worker now compiles its share at
the same time as the others, then loads the rest from Numba's cache. Only where the collected
tests import the engine (a selection that does not skips it); once cached, a share is a load.
"""

import sys


def pytest_collection_finish(session):
    worker = getattr(session.config, "workerinput", None)  # None: no xdist
    if worker is None or "wafersim.fabric.engine" not in sys.modules:
        return
    from wafersim.fabric.precompile import compile_share

    compile_share(int(worker["workerid"].removeprefix("gw")), worker["workercount"])
