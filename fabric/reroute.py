"""Detours for color routes: route trees that avoid every hole and dead link.

A :class:`RouteRequest` asks for one color to carry wavelets from a source PE to one target
(point-to-point) or many (a multicast tree, such as :func:`row_multicast`).
:func:`plan_routes` joins each target to the source by a shortest path of working wires
and returns a :class:`RoutePlan`: per request a tree, the hops each detour adds, and the
links that more than one request uses.

Rules.

* A path uses only working routers and wires that work both ways (``Mesh.link_ok`` at
  both ends); holes are never crossed.
* Each request's paths form one tree (one parent per PE) in which every target's path is
  a shortest working path. Among equally short paths the dimension-order (XY) one, along
  the source's row and then the target's column, is taken whenever all of it works: a
  defect-free mesh gets exactly the XY routes, with 0 added hops. Every other target walks
  back from itself, one hop nearer the source per step, taking the step nearest its own
  XY path (ties: the XY step, then the horizontal step towards the source, then N, E, S,
  W), until it meets the tree; so detours hug the XY route and leave it only where they
  must. Minimising each target's hops does not minimise the tree's total links.
* Added hops of a target are its tree depth minus its Manhattan distance; a route's added
  hops are the most over its targets, and ``longest_detour`` the most over all routes.
* Links are directed, ``link = pe * 4 + direction`` (:mod:`wafer.geometry`); a link two
  requests use is *shared*. Two requests of one color sharing a link (or a source) would
  mix their wavelets, so :meth:`RoutePlan.routes_for` refuses them.

Authority. This module is the fabric's word on how far round holes a path must go: every
target's path is a shortest working path. The kernels' routes (:mod:`kernels.wiring`) use
the same working wires but claim colored channels stream by stream, so a route may be longer
and never shorter; the analytic tier's detours (:mod:`kernels.detour`) are a closed form per
logical hop that equals these shortest paths where its assumed path exists and bounds them
below elsewhere. ``tests/test_detour_models.py`` holds the three to that on random holed
patches. The study's reroutes (``wafersim.studies.routes``) are these trees.

Speed: each search is a BFS confined to a box around the source and targets that grows
only when needed. A path that leaves a box must reach a row or column outside it, so it is
at least as long as the detour to that row or column; when every target's in-box distance
is within that bound the in-box paths are shortest over the whole mesh, otherwise the
margin doubles. Row and column multicasts thus search a few rows or columns, not the wafer.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field

import numpy as np
from wafersim.fabric import _reroute_jit as jit
from wafersim.fabric.mesh import Mesh
from wafersim.fabric.routes import ColorRoutes
from wafersim.wafer.errors import ConfigError, ConnectivityError
from wafersim.wafer.geometry import DIR_NAMES, NUM_DIRS, OPPOSITE, RAMP, E, N, S, W

FIRST_MARGIN_PES = 2  # rows/columns a search first looks beyond the request's bounding box
ISLANDS_LISTED = 8  # islands named in a ConnectivityError
PES_LISTED = 4  # unreachable targets named in a ConnectivityError


@dataclass(frozen=True)
class RouteRequest:
    """One color from ``source`` to every PE in ``targets`` (PE ids; one target = unicast)."""

    color: int
    source: int
    targets: tuple[int, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "color", _index("color", self.color))
        object.__setattr__(self, "source", _index("source", self.source))
        targets = np.asarray(self.targets)
        if targets.ndim != 1 or targets.size == 0 or targets.dtype.kind not in "iu":
            raise ConfigError(f"targets={self.targets!r} must be a non-empty sequence of PE ids")
        if targets.min() < 0:
            raise ConfigError(f"targets must be >= 0, got {int(targets.min())}")
        if np.unique(targets).size != targets.size:
            raise ConfigError(f"targets name a PE more than once: {self.targets!r}")
        if (targets == self.source).any():
            raise ConfigError(f"source pe={self.source} is also a target")
        object.__setattr__(self, "targets", tuple(targets.tolist()))


def _index(name: str, value) -> int:
    """``value`` as a non-negative int; bools, floats and negatives are refused."""
    try:
        if isinstance(value, bool):
            raise TypeError
        value = operator.index(value)
    except TypeError:
        raise ConfigError(f"{name}={value!r} must be a non-negative integer") from None
    if value < 0:
        raise ConfigError(f"{name}={value} must be >= 0")
    return value


def row_multicast(mesh: Mesh, color: int, source: int) -> RouteRequest:
    """``source`` to every other working PE of its row."""
    y = _checked_pe(mesh, source) // mesh.width
    working = np.flatnonzero(mesh.alive[y]) + y * mesh.width
    return RouteRequest(color, source, tuple(working[working != source].tolist()))


def column_multicast(mesh: Mesh, color: int, source: int) -> RouteRequest:
    """``source`` to every other working PE of its column."""
    x = _checked_pe(mesh, source) % mesh.width
    working = np.flatnonzero(mesh.alive[:, x]) * mesh.width + x
    return RouteRequest(color, source, tuple(working[working != source].tolist()))


def _checked_pe(mesh: Mesh, pe: int) -> int:
    pe = _index("pe", pe)
    if pe >= mesh.pes:
        raise ConfigError(f"pe={pe} is out of range [0, {mesh.pes - 1}]")
    return pe


@dataclass(frozen=True, eq=False)
class SharedLinks:
    """Links used by more than one request; ``request``/``color`` split by ``offsets``."""

    link: np.ndarray  # int64 (K,): directed link id, pe * 4 + direction, ascending
    offsets: np.ndarray  # int64 (K + 1,): link i's users are request[offsets[i]:offsets[i+1]]
    request: np.ndarray  # int64 (offsets[-1],): request indices, ascending per link
    color: np.ndarray  # int64 (offsets[-1],): their colors

    def __len__(self) -> int:
        return int(self.link.size)

    def same_color(self) -> np.ndarray:
        """bool (K,): links that two requests of one color share (their wavelets would mix)."""
        group = np.repeat(np.arange(len(self)), np.diff(self.offsets))
        order = np.lexsort((self.color, group))
        g, c = group[order], self.color[order]
        same = np.zeros(len(self), bool)
        same[g[1:][(g[1:] == g[:-1]) & (c[1:] == c[:-1])]] = True
        return same

    def records(self, width: int) -> list[dict]:
        """One JSON-ready dict per link: ``pe`` as ``[x, y]``, direction, requests, colors."""
        out = []
        for i, link in enumerate(self.link.tolist()):
            pe, d = divmod(link, NUM_DIRS)
            lo, hi = self.offsets[i], self.offsets[i + 1]
            out.append(
                {
                    "pe": [pe % width, pe // width],
                    "direction": DIR_NAMES[d],
                    "requests": self.request[lo:hi].tolist(),
                    "colors": self.color[lo:hi].tolist(),
                }
            )
        return out


@dataclass(frozen=True, eq=False)
class RoutePlan:
    """Per request a tree of working links, split by ``tree_offsets``/``target_offsets``."""

    mesh: Mesh
    requests: tuple[RouteRequest, ...]
    tree_offsets: np.ndarray  # int64 (R + 1,)
    tree_pe: np.ndarray  # int64 (tree_offsets[-1],): tree PEs, each request's source first
    tree_parent: np.ndarray  # int64 (tree_offsets[-1],): parent PE, -1 for the source
    target_offsets: np.ndarray  # int64 (R + 1,)
    target_pe: np.ndarray  # int64 (target_offsets[-1],): targets in request order
    target_hops: np.ndarray  # int64: tree depth of each target
    target_added_hops: np.ndarray  # int64: depth minus Manhattan distance
    added_hops: np.ndarray  # int64 (R,): most added hops over each request's targets
    longest_detour: int  # most added hops over all requests, 0 if none
    shared_links: SharedLinks = field(repr=False)

    def tree(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        """Request ``index``'s tree as (PE ids, parent PE ids), the source first."""
        lo, hi = self.tree_offsets[index], self.tree_offsets[index + 1]
        return self.tree_pe[lo:hi], self.tree_parent[lo:hi]

    def parents(self, index: int) -> np.ndarray:
        """int64 (P,): each PE's parent in request ``index``'s tree, -1 off it and at the root."""
        pes, parents = self.tree(index)
        out = np.full(self.mesh.pes, -1, np.int64)
        out[pes] = parents
        return out

    def path(self, index: int, target: int) -> list[int]:
        """PE ids from request ``index``'s source to ``target`` along its tree."""
        parents = self.parents(index)
        if target == self.requests[index].source:
            return [target]
        if parents[target] < 0:
            raise ConfigError(f"pe={target} is not on the tree of request {index}")
        path = [target]
        while parents[path[-1]] >= 0:
            path.append(int(parents[path[-1]]))
        return path[::-1]

    def summary(self) -> dict:
        """JSON-ready figures: routes, targets, added hops, longest detour, shared links."""
        return {
            "routes": len(self.requests),
            "targets": int(self.target_pe.size),
            "mean_added_hops_per_route": float(self.added_hops.mean()) if self.requests else 0.0,
            "max_added_hops_per_route": self.longest_detour,
            "mean_added_hops_per_target": float(self.target_added_hops.mean())
            if self.target_pe.size
            else 0.0,
            "routes_with_detour": int((self.added_hops > 0).sum()),
            "shared_links": len(self.shared_links),
            "shared_links_same_color": int(self.shared_links.same_color().sum()),
        }

    def routes_for(self, colors: int) -> ColorRoutes:
        """A ``colors``-color route table carrying every request's tree (via ``add``).

        At each tree PE the color arriving on the port from its parent (the ramp at the
        source) goes to the ports of its children, and to the ramp at a target.

        Raises :class:`ConfigError` where two requests of one color would enter a router on
        the same port (a shared link or source), since the table cannot keep them apart.
        """
        used = max((r.color for r in self.requests), default=0)
        if used >= colors:
            raise ConfigError(f"colors={colors} is too few: the plan uses color {used}")
        entries = [_router_entries(self, i) for i in range(len(self.requests))]
        _check_collisions(self, entries)
        routes = ColorRoutes(self.mesh, colors)
        for request, (pes, in_ports, masks) in zip(self.requests, entries, strict=True):
            for pe, in_port, mask in zip(
                pes.tolist(), in_ports.tolist(), masks.tolist(), strict=True
            ):
                ports = tuple(p for p in range(RAMP + 1) if mask >> p & 1)
                routes.add(pe, in_port, request.color, ports)
        return routes


