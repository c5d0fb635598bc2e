"""wafersim against published hardware measurements (the validation table).

Each row is a figure from ``docs/hardware_sources.md`` (its id there), the setup wafersim
reproduces, the published value, and wafersim's value recomputed here by the command shown,
with its tier and the error. A setup detail the source does not give is an ``assumption``
named in the row; no constant is chosen to fit a row. Rows are added as their setups become
known (most papers' setups are in bodies that could not be read yet: see the sources page).

    python benchmarks/bench_hardware.py   # prints the table, writes out/bench_hardware.json
    python benchmarks/bench_hardware.py --doc docs/validation.md   # and the page's table
    python benchmarks/bench_hardware.py --strategies weight_stream_chain weight_stream_tree
        # the training rows with the weight-streaming dataflow alone (a sensitivity)
"""

from __future__ import annotations

import argparse
import functools
import statistics
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from wafersim.compiler.model_file import load_model
from wafersim.compiler.plan import CompileOptions, compile_plan
from wafersim.kernels.grid import kernel_grid
from wafersim.kernels.stencil import RADIUS
from wafersim.kernels.tiers import estimate
from wafersim.memoryx.report import performance
from wafersim.memoryx.run import run
from wafersim.memoryx.run_config import run_config
from wafersim.wafer.atomic import write_json, write_text
from wafersim.wafer.presets import preset

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


def _training(model: str, spec: str, batch: int, seq: int,
              strategies: tuple[str, ...] | None = None) -> tuple[float, str]:  # fmt: skip
    """Samples/s of one weight-streaming training step at the analytic tier, and the
    command that gives it (``strategies``: the GEMM placements searched, None: all)."""
    options = CompileOptions(batch=batch, seq=seq, strategies=strategies)
    plan = compile_plan(load_model(ZOO / f"{model}.yaml"), preset(spec), options)
    named = f" --strategies {' '.join(strategies)}" if strategies else ""
    command = (f"wafersim compile examples/models/{model}.yaml --preset {spec} --batch {batch} "
               f"--seq {seq}{named}  (samples/s = batch / totals.seconds)")  # fmt: skip
    return batch / plan.totals.seconds, command


@dataclass(frozen=True)
class TrainingRun:
    """A published weight-streaming training throughput and the run that reproduces it."""

    published: Published
    model: str  # examples/models/<model>.yaml
    spec: str
    batch: int
    seq: int


TRAINING_RUNS = (
    TrainingRun(Published(  # ALCF run log, 2024 (release R_2.3.0)
        "A13", "LLaMA-7B training throughput", "one CS-2 (wse2), batch 99", 20.46,
        "samples/s", "sequence length 2048 (the log gives none); bf16/fp16 as fp16",
    ), "llama-7b", "wse2", 99, 2048),
    TrainingRun(Published(  # ALCF run log, 2025
        "A14", "Llama-3-8B training throughput", "one CS-3 (wse3), MSL 2048", 19.37,
        "samples/s", "batch 960, derived from the log (19.4 samples/s at 49.4 s a step; it "
        "prints no batch); the wse3 preset's clock and grid are assumptions",
    ), "llama3-8b", "wse3", 960, 2048),
    TrainingRun(Published(  # ALCF user guide's run log, 2023-11-29 (release R2.0.3)
        "A15", "BERT-Large training throughput", "one CS-2 (wse2), MSL 128, weight streaming",
        4047.95, "samples/s", "batch 1024 (1,024,000 samples in 1,000 steps, the log); MLM "
        "head on every position (the original predicts 15 %)",
    ), "bert-large", "wse2", 1024, 128),
    TrainingRun(Published(  # ALCF SC23 tutorial's run log, 2023-11-10 (release R1.9.2)
        "A17", "GPT-J 6B training throughput", "one CS-2 (wse2), MSL 2048", 19.80,
        "samples/s", "batch 66 (13,200 samples in 200 steps, the log); MSL 2048, the Model "
        "Zoo's GPT-J config (the log gives none); rotary embedding left out",
    ), "gptj-6b", "wse2", 66, 2048),
    TrainingRun(Published(  # ALCF AI-science training series' run log, 2024-03-14
        "A23", "GPT-2 small (MSL 2048) training throughput", "one CS-2 (wse2), MSL 2048",
        494.15, "samples/s", "batch 112 (the log); the Model Zoo's GPT-2 small at 2048 "
        "positions (12 layers, hidden 768, vocab 50257) has GPT-3 Small's shape, which "
        "wafersim runs",
    ), "gpt3-125m", "wse2", 112, 2048),
    TrainingRun(Published(  # ALCF user guide's run log, 2025-10-10 (release R2.5)
        "A18", "GPT-J 6B training throughput", "one CS-3 (wse3), MSL 2048", 44.75,
        "samples/s", "batch 120 (24,000 samples in 200 steps, the log); MSL 2048 as A17; the "
        "wse3 preset's clock and grid are assumptions",
    ), "gptj-6b", "wse3", 120, 2048),
    TrainingRun(Published(  # ALCF user guide's run log, 2025-10-13
        "A19", "Llama-2-7B training throughput", "one CS-3 (wse3), MSL 4096", 31.98,
        "samples/s", "batch 1024 (204,800 samples in 200 steps, the log); MSL 4096, the Model "
        "Zoo's Llama-2-7B config (the log gives none); the wse3 preset's clock and grid are "
        "assumptions",
    ), "llama2-7b", "wse3", 1024, 4096),
    TrainingRun(Published(  # ALCF user guide's run log, 2024-08-02 (release R2.3.0)
        "A20", "ESM-2 35M training throughput", "one CS-2 (wse2), MSL 1026", 585.88,
        "samples/s", "batch 2048 (819,200 samples in 400 steps, the log); MSL 1026, the public "
        "Model Zoo ESM-2 config's (ALCF runs a modified copy); rotary embedding left out, MLM "
        "head on every position",
    ), "esm2-35m", "wse2", 2048, 1026),
    TrainingRun(Published(  # ALCF user guide's run log, 2025-10-10 (release R2.5)
        "A21", "ESM-2 35M training throughput", "one CS-3 (wse3), MSL 1026", 989.11,
        "samples/s", "as A20; the wse3 preset's clock and grid are assumptions",
    ), "esm2-35m", "wse3", 2048, 1026),
)  # fmt: skip


