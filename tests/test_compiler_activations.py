"""Activations kept for backward: bytes by hand, the reserve in every placement, the policy
and micro-batch search, recompute in the step and the stream, and clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from wafersim.compiler.activations import kept_per_sequence
from wafersim.compiler.model_file import load_model
from wafersim.compiler.plan import CompileOptions, compile_plan
from wafersim.memoryx.streaming import prefetch_buffer_bytes, segments, step_order
from wafersim.wafer.arith import ceil_div
from wafersim.wafer.errors import ConfigError

ZOO = Path(__file__).resolve().parents[1] / "examples" / "models"
BLOCKS = """
name: two-blocks
input_features: 8
graph:
  - {op: linear, name: embed, out: 16}
  - repeat: 2
    name: b
    block:
      - {op: linear, name: up, out: 32, bias: true}
      - {op: relu, name: act}
      - {op: linear, name: down, out: 16}
      - {op: add, name: res, from: [block_input, down]}
  - {op: loss, name: loss}
"""


@pytest.fixture
def blocks(tmp_path):
    path = tmp_path / "two-blocks.yaml"
    path.write_text(BLOCKS)
    return load_model(path)


def test_kept_bytes_by_hand(blocks):
    """Each layer keeps what its backward reads: a matmul or relu its input, a bias or add
    nothing; a block's checkpoint is the tensor entering it; recompute holds the
    checkpoints, what layers outside the blocks keep, and one block's own tensors."""
    kept = kept_per_sequence(blocks.graph, seq=1, value_bytes=4)
    assert kept.keeper == {
        "input": "embed", "embed": "b.0.up", "b.0.up.bias": "b.0.act", "b.0.act": "b.0.down",
        "b.0.res": "b.1.up", "b.1.up.bias": "b.1.act", "b.1.act": "b.1.down", "b.1.res": "loss",
    }  # fmt: skip
    assert [(run.block, run.entering) for run in kept.runs] == [
        ("b.0", {"embed"}), ("b.1", {"b.0.res"})
    ]  # fmt: skip
    assert kept.peak("keep") == 4 * (8 + 16 + 2 * (32 + 32 + 16))
    assert kept.checkpoint_bytes() == 4 * (16 + 16)
    assert kept.peak("recompute") == 4 * ((8 + 16 + 16 + 16) + (32 + 32))
    assert kept.peak("ignore") == 0
    assert kept.largest() == ("b.0.act", 4 * 32)


SHARED = """
name: shared
input_features: 8
graph:
  - {op: linear, name: x, out: 16}
  - {op: linear, name: a, out: 4, from: x}
  - {op: linear, name: b, out: 4, from: x}
  - {op: add, name: s, from: [a, b]}
  - {op: loss, name: loss}
"""


def test_a_tensor_read_by_several_layers_is_kept_once(tmp_path):
    """q, k and v projections (or LLaMA's w1 and w3) read one tensor: it is kept once."""
    path = tmp_path / "shared.yaml"
    path.write_text(SHARED)
    kept = kept_per_sequence(load_model(path).graph, seq=2, value_bytes=2)
    assert kept.keeper == {"input": "x", "x": "a", "s": "loss"}
    assert kept.peak("keep") == 2 * 2 * (8 + 16 + 4)


def test_digits_keep_everything_in_one_micro_batch(tiny):
    """The digits MLP keeps all its activations, spread evenly over the working PEs."""
    plan = compile_plan(load_model(ZOO / "fc-digits.yaml"), tiny,
                        CompileOptions(batch=64, dtype="fp32"))  # fmt: skip
    memory = plan.activations
    assert (memory.policy, memory.micro_batches) == ("keep", 1)
    assert memory.bytes == 64 * (64 + 256 + 256 + 128 + 128 + 10) * 4
    assert memory.bytes_per_pe == ceil_div(memory.bytes, plan.working["pes"])