def _directions(parent: np.ndarray, child: np.ndarray, width: int) -> np.ndarray:
    """int64: the direction of the link from each ``parent`` to its neighbouring ``child``."""
    step = child - parent
    return np.select([step == width, step == -width, step == 1], [S, N, E], W).astype(np.int64)


def _router_entries(plan: RoutePlan, index: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Request ``index``'s table entries: per tree PE its input port and output-port mask."""
    pes, parents = plan.tree(index)
    width = plan.mesh.width
    order = np.argsort(pes)
    where = order[np.searchsorted(pes[order], parents[1:])]  # parent's index in pes
    dirs = _directions(parents[1:], pes[1:], width)
    masks = np.zeros(pes.size, np.int64)
    np.bitwise_or.at(masks, where, 1 << dirs)
    lo, hi = plan.target_offsets[index], plan.target_offsets[index + 1]
    masks[order[np.searchsorted(pes[order], plan.target_pe[lo:hi])]] |= 1 << RAMP
    in_ports = np.concatenate(([RAMP], OPPOSITE[dirs]))
    return pes, in_ports, masks


def _check_collisions(plan: RoutePlan, entries) -> None:
    """Refuse two requests of one color entering one router on the same port."""
    if not entries:
        return
    colors = np.array([r.color for r in plan.requests], np.int64)
    sizes = [pes.size for pes, _, _ in entries]
    owner = np.repeat(np.arange(len(entries)), sizes)
    pe = np.concatenate([pes for pes, _, _ in entries])
    port = np.concatenate([ports for _, ports, _ in entries])
    key = (pe * (RAMP + 1) + port) * (colors.max() + 1) + colors[owner]
    order = np.argsort(key, kind="stable")
    clash = np.flatnonzero(key[order][1:] == key[order][:-1])
    if clash.size:
        first, second = owner[order[clash[0]]], owner[order[clash[0] + 1]]
        at = int(pe[order[clash[0]]])
        via = DIR_NAMES[port[order[clash[0]]]]
        raise ConfigError(
            f"requests {first} and {second} both route color {colors[first]} into "
            f"{_xy(at, plan.mesh.width)} on port {via}; give them different colors"
        )


def _xy(pe: int, width: int) -> str:
    return f"PE ({pe % width}, {pe // width})"


def _wire_ok(mesh: Mesh) -> np.ndarray:
    """uint8 (P, 4): 1 where the wire leaving a PE that way works (:meth:`Mesh.link_ok`, the
    one home of that fact) in both directions."""
    ok = mesh.link_ok().astype(bool)
    back = ok[np.maximum(mesh.neighbors(), 0), OPPOSITE]  # the same wire, entered from there
    return (ok & back).astype(np.uint8)


def islands(mesh: Mesh) -> np.ndarray:
    """int64 (H, W): island number of each working PE (row-major first-seen order), -1 holes."""
    labels = jit.label_islands(mesh.alive.reshape(-1), _wire_ok(mesh), mesh.width)
    return labels.reshape(mesh.height, mesh.width)


def check_connected(mesh: Mesh) -> None:
    """Raise :class:`ConnectivityError` unless the working PEs form one island."""
    labels = islands(mesh).reshape(-1)
    sizes = np.bincount(labels[labels >= 0])
    if sizes.size == 1:
        return
    if sizes.size == 0:
        raise ConnectivityError("the mesh has no working PE")
    first = np.full(sizes.size, labels.size, np.int64)
    np.minimum.at(first, labels[labels >= 0], np.flatnonzero(labels >= 0))
    ranked = np.argsort(-sizes, kind="stable")
    listed = [
        f"{sizes[i]} PEs from {_xy(int(first[i]), mesh.width)}" for i in ranked[:ISLANDS_LISTED]
    ]
    more = f" and {sizes.size - ISLANDS_LISTED} more" if sizes.size > ISLANDS_LISTED else ""
    raise ConnectivityError(
        f"the mesh has {sizes.size} islands of working PEs that cannot reach each other: "
        f"{', '.join(listed)}{more}"
    )


def plan_routes(mesh: Mesh, requests) -> RoutePlan:
    """Shortest working route trees for ``requests`` (a sequence of :class:`RouteRequest`).

    Raises :class:`ConfigError` for PE ids off the mesh and :class:`ConnectivityError`
    naming the PEs when a source or target is a hole or a target is in another island.
    """
    requests = tuple(requests)
    for i, request in enumerate(requests):
        if not isinstance(request, RouteRequest):
            raise ConfigError(f"requests[{i}] is a {type(request).__name__}, not a RouteRequest")
    wire_ok = _wire_ok(mesh)
    labels = jit.label_islands(mesh.alive.reshape(-1), wire_ok, mesh.width)
    targets = [np.asarray(r.targets, np.int64) for r in requests]
    for i, request in enumerate(requests):
        _check_request(mesh, labels, i, request, targets[i])
    trees = []
    for request, wanted in zip(requests, targets, strict=True):
        tree = jit.route_tree(
            wire_ok, mesh.width, mesh.height, request.source, wanted, FIRST_MARGIN_PES
        )
        if (tree[2] < 0).any():  # cannot happen: _check_request refused other islands
            raise ConnectivityError(f"no working path from {_xy(request.source, mesh.width)}")
        trees.append(tree)
    return _assemble(mesh, requests, targets, trees)


def _check_request(
    mesh: Mesh, labels: np.ndarray, index: int, request: RouteRequest, targets: np.ndarray
) -> None:
    """Refuse PEs off the mesh, holes, and targets outside the source's island."""
    where = f"request {index} (color {request.color})"
    worst = max(request.source, int(targets.max()))
    if worst >= mesh.pes:
        raise ConfigError(f"{where}: pe={worst} is out of range [0, {mesh.pes - 1}]")
    holes = [p for p in (request.source, *targets[labels[targets] < 0].tolist()) if labels[p] < 0]
    if holes:
        raise ConnectivityError(f"{where}: {_pe_list(holes, mesh.width)} is a hole (dead PE)")
    island = labels[request.source]
    cut = targets[labels[targets] != island].tolist()
    if cut:
        sizes = np.bincount(labels[labels >= 0])
        raise ConnectivityError(
            f"{where}: {_pe_list(cut, mesh.width)} cannot be reached from source "
            f"{_xy(request.source, mesh.width)}: they are in different islands "
            f"({sizes[labels[cut[0]]]} and {sizes[island]} working PEs)"
        )


def _pe_list(pes: list[int], width: int) -> str:
    named = ", ".join(_xy(p, width) for p in pes[:PES_LISTED])
    return named + (f" and {len(pes) - PES_LISTED} more" if len(pes) > PES_LISTED else "")


def _assemble(mesh: Mesh, requests, targets: list[np.ndarray], trees) -> RoutePlan:
    """Pack per-request trees into a :class:`RoutePlan` with added hops and shared links."""
    width = mesh.width
    counts = [t.size for t in targets]
    target_pe = _concat(targets)
    source = np.repeat(np.array([r.source for r in requests], np.int64), counts)
    dx, dy = target_pe % width - source % width, target_pe // width - source // width
    target_hops = _concat([h for _, _, h in trees])
    target_added = target_hops - np.abs(dx) - np.abs(dy)
    target_offsets = _offsets(counts)
    added = np.zeros(len(requests), np.int64)
    if requests:
        added = np.maximum.reduceat(target_added, target_offsets[:-1])
    pes, parents = _concat([p for p, _, _ in trees]), _concat([p for _, p, _ in trees])
    tree_offsets = _offsets([p.size for p, _, _ in trees])
    return RoutePlan(
        mesh=mesh,
        requests=requests,
        tree_offsets=tree_offsets,
        tree_pe=pes,
        tree_parent=parents,
        target_offsets=target_offsets,
        target_pe=target_pe,
        target_hops=target_hops,
        target_added_hops=target_added,
        added_hops=added,
        longest_detour=int(added.max()) if added.size else 0,
        shared_links=_shared_links(requests, tree_offsets, pes, parents, mesh),
    )


def _concat(arrays: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(arrays).astype(np.int64) if arrays else np.zeros(0, np.int64)


def _offsets(sizes: list[int]) -> np.ndarray:
    return np.concatenate(([0], np.cumsum(sizes, dtype=np.int64))).astype(np.int64)


def _shared_links(requests, tree_offsets, pes, parents, mesh: Mesh) -> SharedLinks:
    """The directed links that more than one request's tree uses."""
    owner = np.repeat(np.arange(len(requests), dtype=np.int64), np.diff(tree_offsets))
    edge = parents >= 0
    link = parents[edge] * NUM_DIRS + _directions(parents[edge], pes[edge], mesh.width)
    owner = owner[edge]
    users = np.bincount(link, minlength=mesh.pes * NUM_DIRS)  # a tree uses a link once
    shared = users[link] > 1
    link, owner = link[shared], owner[shared]
    order = np.lexsort((owner, link))
    link, owner = link[order], owner[order]
    starts = np.flatnonzero(np.r_[True, link[1:] != link[:-1]]) if link.size else link
    colors = np.array([r.color for r in requests], np.int64)
    return SharedLinks(
        link=link[starts],
        offsets=np.append(starts, link.size).astype(np.int64),
        request=owner,
        color=colors[owner],
    )


def warm_up() -> None:
    """Compile the kernels on a 3x3 mesh with a hole, so timings exclude JIT compilation."""
    alive = np.ones((3, 3), bool)
    alive[1, 1] = False
    mesh = Mesh(3, 3, alive, np.zeros((3, 3, NUM_DIRS), bool))
    islands(mesh)
    plan_routes(mesh, [RouteRequest(0, 3, (5,)), row_multicast(mesh, 1, 0)])


ROW_COLOR, COLUMN_COLOR = 0, 1  # the colors of multicast_requests


def multicast_requests(mesh: Mesh) -> list[RouteRequest]:
    """One row multicast per row and one column multicast per column with two working PEs,
    each from the first working PE of its row (color 0) or column (color 1)."""
    requests = []
    for y in range(mesh.height):
        working = np.flatnonzero(mesh.alive[y])
        if working.size > 1:
            requests.append(row_multicast(mesh, ROW_COLOR, int(y * mesh.width + working[0])))
    for x in range(mesh.width):
        working = np.flatnonzero(mesh.alive[:, x])
        if working.size > 1:
            requests.append(column_multicast(mesh, COLUMN_COLOR, int(working[0] * mesh.width + x)))
    return requests
