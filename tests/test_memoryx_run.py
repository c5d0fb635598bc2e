"""``wafersim run``: functional training on the cycle engine against numpy, outputs, resume
after a kill, checkpoint errors and bad configs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import h5py
import numpy as np
import pytest
import yaml
from wafersim.compiler.model_file import load_model
from wafersim.fabric.engine import REASON_NAMES
from wafersim.memoryx.checkpoint import load_checkpoint
from wafersim.memoryx.data import load_dataset
from wafersim.memoryx.functional import numpy_matmul, weight_shapes
from wafersim.memoryx.optimizer import make_optimizer
from wafersim.memoryx.report import performance, write_outputs
from wafersim.memoryx.run import run
from wafersim.memoryx.run_config import load_run_config
from wafersim.memoryx.sparsity import apply_masks, prune_masks
from wafersim.memoryx.store import WeightStore
from wafersim.memoryx.training import Trainer, checkpoints
from wafersim.wafer.errors import ConfigError

from wafersim.cli import main
from wafersim.plots.run import write_plots

ROOT = Path(__file__).resolve().parents[1]
MODEL = ROOT / "examples" / "models" / "fc-digits.yaml"
SMALL = {
    "model": str(MODEL),
    "wafer": {
        "preset": "tiny",
        "defects": {"model": "poisson", "pe_defect_prob": 0.02, "seed": 3, "repair": "none"},
    },
    "data": {"name": "digits"},
    "batch": 16,
    "dtype": "fp32",
    "optimizer": {"name": "adamw", "lr": 0.003},
    "steps": 3,
    "seed": 5,
    "init_std": 0.2,
    "checkpoint_every": 1,
    "eval_every": 3,
}


def write_config(folder: Path, **changes) -> Path:
    path = folder / "run.yaml"
    path.write_text(yaml.safe_dump({**SMALL, **changes}))
    return path


def reference_losses(config: dict, steps: int, sparsity=None) -> list[float]:
    """The same training in numpy: same initial weights, pruning, batches and optimizer."""
    graph = load_model(MODEL).graph
    data = load_dataset(config["data"], config["seed"])
    store = WeightStore.materialised(weight_shapes(graph), config["seed"], init_std=0.2)
    masks = prune_masks(store, sparsity)
    apply_masks(store, masks)
    optimizer = make_optimizer(**config["optimizer"])
    trainer = Trainer(
        graph, data, optimizer, [numpy_matmul], config["batch"], config["seed"], 4, masks
    )
    return [trainer.step(store, step) for step in range(steps)]


@pytest.mark.slow
def test_engine_training_matches_numpy_reference(tmp_path):
    """The loss curve of a run on the cycle engine equals numpy's to float tolerance."""
    config = load_run_config(write_config(tmp_path))
    result = run(config, tmp_path / "out")
    assert result.wafers[0].logical.unrepaired_pes > 0  # the wafer has holes
    expected = reference_losses(SMALL, 3)
    np.testing.assert_allclose(result.history.losses, expected, rtol=1e-5)
    assert result.history.losses[-1] < result.history.losses[0]


def test_sparse_streaming_is_exact_and_saves(tmp_path):
    """Pruned weights stream compressed and skip work; losses still equal numpy's."""
    sparsity = {"density": 0.05}
    out = tmp_path / "out"
    config = load_run_config(write_config(tmp_path, sparsity=sparsity, steps=2))
    result = run(config, out)
    np.testing.assert_allclose(
        result.history.losses, reference_losses(SMALL, 2, sparsity), rtol=1e-5
    )
    perf = write_outputs(result, out)
    assert 0 < perf["sparsity"]["streamed_fraction"] <= 0.2  # indices included
    assert perf["sparsity"]["bytes_saved"] > 0
    assert perf["sparsity"]["cycles_saved"] > 0
    store = load_checkpoint(checkpoints(out)[-1]).store
    kept = np.count_nonzero(store.get("fc2")) / store.numel("fc2")
    assert kept == pytest.approx(0.05, abs=1e-3)  # pruned weights stayed zero


