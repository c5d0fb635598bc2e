"""``wafersim run --validate-only`` makes every check the run makes short of simulating, and
the run makes its cheap checks before compiling plans, loading data or simulating."""

from __future__ import annotations

import pytest
from wafersim.memoryx import run as run_module
from wafersim.memoryx.run import RunTier, run
from wafersim.memoryx.run_config import load_run_config
from wafersim.wafer.config_io import parse_overrides
from wafersim.wafer.errors import ConfigError

from tests.test_memoryx_data import _tiny_mnist
from tests.test_memoryx_run import ROOT, write_config
from wafersim.cli import main

EXAMPLE = ROOT / "examples" / "fc_digits.yaml"
DUPLICATE_MODEL = """name: dup
input_features: 64
graph:
  - {op: linear, name: fc1, out: 32, bias: true}
  - {op: relu, name: relu1}
  - {op: linear, name: fc1, out: 10}
  - {op: loss, name: loss}
"""


def refusal(capsys, argv: list[str]) -> str:
    """The one line ``main(argv)`` prints to stderr as it exits 2, with no traceback."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


def no_compile(monkeypatch) -> None:
    """Make compiling a plan, or starting the engine's compile, fail the test."""

    def refuse(*args, **kwargs):
        pytest.fail("a plan was compiled before the cheap checks refused the run")

    from wafersim.fabric import precompile
    from wafersim.memoryx import run_modes

    monkeypatch.setattr(run_module, "compile_cached", refuse)
    monkeypatch.setattr(run_modes, "compile_cached", refuse)
    monkeypatch.setattr(precompile, "compile_in_background", refuse)


def no_simulation(monkeypatch) -> None:
    """Make the run's training or timing, and its stream simulation, fail the test."""

    def refuse(*args, **kwargs):
        pytest.fail("the run simulated before its checks refused it")

    for name in run_module.RUN_TIERS:
        functional = run_module.RUN_TIERS[name].functional
        monkeypatch.setitem(run_module.RUN_TIERS, name, RunTier(functional, refuse))
    monkeypatch.setattr(run_module, "simulate_stream", refuse)


def test_validate_only_refuses_more_samples_a_step_than_the_data_holds(capsys, monkeypatch):
    """batch x wafers above the digits' 1,438 training samples is refused by --validate-only,
    in one line naming both keys, before any plan is compiled."""
    no_compile(monkeypatch)
    argv = ["run", str(EXAMPLE), "swarmx.wafers=40", "batch=64", "--validate-only"]
    line = refusal(capsys, argv)
    assert "batch=64 x swarmx.wafers=40" in line
    assert "1438 training samples" in line


def test_a_run_refuses_batch_times_wafers_before_compiling_a_plan(tmp_path, capsys, monkeypatch):
    """A run of 4096 wafers whose batches outnumber the data refuses at once: no plan is
    compiled, no engine compile starts and its folder is not made."""
    no_compile(monkeypatch)
    out = tmp_path / "out"
    line = refusal(capsys, ["run", str(EXAMPLE), "swarmx.wafers=4096", "--out", str(out)])
    assert "batch=64 x swarmx.wafers=4096 is 262144 samples a step" in line
    assert not out.exists()
    config = load_run_config(EXAMPLE, {"swarmx.wafers": 4096})
    with pytest.raises(ConfigError, match="at most the 1438 training samples"):
        run(config, out)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["micro_batches=2"], "splits batch=16 into 2 micro-batches"),
        (["tier=analytic", "steps=1000000000"], "steps=1000000000 x swarmx.wafers=1"),
        (["optimizer.name=foo"], "optimizer is 'foo'"),
        (["memoryx.prefetch_buffer_bytes=16384", "memoryx.tile_bytes=32768"],
         "tile_bytes=32768 must be <="),
    ],
)  # fmt: skip
def test_validate_only_and_the_run_refuse_the_same(tmp_path, capsys, monkeypatch, overrides,
                                                    message):  # fmt: skip
    """What the run would refuse (a split batch on the cycle engine, a stream too big to
    simulate, an unknown optimizer on any tier, a tile beside no buffer) --validate-only
    refuses in one line, and the run refuses before it simulates."""
    path = write_config(tmp_path, steps=2)
    assert message in refusal(capsys, ["run", str(path), *overrides, "--validate-only"])
    no_simulation(monkeypatch)
    with pytest.raises(ConfigError, match=message):  # at load, or before the simulation
        run(load_run_config(path, parse_overrides(overrides)), tmp_path / "out")


