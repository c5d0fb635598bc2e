"""A slow, plainly written model of the fabric's cycle semantics, to check the engine against.

It shares no code with ``fabric/_engine_jit.py``. Routers are Python objects holding a deque
per (input port, color); credits are a dict; wires are a calendar of what arrives when.
The rules, each written once below:

* **A cycle has three phases**, each run over the whole mesh before the next: *ingest*
  (wavelets and credits put on a wire ``L`` cycles ago arrive), *route*, then *PE*. Nothing
  crosses a wire in less than a cycle (``L >= 1``), so this equals the engine's
  router-by-router order.
* **Queues and credits.** Each router has an input queue of depth ``D`` per (port, color); the
  ramp port is fed by its own PE, which also has a receive queue per color: in a program, the
  colors a PE's ops read, in increasing order, take the core's input queues 1, 2, ... 7 (queue 0
  is the SDK memcpy's), whose depths the PE spec gives (queues 0-1, 2-3, 4-7); a color past the
  seventh or never read takes queue 7's; synthetic traffic's is ``D`` deep. Likewise the ramp
  queue a PE sends into is the core's output queue of its color: the colors a PE's sends use
  take output queues 1 to 5 (0-1, 2-3, 4-5 in the spec), the rest queue 5's. A program may bind
  a color to a queue itself; its other colors take the free queues from 1 on. A router may put a
  wavelet on a wire only with a credit for that (output, color); it gets the credit back ``L``
  cycles after the downstream router dequeued the wavelet.
* **Route.** First every queue head says which outputs it wants *and* can use now (room
  downstream); each wanted output without room counts one stall. Then each output grants
  one request, round-robin over candidates ``port * colors + color`` starting just after
  its last grant. A static color's head goes to every output of its route (multicast),
  once each, and is dequeued once all have taken it; a wormhole color's head goes to its
  dimension-order output, which its packet then holds until the tail has passed.
* **PE.** Tasks run one after the other within the cycle. Each op costs ``startup`` idle
  cycles first; then each element either moves one wavelet (send to the ramp queue,
  receive from the receive queue) or computes, and takes its cost in cycles (1 for
  streams, the largest of FMAC, SRAM-read and SRAM-write cycles for compute), all of them
  before the next op's startup. An op is done (what another task's ``wait`` counts) in the
  last cycle of its last element, once its cost has run. A wavelet or SRAM word holds one
  fp32 or two fp16 values; arithmetic is fp32 and fp16 results are rounded when stored
  (numpy's float16 here).
  Traffic mode instead drains the receive queue and injects one flit of the current
  packet (counted as a busy cycle), packets being created at the cycles of a schedule.
* **The end.** A program is done when nothing is queued, received or on a wire and every
  task has finished; it took one cycle more than the last in which anything happened.

What it leaves out: meshes with dead routers or links, up*/down* table routing, and the
random traffic patterns (uniform, hotspot), whose destinations come from the engine's
own random streams.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict, deque
from dataclasses import dataclass, field, replace

import numpy as np

N, E, S, W, RAMP = 0, 1, 2, 3, 4
PORTS = (N, E, S, W, RAMP)
LINKS = (N, E, S, W)
OPPOSITE = {N: S, E: W, S: N, W: E}
STEP = {N: (0, -1), E: (1, 0), S: (0, 1), W: (-1, 0)}
RECEIVE_OPS = ("recv", "recv_add", "fmacs")
ARITHMETIC_OPS = ("recv_add", "fmacs", "matmul", "vadd", "vscale", "vfma", "vaxpy")  # one datapath
WORD_BYTES = 4
VALUE_BYTES = {"fp32": 4, "fp16": 2}
HIST_BINS = 4096  # latencies at or above the last bin are counted in it, as the engine does


@dataclass(frozen=True)
class Wavelet:
    value: np.float32
    color: int
    head: bool = True
    tail: bool = True
    dst: int = -1  # destination PE of a wormhole packet
    created: int = 0  # traffic: cycle the packet was created
    commands: tuple | None = None  # a control wavelet's (data: None), the next router's first


@dataclass
class InputQueue:
    wavelets: deque = field(default_factory=deque)
    served: set = field(default_factory=set)  # static color: outputs that took the head
    locked_to: int | None = None  # wormhole color: output held by the packet passing


@dataclass
class Switch:
    """A router's switch of one color: its positions' routes (input port -> outputs), the
    one now in use, ring mode, and pop mode (0 never, 1 always, 2 when it advanced)."""

    positions: list
    current: int
    ring: bool
    pop: int
    moved: bool = False  # a control wavelet moved it this cycle: its routes change after

    def next_position(self, commands) -> int | None:
        """Where a control wavelet's first command moves it: None if nowhere."""
        if not commands or commands[0] != 1 or len(self.positions) < 2:
            return None
        if self.current + 1 < len(self.positions):
            return self.current + 1
        return 0 if self.ring else None

    def forwarded(self, commands) -> tuple:
        """The commands it passes on: less its own where its pop mode says so."""
        popped = self.pop == 1 or (self.pop == 2 and self.next_position(commands) is not None)
        return tuple(commands[1:]) if popped else tuple(commands)


