"""Collectives along one row or column of a mesh (a *line* of PEs), run on the cycle engine.

``broadcast``, ``reduce`` (sum into the root) and ``allreduce`` (every PE ends with the sum)
each build static color routes and PE programs for one algorithm of :data:`ALGOS`, run them
with :func:`fabric.engine.simulate` and return a :class:`CollectiveResult`.

Memory layout per PE: the input vector at SRAM word 0, the result at :data:`RESULT_WORD`.
The result region starts as a copy of the input (placed there with the input, not by the
program), so a reduction accumulates into it with ``recv_add`` and leaves the input intact.

Algorithms (``n`` words, ``s = pe.op_startup_cycles``, ``L = link.hop_latency_cycles``):

* ``chain``: store-and-forward along the line, vector by vector. Broadcast: the root sends
  once on a color its router fans out to both neighbours; each PE receives, then forwards
  outward. Reduce: each PE ``recv_add``s its outer neighbour's partial sum, then sends it
  inward; the root adds the left side, then the right side. Colors alternate with the
  distance to the root (and differ per side for reduce) so neighbouring links never share
  a receive queue.
* ``tree``: broadcast is one send on a color whose route is a multicast path to every PE
  (each router forwards and delivers). Reduce is a binomial tree on each side of the root:
  in round ``k`` the PE at index ``i`` (distance from the root, ``i % 2^(k+1) == 2^k``)
  sends its partial sum ``2^k`` hops inward; one color per (round, side).
* ``allreduce`` is ``reduce`` to the middle PE followed by ``broadcast`` from it, with
  the same algorithm and disjoint colors.

:func:`analytic_cycles` estimates each (op, algo) from the point-to-point rule: one stream
of ``n`` words over ``h`` hops takes ``p2p(h) = s + 1 + h*L + n`` cycles. See its docstring.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from fabric.engine import simulate
from fabric.mesh import Mesh
from fabric.program import ProgramBuilder
from fabric.routes import ColorRoutes
from wafer.errors import ConfigError
from wafer.presets import preset
from wafer.spec import WaferSpec

RESULT_WORD = 2048  # SRAM word where every PE's result vector starts
MAX_WORDS = RESULT_WORD  # inputs at [0, n) must not overlap results at [RESULT_WORD, +n)
MAX_CYCLES_FACTOR = 4  # engine budget: this many times the analytic estimate ...
MAX_CYCLES_SLACK = 1000  # ... plus this many cycles


@dataclass(frozen=True)
class CollectiveResult:
    """What a collective left behind: ``values`` (len(line), n_words) float32 at RESULT_WORD."""

    op: str
    algo: str
    line: tuple[int, ...]
    root: int
    cycles: int
    values: np.ndarray  # float32 (len(line), n_words): each PE's result region
    inputs: np.ndarray  # float32 (len(line), n_words): each PE's input vector
    colors_used: int


@dataclass
class _Plan:
    """Routes and programs under construction for one line; records the colors it uses."""

    mesh: Mesh
    spec: WaferSpec
    line: list[int]
    n_words: int
    routes: ColorRoutes = field(init=False)
    prog: ProgramBuilder = field(init=False)
    colors: set[int] = field(default_factory=set)

    def __post_init__(self) -> None:
        count = self.spec.router.colors
        self.routes = ColorRoutes(self.mesh, count)
        self.prog = ProgramBuilder(self.mesh.pes, self.spec.pe, count)

    def color(self, c: int) -> int:
        if c >= self.spec.router.colors:
            raise ConfigError(
                f"collective needs color {c}, router.colors={self.spec.router.colors}"
            )
        self.colors.add(c)
        return c

    def stream(self, color: int, src: int, dst: int, add: bool) -> None:
        """Route ``color`` from line position ``src`` to ``dst``; send there, receive here."""
        step = 1 if dst > src else -1
        pes = [self.line[i] for i in range(src, dst + step, step)]
        self.routes.add_path(self.color(color), pes)
        self.prog.send(pes[0], 0, color, RESULT_WORD, self.n_words)
        receive = self.prog.recv_add if add else self.prog.recv
        receive(pes[-1], 0, color, RESULT_WORD, self.n_words)


# ---- phases: each adds routes and ops from color ``base`` on and returns the next free color


def _chain_broadcast(plan: _Plan, root: int, base: int) -> int:
    n = len(plan.line)
    plan.color(base)
    for side in (-1, 1):  # the root's one send fans out to both neighbours
        if 0 <= root + side < n:
            plan.routes.add_path(base, [plan.line[root], plan.line[root + side]])
            plan.prog.recv(plan.line[root + side], 0, base, RESULT_WORD, plan.n_words)
    plan.prog.send(plan.line[root], 0, base, RESULT_WORD, plan.n_words)
    for side in (-1, 1):
        pos = root + 2 * side
        while 0 <= pos < n:
            plan.stream(base + (abs(pos - root) - 1) % 2, pos - side, pos, add=False)
            pos += side
    return base + (2 if n > 2 else 1)


def _chain_reduce(plan: _Plan, root: int, base: int) -> int:
    n = len(plan.line)
    for k, side in enumerate((-1, 1)):
        pos = 0 if side < 0 else n - 1
        while pos != root:
            color = base + 2 * k + (abs(pos - root) - 1) % 2
            plan.stream(color, pos, pos - side, add=True)
            pos -= side
    return base + 4


def _tree_broadcast(plan: _Plan, root: int, base: int) -> int:
    plan.color(base)
    for pos in range(len(plan.line)):
        if pos != root:
            step = 1 if pos > root else -1
            path = [plan.line[i] for i in range(root, pos + step, step)]
            plan.routes.add_path(base, path)
            plan.prog.recv(plan.line[pos], 0, base, RESULT_WORD, plan.n_words)
    plan.prog.send(plan.line[root], 0, base, RESULT_WORD, plan.n_words)
    return base + 1


def _tree_reduce(plan: _Plan, root: int, base: int) -> int:
    sides = [list(range(root, -1, -1)), list(range(root, len(plan.line)))]
    rounds = _rounds(max(len(s) for s in sides))
    for k in range(rounds):
        stride = 1 << k
        for j, side in enumerate(sides):
            for i in range(stride, len(side), 2 * stride):
                plan.stream(base + 2 * k + j, side[i], side[i - stride], add=True)
    return base + 2 * rounds


def _rounds(size: int) -> int:
    """Binomial-tree rounds to reduce ``size`` PEs: ceil(log2(size))."""
    return max(0, (size - 1).bit_length())


BROADCASTS: dict[str, Callable[[_Plan, int, int], int]] = {
    "chain": _chain_broadcast,
    "tree": _tree_broadcast,
}
REDUCES: dict[str, Callable[[_Plan, int, int], int]] = {
    "chain": _chain_reduce,
    "tree": _tree_reduce,
}
ALGOS = tuple(BROADCASTS)


# ---- public collectives


def broadcast(line, root, n_words, algo="chain", *, mesh=None, spec=None, inputs=None):
    """Every PE of ``line`` ends with ``root``'s vector; see the module docstring."""
    return _run("broadcast", line, root, n_words, algo, mesh, spec, inputs)