@pytest.mark.parametrize("batch", [1, 8])
@pytest.mark.slow
def test_gpt3_reserve_and_layers_fit_sram_together(batch, wse2):
    """GPT-3 175B keeps 155 GB per sequence: the compiler recomputes blocks, splits a batch of
    8 into micro-batches, and no pass's working set plus the reserve exceeds a PE's SRAM."""
    spec = wse2
    plan = compile_plan(load_model(ZOO / "gpt3-175b.yaml"), spec, CompileOptions(batch=batch))
    memory = plan.activations
    assert memory.keep_all_bytes > plan.working["pes"] * spec.pe.sram_bytes
    assert memory.policy == "recompute"
    assert memory.micro_batches * memory.sequences_per_micro_batch == batch
    assert memory.micro_batches == (1 if batch == 1 else 2)
    for _, _, placed in plan.placements():
        assert placed.sram_bytes_per_pe + memory.bytes_per_pe <= spec.pe.sram_bytes
    assert plan.totals.sram_peak_bytes_per_pe <= spec.pe.sram_bytes
    forced = CompileOptions(batch=batch, activations="recompute", micro_batches=1)
    if batch == 8:
        message = "do not fit: 8 sequence.* in micro_batches=1 of 8 sequence.*leave micro_batches"
        with pytest.raises(ConfigError, match=message):
            compile_plan(load_model(ZOO / "gpt3-175b.yaml"), spec, forced)


def test_recompute_runs_block_forwards_again(blocks, tiny):
    """Totals and the stream: a block's forward passes run again right before its backward,
    and every pass runs once per micro-batch."""
    options = CompileOptions(batch=4, seq=1, dtype="fp32", activations="recompute",
                             micro_batches=2)  # fmt: skip
    plan = compile_plan(blocks, tiny, options)
    names = [layer.name for layer in plan.layers]
    order = [(names[i], p) for i, p in step_order(plan)]
    step = len(order) // 2
    assert order[:step] == order[step:]
    tail = [(n, p) for n, p in order[:step] if p != "forward" or n.startswith("b.0")]
    block0 = [n for n in names if n.startswith("b.0.")]
    start = tail.index((block0[0], "recompute"))
    assert tail[start : start + len(block0)] == [(n, "recompute") for n in block0]
    assert tail[start + len(block0)][0] == block0[-1]  # then its backward, last layer first
    forwards = sum(lay.passes["forward"].cycles for lay in plan.layers if lay.block)
    assert plan.totals.cycles_per_pass["recompute"] == 2 * forwards
    recomputed = [(s.layer, s.pass_name) for s in segments(plan) if s.pass_name == "recompute"]
    assert recomputed == [(n, p) for n, p in order if p == "recompute"]


def test_ignore_reserves_nothing_and_keep_reserves_the_buffer(blocks, tiny):
    """``ignore`` reserves nothing; what ``keep`` reserves comes out of the prefetch buffer."""
    spec = tiny
    ignore = compile_plan(blocks, spec, CompileOptions(batch=4, seq=1, activations="ignore"))
    keep = compile_plan(blocks, spec, CompileOptions(batch=4, seq=1, activations="keep"))
    assert ignore.activations.bytes_per_pe == 0
    assert keep.activations.bytes_per_pe > 0
    pes = keep.working["pes"]
    assert prefetch_buffer_bytes(ignore, spec) - prefetch_buffer_bytes(keep, spec) == (
        pes * keep.activations.bytes_per_pe
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"activations": "offload"}, "activations='offload' must be one of: auto, keep"),
        ({"micro_batches": 0}, r"micro_batches=0 must be null \(auto\) or an integer"),
        ({"micro_batches": True}, "micro_batches=True must be null"),
        ({"batch": 4, "micro_batches": 3}, "micro_batches=3 must divide batch=4"),
    ],
)
def test_bad_activation_options_name_the_field(blocks, options, message, tiny):
    """A bad policy or micro-batch count is a one-line error naming the field."""
    with pytest.raises(ConfigError, match=message):
        compile_plan(blocks, tiny, CompileOptions(seq=1, **options))


def test_recompute_needs_blocks(tiny):
    """Recompute needs repeated blocks; the digits MLP has none."""
    model = load_model(ZOO / "fc-digits.yaml")
    with pytest.raises(ConfigError, match="recompute' needs repeated blocks"):
        compile_plan(model, tiny, CompileOptions(activations="recompute"))


def test_a_layer_too_big_alone_is_named_not_the_activations(tiny):
    """When a layer's own working set does not fit even with nothing kept aside, the error
    names that layer, not the activations."""
    model = load_model(ZOO / "gpt2-small.yaml")
    with pytest.raises(ConfigError, match=r"layer 'h.0.qkv' does not fit: needs \d+ bytes"):
        compile_plan(model, tiny, CompileOptions(seq=4, activations="keep"))