def training_row(run: TrainingRun, strategies: tuple[str, ...] | None = None) -> Row:
    value, command = _training(run.model, run.spec, run.batch, run.seq, strategies)
    return Row(run.published, value, "analytic", command)


@dataclass(frozen=True)
class ClusterRun:
    """A published training throughput of several systems behind SwarmX (data parallel), and
    the timing-only ``wafersim run`` that reproduces it."""

    published: Published
    model: str
    spec: str
    batch: int  # global, split evenly over the wafers
    seq: int
    wafers: int
    vocab: int  # the synthetic tokens' (timing only)


CLUSTER_RUNS = (
    ClusterRun(Published(  # ALCF user guide's run log, 2023-11-29 (release R2.0.3)
        "A22", "GPT-J 6B training throughput", "two CS-2 (wse2) behind SwarmX, MSL 2048",
        43.70, "samples/s", "batch 120 (24,000 samples in 200 steps, the log), 60 a wafer; "
        "two systems as the guide said when the log was added (a 2025 edit says one, same "
        "log); MSL 2048 as A17",
    ), "gptj-6b", "wse2", 120, 2048, 2, 50400),
)  # fmt: skip


def cluster_row(run_: ClusterRun, strategies: tuple[str, ...] | None = None) -> Row:
    """Samples/s of a timing-only run at the analytic tier: each wafer's plan, its MemoryX
    stream simulated tile by tile, the SwarmX broadcast and reduction."""
    per_wafer = run_.batch // run_.wafers
    table = {"model": str(ZOO / f"{run_.model}.yaml"), "wafer": {"preset": run_.spec},
             "data": {"name": "synthetic_tokens", "vocab": run_.vocab, "seq": run_.seq,
                      "samples": 1},
             "batch": per_wafer, "seq": run_.seq, "dtype": "fp16", "optimizer": {"name": "adamw"},
             "steps": 2, "tier": "analytic", "swarmx": {"wafers": run_.wafers},
             "strategies": None if strategies is None else list(strategies)}  # fmt: skip
    with tempfile.TemporaryDirectory() as out:
        value = performance(run(run_config(table, ZOO), Path(out)))["samples_per_sec"]
    command = (f"wafersim run RUN.yaml (model: examples/models/{run_.model}.yaml, wafer: "
               f"{{preset: {run_.spec}}}, batch: {per_wafer}, seq: {run_.seq}, dtype: fp16, "
               f"tier: analytic, swarmx: {{wafers: {run_.wafers}}}"
               f"{f', strategies: {list(strategies)}' if strategies else ''}; data "
               "synthetic_tokens)  "
               "(samples_per_sec)")  # fmt: skip
    return Row(run_.published, value, "analytic", command)


STENCIL_Z = 600  # assumption: the paper's z extent was not read (up to 1,360 cells fit in
# 48 KB, but not 1,150-1,202: the published program's chunk rule)


def stencil25_flops(strategies: tuple[str, ...] | None = None) -> Row:
    """A2: the 25-point star stencil on a whole WSE-2 (Jacquelin et al., SC22); a kernel,
    no GEMM placement (``strategies`` does not apply)."""
    published = Published(
        "A2", "25-point stencil FLOP rate", "WSE-2, weak scaling to the whole wafer", 503e12,
        "FLOP/s", f"the wse2 grid (750 x 994) with z = {STENCIL_Z} a PE (the paper's extent "
        "was not read); one wave-equation step as the SDK's 25-point program takes it (two "
        "chunks of 300: chunk buffer and its pass, z pass, update); wafersim's FLOP count for "
        "the stencil (49 a point; the update's 4 not counted); fp32",
    )  # fmt: skip
    spec = preset("wse2")
    grid = kernel_grid(spec.logical_height_pes, spec.logical_width_pes)
    shape = {"n": STENCIL_Z}
    est = estimate("stencil", "star25", shape, grid, spec, tier="analytic")
    points = grid.rows * grid.cols * STENCIL_Z
    flops = points * (2 * 6 * RADIUS["star25"] + 1)
    command = (f"wafersim kernel stencil --algo star25 --tier analytic --grid wafer "
               f"--n {STENCIL_Z}  (FLOP/s = 49 x PEs x n / seconds)")  # fmt: skip
    return Row(published, flops / est.seconds, "analytic", command)


