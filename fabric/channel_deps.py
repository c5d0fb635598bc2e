"""Deadlock freedom by proof: the channel dependency graph of the routes in use is acyclic.

A *channel* is one input queue of the fabric, ``(pe, in_port, color)``: ports 0..3 hold the
wavelets arriving on the link from that side, port 4 (``RAMP``) those the PE sends. A
wavelet at the head of a channel waits for room in the downstream channel of each output
it needs (``fabric/_engine_jit.py``), so the channel *depends* on those channels: the graph
has an edge from the channel to ``(neighbour across o, opposite(o), color)`` for each link
output ``o``.

Why an acyclic graph is the right check (Dally & Seitz, "Deadlock-free message routing in
multiprocessor interconnection networks", IEEE Trans. Computers C-36(5), 1987): a routing
function is deadlock-free if its channel dependency graph has no cycle. With wormhole or
credit flow control a deadlock is a set of full channels, each head waiting for room in
another channel of the set, and following those waits must come back round: a cycle of
dependencies is necessary for deadlock. Equivalently, the proof: order the channels
topologically; the last ones only feed ramps, which drain, and a channel whose downstream
channels all drain eventually drains too. For deterministic routing (static colors,
dimension order) the criterion is also necessary: enough traffic fills any cycle.

Assumptions the proof rests on:

* Ramp outputs are sinks: the PE drains its receive queue, i.e. programs consume what they
  are sent. A program that stops receiving while wavelets still arrive is a program bug
  the engine reports as a deadlock; it is not a routing property.
* Multicast: a head leaves its channel once every output has taken it, and the engine
  serves each output independently (an output takes the head as soon as *it* has a
  credit, keeping a per-head ``served`` mask). A head therefore never holds one output
  while waiting for another, so adding an edge to every output keeps the criterion
  sufficient. (Hardware that needed all outputs free at once would need more care.)
* Colors are separate channels: each color has its own queue and credits on every link,
  and an output only grants to a request that holds a credit, so colors share bandwidth
  but never block each other. There are no edges between colors.
* Every channel that receives wavelets forwards them somewhere; a route table entry of
  zero where wavelets arrive is a dead end (:func:`dead_end_channels`), checked apart.

Static colors (:class:`fabric.routes.ColorRoutes`) route by (port, color) alone, so for
them a cycle is more than a risk: any wavelet that reaches it circles forever, and enough
of them fill it. Destination colors use dimension-order routing; :func:`dor_dependencies`
builds their graph, acyclic on any mesh for XY or for YX alone, cyclic once both orders
share a color.
"""

from __future__ import annotations

from typing import NoReturn

import networkx as nx
import numpy as np
from wafersim.fabric._channel_jit import unresolved_channels
from wafersim.fabric.mesh import Mesh
from wafersim.fabric.routes import ColorRoutes
from wafersim.wafer.errors import ConfigError, WaferSimError
from wafersim.wafer.geometry import DIR_NAMES, NUM_DIRS, OPPOSITE, RAMP, E, W, pe_xy

# order -> whether a wavelet travelling in direction ``d_in`` may leave in ``d_out``
_HORIZONTAL = frozenset((E, W))
TURN_RULES = {
    "xy": lambda d_in, d_out: d_in == d_out or (d_in in _HORIZONTAL and d_out not in _HORIZONTAL),
    "yx": lambda d_in, d_out: d_in == d_out or (d_in not in _HORIZONTAL and d_out in _HORIZONTAL),
}
MAX_CHAIN = 64  # channels listed in an error message before the middle is elided

Channel = tuple[int, int, int]  # (pe, in_port, color)


class RouteCycleError(WaferSimError):
    """Routes whose channel dependency graph has a cycle: they can deadlock the fabric.

    ``cycle`` holds the channels ``(pe, in_port, color)`` of the cycle in order.
    """

    def __init__(self, message: str, cycle: list[Channel]) -> None:
        super().__init__(message)
        self.cycle = cycle