@pytest.mark.slow
def test_outputs_written(tmp_path):
    """performance.json holds the documented fields; trace.h5 and the PNGs exist."""
    out = tmp_path / "out"
    config = load_run_config(write_config(tmp_path, steps=2, eval_every=1))
    perf = write_outputs(run(config, out), out, plots=write_plots)
    saved = json.loads((out / "performance" / "performance.json").read_text())
    for key in ("compile_time_s", "programming_time_s", "est_samples_per_sec", "samples_per_sec",
                "wafer_samples_per_sec", "total_samples", "total_time_s", "sim_wall_s",
                "stall_fraction", "suspected_input_bottleneck", "edge_utilization",
                "memoryx_bytes_in", "memoryx_bytes_out", "layers"):  # fmt: skip
        assert key in saved, key
    assert saved["samples_per_sec"] == pytest.approx(
        min(saved["wafer_samples_per_sec"], saved["input_samples_per_s"])
    )
    assert saved["samples_per_sec"] * saved["total_time_s"] == pytest.approx(32)
    assert saved["programming_time_s"] > 0
    assert saved["weights_kept_for_backward"] == ["fc3", "fc3.bias"]  # the output layer's
    assert yaml.safe_load((out / "run.yaml").read_text()) == config.raw
    assert list((out / "compile" / "wafer_0").glob("*.plan.json"))
    assert saved["total_samples"] == 2 * 16
    assert 0.0 <= saved["stall_fraction"] <= 1.0
    assert perf["memoryx_bytes_in"] > 0
    assert perf["memoryx_bytes_out"] > 0
    first = saved["layers"][0]
    assert {"compute_cycles", "stream_in_cycles", "stall_cycles"} <= set(first)
    assert saved["measured_cycles"]["fc1/forward"] > 0
    with h5py.File(out / "trace.h5") as f:
        assert f["loss"].shape == (2,)
        assert f["wafer_0/times_cycles"].shape[0] == 2
        assert f["pe_busy_cycles"][()].sum() > 0
        reasons = f["pe_cycle_reasons"][()]  # (H, W, 5), summed over every GEMM run
    assert (out / "timeline.png").stat().st_size > 0
    assert (out / "wafer.png").stat().st_size > 0
    by_reason = saved["pe_cycles_by_reason"]
    totals = dict(zip(REASON_NAMES, reasons.sum(axis=(0, 1)).tolist(), strict=True))
    assert by_reason == totals
    assert by_reason["computing"] > 0
    assert by_reason["waiting_sram"] == 0  # not modelled
    assert (out / "wafer_computing.png").stat().st_size > 0


@pytest.mark.slow
def test_resume_gives_the_uninterrupted_weights(tmp_path):
    """A run stopped after a checkpoint and run again ends bit-identical to one run."""
    whole = load_run_config(write_config(tmp_path, steps=4))
    run(whole, tmp_path / "whole")
    part = tmp_path / "parts"
    run(whole, part)
    checkpoints(part)[-1].unlink()  # the step-4 checkpoint: resume from the one before
    result = run(whole, part)
    assert_same_weights(tmp_path / "whole", part)
    assert len(result.history.losses) == 4


@pytest.mark.slow
def test_a_resumed_run_trains_on_to_more_steps(tmp_path):
    """``steps=2`` then ``steps=4`` on one folder (the checkpoint interval changed too) ends
    with the weights, losses and accuracy history of one ``steps=4`` run: the
    evaluation at the first part's end, off the interval, is not kept."""
    path = write_config(tmp_path, steps=4)
    whole = run(load_run_config(path), tmp_path / "whole")
    run(load_run_config(path, {"steps": 2}), tmp_path / "on")
    on = run(load_run_config(path, {"checkpoint_every": 1, "keep_checkpoints": 3}),
             tmp_path / "on")  # fmt: skip
    assert_same_weights(tmp_path / "whole", tmp_path / "on")
    assert on.history.losses == whole.history.losses
    assert on.history.accuracy == whole.history.accuracy  # the first part's end dropped
    assert [p.name for p in checkpoints(tmp_path / "on")] == [f"step_{s:08d}.h5" for s in (2, 3, 4)]


def test_a_resume_to_fewer_steps_than_saved_is_refused(tmp_path):
    path = write_config(tmp_path, steps=2)
    run(load_run_config(path), tmp_path / "out")
    with pytest.raises(ConfigError, match="steps=1: .* checkpoint of step 2"):
        run(load_run_config(path, {"steps": 1}), tmp_path / "out")


