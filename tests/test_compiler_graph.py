"""Model files -> layer graphs: the zoo's parameter counts, shapes, repeats and clear errors."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from wafersim.compiler.model_file import load_model
from wafersim.wafer.errors import ConfigError

ZOO = Path(__file__).resolve().parents[1] / "examples" / "models"
UNITS = {"": 1, "K": 10**3, "M": 10**6, "B": 10**9}
# published as names rounded to two digits, which a 1 % band cannot hold (see the report)
ROUNDED_NAMES = {"gpt3-1.3b", "gpt3-2.7b", "bert-large"}  # BERT's paper: "340M" (0.34B)
# published only as a name: ESM-2's count is not published, its name (esm2_t12_35M_UR50D)
# says 35M and the configured shape (the Model Zoo's: 12 layers of width 480, filter 1920)
# has 33.5M, 4.3 % less; 5 % holds that gap and still fails on a layer more or less (8 %)
NAMED_ONLY = {"esm2-35m": 0.05}


def published(text: str) -> tuple[float, float]:
    """``"1.3B"`` -> (1.3e9, half a unit in its last digit: 0.05e9)."""
    number, unit = re.fullmatch(r"([0-9.]+)([KMB]?)", text).groups()
    decimals = len(number.partition(".")[2])
    return float(number) * UNITS[unit], 0.5 * 10.0**-decimals * UNITS[unit]


@pytest.mark.parametrize("path", sorted(ZOO.glob("*.yaml")), ids=lambda p: p.stem)
def test_zoo_parameter_counts_match_published_totals(path):
    """Every zoo model's parameters are within 1 % of its published total (three names
    that are published rounded to two digits: within that rounding; a size known only from
    the model's name: within its band)."""
    model = load_model(path)
    total, half_unit = published(model.published_params)
    tolerance = max(0.01 * total, half_unit if path.stem in ROUNDED_NAMES else 0,
                    NAMED_ONLY.get(path.stem, 0) * total)  # fmt: skip
    assert abs(model.graph.params - total) <= tolerance


def test_zoo_has_the_requested_models():
    """The zoo holds the FC digits nets (the main job's and a wider one), four GPT-2, six
    GPT-3, three LLaMA, and for the hardware validation table Llama-2-7B, Llama-3-8B,
    BERT-Large, GPT-J 6B and ESM-2 35M."""
    names = {p.stem for p in ZOO.glob("*.yaml")}
    assert len(names) == 20
    wanted = {"fc-digits", "fc-digits-small", "gpt2-xl", "gpt3-175b", "llama-70b", "llama3-8b"}
    assert wanted | {"bert-large", "llama2-7b", "gptj-6b", "esm2-35m", "gpt3-125m"} <= names


def test_shapes_propagate_through_the_graph():
    """Every matmul's input width is its producer's output width; GQA narrows k and v."""
    graph = load_model(ZOO / "llama-70b.yaml").graph
    widths = {layer.name: layer.features for layer in graph.layers}
    for layer in graph.layers:
        if layer.weights is not None:
            assert layer.weights[0] == sum(widths[name] for name in layer.inputs)
    by_name = {layer.name: layer for layer in graph.layers}
    assert by_name["layers.0.wk"].weights == (8192, 1024)
    assert by_name["layers.79.w2"].weights == (28672, 8192)
    assert by_name["output"].weights == (8192, 32000)


def test_a_repeated_block_expands_per_layer():
    """A block with ``repeat: layers`` appears once per layer, each referring to its own."""
    graph = load_model(ZOO / "gpt2-small.yaml").graph
    qkv = [layer for layer in graph.layers if layer.name.endswith(".qkv")]
    assert len(qkv) == 12
    res = {layer.name: layer for layer in graph.layers}["h.3.res_1"]
    assert res.inputs == ("h.2.res_2", "h.3.proj.bias")


def test_attention_is_its_matmuls():
    """Attention expands into scores and context matmuls around a softmax."""
    graph = load_model(ZOO / "gpt2-small.yaml").graph
    ops = [layer.op for layer in graph.layers if layer.name.startswith("h.0.attn")]
    assert ops == ["matmul", "softmax", "matmul"]


def write(tmp_path, text: str) -> Path:
    path = tmp_path / "model.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("graph", "message"),
    [
        ("- {op: conv, name: c1}", "op='conv' is not one of: embedding"),
        ("- {op: linear, name: f, in: 32, out: 4}", "in=32 but its input has 64"),
        ("- {op: linear, name: f, out: 4, stride: 2}", "unknown field(s) stride"),
        ("- {op: linear, name: f, out: width}", "unknown dim 'width'"),
        ("- {op: add, name: a, from: [input, nope]}", "from='nope' names no earlier op"),
        ("- {op: linear, name: f, out: 65/2}", "not an exact integer division"),
        ("- {op: linear, name: f, out: 0}", "layer 'f': out=0 must be an integer in"),
        ("- {op: linear, name: f, out: 4 - 8}", "layer 'f': out=-4 must be an integer in"),
        ("- {op: linear, name: f, out: true}", "layer 'f': out=True must be an integer in"),
        ("- {op: linear, name: f, out: 1099511627776}", "out=1099511627776 must be an integer in"),
        ("- {op: linear, name: f, out: 4, bias: 2}", "layer 'f': bias=2 must be true or false"),
        ("- {op: linear, name: input, out: 4}", "layer 'input' at graph[0]: the name is reserved"),
    ],
)
def test_bad_model_files_are_clear_errors(tmp_path, graph, message):
    """A bad op, field, dim or reference is a ConfigError naming it."""
    path = write(tmp_path, f"name: bad\ninput_features: 64\ngraph:\n  {graph}\n")
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_model(path)


@pytest.mark.parametrize(
    ("graph", "message"),
    [
        ("[{op: linear, name: fc1, out: 8}, {op: relu, name: r}, {op: linear, name: fc1, out: 4}]",
         "layer 'fc1' is defined twice: at graph[0] and at graph[2]"),
        ("[{op: linear, name: f, out: 8, bias: true}, {op: relu, name: f.bias}]",
         "layer 'f.bias' is defined twice: at graph[0] and at graph[1]"),
        ("[{repeat: 2, name: h, block: [{op: relu, name: r}]}, {op: relu, name: h.1.r}]",
         "layer 'h.1.r' is defined twice: at graph[0].block[0] and at graph[1]"),
    ],
)  # fmt: skip
def test_a_layer_name_used_twice_is_refused_naming_both_entries(tmp_path, graph, message):
    """Layer names are unique: a second one is refused at load, naming both graph entries."""
    path = write(tmp_path, f"name: bad\ninput_features: 64\ngraph: {graph}\n")
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_model(path)


def test_a_graph_made_in_python_refuses_a_layer_name_used_twice():
    """LayerGraph itself refuses two layers of one name, naming both indices."""
    from wafersim.compiler.graph import Layer, LayerGraph

    layers = (Layer("a", "relu", (), 4), Layer("b", "relu", (), 4), Layer("a", "relu", (), 4))
    message = "'a' is defined twice: layers[0] and layers[2]"
    with pytest.raises(ConfigError, match=re.escape(message)):
        LayerGraph("m", layers, 4, 1)