def reduce(line, root, n_words, algo="chain", *, mesh=None, spec=None, inputs=None):
    """``root`` ends with the sum of every PE's vector."""
    return _run("reduce", line, root, n_words, algo, mesh, spec, inputs)


def allreduce(line, n_words, algo="chain", *, mesh=None, spec=None, inputs=None):
    """Every PE ends with the sum: reduce to the middle PE, then broadcast from it."""
    root = line[(len(line) - 1) // 2] if len(line) else None
    return _run("allreduce", line, root, n_words, algo, mesh, spec, inputs)


def _run(op, line, root, n_words, algo, mesh, spec, inputs) -> CollectiveResult:
    spec = spec or preset("tiny")
    line = list(line)
    mesh = mesh or Mesh.full(max(line, default=0) + 1, 1)
    _validate(mesh, line, root, n_words, algo)
    inputs = _inputs(inputs, len(line), n_words)
    plan = _Plan(mesh, spec, line, n_words)
    pos = line.index(root)
    if op in ("reduce", "allreduce"):
        base = REDUCES[algo](plan, pos, 0)
    if op in ("broadcast", "allreduce"):
        BROADCASTS[algo](plan, pos, base if op == "allreduce" else 0)
    estimate = analytic_cycles(op, algo, len(line), pos, n_words, spec)
    budget = MAX_CYCLES_FACTOR * estimate + MAX_CYCLES_SLACK
    memory = _memory(mesh.pes, line, inputs)
    sim = simulate(mesh, spec, plan.routes, plan.prog.build(), memory, max_cycles=budget)
    values = sim.mem[line, RESULT_WORD : RESULT_WORD + n_words].copy()
    return CollectiveResult(
        op, algo, tuple(line), root, sim.cycles, values, inputs, len(plan.colors)
    )


def _memory(pes: int, line: list[int], inputs: np.ndarray) -> np.ndarray:
    """SRAM image: inputs at word 0 and, as the result's starting value, at RESULT_WORD."""
    n = inputs.shape[1]
    memory = np.zeros((pes, RESULT_WORD + n), np.float32)
    memory[line, :n] = inputs
    memory[line, RESULT_WORD:] = inputs
    return memory


def _inputs(inputs, length: int, n_words: int) -> np.ndarray:
    if inputs is None:
        rng = np.random.default_rng(0)
        return rng.standard_normal((length, n_words)).astype(np.float32)
    inputs = np.asarray(inputs, np.float32)
    if inputs.shape != (length, n_words):
        raise ConfigError(f"inputs shape {inputs.shape} must be (len(line), n_words)")
    return inputs


def _validate(mesh: Mesh, line: list[int], root, n_words, algo) -> None:
    if algo not in BROADCASTS:
        raise ConfigError(f"algo={algo!r} is not one of: {', '.join(ALGOS)}")
    if not isinstance(n_words, int) or not 1 <= n_words <= MAX_WORDS:
        raise ConfigError(f"n_words={n_words!r} is out of range [1, {MAX_WORDS}]")
    if len(line) < 2 or len(set(line)) != len(line):
        raise ConfigError(f"line={line} must list at least 2 distinct PEs")
    if any(not 0 <= pe < mesh.pes for pe in line):
        raise ConfigError(f"line={line}: PE ids must be in range [0, {mesh.pes - 1}]")
    if root not in line:
        raise ConfigError(f"root={root!r} is not in line={line}")
    _check_straight(mesh.width, line)


def _check_straight(width: int, line: list[int]) -> None:
    """The line must walk one row or one column, one neighbour per step, in one direction."""
    steps = {b - a for a, b in zip(line, line[1:], strict=False)}
    rows = {pe // width for pe in line}
    if not (steps in ({1}, {-1}) and len(rows) == 1) and steps not in ({width}, {-width}):
        raise ConfigError(f"line={line} is not a straight row or column of neighbours")


# ---- analytic estimate


def analytic_cycles(op, algo, length, root_pos, n_words, spec=None) -> int:
    """Cycle estimate from the point-to-point rule ``p2p(h) = s + 1 + h*L + n``.

    With ``a`` and ``b`` the hops from the root to the two ends (``D = max(a, b)``):

    * chain broadcast: ``D * p2p(1)`` (each hop is a full store-and-forward stream);
    * tree broadcast: ``p2p(D)`` (one multicast stream);
    * chain reduce: ``D * p2p(1)`` with one side; with both, the root adds the left side
      (done at ``a * p2p(1)``) then the right: ``max(b * p2p(1), a * p2p(1) + s + n + x)``
      where ``x = min(n, Q)`` (``Q = router.queue_depth_wavelets``) if ``b >= a``, else 0
      (fitted to the engine: a right side that arrives as the left ends costs ``x`` more);
    * tree reduce: ``sum_k p2p(2^k)`` over the rounds of the longer side, plus ``s + n + min(n, Q)``
      per round in which both sides send to the root (rough: it ignores that a round's
      sender may be ready late or early; see the tests for where it is off);
    * allreduce: reduce + broadcast, rooted at the middle PE.
    """
    spec = spec or preset("tiny")
    s, lat, n = spec.pe.op_startup_cycles, spec.link.hop_latency_cycles, n_words
    if op == "allreduce":
        mid = (length - 1) // 2
        return sum(analytic_cycles(o, algo, length, mid, n, spec) for o in ("reduce", "broadcast"))
    a, b = root_pos, length - 1 - root_pos
    p2p = lambda h: s + 1 + h * lat + n  # noqa: E731
    queue = spec.router.queue_depth_wavelets
    both = s + n + min(n, queue)
    if algo == "chain" and op == "reduce" and a and b:
        left = a * p2p(1)  # the root adds the left side first
        return max(b * p2p(1), left + both - (0 if b >= a else min(n, queue)))
    if algo == "chain":
        return max(a, b) * p2p(1)
    if op == "broadcast":
        return p2p(max(a, b))
    total = 0
    for k in range(_rounds(max(a, b) + 1)):
        stride = 1 << k
        total += p2p(stride) + (both if a >= stride and b >= stride else 0)
    return total