def test_each_run_config_has_its_own_default_folder(tmp_path):
    """Points of a sweep over steps do not share a folder (and a checkpoint of more steps);
    training on names its folder with --out."""
    from wafersim.commands.run import default_out

    path = write_config(tmp_path, steps=2)
    folders = {default_out(str(path), load_run_config(path, c).run_digest)
               for c in ({}, {"steps": 9}, {"eval_every": 1})}  # fmt: skip
    assert len(folders) == 3


def test_a_refused_resume_deletes_and_overwrites_nothing(tmp_path):
    """Refused for fewer steps, or for another training: every checkpoint and the folder's
    plan stay as they were."""
    path = write_config(tmp_path, steps=2, checkpoint_every=1)
    out = tmp_path / "out"
    run(load_run_config(path), out)
    kept = {p: p.read_bytes() for p in [*checkpoints(out), *(out / "compile").rglob("*.json")]}
    for changes, message in (
        ({"steps": 1, "keep_checkpoints": 1}, "steps=1"),
        ({"batch": 8, "keep_checkpoints": 1}, "batch was 16, now 8"),
    ):
        with pytest.raises(ConfigError, match=message):
            run(load_run_config(path, changes), out)  # fmt: skip
    assert {p: p.read_bytes() for p in kept} == kept
    assert sorted(checkpoints(out)) == sorted(p for p in kept if p.suffix == ".h5")


def assert_same_weights(a_dir: Path, b_dir: Path) -> None:
    a = load_checkpoint(checkpoints(a_dir)[-1]).store
    b = load_checkpoint(checkpoints(b_dir)[-1]).store
    for name in a.names:
        assert np.array_equal(a.get(name), b.get(name)), name


@pytest.mark.slow
def test_killed_run_resumes_bit_identical(tmp_path):
    """A run killed mid-way (a real subprocess) resumes and ends with the same weights."""
    path = write_config(tmp_path, steps=6)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-m", "wafersim.cli", "run", str(path), "--out", str(tmp_path / "k")]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while not checkpoints(tmp_path / "k") and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.kill()
    proc.wait()
    assert checkpoints(tmp_path / "k"), "no checkpoint before the deadline"
    assert main(["run", str(path), "--out", str(tmp_path / "k"), "--json"]) == 0
    assert main(["run", str(path), "--out", str(tmp_path / "ref"), "--json"]) == 0
    a = load_checkpoint(checkpoints(tmp_path / "k")[-1])
    b = load_checkpoint(checkpoints(tmp_path / "ref")[-1])
    assert a.step == b.step == 6
    for name in a.store.names:
        assert np.array_equal(a.store.get(name), b.store.get(name)), name


def test_corrupt_checkpoint_is_a_clear_error_and_kept(tmp_path):
    """A damaged newest checkpoint stops the run with its name; nothing is overwritten."""
    config = load_run_config(write_config(tmp_path, steps=1))
    run(config, tmp_path / "out")
    newest = checkpoints(tmp_path / "out")[-1]
    newest.write_bytes(b"not a checkpoint")
    with pytest.raises(ConfigError, match=newest.name):
        run(config, tmp_path / "out")
    assert newest.read_bytes() == b"not a checkpoint"


@pytest.mark.slow
def test_a_damaged_newest_checkpoint_falls_back_to_the_one_before(tmp_path, caplog):
    """The newest checkpoint failing its checksum is skipped for the one before, saying so;
    the run then ends as an uninterrupted one."""
    import h5py

    config = load_run_config(write_config(tmp_path, steps=4), {"checkpoint_every": 1})
    run(config, tmp_path / "whole")
    short = load_run_config(write_config(tmp_path, steps=4), {"checkpoint_every": 1})
    run(short, tmp_path / "out")
    newest = checkpoints(tmp_path / "out")[-1]
    with h5py.File(newest, "r+") as f:
        name = next(iter(f["weights"]))
        f["weights"][name][...] = f["weights"][name][()] + 1
    result = run(config, tmp_path / "out")
    assert f"skipped damaged checkpoint(s): {newest}" in caplog.text
    assert len(result.history.losses) == 4
    a = load_checkpoint(checkpoints(tmp_path / "whole")[-1]).store
    b = load_checkpoint(checkpoints(tmp_path / "out")[-1]).store
    for tensor in a.names:
        assert np.array_equal(a.get(tensor), b.get(tensor)), tensor


