"""docs/validation.md's table is what benchmarks/bench_hardware.py computes now: a change
to a cost model that moves a hardware comparison shows here, and the page is rewritten by
the benchmark (``--doc docs/validation.md``), never by hand. Each row is its own test, so
that pytest's workers share the rows' compiles."""

import importlib.util
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # runs the hardware benchmarks behind docs/validation.md

ROOT = Path(__file__).resolve().parents[1]
STALE = "docs/validation.md is stale: python benchmarks/bench_hardware.py --doc docs/validation.md"


def _bench():
    spec = importlib.util.spec_from_file_location("bench_hardware", ROOT / "benchmarks" /
                                                  "bench_hardware.py")  # fmt: skip
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


BENCH = _bench()


def page_table() -> list[str]:
    """The lines between the page's markers."""
    page = (ROOT / "docs" / "validation.md").read_text()
    return page.split(BENCH.START, 1)[1].split(BENCH.END, 1)[0].strip().split("\n")


@pytest.mark.parametrize("index", range(len(BENCH.ROWS)))
def test_each_row_of_the_validation_table_is_the_benchmarks(index):
    lines = page_table()
    assert lines[len(BENCH.HEADER) + index] == BENCH.table_line(BENCH.ROWS[index]()), STALE


def test_the_table_has_every_row_and_their_summary():
    lines = page_table()
    header, rows, summary = len(BENCH.HEADER), len(BENCH.ROWS), lines[-1]
    assert tuple(lines[:header]) == BENCH.HEADER, STALE
    assert len(lines) == header + rows + 2, STALE
    assert lines[-2] == "", STALE
    errors = [float(line.split(" | ")[5].rstrip("%")) / 100 for line in lines[header:-2]]
    assert summary == BENCH.summary_line(errors), STALE
