"""The package stack from the source's imports (inside functions and TYPE_CHECKING blocks
too): each package imports only the ones below it, and no modules import each other in a
circle, across packages or inside one."""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parent.parent
# Bottom to top, as the README's design notes describe them: each layer's folder at the
# repository's root installs as wafersim.<folder>; the application is wafersim/ itself.
LAYERS = ("wafer", "fabric", "kernels", "compiler", "memoryx", "wafersim")


def package_name(folder: str) -> str:
    """The installed name of a layer's folder."""
    return folder if folder == "wafersim" else f"wafersim.{folder}"


def layer_of(module: str) -> int:
    """The layer a module's installed name puts it in (the application's are the rest)."""
    parts = module.split(".")
    return LAYERS.index(parts[1]) if len(parts) > 1 and parts[1] in LAYERS[:-1] else len(LAYERS) - 1


def modules() -> dict[str, Path]:
    found = {}
    for folder in LAYERS:
        for path in (ROOT / folder).rglob("*.py"):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            name = ".".join((package_name(folder), *parts))
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


def reexports(tree: ast.Module) -> set[int]:
    """The ids of the import statements in a module's top-level ``if TYPE_CHECKING:`` blocks:
    in a package root, the types of its lazy EXPORTS, which never run."""
    blocks = [node for node in tree.body if isinstance(node, ast.If)
              and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"]  # fmt: skip
    return {id(inner) for block in blocks for inner in ast.walk(block)}


def import_graph() -> nx.DiGraph:
    """Edges ``reexport``: a package root's re-exports (see :func:`reexports`) alone."""
    known = modules()
    graph = nx.DiGraph()
    for name, path in known.items():
        graph.add_node(name)
        tree = ast.parse(path.read_text(), str(path))
        lazy = reexports(tree) if path.name == "__init__.py" else set()
        for node in ast.walk(tree):
            for target in imported(node, known):
                if target == name:
                    continue
                eager = graph.has_edge(name, target) and not graph.edges[name, target]["reexport"]
                graph.add_edge(name, target, line=f"{path.relative_to(ROOT)}:{node.lineno}",
                               reexport=id(node) in lazy and not eager)  # fmt: skip
    return graph


def test_every_package_has_a_layer():
    # examples/ is data (the bundled examples), not a layer of code
    packages = {p.parent.name for p in ROOT.glob("*/__init__.py")} - {
        "tests",
        "benchmarks",
        "examples",
    }
    assert packages == set(LAYERS)


def test_no_import_runs_up_the_stack():
    upward = [
        f"{a} -> {b} ({data['line']})"
        for a, b, data in import_graph().edges(data=True)
        if layer_of(b) > layer_of(a)
    ]
    assert upward == []


def test_no_modules_import_each_other_in_a_circle():
    """Not counting a package root's re-exports for type checkers: they mirror its lazy
    EXPORTS, so a module importing its root (``from wafersim import wafer``, for the
    version) closes no circle at run time."""
    graph = import_graph()
    graph.remove_edges_from([(a, b) for a, b, lazy in graph.edges(data="reexport") if lazy])
    circles = [sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1]
    assert circles == []


def test_only_the_namespace_is_installed():
    """Every package installs under wafersim: no top-level name of another project is taken."""
    import tomllib

    setup = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    folders = {p.parent.relative_to(ROOT).as_posix() for p in ROOT.glob("*/**/__init__.py")}
    shipped = (*LAYERS, "examples")  # the layers and the bundled examples (data)
    folders = {f for f in folders if f.split("/")[0] in shipped}  # not tests, build/, .venv
    packages = {".".join((package_name(f.split("/")[0]), *f.split("/")[1:])) for f in folders}
    assert set(setup["packages"]) == packages
    assert all(p == "wafersim" or p.startswith("wafersim.") for p in setup["packages"])
    assert all(setup["package-dir"][package_name(f)] == f for f in shipped)


def test_the_graph_holds_imports_at_the_top_and_inside_functions():
    """The graph is built from the import statements: edges known to exist are in it."""
    graph = import_graph()
    assert graph.has_edge("wafersim.cli", "wafersim.commands.parser")
    assert graph.has_edge("wafersim.fabric.precompile", "wafersim.fabric.traffic")
    assert graph.has_edge("wafersim.commands.defects", "wafersim.plots.study")  # in a function
    assert graph.edges["wafersim.wafer", "wafersim.wafer.spec"]["reexport"]  # TYPE_CHECKING
    assert not graph.edges["wafersim.wafer", "wafersim.wafer.lazy"]["reexport"]