class Router:
    def __init__(self, pe: int, width: int, colors: int, depth: int) -> None:
        self.pe, self.x, self.y = pe, pe % width, pe // width
        self.inputs = {(p, c): InputQueue() for p in PORTS for c in range(colors)}
        self.credits = {(o, c): depth for o in LINKS for c in range(colors)}
        self.next_candidate = dict.fromkeys(PORTS, 0)  # round-robin pointer per output
        self.owner: dict[tuple[int, int], int] = {}  # (output, color) -> input holding it
        self.receive = {c: deque() for c in range(colors)}  # the PE's receive queues
        self.flits_out = dict.fromkeys(PORTS, 0)
        self.stalls = dict.fromkeys(PORTS, 0)


# ---------------------------------------------------------------------------------------
# PE programs


@dataclass(frozen=True)
class Op:
    kind: str
    color: int = 0
    dst: int = 0
    a: int = 0
    b: int = 0
    values: int = 1  # values streamed (stream ops)
    elements: int = 1  # steps: wavelets for stream ops, one for a local vector op
    m: int = 1  # vector length (recv: the stride of the words it writes)
    scalar: float = 0.0
    cycles: int = 1  # cycles per element
    fp16: bool = False  # values stored as fp16, two per word and per wavelet
    period: int = 1  # fmacs: values per accumulator block; matmul: k
    commands: tuple = ()  # control: a control wavelet's, its sender's router first


class ReferenceProgram:
    """Takes the same calls as ``fabric.program.ProgramBuilder``; keeps ops per (PE, task).

    Costs follow the PE spec: a stream op moves one wavelet (one fp32 or two fp16 values) a
    cycle; a multiply-add takes the largest of its FMAC, SRAM-read and SRAM-write cycles.
    """

    def __init__(self, pes: int, pe_spec, tasks: int = 1) -> None:
        self.pes, self.pe_spec, self.tasks = pes, pe_spec, tasks
        self.ops: dict[tuple[int, int], list[Op]] = defaultdict(list)
        self.bound: dict[tuple[int, int, bool], int] = {}  # (pe, color, output) -> queue

    def bind_queue(self, pes, color, queue, output=False):
        for pe in np.atleast_1d(pes):
            self.bound[int(pe), color, output] = queue

    def send(self, pe, task, color, src, n, dtype="fp32"):
        self._stream(pe, task, Op("send", color, a=src), n, dtype)

    def control(self, pe, task, color, commands):
        self._stream(pe, task, Op("control", color, commands=tuple(commands)), 1, "fp32")

    def recv(self, pe, task, color, dst, n, dtype="fp32", stride=1):
        self._stream(pe, task, Op("recv", color, dst=dst, m=stride), n, dtype)

    def recv_add(self, pe, task, color, dst, n, dtype="fp32", scale=1.0):
        self._stream(pe, task, Op("recv_add", color, dst=dst, scalar=scale), n, dtype)

    def fmacs(self, pe, task, color, acc, mat, m, n, dtype="fp32", blocks=1):
        """acc is fp32; value v of the stream times matrix row ``v % n`` of m values, into
        accumulator block ``v // n``."""
        scalars = WORD_BYTES // VALUE_BYTES[dtype]  # a data task, one instruction a scalar
        cycles = self.pe_spec.task_activation_cycles + scalars * self._instruction(dtype, m)
        op = Op("fmacs", color, dst=acc, a=mat, m=m, cycles=cycles, period=n)
        self._stream(pe, task, op, n * blocks, dtype)

    def matmul(self, pe, task, c, a, b, m, k, n, dtype="fp32"):
        """C (fp32, m x n) += A (m x k) @ B (k x n), column-major; one column a step."""
        loop = self.pe_spec.issue_cycles  # a scalar loop: an instruction an element of B
        cycles = k * (loop + self._instruction(dtype, m))
        op = Op("matmul", dst=c, a=a, b=b, m=m, period=k, elements=n, cycles=cycles)
        self.ops[pe, task].append(replace(op, fp16=dtype == "fp16"))

    def wait(self, pe, task, other, ops_done):
        """Blocks until task ``other`` has finished ``ops_done`` ops (not counted a stall)."""
        self.ops[pe, task].append(Op("wait", a=other, b=ops_done))

    def vadd(self, pe, task, dst, a, b, m, dtype="fp32", iteration=False):
        self._local(pe, task, Op("vadd", dst=dst, a=a, b=b, m=m), 2, dtype, iteration)

    def vscale(self, pe, task, dst, a, scalar, m, dtype="fp32", iteration=False):
        op = Op("vscale", dst=dst, a=a, m=m, scalar=scalar)
        self._local(pe, task, op, 1, dtype, iteration)

    def vfma(self, pe, task, dst, a, b, m, dtype="fp32", iteration=False):
        self._local(pe, task, Op("vfma", dst=dst, a=a, b=b, m=m), 3, dtype, iteration)

    def vaxpy(self, pe, task, dst, a, scalar, m, dtype="fp32", iteration=False):
        op = Op("vaxpy", dst=dst, a=a, m=m, scalar=scalar)
        self._local(pe, task, op, 2, dtype, iteration)

    def _stream(self, pe, task, op: Op, n: int, dtype: str) -> None:
        wavelets = math.ceil(n * VALUE_BYTES[dtype] / WORD_BYTES)
        op = replace(op, values=n, elements=wavelets, fp16=dtype == "fp16")
        self.ops[pe, task].append(op)

    def _local(self, pe, task, op: Op, reads: int, dtype: str, iteration: bool) -> None:
        """m results, each reading ``reads`` values and writing one; an op that opens a
        scalar loop's iteration pays the loop's control too."""
        size = VALUE_BYTES[dtype]
        cycles = self._cycles(dtype, op.m, op.m * reads * size, op.m * size)
        cycles += self.pe_spec.issue_cycles if iteration else 0
        self.ops[pe, task].append(replace(op, cycles=cycles, fp16=dtype == "fp16"))

    def _instruction(self, dtype: str, m: int) -> int:
        """One ``acc[0:m] += vec[0:m] * scalar``: start-up, then ``m`` macs, each reading a
        vector value and acc and writing acc."""
        size = VALUE_BYTES[dtype]
        vector = self._cycles(dtype, m, m * (size + WORD_BYTES), m * WORD_BYTES)
        return self.pe_spec.op_startup_cycles + vector

    def _cycles(self, dtype: str, macs: int, read_bytes: int, write_bytes: int) -> int:
        pe = self.pe_spec
        rate = pe.fp16_fmac_per_cycle if dtype == "fp16" else pe.fp32_fmac_per_cycle
        return max(
            1,
            math.ceil(macs / rate),
            math.ceil(read_bytes / pe.sram_read_bytes_per_cycle),
            math.ceil(write_bytes / pe.sram_write_bytes_per_cycle),
        )