def test_a_too_long_stream_is_refused_after_the_first_wafer_s_plan(tmp_path, monkeypatch):
    """The stream simulation's size is checked on wafer 0's plan, before wafer 1's is made."""
    made = []
    compile_cached = run_module.compile_cached

    def counting(*args, **kwargs):
        made.append(1)
        return compile_cached(*args, **kwargs)

    monkeypatch.setattr(run_module, "compile_cached", counting)
    changes = {"tier": "analytic", "steps": 10**8, "swarmx.wafers": 2}
    config = load_run_config(write_config(tmp_path), changes)
    with pytest.raises(ConfigError, match=r"steps=100000000 x swarmx.wafers=2.*steps in \[1, "):
        run(config, tmp_path / "out")
    assert len(made) == 1


def test_a_model_and_data_that_do_not_fit_are_refused(tmp_path, capsys, monkeypatch):
    """A functional run on data of another width than the model's input, on token ids, or
    with fewer logits than classes is refused by --validate-only before any plan is compiled."""
    no_compile(monkeypatch)
    _tiny_mnist(tmp_path, compress=True)
    path = write_config(tmp_path, data={"name": "mnist", "path": str(tmp_path)}, batch=2)
    line = refusal(capsys, ["run", str(path), "--validate-only"])
    assert "input_features=64 but data 'mnist' has 784 features a sample" in line
    tokens = {"name": "synthetic_tokens", "vocab": 100, "seq": 4, "samples": 64}
    path = write_config(tmp_path, data=tokens, batch=2)
    assert "holds token ids, not features" in refusal(capsys, ["run", str(path), "--validate-only"])
    model = tmp_path / "five.yaml"
    model.write_text(DUPLICATE_MODEL.replace("fc1, out: 10", "fc2, out: 5"))
    path = write_config(tmp_path, model=str(model))
    line = refusal(capsys, ["run", str(path), "--validate-only"])
    assert "ends in 5 logits but data 'digits' has 10 classes; allowed: at least 10" in line


def test_mnist_sizes_come_from_the_headers(tmp_path, monkeypatch):
    """The data set's sizes are read from the IDX headers, with the load's shape checks,
    without reading the images."""
    from wafersim.memoryx import data
    from wafersim.memoryx.data import dataset_size

    _tiny_mnist(tmp_path, compress=True)
    config = {"name": "mnist", "path": str(tmp_path)}
    loaded = data.load_dataset(config, 0)
    monkeypatch.setattr(data, "read_idx", lambda path: pytest.fail(f"{path} read whole"))
    size = dataset_size(config, 0)
    assert (size.train_samples, size.features, size.classes) == (5, 784, 10)
    assert size.train_samples == len(loaded.y_train)
    labels = tmp_path / "train-labels-idx1-ubyte"
    labels.write_bytes(b"\x00\x00\x08\x01\x00\x00\x00\x03\x00\x01\x02")
    with pytest.raises(ConfigError, match="train-labels-idx1-ubyte: 3 labels for 5 images"):
        dataset_size(config, 0)


def test_duplicate_layer_names_are_refused_at_model_load(tmp_path, capsys):
    """Two layers named fc1 are refused by compile and run --validate-only, naming the layer
    and both graph entries, not met later as a GEMM shape error."""
    model = tmp_path / "dup.yaml"
    model.write_text(DUPLICATE_MODEL)
    expected = "layer 'fc1' is defined twice: at graph[0] and at graph[2]"
    assert expected in refusal(capsys, ["compile", str(model), "--validate-only"])
    path = write_config(tmp_path, model=str(model))
    assert expected in refusal(capsys, ["run", str(path), "--validate-only"])
