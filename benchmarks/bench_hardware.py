"""wafersim against published hardware measurements (issue 26's validation table).

Each row is a figure from ``docs/hardware_sources.md`` (its id there), the setup wafersim
reproduces, the published value, and wafersim's value recomputed here by the command shown,
with its tier and the error. A setup detail the source does not give is an ``assumption``
named in the row; no constant is chosen to fit a row. Rows are added as their setups become
known (most papers' setups are in bodies that could not be read yet: see the sources page).

    python benchmarks/bench_hardware.py   # prints the table, writes out/bench_hardware.json
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from compiler.model_file import load_model
from compiler.plan import CompileOptions, compile_plan
from wafer.atomic import write_json
from wafer.presets import preset

ZOO = Path(__file__).resolve().parents[1] / "examples" / "models"


@dataclass(frozen=True)
class Published:
    """A measurement on real hardware, as its source reports it."""

    source_id: str  # the entry in docs/hardware_sources.md
    what: str
    setup: str
    value: float
    unit: str
    assumptions: str  # what the source leaves out and the row assumes


@dataclass(frozen=True)
class Row:
    published: Published
    wafersim: float
    tier: str
    command: str

    @property
    def error(self) -> float:
        return self.wafersim / self.published.value - 1


def llama7b_training() -> Row:
    """A13: LLaMA-7B weight-streaming training on one CS-2, batch 99 (ALCF run log)."""
    published = Published(
        "A13", "LLaMA-7B training throughput", "one CS-2 (wse2), batch 99", 20.46,
        "samples/s", "sequence length 2048 (the log gives none); bf16/fp16 as fp16",
    )  # fmt: skip
    batch, seq = 99, 2048
    plan = compile_plan(load_model(ZOO / "llama-7b.yaml"), preset("wse2"),
                        CompileOptions(batch=batch, seq=seq))  # fmt: skip
    command = (f"wafersim compile examples/models/llama-7b.yaml --preset wse2 --batch {batch} "
               f"--seq {seq}  (samples/s = batch / totals.seconds)")  # fmt: skip
    return Row(published, batch / plan.totals.seconds, "analytic", command)


ROWS: tuple[Callable[[], Row], ...] = (llama7b_training,)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="out/bench_hardware.json")
    args = parser.parse_args()
    rows = [make() for make in ROWS]
    print(f"{'id':4} {'what':32} {'published':>14} {'wafersim':>14} {'error':>7} {'tier':8}")
    for row in rows:
        p = row.published
        print(f"{p.source_id:4} {p.what:32} {p.value:>9.4g} {p.unit:4} {row.wafersim:>9.4g} "
              f"{p.unit:4} {row.error:+7.1%} {row.tier:8}")  # fmt: skip
        print(f"     setup: {p.setup}; assumed: {p.assumptions}\n     command: {row.command}")
    errors = [abs(row.error) for row in rows]
    print(
        f"{len(rows)} rows; median |error| {statistics.median(errors):.1%}, max {max(errors):.1%}"
    )
    summary = [{**asdict(row.published), "wafersim": row.wafersim, "tier": row.tier,
                "command": row.command, "error": row.error} for row in rows]  # fmt: skip
    write_json(Path(args.out), {"rows": summary})
    print(f"saved {args.out}")


if __name__ == "__main__":
    main()