class Task:
    """A list of ops run in order; ``busy_for`` cycles pass before the next element."""

    def __init__(self, ops: list[Op], startup: int) -> None:
        self.ops, self.startup = ops, startup
        self.index = 0  # the op now running
        self.done = 0  # its elements finished
        self.busy_for = startup if ops else 0
        self.arithmetic = False  # whether the cost counting down holds the datapath

    @property
    def op(self) -> Op | None:
        return self.ops[self.index] if self.index < len(self.ops) else None

    def finish_element(self) -> None:
        """The element took its first cycle: the rest of its cost, then maybe a new op."""
        self.done += 1
        self.busy_for = self.op.cycles - 1
        if self.busy_for <= 0 and self.finishing:
            self.next_op()

    @property
    def finishing(self) -> bool:
        """Whether the cost being run is the op's last element's: the op is done after it."""
        return self.op is not None and self.done == self.op.elements

    def next_op(self) -> None:
        """The op is done, its every cycle run: a ``wait`` counts it, the next op starts."""
        self.index, self.done = self.index + 1, 0
        if self.op is not None:
            self.busy_for += self.startup


# ---------------------------------------------------------------------------------------
# Synthetic traffic


def destination(pattern: str, pe: int, width: int, height: int) -> int:
    """The deterministic traffic patterns: where PE ``pe`` sends its packets."""
    x, y = pe % width, pe // width
    if pattern == "transpose":
        return (x % height) * width + y % width
    if pattern == "bitcomp":
        return (height - 1 - y) * width + (width - 1 - x)
    if pattern == "neighbor":
        return y * width + (x + 1) % width
    raise ValueError(f"pattern {pattern!r} is random or unknown; the reference has no RNG")


@dataclass
class Packet:
    dst: int
    created: int
    flits_left: int
    injected: int = -1  # cycle its head entered the ramp queue


@dataclass
class Source:
    backlog: deque  # creation cycles of the packets not yet started
    packet: Packet | None = None


# ---------------------------------------------------------------------------------------
# The fabric