def test_a_kill_between_save_and_pruning_leaves_no_extra_checkpoint(tmp_path):
    """Resuming prunes to the kept number (a kill between the save and the pruning must
    not leave one too many for good)."""
    import shutil

    config = load_run_config(write_config(tmp_path, steps=3), {"checkpoint_every": 1})
    run(config, tmp_path / "out")
    kept = checkpoints(tmp_path / "out")
    extra = kept[0].with_name("step_00000000.h5")  # as if pruning had not run
    shutil.copyfile(kept[0], extra)
    run(config, tmp_path / "out")
    assert checkpoints(tmp_path / "out") == kept


def test_a_diverging_run_stops_naming_the_step(tmp_path):
    """A non-finite loss is an error naming the step, not a finished run with loss nan."""
    changes = {"optimizer.name": "sgd", "optimizer.lr": 1e6}
    config = load_run_config(write_config(tmp_path, steps=3), changes)
    with pytest.raises(ConfigError, match=r"training diverged: step \d+ has loss (nan|inf)"):
        run(config, tmp_path / "out")


def test_checkpoint_of_another_config_is_refused_naming_the_key(tmp_path):
    """Checkpoints in DIR from a different training are an error naming what changed, not
    silently reused."""
    run(load_run_config(write_config(tmp_path, steps=1)), tmp_path / "out")
    other = load_run_config(write_config(tmp_path, steps=1), {"optimizer.lr": 0.01})
    with pytest.raises(ConfigError, match=r"another training: optimizer.lr was 0.003, now 0.01"):
        run(other, tmp_path / "out")


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"colour": 1}, "unknown key"),
        ({"batch": 0}, r"batch=0 must be an integer in \[1,"),
        ({"batch": 100_000}, r"batch=100000 x swarmx.wafers=1 is 100000 samples a step"),
        ({"micro_batches": 2}, r"splits batch=16 into 2 micro-batches.*use tier fast"),
        ({"tier": "quick"}, "tier='quick' is not one of"),
        ({"model": "missing.yaml"}, "no such file"),
        ({"memoryx": {"tile_size": 1}}, "unknown key.*memoryx"),
        ({"wafer": {"preset": "tiny", "overrides": {"pe.sram_bytes": 10}}}, "sram_bytes"),
        ({"optimizer": {"name": "adamw", "lr": -1}}, "lr"),
        ({"model": str(ROOT / "examples/models/gpt2-small.yaml")}, "use tier: analytic"),
        ({"sparsity": {"density": 2}}, r"sparsity.density=2 must be a number in \(0, 1\]"),
        ({"sparsity": {"density": 0.5, "threshold": 1}}, "exactly one of"),
        ({"sparsity": {"density": 0.5}, "strategies": ["summa"]}, "skips zero weights, none"),
        ({"sparsity": {"threshold": 0.1}, "strategies": ["summa"]}, "needs strategies among"),
        ({"sparsity": {"threshold": 0.1}, "tier": "fast"}, "take sparsity.density"),
        ({"wafer": {"preset": "tiny", "defects": 3}}, "wafer.defects must be a table"),
        ({"wafer": {"preset": "tiny", "defects": {"seed": "x"}}}, "wafer.defects.seed='x'"),
        ({"strategies": "summa"}, "strategies='summa' must be a list"),
        ({"strategies": ["sumo"]}, "each must be one of"),
        ({"swarmx": {"defect_seed_stride": "a"}}, "swarmx.defect_seed_stride='a'"),
        ({"swarmx": {"wafers": 0}}, r"swarmx.wafers=0 must be an integer in \[1,"),
        ({"memoryx": {"tile_bytes": 0}}, r"memoryx.tile_bytes=0 must be an integer in \[1,"),
        ({"input": {"worker": 8}}, "worker"),
        ({"activations": "all"}, "activations='all' must be one of: auto, keep"),
        ({"micro_batches": 0}, r"micro_batches=0 must be null \(auto\)"),
    ],
)
def test_bad_configs_are_clear_errors(tmp_path, changes, message):
    """Unknown keys, impossible sizes and unsupported models name what is wrong."""
    with pytest.raises(ConfigError, match=message):
        run(load_run_config(write_config(tmp_path, **changes)), tmp_path / "out")


