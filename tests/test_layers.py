"""The package stack from the source's imports (inside functions and TYPE_CHECKING blocks
too): each package imports only the ones below it, and no modules import each other in a
circle, across packages or inside one."""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parent.parent
# Bottom to top, as the README's design notes describe them.
LAYERS = ("wafer", "fabric", "kernels", "compiler", "memoryx", "wafersim")


def modules() -> dict[str, Path]:
    found = {}
    for package in LAYERS:
        for path in (ROOT / package).rglob("*.py"):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            found[name.removesuffix(".__init__")] = path
    return found


def imported(node: ast.AST, known: dict[str, Path]) -> list[str]:
    """The project modules an import statement names (``from a import b``: ``a.b`` if that
    is a module, else ``a``)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names if alias.name in known]
    if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module in known:
        return [
            f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in known else node.module
            for alias in node.names
        ]
    return []


def import_graph() -> nx.DiGraph:
    known = modules()
    graph = nx.DiGraph()
    for name, path in known.items():
        graph.add_node(name)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            for target in imported(node, known):
                if target != name:
                    graph.add_edge(name, target, line=f"{path.relative_to(ROOT)}:{node.lineno}")
    return graph


def test_every_package_has_a_layer():
    packages = {p.parent.name for p in ROOT.glob("*/__init__.py")} - {"tests", "benchmarks"}
    assert packages == set(LAYERS)


def test_no_import_runs_up_the_stack():
    layer = {name: LAYERS.index(name.split(".")[0]) for name in modules()}
    upward = [
        f"{a} -> {b} ({data['line']})"
        for a, b, data in import_graph().edges(data=True)
        if layer[b] > layer[a]
    ]
    assert upward == []


def test_no_modules_import_each_other_in_a_circle():
    graph = import_graph()
    circles = [sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1]
    assert circles == []


def test_the_graph_holds_imports_at_the_top_and_inside_functions():
    """The graph is built from the import statements: edges known to exist are in it."""
    graph = import_graph()
    assert graph.has_edge("wafersim.cli", "wafersim.parser")
    assert graph.has_edge("fabric.precompile", "fabric.traffic")  # an import inside the module
    assert graph.has_edge("wafersim.defects_command", "wafersim.study_plot")  # in a function