class ReferenceFabric:
    """The whole mesh; :meth:`step` runs one cycle, :meth:`state` shows it as the engine's
    arrays. Build it with :meth:`for_program` or :meth:`for_traffic`."""

    def __init__(self, mesh, spec, colors: int, route_table=None, wormhole=(), yx=False):
        if not mesh.alive.all() or mesh.dead_link.any():
            raise ValueError("the reference models full meshes only")
        self.width, self.height, self.colors = mesh.width, mesh.height, colors
        self.pes = mesh.width * mesh.height
        self.depth = spec.router.queue_depth_wavelets
        self.receive_depth = {(pe, c): self.depth for pe in range(self.pes) for c in range(colors)}
        self.send_depth = dict(self.receive_depth)  # a program's: its output queues'
        self.latency = spec.link.hop_latency_cycles
        self.link_hops = mesh.hops()  # (P, 4): a link of h physical hops takes h hop latencies
        self.startup = spec.pe.op_startup_cycles
        self.routers = [Router(pe, self.width, colors, self.depth) for pe in range(self.pes)]
        table = np.zeros((self.pes, 5, colors), np.uint8) if route_table is None else route_table
        self.routes = {  # static colors: (pe, input port, color) -> set of outputs
            (pe, p, c): frozenset(o for o in PORTS if int(table[pe, p, c]) >> o & 1)
            for pe in range(self.pes)
            for p in PORTS
            for c in range(colors)
        }
        self.wormhole, self.yx = set(wormhole), yx
        self.candidates = [(p, c) for p in PORTS for c in range(colors)]
        self.wavelets_due = defaultdict(list)  # cycle -> [(pe, in port, wavelet)]
        self.credits_due = defaultdict(list)  # cycle -> [(pe, out port, color)]
        self.cycle, self.last_active = 0, -1
        self.grants: list[tuple[int, int, int, int, int]] = []  # (t, pe, out, in port, color)
        self.busy = [0] * self.pes
        self.pe_stalls = [0] * self.pes
        self.datapath_free = [0] * self.pes  # the first cycle each PE's datapath is free
        self.tasks: list[list[Task]] = [[] for _ in range(self.pes)]
        self.mem = np.zeros((self.pes, 1), np.float32)
        self.sources: list[Source] | None = None
        # (pe, color) -> [kind, low, high, count]: what the router hands its PE (the SDK's
        # counter filter: its count at most ``low``, counting back to 0 after ``high``; its
        # range filter: a wavelet's upper 16 bits within [low, high])
        self.filters: dict[tuple[int, int], list[int]] = {}
        self.switches: dict[tuple[int, int], Switch] = {}  # (pe, color) -> its switch

    @classmethod
    def for_program(
        cls, mesh, spec, route_table, program: ReferenceProgram, memory, filters=None, switches=None
    ):
        fabric = cls(mesh, spec, route_table.shape[2], route_table)
        fabric.mem = np.array(memory, np.float32)
        if filters is not None:
            for pe, c in zip(*np.nonzero(filters[:, :, 0]), strict=True):
                fabric.filters[int(pe), int(c)] = [int(v) for v in filters[pe, c]]
        if switches is not None:
            fabric._hold_switches(route_table, switches)
        pe_spec = spec.pe
        inputs = [pe_spec.input_queue_01_wavelets] * 2 + [pe_spec.input_queue_23_wavelets] * 2
        inputs += [pe_spec.input_queue_47_wavelets] * 4
        outputs = [pe_spec.output_queue_01_wavelets] * 2 + [pe_spec.output_queue_23_wavelets] * 2
        outputs += [pe_spec.output_queue_45_wavelets] * 2
        for pe in range(fabric.pes):
            ops = [op for t in range(program.tasks) for op in program.ops.get((pe, t), ())]
            read = {op.color for op in ops if op.kind in RECEIVE_OPS}
            sent = {op.color for op in ops if op.kind in ("send", "control")}
            for output, used, depth, depths in (
                (False, read, fabric.receive_depth, inputs),
                (True, sent, fabric.send_depth, outputs),
            ):
                bound = {
                    c: q for (p, c, out), q in program.bound.items() if (p, out) == (pe, output)
                }
                free = [q for q in range(1, len(depths)) if q not in bound.values()]
                unbound = sorted(c for c in used if c not in bound)
                for c in range(fabric.colors):
                    if c in bound:
                        queue = bound[c]
                    elif c in unbound and unbound.index(c) < len(free):
                        queue = free[unbound.index(c)]
                    else:
                        queue = len(depths) - 1
                    depth[pe, c] = depths[queue]
        fabric.tasks = [
            [Task(list(program.ops.get((pe, t), ())), fabric.startup) for t in range(program.tasks)]
            for pe in range(fabric.pes)
        ]
        return fabric

    def _hold_switches(self, table, switches) -> None:
        """Each router's switch of a color from ``ColorRoutes.switches``' fields: current
        position, count, ring mode, pop mode, then positions 1-3 packed five bits an input
        port (position 0: the table's), which this model unpacks on its own."""

        def outputs(masks) -> dict:
            return {p: frozenset(o for o in PORTS if int(masks[p]) >> o & 1) for p in PORTS}

        for pe, c in np.ndindex(switches.shape[:2]):
            current, count, ring, pop, _moved, _first, *packed = (int(v) for v in switches[pe, c])
            positions = [outputs(table[pe, :, c])]
            positions += [outputs([w >> (5 * p) & 31 for p in PORTS]) for w in packed[: count - 1]]
            self.switches[pe, c] = Switch(positions, current, bool(ring), pop)
            self._set_position(pe, c, current)

    def _set_position(self, pe: int, c: int, position: int) -> None:
        switch = self.switches[pe, c]
        switch.current = position
        for p in PORTS:
            self.routes[pe, p, c] = switch.positions[position][p]

    @classmethod
    def for_traffic(
        cls, mesh, spec, *, pattern, packet_flits, schedule, warmup=0, yx=False, stop=2**62
    ):
        """Wormhole color 0; ``schedule[pe]`` lists the creation cycles of its packets
        (those from ``stop`` on never start)."""
        fabric = cls(mesh, spec, 1, wormhole=(0,), yx=yx)
        fabric.link_hops = np.ones_like(fabric.link_hops)  # traffic: every link one hop
        fabric.pattern, fabric.packet_flits, fabric.warmup = pattern, packet_flits, warmup
        fabric.stop = stop
        fabric.sources = [Source(deque(schedule.get(pe, ()))) for pe in range(fabric.pes)]
        fabric.delivered, fabric.hops, fabric.created = ([0] * fabric.pes for _ in range(3))
        fabric.packets, fabric.latency_sum, fabric.network_latency_sum = (
            [0] * fabric.height for _ in range(3)
        )
        fabric.latencies = [Counter() for _ in range(fabric.height)]
        return fabric

    # -- one cycle ----------------------------------------------------------------------

    def step(self) -> bool:
        """Run cycle ``self.cycle``; returns whether anything moved or computed in it."""
        t = self.cycle
        active = self._ingest(t)
        for router in self.routers:
            active |= self._route(router, t)
        for router in self.routers:
            active |= self._pe_cycle(router, t)
        if active:
            self.last_active = t
        self.cycle += 1
        return active

    def pending(self) -> bool:
        """Whether any wavelet is queued, received or on a wire, or any task not done."""
        return (
            any(q.wavelets for r in self.routers for q in r.inputs.values())
            or any(rx for r in self.routers for rx in r.receive.values())
            or any(self.wavelets_due.values())
            or any(task.op is not None or task.busy_for for ts in self.tasks for task in ts)
        )

    def run(self, max_cycles: int) -> tuple[str, int]:
        """Step to the end: ``("done", cycles)``, ``("deadlock", first idle cycle)`` when
        nothing moves and nothing is on a wire with work pending, or ``("max_cycles", n)``."""
        while self.cycle < max_cycles:
            if self.step():
                continue
            if not self.pending():
                return "done", self.last_active + 1
            if not self.wavelets_due and not self.credits_due:
                return "deadlock", self.last_active + 1
        return "max_cycles", max_cycles

    # -- phase 1: ingest ----------------------------------------------------------------

    def _ingest(self, t: int) -> bool:
        arrivals = self.wavelets_due.pop(t, [])
        for pe, port, wavelet in arrivals:
            queue = self.routers[pe].inputs[port, wavelet.color].wavelets
            queue.append(wavelet)
            assert len(queue) <= self.depth, f"cycle {t}: credit protocol overflowed a queue"
        for pe, port, color in self.credits_due.pop(t, []):
            self.routers[pe].credits[port, color] += 1
        return bool(arrivals)

    # -- phase 2: route -----------------------------------------------------------------

    def _route(self, router: Router, t: int) -> bool:
        dropped = [  # static heads refused the ramp, their only output
            (port, color)
            for (port, color), queue in router.inputs.items()
            if queue.wavelets
            and color not in self.wormhole
            and self.routes[router.pe, port, color]
            and not self._outputs(router, port, color)
        ]
        for port, color in dropped:
            self._retire_head(router, port, color, t)
        requests = {
            (port, color): self._request(router, port, color, queue)
            for (port, color), queue in router.inputs.items()
            if queue.wavelets and (port, color) not in dropped
        }
        granted = []
        for output in PORTS:
            winner = self._arbitrate(router, output, requests)
            if winner is not None:
                self._forward(router, output, *winner, t)
                granted.append(winner)
        for port, color in set(granted):
            self._retire_head(router, port, color, t)
        for color in range(self.colors):
            switch = self.switches.get((router.pe, color))
            if switch is not None and switch.moved:
                switch.moved = False
                self._set_position(router.pe, color, switch.current)
        return bool(granted or dropped)

    def _request(self, router: Router, port: int, color: int, queue: InputQueue) -> set[int]:
        """Outputs the head wants and can use now; a wanted output without room is a stall."""
        ready = set()
        for output in sorted(self._wanted(router, port, color, queue)):
            if self._has_room(router, output, color):
                ready.add(output)
            else:
                router.stalls[output] += 1
        return ready

    def _wanted(self, router: Router, port: int, color: int, queue: InputQueue) -> set[int]:
        if color not in self.wormhole:
            return set(self._outputs(router, port, color) - queue.served)
        if queue.locked_to is not None:
            return {queue.locked_to}
        output = self._dimension_order(router, queue.wavelets[0].dst)
        return set() if (output, color) in router.owner else {output}

    def _outputs(self, router: Router, port: int, color: int) -> frozenset:
        """A static color's route for the queue's head, less the ramp if the filter refuses."""
        routes = self.routes[router.pe, port, color]
        if router.inputs[port, color].wavelets[0].commands is not None:
            return routes - {RAMP}  # a control wavelet: never to the PE, never filtered
        flt = self.filters.get((router.pe, color))
        if flt is None or RAMP not in routes:
            return routes
        kind, low, high, count = flt
        if kind == 1:
            takes = count <= low
        else:
            value = router.inputs[port, color].wavelets[0].value
            takes = low <= int(np.float32(value).view(np.uint32)) >> 16 <= high
        return routes if takes else routes - {RAMP}

    def _has_room(self, router: Router, output: int, color: int) -> bool:
        if output == RAMP:
            return len(router.receive[color]) < self.receive_depth[router.pe, color]
        if self._neighbor(router.pe, output) is None:
            return False
        return router.credits[output, color] > 0

    def _arbitrate(self, router: Router, output: int, requests) -> tuple[int, int] | None:
        """Round-robin: the first candidate at or after the pointer that asks for ``output``."""
        count = len(self.candidates)
        for i in range(count):
            k = (router.next_candidate[output] + i) % count
            if output in requests.get(self.candidates[k], ()):
                router.next_candidate[output] = (k + 1) % count
                return self.candidates[k]
        return None

    def _forward(self, router: Router, output: int, port: int, color: int, t: int) -> None:
        """Copy the head of queue (port, color) out through ``output``."""
        queue = router.inputs[port, color]
        wavelet = queue.wavelets[0]
        switch = self.switches.get((router.pe, color))
        if wavelet.commands is not None and switch is not None:
            wavelet = replace(wavelet, commands=switch.forwarded(wavelet.commands))
        if output == RAMP:
            router.receive[color].append(wavelet)
        else:
            router.credits[output, color] -= 1
            there = self._neighbor(router.pe, output)
            due = t + self.latency * int(self.link_hops[router.pe, output])
            self.wavelets_due[due].append((there, OPPOSITE[output], wavelet))
        router.flits_out[output] += 1
        self.grants.append((t, router.pe, output, port, color))
        if color not in self.wormhole:
            queue.served.add(output)
            return
        if wavelet.head:
            router.owner[output, color] = port
            queue.locked_to = output
        if wavelet.tail:
            del router.owner[output, color]
            queue.locked_to = None

    def _retire_head(self, router: Router, port: int, color: int, t: int) -> None:
        """Dequeue the head once every output it needs has taken it; the credit goes back."""
        queue = router.inputs[port, color]
        if color not in self.wormhole and queue.served != self._outputs(router, port, color):
            return
        commands = queue.wavelets[0].commands
        flt = self.filters.get((router.pe, color))
        if commands is not None:
            switch = self.switches.get((router.pe, color))
            position = switch.next_position(commands) if switch else None
            if position is not None:  # its routes change once the router's cycle is routed
                switch.current, switch.moved = position, True
        elif flt and flt[0] == 1 and RAMP in self.routes[router.pe, port, color]:
            flt[3] = 0 if flt[3] >= flt[2] else flt[3] + 1
        queue.wavelets.popleft()
        queue.served.clear()
        if port != RAMP:
            upstream = self._neighbor(router.pe, port)
            due = t + self.latency * int(self.link_hops[router.pe, port])
            self.credits_due[due].append((upstream, OPPOSITE[port], color))

    def _dimension_order(self, router: Router, dst: int) -> int:
        """XY: along the row first, then the column; YX the other way round."""
        if dst == router.pe:
            return RAMP
        dx, dy = dst % self.width, dst // self.width
        horizontal = E if dx > router.x else W if dx < router.x else None
        vertical = S if dy > router.y else N if dy < router.y else None
        first, second = (vertical, horizontal) if self.yx else (horizontal, vertical)
        return first if first is not None else second

    def _neighbor(self, pe: int, direction: int) -> int | None:
        dx, dy = STEP[direction]
        x, y = pe % self.width + dx, pe // self.width + dy
        inside = 0 <= x < self.width and 0 <= y < self.height
        return y * self.width + x if inside else None

    # -- phase 3: PE --------------------------------------------------------------------

    def _pe_cycle(self, router: Router, t: int) -> bool:
        if self.sources is not None:
            return self._traffic_cycle(router, t)
        active = False
        for task in self.tasks[router.pe]:  # also the datapath's priority order
            active |= self._task_cycle(router, task, t)
        return active

    def _task_cycle(self, router: Router, task: Task, t: int) -> bool:
        """One cycle of a task: sit out a busy cycle, or try the next element of its op. The
        PE's tasks share one arithmetic datapath a cycle at a time: an element that computes
        takes it in its first cycle and in each cycle of its cost (and the next op's
        start-up), unless a task of a lower number (stepped first) took it this cycle."""
        pe, op = router.pe, task.op
        if task.busy_for > 0:
            if task.arithmetic:
                if self.datapath_free[pe] > t:
                    return False
                self._take_datapath(pe, t)
            task.busy_for -= 1
            self.busy[pe] += 1
            if task.busy_for == 0 and task.finishing:
                task.next_op()
            return True
        if op is None:
            return False
        computes = op.kind in ARITHMETIC_OPS
        if op.kind == "wait":
            if self.tasks[pe][op.a].index < op.b:
                return False
        elif op.kind in RECEIVE_OPS and not router.receive[op.color]:
            self.pe_stalls[pe] += 1
            return False
        elif computes and self.datapath_free[pe] > t:
            return False
        elif not self._element(router, op, task.done):
            self.pe_stalls[pe] += 1
            return False
        if computes:
            self._take_datapath(pe, t)
        task.arithmetic = computes
        self.busy[pe] += 1
        task.finish_element()
        return True

    def _take_datapath(self, pe: int, t: int) -> None:
        """A task holds the datapath in cycle ``t``."""
        self.datapath_free[pe] = t + 1

    def _element(self, router: Router, op: Op, k: int) -> bool:
        """Element ``k`` of ``op``; False when its queue is full (send) or empty (receive)."""
        mem = self.mem[router.pe]
        if op.kind in ("send", "control"):
            queue = router.inputs[RAMP, op.color].wavelets
            if len(queue) >= self.send_depth[router.pe, op.color]:
                return False
            control = op.commands if op.kind == "control" else None
            value = np.float32(0) if control is not None else mem[op.a + k]
            queue.append(Wavelet(value, op.color, commands=control))
        elif op.kind in RECEIVE_OPS:
            received = router.receive[op.color]
            if not received:
                return False
            _consume(mem, op, k, received.popleft().value)
        elif op.kind == "matmul":
            _matmul_column(mem, op, k)
        else:
            _compute(mem, op)
        return True

    def _traffic_cycle(self, router: Router, t: int) -> bool:
        """The sink drains the receive queue; the source starts a packet and injects a flit."""
        active = self._drain(router, t)
        source = self.sources[router.pe]
        if source.packet is None and source.backlog and source.backlog[0] <= min(t, self.stop - 1):
            self._start_packet(router.pe, source)
        ramp = router.inputs[RAMP, 0].wavelets
        if source.packet is not None and len(ramp) < self.depth:
            packet = source.packet
            head = packet.flits_left == self.packet_flits
            if head:
                packet.injected = t
            tail = packet.flits_left == 1
            value = np.float32(packet.injected)
            ramp.append(Wavelet(value, 0, head, tail, packet.dst, packet.created))
            packet.flits_left -= 1
            self.busy[router.pe] += 1  # flits injected
            if tail:
                source.packet = None
            active = True
        return active

    def _start_packet(self, pe: int, source: Source) -> None:
        created = source.backlog.popleft()
        dst = destination(self.pattern, pe, self.width, self.height)
        source.packet = Packet(dst, created, self.packet_flits)
        if created >= self.warmup:
            w = self.width
            self.hops[pe] += abs(dst % w - pe % w) + abs(dst // w - pe // w)
            self.created[pe] += 1

    def _drain(self, router: Router, t: int) -> bool:
        received = router.receive[0]
        active = bool(received)
        while received:
            flit = received.popleft()
            if flit.created < self.warmup:
                continue
            self.delivered[router.pe] += 1
            if flit.tail:
                latency = t - flit.created
                self.packets[router.y] += 1
                self.latency_sum[router.y] += latency
                self.network_latency_sum[router.y] += t - int(flit.value)
                self.latencies[router.y][min(latency, HIST_BINS - 1)] += 1
        return active

    # -- what the engine's arrays should hold -------------------------------------------

    def state(self) -> dict[str, np.ndarray]:
        """The engine's state arrays as this model has them (same names and shapes)."""
        out = {
            "q_count": np.zeros((self.pes, 5, self.colors), np.int32),
            "rx_count": np.zeros((self.pes, self.colors), np.int32),
            "credits": np.zeros((self.pes, 4, self.colors), np.int32),
            "link_flits": np.zeros((self.pes, 5), np.int64),
            "stalls": np.zeros((self.pes, 5), np.int64),
        }
        for r in self.routers:
            for (p, c), queue in r.inputs.items():
                out["q_count"][r.pe, p, c] = len(queue.wavelets)
            for c, rx in r.receive.items():
                out["rx_count"][r.pe, c] = len(rx)
            for (o, c), credits in r.credits.items():
                out["credits"][r.pe, o, c] = credits
            for o in PORTS:
                out["link_flits"][r.pe, o] = r.flits_out[o]
                out["stalls"][r.pe, o] = r.stalls[o]
        out.update(self._traffic_state() if self.sources is not None else self._program_state())
        return out

    def _program_state(self) -> dict[str, np.ndarray]:
        return {
            "busy": np.array(self.busy, np.int64),
            "pe_stalls": np.array(self.pe_stalls, np.int64),
            "mem": self.mem.reshape(-1).copy(),  # the engine's: every PE as many words
            "pc": np.array([[t.index for t in ts] for ts in self.tasks], np.int64),
            "progress": np.array([[t.done for t in ts] for ts in self.tasks], np.int64),
        }

    def _traffic_state(self) -> dict[str, np.ndarray]:
        hist = np.zeros((self.height, HIST_BINS), np.int64)
        for row, counts in enumerate(self.latencies):
            for latency, count in counts.items():
                hist[row, latency] = count
        left = [s.packet.flits_left if s.packet else 0 for s in self.sources]
        return {
            "left": np.array(left, np.int64),
            "busy": np.array(self.busy, np.int64),
            "flits_delivered": np.array(self.delivered, np.int64),
            "hops": np.array(self.hops, np.int64),
            "packets_created": np.array(self.created, np.int64),
            "packets": np.array(self.packets, np.int64),
            "latency_sum": np.array(self.latency_sum, np.int64),
            "network_latency_sum": np.array(self.network_latency_sum, np.int64),
            "hist": hist,
        }


def _consume(mem: np.ndarray, op: Op, k: int, value: np.float32) -> None:
    """What the ``k``-th wavelet of a receiving op does to SRAM.

    Arithmetic is fp32; fp16 values (two per word, the even one in the low half) are
    widened when loaded and rounded to nearest even when stored. Only fmacs knows that the
    last wavelet of an odd-length fp16 stream carries a pad half.
    """
    if op.kind == "recv":
        mem[op.dst + k * op.m] = value  # a whole word: one fp32 or two fp16 values
    elif not op.fp16 and op.kind == "recv_add":
        mem[op.dst + k] += value * np.float32(op.scalar)
    elif not op.fp16:  # fmacs: acc block k // period += mat row k % period * value
        acc, row = op.dst + (k // op.period) * op.m, op.a + (k % op.period) * op.m
        for i in range(op.m):
            mem[acc + i] += mem[row + i] * value
    else:
        halves = mem.view(np.float16)  # value i of the vector at word w: halves[2w + i]
        pair = np.array([value], np.float32).view(np.float16)
        for j in (0, 1):
            e = 2 * k + j  # the value's index in its stream
            if op.kind == "recv_add":
                at = 2 * op.dst + e
                add = np.float32(pair[j]) * np.float32(op.scalar)
                halves[at] = np.float16(np.float32(halves[at]) + add)
            elif e < op.values:  # fmacs, fp32 acc block e // period += mat row e % period * e
                row = 2 * op.a + (e % op.period) * op.m
                acc = op.dst + (e // op.period) * op.m
                for i in range(op.m):
                    mem[acc + i] += np.float32(halves[row + i]) * np.float32(pair[j])


def _matmul_column(mem: np.ndarray, op: Op, j: int) -> None:
    """Column ``j`` of ``C += A @ B``: k vector multiply-adds of length m, in order."""
    halves = mem.view(np.float16)
    for p in range(op.period):
        if op.fp16:
            b = np.float32(halves[2 * op.b + j * op.period + p])
            column = [np.float32(halves[2 * op.a + p * op.m + i]) for i in range(op.m)]
        else:
            b = mem[op.b + j * op.period + p]
            column = [mem[op.a + p * op.m + i] for i in range(op.m)]
        for i in range(op.m):
            mem[op.dst + j * op.m + i] += column[i] * b


def _compute(mem: np.ndarray, op: Op) -> None:
    """A local vector op, element by element in address order (fp32 arithmetic)."""
    scalar = np.float32(op.scalar)
    if op.fp16:
        halves = mem.view(np.float16)
        for i in range(op.m):
            x = np.float32(halves[2 * op.a + i])
            if op.kind == "vadd":
                result = x + np.float32(halves[2 * op.b + i])
            elif op.kind == "vscale":
                result = x * scalar
            elif op.kind == "vaxpy":
                result = np.float32(halves[2 * op.dst + i]) + x * scalar
            else:  # vfma
                result = np.float32(halves[2 * op.dst + i]) + x * np.float32(halves[2 * op.b + i])
            halves[2 * op.dst + i] = np.float16(result)
        return
    for i in range(op.m):
        if op.kind == "vadd":
            mem[op.dst + i] = mem[op.a + i] + mem[op.b + i]
        elif op.kind == "vscale":
            mem[op.dst + i] = mem[op.a + i] * scalar
        elif op.kind == "vaxpy":
            mem[op.dst + i] += mem[op.a + i] * scalar
        else:  # vfma
            mem[op.dst + i] += mem[op.a + i] * mem[op.b + i]
