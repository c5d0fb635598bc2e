"""``wafersim run --validate-only`` and ``--compile-only``: a run's config checked, and its
plans made, without training or timing anything.

- validate-only: every check a run makes before it simulates is made, by the same functions
  (:func:`memoryx.run.validate_config`, :func:`memoryx.run.validate_plan`): the config, the
  model and its layer graph, the optimizer, the initial weights' spread, the data set (its
  sizes against batch x wafers, then its files read whole), a resume from the default
  folder, wafer 0's defect map, the activations' fit, the MemoryX buffer and tiles, and the
  stream simulation's size; wafer 0's plan is made in memory (two seconds or less, even for
  GPT-3 175B): every layer's passes are listed with their shape and the kernel chosen for
  each. Nothing is written. Other wafers' plans (their own defect maps) are not made.
- compile-only: the checks that need no plan come first, then every wafer's plan is made
  (each with its own defect map, each checked before the next) and saved under
  ``DIR/compile`` as a full run would, beside the run's resolved config (``DIR/run.yaml``);
  the same list, and the plan files written.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wafersim.compiler.model_file import ModelFile, load_model
from wafersim.compiler.plan import check_activations_fit, compile_cached, plan_path
from wafersim.compiler.plan_records import GemmPlacement, Plan, to_json
from wafersim.memoryx.data import load_dataset
from wafersim.memoryx.run import (
    compile_folder,
    compile_options,
    compile_wafers,
    count_wafers,
    logical_grid,
    validate_config,
    validate_plan,
)
from wafersim.memoryx.run_config import RunConfig, write_config

MODES = ("validate-only", "compile-only")


@dataclass(frozen=True)
class PassRow:
    """One pass of one layer: its shape and the kernel the compiler chose for it."""

    layer: str
    op: str
    pass_name: str
    shape: dict[str, int]  # GEMMs: m, k, n; element-wise work: tokens, features
    kernel: str  # the GEMM algorithm or the vector kernel
    width_pes: int  # PEs the pass spans along the wafer's x axis
    height_pes: int  # and along its y axis
    cycles: int


@dataclass(frozen=True)
class ModeResult:
    """What ``--validate-only`` or ``--compile-only`` reports (JSON: :meth:`to_dict`)."""

    mode: str
    model: str
    spec: str
    tier: str
    wafers: int
    passes: list[PassRow]
    step_cycles: int  # wafer 0's plan
    plans: list[str]  # compile-only: the files written (each wafer's plan, the config)
    compile_time_s: float

    def to_dict(self) -> dict[str, Any]:
        return to_json(self)


def run_mode(mode: str, config: RunConfig, out_dir: Path) -> ModeResult:
    """Validate ``config`` or compile its plans into ``out_dir`` (see the module's text)."""
    start = time.perf_counter()
    validate_config(config, out_dir)
    model = load_model(config.model_path)
    if mode == "validate-only":
        plan = validated_plan(config, model)
        saved: list[str] = []
    else:
        wafers = compile_wafers(config, out_dir)
        plan = wafers[0].plan
        saved = [str(plan_path(compile_folder(out_dir, w), plan.model)) for w in range(len(wafers))]
        saved.append(str(write_config(config, out_dir)))
    return ModeResult(mode, model.graph.name, config.spec.name, config.tier,
                      count_wafers(config), pass_rows(plan), plan.totals.cycles, saved,
                      time.perf_counter() - start)  # fmt: skip


def validated_plan(config: RunConfig, model: ModelFile) -> Plan:
    """Wafer 0's plan, made in memory, with the checks a run makes of it and of its data set
    before it simulates."""
    options = compile_options(config)
    logical = logical_grid(config, 0)
    check_activations_fit(model, config.spec, options, logical)
    plan, _ = compile_cached(config.model_path, config.spec, options, None, logical)
    validate_plan(config, plan)
    load_dataset(config.data, config.seed)  # the files whole, as the run reads them
    return plan


def pass_rows(plan: Plan) -> list[PassRow]:
    rows = []
    for layer, name, placed in plan.placements():
        gemm = isinstance(placed, GemmPlacement)
        shape = placed.gemm.shape().as_dict() if gemm else dict(placed.shape)
        rows.append(PassRow(layer.name, layer.op, name, shape, placed.algorithm,
                            placed.width_pes, placed.height_pes, placed.cycles))  # fmt: skip
    return rows


def mode_text(r: dict[str, Any]) -> str:
    lines = [f"{'layer':24} {'op':10} {'pass':16} {'shape':30} {'kernel':18} {'W x H':>9} "
             f"{'cycles':>11}"]  # fmt: skip
    for p in r["passes"]:
        shape = " ".join(f"{k}={v}" for k, v in p["shape"].items())
        grid = f"{p['width_pes']}x{p['height_pes']}"
        lines.append(f"{p['layer'][:24]:24} {p['op'][:10]:10} {p['pass_name'][:16]:16} "
                     f"{shape[:30]:30} {p['kernel'][:18]:18} {grid:>9} "
                     f"{p['cycles']:>11}")  # fmt: skip
    what = "valid" if r["mode"] == "validate-only" else f"compiled: {', '.join(r['plans'])}"
    lines.append(f"{r['model']} on {r['spec']}, {r['wafers']} wafer(s), tier {r['tier']}: "
                 f"{what}; wafer 0's step {r['step_cycles']:,} cycles "
                 f"({r['compile_time_s']:.2f} s)")  # fmt: skip
    return "\n".join(lines)
