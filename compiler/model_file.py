"""Model files (YAML or TOML) -> :class:`~compiler.graph.LayerGraph`.

A model file names its sizes once under ``dims`` and lists ops under ``graph``; a field may be
an integer or an expression over the dims (``3*d_model``, ``d_model/heads``). An op takes the
previous op's output unless ``from`` names one or more earlier ops (``input`` is the model's
input, ``block_input`` the input of the current repeated block). ``{repeat: N, name: B,
block: [...]}`` expands ``block`` N times as ``B.0.*``, ``B.1.*``, ...; names inside a block
refer to that instance. Layer names are unique (a name used twice is refused, naming both
entries), and ``input`` and ``block_input`` are no op's name. See ``examples/models/`` for the
zoo.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import json
import operator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wafersim.compiler.graph import OPS, Layer, LayerGraph, build_op
from wafersim.wafer.config_io import load_mapping
from wafersim.wafer.errors import ConfigError, excerpt

TOP_REQUIRED = ("name", "graph")
TOP_OPTIONAL = ("dims", "input_features", "context", "published_params", "source", "notes")
_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul}


@dataclass(frozen=True)
class ModelFile:
    """A parsed model file: its graph, its text's SHA-256 and the published size."""

    graph: LayerGraph
    sha256: str
    published_params: str | None
    source: str | None


def load_model(path: str | Path) -> ModelFile:
    """Read and expand a model file; every error names the file and the field."""
    path = Path(path)
    data = load_mapping(path)
    unknown = set(data) - set(TOP_REQUIRED) - set(TOP_OPTIONAL)
    missing = [key for key in TOP_REQUIRED if key not in data]
    if unknown or missing:
        raise ConfigError(
            f"{path}: unknown key(s) {excerpt(sorted(map(str, unknown)))}, missing {missing}; "
            f"allowed: "
            f"{', '.join(TOP_REQUIRED + TOP_OPTIONAL)}"
        )
    dims = {key: _dim(key, value) for key, value in (data.get("dims") or {}).items()}
    context = evaluate(data.get("context", 1), dims, "context")
    graph = build_graph(str(data["name"]), data["graph"], data.get("input_features"), dims, context)
    published = data.get("published_params")
    return ModelFile(
        graph,
        hashlib.sha256(path.read_bytes()).hexdigest(),
        None if published is None else str(published),
        data.get("source"),
    )


def build_graph(
    name: str,
    entries: list[dict[str, Any]],
    input_features: int | None = None,
    dims: dict[str, int] | None = None,
    context: int = 1,
) -> LayerGraph:
    """The graph of a model file's ``graph`` entries (ops and repeated blocks)."""
    builder = _Builder(dims or {}, input_features)
    builder.ops(entries, {}, "", "graph")
    return LayerGraph(name, tuple(builder.layers), input_features or 0, context)


def graph_model(graph: LayerGraph, source: str | None = None) -> ModelFile:
    """A graph made in Python (not read from a file) as a :class:`ModelFile`, hashed by its
    layers, so plans of it are cached like a file's."""
    layers = [dataclasses.asdict(layer) for layer in graph.layers]
    content = {"name": graph.name, "layers": layers, "input_features": graph.input_features,
               "context": graph.context}  # fmt: skip
    digest = hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()
    return ModelFile(graph, digest, None, source)