FFT_N = 512  # [Q] the paper's 512^3 on a 512 x 512 subgrid


def fft3d_seconds(strategies: tuple[str, ...] | None = None) -> Row:
    """A3: a 3D FFT of 512^3 complex fp32 values on 512 x 512 PEs of a CS-2 (Orenes-Vera et
    al., ICS 2023); a kernel, no GEMM placement (``strategies`` does not apply)."""
    published = Published(
        "A3", "3D FFT 512^3 time", "CS-2, 512 x 512 PEs, fp32", 959e-6, "s",
        "the output back in the input's layout, as the vendor's run.py reads it (four line "
        "all-to-alls: three cannot restore it); the all-to-alls as express relays, a relay "
        "every 2 PEs and the routers between handing out blocks with counter filters (the "
        "vendor's 3D transpose is not public; relays at every PE: +62 %); the passes' scalar "
        "loops charged as Cannon's loop iteration (the vendor's does more scalar work)",
    )  # fmt: skip
    spec = preset("wse2")
    grid = kernel_grid(FFT_N, FFT_N)
    est = estimate("fft", "express", {"n": FFT_N}, grid, spec, tier="analytic")
    command = (f"wafersim kernel fft --algo express --n {FFT_N} --grid {FFT_N}x{FFT_N} "
               "--tier analytic  (seconds)")  # fmt: skip
    return Row(published, est.seconds, "analytic", command)


ROWS: tuple[Callable[[], Row], ...] = (
    *(functools.partial(training_row, run) for run in TRAINING_RUNS),
    *(functools.partial(cluster_row, run) for run in CLUSTER_RUNS),
    stencil25_flops,
    fft3d_seconds,
)


START, END = "<!-- table: written by benchmarks/bench_hardware.py -->", "<!-- end table -->"


HEADER = ("| id | published figure | setup | published | wafersim | error | tier | command "
          "| assumed |", "|---|---|---|---|---|---|---|---|---|")  # fmt: skip


def table_line(row: Row) -> str:
    """One row as the validation page shows it."""
    p = row.published
    return (f"| {p.source_id} | {p.what} | {p.setup} | {p.value:.4g} {p.unit} | "
            f"{row.wafersim:.4g} {p.unit} | {row.error:+.1%} | {row.tier} | "
            f"`{row.command}` | {p.assumptions} |")  # fmt: skip


def summary_line(errors: list[float]) -> str:
    """The median and largest |error| of the rows, from their errors as the page shows them
    (to 0.1 %), so that the page's own column gives the same line."""
    shown = [round(abs(error), 3) for error in errors]
    return (f"{len(shown)} rows; median |error| {statistics.median(shown):.1%}, "
            f"largest {max(shown):.1%}.")  # fmt: skip


def markdown_table(rows: list[Row]) -> str:
    """The rows as the validation page shows them, with their median and largest error."""
    lines = [*HEADER, *(table_line(row) for row in rows), ""]
    return "\n".join([*lines, summary_line([row.error for row in rows])])


def write_table(path: Path, rows: list[Row]) -> None:
    """Put the table between the page's markers (atomically)."""
    text = path.read_text()
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    write_text(path, f"{head}{START}\n{markdown_table(rows)}\n{END}{tail}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="out/bench_hardware.json")
    parser.add_argument("--doc", help="a page whose table between the markers to rewrite")
    parser.add_argument("--strategies", nargs="+", metavar="NAME",
                        help="GEMM placements the training rows search (default: all), e.g. "
                        "weight_stream_chain weight_stream_tree; not with --doc")  # fmt: skip
    args = parser.parse_args()
    if args.doc and args.strategies:
        parser.error("--strategies: the page's table searches every strategy (drop --doc)")
    strategies = tuple(args.strategies) if args.strategies else None
    rows = [make(strategies) for make in ROWS]
    if args.doc:
        write_table(Path(args.doc), rows)
    print(f"{'id':4} {'what':32} {'published':>19} {'wafersim':>19} {'error':>7} {'tier':8}")
    for row in rows:
        p = row.published
        print(f"{p.source_id:4} {p.what:32} {p.value:>9.4g} {p.unit:9} {row.wafersim:>9.4g} "
              f"{p.unit:9} {row.error:+7.1%} {row.tier:8}")  # fmt: skip
        print(f"     setup: {p.setup}; assumed: {p.assumptions}\n     command: {row.command}")
    print(summary_line([row.error for row in rows]))
    summary = [{**asdict(row.published), "wafersim": row.wafersim, "tier": row.tier,
                "command": row.command, "error": row.error} for row in rows]  # fmt: skip
    write_json(Path(args.out), {"rows": summary})
    print(f"saved {args.out}")


if __name__ == "__main__":
    main()