def color_route_dependencies(routes: ColorRoutes) -> nx.DiGraph:
    """Channel dependency graph of static color routes.

    Nodes are the channels ``(pe, in_port, color)`` that have a route or receive wavelets;
    an edge joins a channel to the channel across each link output of its route. Ramp
    outputs add no edge (the PE drains them). ``graph.graph["width"]`` is the mesh width.
    """
    graph = _empty_graph(routes.mesh)
    table = routes.table
    graph.add_nodes_from(zip(*(axis.tolist() for axis in np.nonzero(table)), strict=True))
    neighbor = routes.mesh.neighbors()
    for out in range(NUM_DIRS):
        pe, port, color = np.nonzero(table & np.uint8(1 << out))
        there = neighbor[pe, out]
        _check_links_exist(pe, there, out, routes.mesh.width)
        into = int(OPPOSITE[out])
        graph.add_edges_from(
            ((int(a), int(p), int(c)), (int(b), into, int(c)))
            for a, p, c, b in zip(pe, port, color, there, strict=True)
        )
    return graph


def dor_dependencies(mesh: Mesh, order: str = "xy", color: int = 0) -> nx.DiGraph:
    """Channel dependency graph of dimension-order routing (``"xy"`` or ``"yx"``) in one color.

    An edge joins two consecutive channels when some route of that order between two working
    PEs uses both. Every such pair is a turn (or straight step) the order allows at a router
    whose two links work, and the two-hop route across it is itself a dimension-order route,
    so the graph is built from local turns: exact on any mesh, defects included, in O(PEs).
    The PE's own ramp queue depends on each working link out of it.
    """
    allowed = _turn_rule(order)
    if not isinstance(color, int) or color < 0:
        raise ConfigError(f"color={color!r} must be an integer >= 0")
    graph = _empty_graph(mesh)
    link_ok = mesh.link_ok().astype(bool)
    neighbor = mesh.neighbors()
    for pe in np.flatnonzero(link_ok.any(axis=1)):
        outs = [int(o) for o in np.flatnonzero(link_ok[pe])]
        for out in outs:
            downstream = (int(neighbor[pe, out]), int(OPPOSITE[out]), color)
            graph.add_edge((int(pe), RAMP, color), downstream)
            for in_port in outs:
                if allowed(int(OPPOSITE[in_port]), out):
                    graph.add_edge((int(pe), in_port, color), downstream)
    return graph


def table_dependencies(
    mesh: Mesh, table: np.ndarray, in_down: np.ndarray, color: int = 0
) -> nx.DiGraph:
    """Channel dependency graph of table routing (``fabric.updown``): an edge from queue
    (pe, in-port) to the queue its packets for some destination are sent to next."""
    graph = _empty_graph(mesh)
    neighbor = mesh.neighbors()
    for pe in np.flatnonzero(mesh.alive.reshape(-1)):
        for in_port in range(RAMP + 1):
            outs = np.unique(table[in_down[pe, in_port], pe])
            for out in outs[(outs >= 0) & (outs < RAMP)]:
                downstream = (int(neighbor[pe, out]), int(OPPOSITE[out]), color)
                graph.add_edge((int(pe), in_port, color), downstream)
    return graph


def check_deadlock_free(graph: nx.DiGraph, width: int | None = None) -> None:
    """Raise :class:`RouteCycleError` printing a cycle of ``graph``, if it has one.

    ``width`` (to print PEs as ``(x, y)``) defaults to ``graph.graph["width"]``.
    """
    width = _graph_width(graph, width)
    on_cycles = _on_cycles(graph)
    if on_cycles:
        _raise_cycle(_a_cycle(graph, on_cycles), width)


def check_routes(routes: ColorRoutes) -> None:
    """Reject static color routes that can deadlock: a dependency cycle or a dead end.

    Linear in the channels: Kahn's algorithm runs over the route table in a Numba kernel
    (``fabric._channel_jit``); the graph is built only to name a cycle that exists.
    """
    stuck, received = _resolve(routes)
    if stuck.any():
        graph = color_route_dependencies(routes)
        _raise_cycle(_a_cycle(graph, set(_channels(routes, stuck))), routes.mesh.width)
    dead = _dead_ends(routes, received)
    if dead:
        names = ", ".join(channel_name(ch, routes.mesh.width) for ch in dead[:MAX_CHAIN])
        raise ConfigError(
            f"routes have {len(dead)} dead end(s): wavelets arriving there have no route "
            f"and would wait forever: {names}"
        )


def dead_end_channels(routes: ColorRoutes) -> list[Channel]:
    """Channels that receive a color over a link but have no route for it, sorted."""
    return _dead_ends(routes, _resolve(routes)[1])