def test_two_wafers_equal_one_wafer_with_twice_the_batch(tmp_path):
    """SwarmX data parallelism: 2 wafers x batch B trains like 1 wafer x 2B (numpy GEMMs)."""
    graph = load_model(MODEL).graph
    data = load_dataset({"name": "digits"}, 0)
    stores = [WeightStore.materialised(weight_shapes(graph), 0, init_std=0.2) for _ in range(2)]
    two = Trainer(graph, data, make_optimizer("sgd", lr=0.1), [numpy_matmul] * 2, 8, 0, 4)
    one = Trainer(graph, data, make_optimizer("sgd", lr=0.1), [numpy_matmul], 16, 0, 4)
    for step in range(3):
        assert two.step(stores[0], step) == pytest.approx(one.step(stores[1], step), rel=1e-5)
    for name in stores[0].names:
        np.testing.assert_allclose(stores[0].get(name), stores[1].get(name), rtol=1e-5, atol=1e-7)


@pytest.mark.slow
def test_timing_only_run_reports_stalls(tmp_path):
    """A large model runs timing-only: stalls fall as tokens per batch grow."""
    fractions = []
    for batch in (1, 16):
        path = write_config(tmp_path, model=str(ROOT / "examples/models/gpt2-small.yaml"),
                            tier="analytic", batch=batch, seq=64, dtype="fp16", steps=1,
                            wafer={"preset": "wse2"})  # fmt: skip
        perf = write_outputs(run(load_run_config(path), tmp_path / f"b{batch}"), tmp_path)
        assert perf["losses"] == []
        fractions.append(perf["stall_fraction"])
    assert fractions[1] < fractions[0]


