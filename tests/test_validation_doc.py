"""docs/validation.md's table is what benchmarks/bench_hardware.py computes now: a change
to a cost model that moves a hardware comparison shows here, and the page is rewritten by
the benchmark (``--doc docs/validation.md``), never by hand."""

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _bench():
    spec = importlib.util.spec_from_file_location("bench_hardware", ROOT / "benchmarks" /
                                                  "bench_hardware.py")  # fmt: skip
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_the_validation_table_is_the_benchmarks():
    bench = _bench()
    rows = [make() for make in bench.ROWS]
    page = (ROOT / "docs" / "validation.md").read_text()
    between = page.split(bench.START, 1)[1].split(bench.END, 1)[0].strip()
    assert between == bench.markdown_table(rows), (
        "docs/validation.md is stale: run python benchmarks/bench_hardware.py "
        "--doc docs/validation.md"
    )