def _resolve(routes: ColorRoutes) -> tuple[np.ndarray, np.ndarray]:
    """``unresolved_channels`` of the route table, after checking its links exist."""
    neighbor = routes.mesh.neighbors()
    for out in range(NUM_DIRS):
        sends = (routes.table & np.uint8(1 << out)).any(axis=(1, 2))
        _check_links_exist(np.flatnonzero(sends), neighbor[sends, out], out, routes.mesh.width)
    return unresolved_channels(routes.table, neighbor)


def _dead_ends(routes: ColorRoutes, received: np.ndarray) -> list[Channel]:
    return _channels(routes, received & (routes.table.reshape(-1) == 0))


def _channels(routes: ColorRoutes, mask: np.ndarray) -> list[Channel]:
    """The channels ``(pe, in_port, color)`` where the flat ``mask`` is set, in order."""
    pe, port, color = np.unravel_index(np.flatnonzero(mask), routes.table.shape)
    return list(zip(pe.tolist(), port.tolist(), color.tolist(), strict=True))


def _on_cycles(graph: nx.DiGraph) -> set:
    """Nodes on some cycle: strongly connected components of several nodes, or a self-loop."""
    nodes = set()
    for component in nx.strongly_connected_components(graph):
        node = next(iter(component))
        if len(component) > 1 or graph.has_edge(node, node):
            nodes |= component
    return nodes


def _a_cycle(graph: nx.DiGraph, stuck: set) -> list[Channel]:
    """A cycle through the ``stuck`` nodes, in the order of its edges, from its least channel.

    ``stuck``: nodes on cycles, or also those downstream of one (what Kahn's algorithm leaves).
    Either way every stuck node has a stuck predecessor, so walking back from any of them
    along stuck predecessors must meet a node twice; the nodes between are a cycle.
    """
    node, path, seen = min(stuck), [], {}
    while node not in seen:
        seen[node] = len(path)
        path.append(node)
        node = next(p for p in graph.predecessors(node) if p in stuck)
    cycle = [tuple(int(i) for i in ch) for ch in reversed(path[seen[node] :])]
    first = cycle.index(min(cycle))
    return cycle[first:] + cycle[:first]


def _raise_cycle(cycle: list[Channel], width: int) -> NoReturn:
    raise RouteCycleError(
        f"routes can deadlock: channel dependency cycle of {len(cycle)} queues: "
        + describe_cycle(cycle, width),
        cycle,
    )


def describe_cycle(cycle: list[Channel], width: int) -> str:
    """``PE (0,0) in S color 0 -> PE (1,0) in W color 0 -> ... -> back to PE (0,0) in S``."""
    names = [channel_name(ch, width) for ch in cycle]
    if len(names) > MAX_CHAIN:
        half = MAX_CHAIN // 2
        names = [*names[:half], f"... {len(names) - 2 * half} more ...", *names[-half:]]
    pe, port, _color = cycle[0]
    x, y = pe_xy(pe, width)
    return " -> ".join(names) + f" -> back to PE ({x},{y}) in {_port_name(port)}"


def channel_name(channel: Channel, width: int) -> str:
    """``PE (x,y) in <port> color <c>`` for a channel ``(pe, in_port, color)``."""
    pe, port, color = channel
    x, y = pe_xy(pe, width)
    return f"PE ({x},{y}) in {_port_name(port)} color {color}"


def _check_links_exist(pe: np.ndarray, there: np.ndarray, out: int, width: int) -> None:
    if (there >= 0).all():
        return
    x, y = pe_xy(int(pe[np.argmin(there)]), width)
    raise ConfigError(f"route table sends a color off the mesh: PE ({x},{y}) out {DIR_NAMES[out]}")


def _port_name(port: int) -> str:
    return "ramp" if port == RAMP else DIR_NAMES[port]


def _empty_graph(mesh: Mesh) -> nx.DiGraph:
    return nx.DiGraph(width=mesh.width, height=mesh.height)


def _graph_width(graph: nx.DiGraph, width: int | None) -> int:
    width = graph.graph.get("width") if width is None else width
    if not isinstance(width, int) or width < 1:
        raise ConfigError(
            f"mesh width={width!r} must be an integer >= 1: pass width= or build the graph "
            "with color_route_dependencies / dor_dependencies, which record it"
        )
    return width


def _turn_rule(order: str):
    try:
        return TURN_RULES[order]
    except KeyError:
        raise ConfigError(
            f"order={order!r} is not a dimension order; valid: {', '.join(TURN_RULES)}"
        ) from None
