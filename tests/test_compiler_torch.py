"""PyTorch import through torch.fx: graphs, plans, and unsupported nodes (skipped without
torch: pip install 'wafersim[torch]')."""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

from wafersim.compiler.model_file import load_model  # noqa: E402
from wafersim.compiler.plan import CompileOptions, compile_plan  # noqa: E402
from wafersim.compiler.torch_import import graph_from_torch, model_from_torch  # noqa: E402
from wafersim.wafer.errors import ConfigError  # noqa: E402
from wafersim.wafer.presets import preset  # noqa: E402

ZOO = Path(__file__).resolve().parents[1] / "examples" / "models"


def digits_mlp() -> nn.Module:
    """The 64-256-128-10 digits MLP of examples/models/fc-digits.yaml, layer for layer."""
    layers = [("fc1", nn.Linear(64, 256)), ("relu1", nn.ReLU()), ("fc2", nn.Linear(256, 128)),
              ("relu2", nn.ReLU()), ("fc3", nn.Linear(128, 10))]  # fmt: skip
    return nn.Sequential(OrderedDict(layers))


def test_digits_mlp_imports_as_the_model_file_graph():
    """The traced MLP has the model file's layers, widths, inputs and parameters."""
    graph = graph_from_torch(digits_mlp(), 64, "fc-digits")
    expected = load_model(ZOO / "fc-digits.yaml").graph
    assert graph == expected
    assert graph.params == sum(p.numel() for p in digits_mlp().parameters()) == 50_826


@pytest.mark.parametrize(("preset_name", "batch"), [("small", 16), ("wse2", 64)])
def test_digits_mlp_compiles_to_the_model_files_plan(preset_name, batch):
    """Compiled, the imported MLP gets the model file's plan (all but the model's hash)."""
    spec, options = preset(preset_name), CompileOptions(batch=batch)
    imported = compile_plan(model_from_torch(digits_mlp(), 64, "fc-digits"), spec, options)
    from_file = compile_plan(load_model(ZOO / "fc-digits.yaml"), spec, options)
    assert imported.pop("cache_key") != from_file.pop("cache_key")
    assert imported == from_file


def test_functions_methods_residuals_and_nesting_trace():
    """F.gelu, Tensor.relu, x + y, nn.Identity and nested Sequentials map to graph ops."""

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.up, self.down = nn.Linear(32, 64, bias=False), nn.Linear(64, 32)
            self.skip = nn.Identity()

        def forward(self, x):
            return self.skip(x) + self.down(nn.functional.gelu(self.up(x)).relu())

    model = nn.Sequential(nn.Linear(16, 32), Block(), nn.Sequential(nn.GELU(), nn.Linear(32, 4)))
    graph = graph_from_torch(model, 16, "block", loss=False)
    ops = [(layer.name, layer.op, layer.inputs) for layer in graph.layers]
    assert ops == [
        ("0", "linear", ("input",)), ("0.bias", "bias", ("0",)),
        ("1.up", "linear", ("0.bias",)), ("gelu", "gelu", ("1.up",)), ("relu", "relu", ("gelu",)),
        ("1.down", "linear", ("relu",)), ("1.down.bias", "bias", ("1.down",)),
        ("add", "add", ("0.bias", "1.down.bias")),
        ("2.0", "gelu", ("add",)), ("2.1", "linear", ("2.0",)), ("2.1.bias", "bias", ("2.1",)),
    ]  # fmt: skip
    assert graph.params == sum(p.numel() for p in model.parameters())


class Shared(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        return self.fc(self.fc(x))


class Branchy(nn.Module):
    def forward(self, x):
        return x if x.sum() > 0 else -x


@pytest.mark.parametrize(
    ("model", "message"),
    [
        (
            nn.Sequential(nn.Linear(8, 8), nn.Tanh()),
            r"node '_1' \(module '1': Tanh\) is not supported",
        ),
        (nn.Sequential(nn.Linear(8, 8), nn.Dropout()), r"node '_1' \(module '1': Dropout\)"),
        (nn.Sequential(nn.Conv1d(8, 8, 1)), r"node '_0' \(module '0': Conv1d\)"),
        (Shared(), r"module 'fc' is called twice"),
        (Branchy(), "torch.fx cannot trace 'm'"),
        (nn.Sequential(nn.Linear(4, 8)), r"layer '0' \(linear\): in=4 but its input has 8"),
        (nn.Sequential(), "must return the value of its last op"),
        ("not a module", "must be a torch.nn.Module"),
    ],
)
def test_unsupported_modules_are_errors_naming_the_node(model, message):
    """What the layer graph cannot hold is a ConfigError naming the node or layer."""
    with pytest.raises(ConfigError, match=message):
        graph_from_torch(model, 8, "m")


def test_imported_graph_hash_follows_its_layers():
    """Two imports of the same module hash alike; another width hashes differently."""
    one = model_from_torch(digits_mlp(), 64, "fc-digits")
    assert one.sha256 == model_from_torch(digits_mlp(), 64, "fc-digits").sha256
    wider = nn.Sequential(nn.Linear(64, 300), nn.ReLU(), nn.Linear(300, 10))
    assert one.sha256 != model_from_torch(wider, 64, "fc-digits").sha256