def _dim(key: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_SIZE:
        raise ConfigError(
            f"dims.{_short(str(key))}={excerpt(value)} must be an integer in [1, {MAX_SIZE}]"
        )
    return value


def evaluate(value: Any, dims: dict[str, int], field: str) -> int | bool:
    """An integer, a boolean, or an integer expression over ``dims`` (+, -, *, exact /)."""
    if isinstance(value, bool | int):
        return value
    if not isinstance(value, str):
        raise ConfigError(f"{field}={excerpt(value)} must be an integer or an expression over dims")
    try:
        return _eval(ast.parse(value, mode="eval").body, dims, field)
    except SyntaxError:
        raise ConfigError(f"{field}={excerpt(value)} is not an expression over dims") from None


def _eval(node: ast.AST, dims: dict[str, int], field: str) -> int:
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in dims:
            known = _short(", ".join(map(str, dims)))
            raise ConfigError(f"{field}: unknown dim {excerpt(node.id)}; dims: {known}")
        return dims[node.id]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        top, bottom = _eval(node.left, dims, field), _eval(node.right, dims, field)
        if bottom == 0 or top % bottom:
            raise ConfigError(f"{field}: {top} / {bottom} is not an exact integer division")
        return top // bottom
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        left, right = _eval(node.left, dims, field), _eval(node.right, dims, field)
        return _BINOPS[type(node.op)](left, right)
    raise ConfigError(f"{field}: only integers, dims and + - * / are allowed")


def _op_and_name(entry: dict[str, Any], prefix: str, where: str) -> tuple[str, str]:
    """The op and name of an op entry, taken out of ``entry``: both text, the op registered
    and the name not one reserved for an input."""
    if "op" not in entry or "name" not in entry:
        raise ConfigError(f"graph entry {excerpt(entry)} needs an op and a name")
    op, local = entry.pop("op"), entry.pop("name")
    for key, value in (("op", op), ("name", local)):
        if not isinstance(value, str) or not value:
            raise ConfigError(f"graph entry {key}={excerpt(value)} must be a name (text)")
    if local in RESERVED_NAMES:
        raise ConfigError(f"layer {local!r} at {where}: the name is reserved for an input "
                          f"(from: {local}); rename the op")  # fmt: skip
    if op not in OPS:
        raise ConfigError(
            f"layer {excerpt(local)}: op={excerpt(op)} is not one of: {', '.join(OPS)}"
        )
    return op, local


def _short(text: str) -> str:
    """``text`` cut to :data:`NAME_CHARS` characters, for a name inside a field's path."""
    return text if len(text) <= NAME_CHARS else text[: NAME_CHARS - 3] + "..."


NAME_CHARS = 40  # characters of a name an error shows at most
FLAG_FIELDS = ("bias", "tied")  # the layer fields that are true or false
# a size above 2^24 is refused: published models stay far below (vocabularies ~2^17,
# contexts ~2^20) and the compiler's placement tables grow with it (2^40 asked for 256 GiB)
MAX_SIZE = 2**24
MAX_REPEAT = 2**14  # blocks a repeat expands to (GPT-3 175B: 96; 2^24 of them never ended)
MAX_LAYERS = 2**20  # layers a model expands to, all repeats together
RESERVED_NAMES = ("input", "block_input")  # what ``from`` calls the model's and a block's input


# ``from`` names in scope -> the layers they stand for (``block_input`` is None in a block
# that starts the model: nothing comes before it)
Scope = dict[str, str | None]


class _Builder:
    """Expands ops and repeated blocks into layers, resolving ``from`` names by scope."""

    def __init__(self, dims: dict[str, int], input_features: int | None) -> None:
        self.dims = dims
        self.layers: list[Layer] = []
        self.widths: dict[str, int] = {}
        self.made_at: dict[str, str] = {}  # layer name -> the graph entry that made it
        self.last: str | None = None
        if input_features is not None:
            self.widths["input"] = _dim("input_features", input_features)
            self.last = "input"

    def ops(self, entries: Any, scope: Scope, prefix: str, where: str) -> None:
        """Expand ``entries``, the list at ``where`` in the file (``graph``, ``graph[2].block``)."""
        if not isinstance(entries, list) or not entries:
            raise ConfigError(f"graph{' of ' + prefix if prefix else ''} must be a list of ops")
        for index, entry in enumerate(entries):
            if not isinstance(entry, dict):
                raise ConfigError(f"graph entry {excerpt(entry)} must be a table")
            if "repeat" in entry:
                self.repeat(entry, scope, prefix, f"{where}[{index}]")
            else:
                self.op(dict(entry), scope, prefix, f"{where}[{index}]")

    def repeat(self, entry: dict[str, Any], scope: Scope, prefix: str,
               where: str) -> None:  # fmt: skip
        extra = set(entry) - {"repeat", "name", "block"}
        if extra or "name" not in entry or "block" not in entry:
            raise ConfigError(
                f"repeat entry needs exactly repeat, name, block; got "
                f"{excerpt(sorted(map(str, entry)))}"
            )
        field = f"{_short(str(entry['name']))}.repeat"
        count = evaluate(entry["repeat"], self.dims, field)
        if isinstance(count, bool) or not 1 <= count <= MAX_REPEAT:
            raise ConfigError(f"{field}={excerpt(count)} must be an integer in [1, {MAX_REPEAT}]")
        for i in range(count):
            local = {**scope, "block_input": self.last}
            self.ops(entry["block"], local, f"{prefix}{entry['name']}.{i}.", f"{where}.block")

    def op(self, entry: dict[str, Any], scope: Scope, prefix: str, where: str) -> None:
        op, local = _op_and_name(entry, prefix, where)
        name = prefix + local
        sources = self.sources(entry.pop("from", None), scope, name)
        fields = self.fields(name, entry)
        widths = [self.widths[s] for s in sources]
        new = build_op(op, name, fields, widths)
        new[0] = dataclasses.replace(new[0], inputs=tuple(sources), in_features=sum(widths))
        if prefix:
            new = [dataclasses.replace(layer, block=prefix[:-1]) for layer in new]
        self.add(new, where)
        if len(self.layers) > MAX_LAYERS:
            raise ConfigError(f"the model expands to more than {MAX_LAYERS:,} layers")
        scope[local] = new[-1].name
        self.widths[new[-1].name] = new[-1].features
        self.last = new[-1].name

    def fields(self, name: str, entry: dict[str, Any]) -> dict[str, int | bool]:
        """The op's other fields evaluated: a flag is a boolean, every other field a count."""
        fields = {
            key: evaluate(value, self.dims, f"{_short(name)}.{_short(str(key))}")
            for key, value in entry.items()
        }
        for key, value in fields.items():
            if key in FLAG_FIELDS:
                if not isinstance(value, bool):
                    raise ConfigError(
                        f"layer {excerpt(name)}: {_short(str(key))}={excerpt(value)} must be true "
                        "or false"
                    )
            elif isinstance(value, bool) or not 1 <= value <= MAX_SIZE:
                raise ConfigError(
                    f"layer {excerpt(name)}: {_short(str(key))}={excerpt(value)} must be an "
                    f"integer in [1, {MAX_SIZE}]"
                )
        return fields

    def add(self, new: list[Layer], where: str) -> None:
        """Append ``new``, made by the entry at ``where``; a name used before is refused, since
        ``from`` and the weights look layers up by name."""
        for layer in new:
            if layer.name in self.made_at:
                raise ConfigError(
                    f"layer {excerpt(layer.name)} is defined twice: at "
                    f"{self.made_at[layer.name]} and "
                    f"at {where}; layer names must be unique"
                )
            self.made_at[layer.name] = where
        self.layers.extend(new)

    def sources(self, given: Any, scope: Scope, name: str) -> list[str]:
        if given is None:
            return [] if self.last is None else [self.last]
        names = [given] if isinstance(given, str) else given
        resolved = [scope.get(n, n) for n in names]
        checked: list[str] = []
        for source, asked in zip(resolved, names, strict=True):
            if source is None or source not in self.widths:
                raise ConfigError(
                    f"layer {excerpt(name)}: from={excerpt(asked)} names no earlier op"
                )
            checked.append(source)
        return checked