def test_micro_batches_and_recompute_run_in_the_stream(tmp_path):
    """A timing-only GPT-2 run forced into two micro-batches with recomputed blocks streams
    every pass twice, each block's forward again before its backward, and the weights of a
    recomputed layer once more per micro-batch than when its activations are kept."""
    common = {"model": str(ROOT / "examples/models/gpt2-small.yaml"), "tier": "analytic",
              "batch": 2, "seq": 64, "dtype": "fp16", "steps": 1,
              "wafer": {"preset": "wse2"}}  # fmt: skip
    streams = {}
    for policy in ("keep", "recompute"):
        path = write_config(tmp_path, **common, activations=policy, micro_batches=2)
        streams[policy] = run(load_run_config(path), tmp_path / policy).streams[0]
    keep, again = streams["keep"], streams["recompute"]
    passes = [(s.layer, s.pass_name) for s in keep.segments]
    assert passes[: len(passes) // 2] == passes[len(passes) // 2 :]
    recomputed = [s for s in again.segments if s.pass_name == "recompute"]
    blocks = {s.layer for s in keep.segments if s.layer.startswith("h.")}
    assert {s.layer for s in recomputed} == blocks
    extra = sum(s.in_bytes for s in recomputed)
    assert extra > 0
    assert again.summary()["memoryx_bytes_in"] == keep.summary()["memoryx_bytes_in"] + extra


@pytest.mark.slow
def test_fast_tier_run_times_like_the_cycle_tier(tmp_path):
    """A fast-tier run (no training) times a step within 10 % of the cycle tier's."""
    totals = {}
    for tier in ("cycle", "fast"):
        config = load_run_config(write_config(tmp_path, steps=2, tier=tier))
        totals[tier] = run(config, tmp_path / tier).streams[0].total_cycles
    assert totals["fast"] == pytest.approx(totals["cycle"], rel=0.10)


@pytest.mark.slow
def test_sparse_savings_are_the_same_resumed_and_nothing_without_zeros(tmp_path):
    """Dense and sparse cycles are measured on the same step's operands (zero activations
    make cycles depend on them): a resumed run reports an uninterrupted run's savings, and
    a threshold of 0 (no weight pruned) saves no cycle."""
    sparse = {"sparsity": {"density": 0.2}}
    whole = run(load_run_config(write_config(tmp_path, steps=2, **sparse)), tmp_path / "a")
    run(load_run_config(write_config(tmp_path, steps=1, **sparse)), tmp_path / "b")
    resumed = run(load_run_config(write_config(tmp_path, steps=2, **sparse)), tmp_path / "b")
    assert performance(resumed)["sparsity"] == performance(whole)["sparsity"]
    none = {"sparsity": {"threshold": 0}}
    kept = run(load_run_config(write_config(tmp_path, steps=2, **none)), tmp_path / "c")
    assert performance(kept)["sparsity"]["cycles_saved"] == 0


@pytest.mark.slow
def test_pruned_weights_make_a_step_faster_in_every_tier(tmp_path):
    """At weight density 0.1 every tier's step is faster than dense, the fast tier within
    10 % of the cycle tier, and the weight stream at most a fifth of dense (fp32)."""
    cycles = {}
    for tier in ("cycle", "fast", "analytic"):
        for density in (1.0, 0.1):
            folder = tmp_path / f"{tier}-{density}"
            changes = {"steps": 1, "tier": tier, "sparsity": {"density": density}}
            result = run(load_run_config(write_config(tmp_path, **changes)), folder)
            cycles[tier, density] = result.streams[0].total_cycles
            if density < 1:
                assert performance(result)["sparsity"]["streamed_fraction"] <= 0.2, tier
        assert cycles[tier, 0.1] < cycles[tier, 1.0], tier
    assert cycles["fast", 0.1] == pytest.approx(cycles["cycle", 0.1], rel=0.10)


def test_a_finished_swarmx_run_reports_the_same_when_run_again(tmp_path):
    """Re-running a finished two-wafer run (nothing left to train) gives the same timing:
    each wafer's measured cycles come back from the checkpoint."""
    config = load_run_config(write_config(tmp_path, steps=1), {"swarmx.wafers": 2})
    first = run(config, tmp_path / "out")
    again = run(config, tmp_path / "out")
    assert [s.total_cycles for s in again.streams] == [s.total_cycles for s in first.streams]
    assert first.streams[0].total_cycles != first.streams[1].total_cycles  # own defect maps


def test_a_run_has_each_kernel_tier_and_no_other():
    """The run's tiers are the kernels' tiers, by the same names (kernels.tiers.TIERS)."""
    from wafersim.kernels.tiers import TIERS
    from wafersim.memoryx.run import RUN_TIERS

    assert list(RUN_TIERS) == list(TIERS)
    assert [name for name, tier in RUN_TIERS.items() if tier.functional] == ["cycle"]


def test_nested_spec_overrides_change_only_their_keys(tiny):
    """``wafer.overrides: {pe: {sram_bytes: 65536}}`` (or the dotted word on the command
    line) changes that key and keeps the rest of the PE, as it does for defects and kernel
    (a partial ``pe`` is an override, not a whole PE missing keys)."""
    from wafersim.memoryx.run_config import wafer_spec

    spec = wafer_spec({"preset": "tiny", "overrides": {"pe": {"sram_bytes": 65536}}})
    assert spec.pe.sram_bytes == 65536
    assert spec.pe.op_startup_cycles == tiny.pe.op_startup_cycles


def test_validate_only_lists_every_pass_and_writes_nothing(tmp_path, capsys):
    """``run --validate-only``: every layer's passes with shape and kernel, text and JSON,
    and no output folder."""
    from wafersim.compiler.plan import compile_cached
    from wafersim.memoryx.run import compile_options, logical_grid

    path = write_config(tmp_path, steps=2)
    before = set(tmp_path.rglob("*"))
    assert main(["run", str(path), "--validate-only", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert set(tmp_path.rglob("*")) == before
    from wafersim.commands.run import default_out

    assert not default_out(str(path), load_run_config(path).run_digest).exists()
    config = load_run_config(path)
    plan, _ = compile_cached(MODEL, config.spec, compile_options(config), None,
                             logical_grid(config, 0))  # fmt: skip
    expected = [(layer.name, name, placed.algorithm) for layer, name, placed in plan.placements()]
    assert [(p["layer"], p["pass_name"], p["kernel"]) for p in result["passes"]] == expected
    first = next(p for p in result["passes"] if p["op"] == "linear")
    assert set(first["shape"]) == {"m", "k", "n"}
    assert main(["run", str(path), "--validate-only"]) == 0
    text = capsys.readouterr().out
    assert "valid" in text
    assert all(p["layer"][:24] in text for p in result["passes"])


def test_compile_only_saves_the_plans_and_trains_nothing(tmp_path, capsys):
    path = write_config(tmp_path, steps=2, swarmx={"wafers": 2})
    out = tmp_path / "out"
    assert main(["run", str(path), "--out", str(out), "--compile-only", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["mode"] == "compile-only"
    assert [Path(p).relative_to(out).parts[:2] for p in result["plans"][:2]] == [
        ("compile", "wafer_0"),
        ("compile", "wafer_1"),
    ]  # one per wafer, each its own defects
    assert yaml.safe_load((out / "run.yaml").read_text())["swarmx"] == {"wafers": 2}
    assert not checkpoints(out)
    assert not (out / "performance").exists()


@pytest.mark.parametrize(
    ("argv", "message"),
    [(["--validate-only", "--compile-only"], "not allowed with"),
     (["--validate-only", "--engine", "cuda"], "runs nothing on an engine"),
     (["--validate-only", "--out", "x"], "--validate-only writes nothing"),
     (["--compile-only", "--summary-only"], "writes no performance summary"),
     (["--validate-only", "optimizer.name=foo"], "optimizer is 'foo'"),
     (["--validate-only", "init_std=-1"], "init_std is -1"),
     (["--validate-only", "memoryx.prefetch_buffer_bytes=16384", "memoryx.tile_bytes=32768"],
      "tile_bytes=32768 must be <=")],
)  # fmt: skip
def test_run_modes_refuse_what_they_cannot_do(tmp_path, capsys, monkeypatch, argv, message):
    from wafersim.fabric import cuda_engine

    monkeypatch.setattr(cuda_engine, "check_available", lambda: None)
    path = write_config(tmp_path, steps=2)
    try:
        code = main(["run", str(path), *argv])
    except SystemExit as exit_:  # argparse's usage error
        code = exit_.code
    assert code == 2
    assert message in capsys.readouterr().err


def test_tensorboard_shows_the_run_s_curves(tmp_path):
    """Event files in DIR hold loss, test accuracy, samples/s and stall fraction per step,
    read back with TensorBoard's own reader where it is installed, else tensorboardX's
    protobuf records."""
    pytest.importorskip("tensorboardX")
    out = tmp_path / "out"
    config = load_run_config(write_config(tmp_path, steps=3, eval_every=1))
    result = run(config, out)
    perf = write_outputs(result, out)
    assert perf["tensorboard_events"] == "written"
    scalars = read_event_scalars(out)
    assert [v for _, v in scalars["loss"]] == pytest.approx(result.history.losses)
    assert [s for s, _ in scalars["test_accuracy"]] == [1, 2, 3]
    assert len(scalars["wafer_samples_per_sec"]) == len(scalars["stall_fraction"]) == 3
    assert all(v > 0 for _, v in scalars["wafer_samples_per_sec"])
    write_outputs(result, out)  # again (a resume writes the whole history): no duplicates
    assert len(list(out.glob("events.out.tfevents.*"))) == 1


def read_event_scalars(folder: Path) -> dict[str, list[tuple[int, float]]]:
    import struct

    from tensorboardX.proto import event_pb2

    scalars: dict[str, list[tuple[int, float]]] = {}
    for path in folder.glob("events.out.tfevents.*"):
        data = path.read_bytes()
        at = 0
        while at < len(data):  # TFRecord: length, its CRC, the record, its CRC
            (length,) = struct.unpack("<Q", data[at : at + 8])
            event = event_pb2.Event.FromString(data[at + 12 : at + 12 + length])
            at += 16 + length
            for value in event.summary.value:
                scalars.setdefault(value.tag, []).append((event.step, value.simple_value))
    return scalars


def test_weights_are_kept_only_where_a_tile_still_fits_beside_them(tmp_path, capsys):
    """A buffer and tile the user sets are not made to clash by the output layer's weights."""
    path = write_config(tmp_path, steps=1, tier="analytic",
                        memoryx={"prefetch_buffer_bytes": 16384, "tile_bytes": 16384})  # fmt: skip
    assert main(["run", str(path), "--out", str(tmp_path / "o"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["weights_kept_for_backward"] == []
