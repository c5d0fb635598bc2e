"""Per-PE costs derived from the cycle counts the Cerebras SDK's simulator gave for public programs.

A public repository publishes the cycles the SDK's cycle-accurate simulator (``--arch=wse2``)
reported for its CSL programs: Cannon's matrix product, and LU and QR factorisations, each an
n x n fp32 matrix on a mesh x mesh rectangle of PEs (``benchmarks/data/vendor_sim_cycles.csv``
names the source). This script ports the programs' structure as cost models (one function per
program part: ``memcpy_h2d``, ``compute_C``, ``shift``, ...), fits the few costs nobody publishes
by least squares on relative error over NAMED series, and holds the other series out to test
the fit. Every other constant is quoted with its source or marked an assumption with its reason
(two of them are wafer/presets.py's); none is chosen to make a row match.

    python benchmarks/derive_pe_costs.py                        # the table and the constants
    python benchmarks/derive_pe_costs.py --json out/pe_costs.json
    python benchmarks/derive_pe_costs.py --doc docs/pe_costs.md  # rewrite the page's tables
    python benchmarks/derive_pe_costs.py --fit cannon_const qr_increasing  # another split (it
        # is refused when its series cannot tell the fitted costs apart)

The fit series are ``cannon_const`` and ``qr_const`` by default: within ``cannon_increasing``
(a fixed 64 x 64 mesh) the copy's words and the loop's iterations both grow as the tile's
square, so that series cannot separate them; the mesh-size series can. Cannon's and LU's loops
issue one vector instruction an iteration, QR's eight, so a QR series is what splits a loop
iteration between its scalar part and an instruction's issue (``vector_issue_cycles``); a fit
without one is refused (see ``docs/pe_costs.md``).

Sources (full references in ``docs/pe_costs.md``):
  [Rocki20]  K. Rocki et al., SC20: fp32 1 FMAC a cycle, a wavelet a link a cycle, a cycle a hop.
  [SDK-TS]   Cerebras SDK docs, "Host Runtime and Tensor Streaming": I/O channels on the east and
             west edges, memcpy support PEs three columns west of the kernel and two east.
  [SDK-CSL]  Cerebras SDK docs, CSL appendix "SIMD Mode": two 32-bit reads, one write a cycle.
  [SDK-EX]   github.com/Cerebras/sdk-examples, benchmarks/benchmark-libs/allreduce/pe.csl: an
             fp32 division about 50 cycles; a WSE-2 core's input queues 0 and 1 hold 6
             wavelets, 2 and 3 hold 4 (wafer/presets.py's pe.input_queue_*_wavelets).
  [SDK-CV]   Cerebras SDK docs, "A Conceptual View": the hardware selects a runnable task when
             the running one ends.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import itertools
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from wafersim.wafer import __version__
from wafersim.wafer.atomic import write_json, write_text
from wafersim.wafer.presets import WSE2_PE

DATA = Path(__file__).resolve().parent / "data" / "vendor_sim_cycles.csv"
START = "<!-- tables: written by benchmarks/derive_pe_costs.py -->"
END = "<!-- end tables -->"

# The memcpy support PEs: three columns west of the kernel rectangle and two east (the SDK's
# "Host Runtime and Tensor Streaming" page); a word crosses them on its way to the rectangle.
MEMCPY_WEST_COLUMNS = 3
DEFAULT_FIT = ("cannon_const", "qr_const")
FITTED = ("channel_cycles_per_word", "row_cycles_per_word", "loop_iteration_cycles")
SPLIT = "vector_issue_cycles"  # fitted with FITTED whenever a QR series is fitted
DEFAULT_FREE = (*FITTED, SPLIT)
CONDITION_LIMIT = 1e6  # a fit whose Jacobian is worse conditioned cannot separate its costs
LOG_BOUND = 20.0  # fitted costs stay within exp(-20) to exp(20) cycles while the fit searches


@dataclass(frozen=True)
class Costs:
    """The costs the ported programs are charged with (cycles of the PE clock), and the
    capacities they use (the receivers' input queues)."""

    channel_cycles_per_word: float  # fitted
    row_cycles_per_word: float  # fitted
    loop_iteration_cycles: float  # fitted
    fmac_cycles_per_element: float = 1.0  # [Rocki20]; the SDK's two reads + one write a cycle
    fabric_cycles_per_wavelet: float = 1.0  # [Rocki20] one wavelet a link a cycle
    hop_latency_cycles: float = 1.0  # [Rocki20]
    division_cycles: float = 50.0  # [SDK-EX] "the division is very expensive, about 50 cycles"
    dsd_update_cycles: float = 1.0  # assumption: one scalar instruction rewrites a DSD's field
    task_activation_cycles: float = WSE2_PE.task_activation_cycles  # assumption (presets)
    # [SDK-EX] the input queues LU reads its streams on (pe_program.csl's in_dsd_north_elimination
    # on queue 0, in_dsd_west_elimination on queue 3)
    north_queue_wavelets: float = WSE2_PE.input_queue_01_wavelets
    west_queue_wavelets: float = WSE2_PE.input_queue_23_wavelets
    vector_issue_cycles: float = WSE2_PE.op_startup_cycles  # fitted on a QR series, else presets'
    sqrt_cycles: float = 50.0  # assumption: no cost is published; a division's


# name: (unit, meaning, source) of each cost; printed, and written to the JSON and the page.
MEANING = {
    "channel_cycles_per_word": (
        "cycles/word",
        "the one I/O channel (--channels=1) passes the copy's words one at a time",
        "fitted",
    ),
    "row_cycles_per_word": (
        "cycles/word",
        "a row of the rectangle takes its share of a copy one word at a time, its PEs in turn "
        "(ROW_MAJOR order keeps a PE's words together)",
        "fitted",
    ),
    "loop_iteration_cycles": (
        "cycles",
        "one iteration of a scalar loop that loads a scalar, issues one @fmacs and moves a "
        "DSD's offset, apart from the fmacs' elements; LU's division loops pay it around "
        "each division",
        "fitted",
    ),
    "fmac_cycles_per_element": (
        "cycles/element",
        "an fp32 element of an @fmacs (two 32-bit reads and one write a cycle), and of QR's "
        "@fmuls and memory-to-memory @fmovs",
        "[Rocki20] FP32 1 FMAC a cycle; SDK CSL appendix, SIMD mode",
    ),
    "fabric_cycles_per_wavelet": (
        "cycles/wavelet",
        "an @fmovs between memory and the fabric moves one 32-bit wavelet a cycle",
        "[Rocki20] one wavelet a link a direction a cycle",
    ),
    "hop_latency_cycles": ("cycles", "a wavelet's latency a router hop", "[Rocki20]"),
    "division_cycles": (
        "cycles",
        "an fp32 division (LU's scaling loops)",
        "[SDK-EX] benchmark-libs/allreduce/pe.csl: about 50 cycles",
    ),
    "dsd_update_cycles": (
        "cycles",
        "an @set_dsd_length or @increment_dsd_offset outside a loop (LU's per-column length "
        "and offset updates)",
        "assumption: a DSD's length or offset is one 16-bit field, rewritten by one scalar "
        "instruction",
    ),
    "task_activation_cycles": (
        "cycles",
        "from a wavelet's arrival (or an @activate) to its task's first instruction",
        "assumption, wafer/presets.py's: the hardware selects a runnable task when the running "
        "one ends [SDK-CV]",
    ),
    "north_queue_wavelets": (
        "wavelets",
        "the wavelets a stream from the north may put ahead of a receiver that is not yet "
        "reading (LU reads it on input queue 0)",
        "[SDK-EX] a WSE-2 core's input queues 0 and 1",
    ),
    "west_queue_wavelets": (
        "wavelets",
        "the same for a stream from the west (LU reads it on input queue 3)",
        "[SDK-EX] a WSE-2 core's input queues 2 and 3",
    ),
    "vector_issue_cycles": (
        "cycles",
        "what each further vector (DSD) instruction of a loop iteration costs before its "
        "elements (the part of loop_iteration_cycles that is one instruction's issue); QR's "
        "iterations issue eight",
        "assumption, wafer/presets.py's op_startup_cycles (identifiable only with a QR series)",
    ),
    "sqrt_cycles": (
        "cycles",
        "an fp32 square root (QR's compute_sin_cos, math.sqrt)",
        "assumption: no cost is published; taken as the quoted division's (the page varies it)",
    ),
}


@dataclass(frozen=True)
class Published:
    """One row of the simulator's cycle counts, as the source publishes it."""

    series: str  # e.g. cannon_const: the program, then how the series grows
    n_matrix: int
    n_mesh: int
    cycles: int

    @property
    def program(self) -> str:
        return self.series.split("_", 1)[0]


@dataclass(frozen=True)
class Row:
    """A published row beside the ported model's cycles. ``role``: fitted, held out, shared
    (a held-out row that is also a fitted row: the same run, so not an independent test), or
    not ported (``modelled_cycles`` is None)."""

    published: Published
    modelled_cycles: float | None
    role: str

    @property
    def error(self) -> float | None:
        if self.modelled_cycles is None:
            return None
        return self.modelled_cycles / self.published.cycles - 1


@dataclass(frozen=True)
class Derivation:
    """The fitted costs, what they were fitted on, and every row's modelled cycles."""

    costs: Costs
    fit_series: tuple[str, ...]
    fitted: tuple[str, ...]
    rows: tuple[Row, ...]

    def series_errors(self) -> dict[str, tuple[str, float, float, int]]:
        """Per series: role, median and largest |error| over its independent rows, and their
        number (shared rows are left out of a held-out series' figures)."""
        found = {}
        for series in dict.fromkeys(row.published.series for row in self.rows):
            own = [r for r in self.rows if r.published.series == series and r.error is not None]
            independent = [r for r in own if r.role != "shared"]
            if not independent:
                continue
            errors = [abs(r.error) for r in independent]
            found[series] = (independent[0].role, statistics.median(errors), max(errors),
                             len(errors))  # fmt: skip
        return found


def load(path: Path = DATA) -> list[Published]:
    """The published rows (lines starting with ``#`` are the header's citation)."""
    with path.open(newline="") as f:
        lines = [line for line in f if not line.startswith("#")]
    return [Published(r["experiment"], int(r["n_matrix"]), int(r["n_mesh"]), int(r["cycles"]))
            for r in csv.DictReader(lines)]  # fmt: skip


# --- The SDK's memcpy (copy mode, MEMCPY_32BIT, ROW_MAJOR, one channel) and launch ---------


def _memcpy(costs: Costs, words_per_pe: int, width: int, height: int) -> float:
    """The words pass the one I/O channel one at a time, then the memcpy columns beside the
    rectangle, and travel along the rows; the rows take theirs at the same time, each its PEs
    in turn [SDK-TS]. The copy takes the longer of the two streams, plus the farthest PE's
    hops."""
    channel = width * height * words_per_pe * costs.channel_cycles_per_word
    row = width * words_per_pe * costs.row_cycles_per_word
    hops = MEMCPY_WEST_COLUMNS + width + height
    return max(channel, row) + hops * costs.hop_latency_cycles


def memcpy_h2d(costs: Costs, words_per_pe: int, width: int, height: int) -> float:
    """``runner.memcpy_h2d(..., streaming=False)`` of ``words_per_pe`` words to every PE."""
    return _memcpy(costs, words_per_pe, width, height)


def memcpy_d2h(costs: Costs, words_per_pe: int, width: int, height: int) -> float:
    """``runner.memcpy_d2h(..., streaming=False)``: the same streams, the other way."""
    return _memcpy(costs, words_per_pe, width, height)


def launch(costs: Costs, width: int, height: int) -> float:
    """``runner.launch``: the RPC reaches the farthest PE of the rectangle."""
    return (MEMCPY_WEST_COLUMNS + width + height) * costs.hop_latency_cycles


def fmacs_loop(costs: Costs, iterations: int, length: int) -> float:
    """A scalar loop of ``iterations`` iterations, each issuing one ``@fmacs`` of ``length``
    elements (Cannon's compute_C, LU's update_sub_matrix)."""
    element = length * costs.fmac_cycles_per_element
    return iterations * (costs.loop_iteration_cycles + element)


def stream(costs: Costs, words: int, hops: int) -> float:
    """An ``@fmovs`` of ``words`` wavelets between a PE's memory and the fabric, ``hops``
    routers away from its farthest receiver (sender and receivers wait for each other)."""
    return words * costs.fabric_cycles_per_wavelet + hops * costs.hop_latency_cycles


# --- Cannon's algorithm (Cannons_algorithm/pe_program.csl) ----------------------------------


def compute_C(costs: Costs, tile: int) -> float:  # noqa: N802 (the program's name)
    """A double loop of tile x tile iterations: load A[row][col], ``@fmacs`` of a row of B
    (tile elements) into a row of C, move B's DSD a row on."""
    return fmacs_loop(costs, tile * tile, tile)


def shift(costs: Costs, tile: int, mesh: int) -> float:
    """Send the tile west (or north) and receive the neighbour's: even PEs send while odd ones
    receive, then the other way round; the first PE's tile wraps across the mesh."""
    return stream(costs, tile * tile, mesh - 1) + stream(costs, tile * tile, 1)


def cannon_compute(costs: Costs, tile: int, mesh: int) -> float:
    """``compute``: mesh - 1 rounds of compute_C and the shifts of A and B, a last compute_C."""
    rounds = mesh - 1
    return mesh * compute_C(costs, tile) + rounds * 2 * shift(costs, tile, mesh)


def cannon(costs: Costs, n: int, mesh: int) -> float:
    """run.py: copy A and B in, launch ``compute``, copy C out."""
    tile = n // mesh
    words = tile * tile
    copies = 2 * memcpy_h2d(costs, words, mesh, mesh) + memcpy_d2h(costs, words, mesh, mesh)
    return copies + launch(costs, mesh, mesh) + cannon_compute(costs, tile, mesh)


# --- LU without pivoting (lu_factorization/many_elements_per_pe/pe_program.csl) -------------
# The numbers in comments are that file's lines. Block step k has four roles, each a PE or a
# set of PEs that move in step: D, the diagonal PE (k, k), runs ``compute``; L, the PEs under
# it, run ``division_step`` a column; U, the PEs right of it, run ``send_row_to_south`` a
# column; I, the trailing PEs, run ``elimination_step``.


def division_loop(costs: Costs, iterations: int) -> float:
    """``A[row*N_per_pe + col] /= pivot`` over ``iterations`` rows (135, 190): a scalar loop,
    so each iteration pays a loop iteration besides its division."""
    return iterations * (costs.loop_iteration_cycles + costs.division_cycles)


def update_sub_matrix(costs: Costs, iterations: int, length: int, advance: bool) -> float:
    """``update_sub_matrix`` (113-123): set ``to_add``'s length and copy ``row_dsd`` (moving the
    copy a row on when ``advance``), then a scalar loop of ``iterations`` @fmacs of ``length``
    elements, Cannon's loop."""
    updates = 3 if advance else 2
    return updates * costs.dsd_update_cycles + fmacs_loop(costs, iterations, length)


def meet(
    costs: Costs, sender: float, receiver: float, words: int, hops: int, queue: float
) -> tuple[float, float]:
    """A blocking @fmovs of ``words`` wavelets, from a sender that reaches it at ``sender`` to
    receivers that reach theirs at ``receiver``: the sender may run ``queue`` wavelets (the
    receivers' input queue) ahead of a receiver not yet reading, and is done when its last
    wavelet leaves; the receivers when the farthest has it. Returns when the sender and the
    receivers are done."""
    if words == 0:
        return sender, receiver
    wavelets = words * costs.fabric_cycles_per_wavelet
    received = max(receiver, sender + hops * costs.hop_latency_cycles) + wavelets
    if words <= queue:  # all of it waits in the queue
        return sender + wavelets, received
    behind = (words - queue) * costs.fabric_cycles_per_wavelet
    return max(sender + wavelets, receiver + behind), received


def lu_diagonal_alone(costs: Costs, tile: int) -> float:
    """The last diagonal PE's ``compute`` (bottom row, right column: it sends nothing, 129 and
    139): for each column its DSD moves (127-128, 137-138, 146-147), the division of the
    m = tile - col - 1 entries below the pivot, and the update of the m x m block."""
    total = 0.0
    for col in range(tile):
        m = tile - col - 1
        total += (6 * costs.dsd_update_cycles + division_loop(costs, m)
                  + update_sub_matrix(costs, m, m, advance=True))  # fmt: skip
    return total


def lu_column(costs: Costs, tile: int, hops: int, m: int, free: list[float]) -> list[float]:
    """One column of a block step, each role in its program's order, each stream meeting its
    receivers (:func:`meet`; m = the entries below the pivot). ``free`` holds when D, L, U and
    I are free; returns the next."""
    d, low, up, inner = free
    dsd, one = costs.dsd_update_cycles, costs.fabric_cycles_per_wavelet
    latency, activation = hops * costs.hop_latency_cycles, costs.task_activation_cycles
    pivot = d + 2 * dsd + one  # 127-130: D moves row_dsd, sends the pivot south
    low = max(low, pivot + latency) + activation  # the pivot wavelet starts division_step
    low += 2 * dsd + division_loop(costs, tile)  # 188-193: L divides its tile's column
    north, west = costs.north_queue_wavelets, costs.west_queue_wavelets
    d, low = meet(costs, pivot + dsd, low, m, hops, north)  # 131-132 with 194: pivot row south
    signal = d + division_loop(costs, m) + 2 * dsd + one  # 134-140: D divides, signals east
    up = max(up, signal + latency) + activation + 3 * dsd  # 210-214: send_row_to_south
    d, up = meet(costs, signal + dsd, up, m, hops, west)  # 141-142 with 215: D's column east
    low, inner = meet(costs, low, inner, tile, hops, west)  # 195 with 161: L's multipliers east
    up, inner = meet(costs, up, inner, tile, hops, north)  # 216 with 162: U's row south
    low_update = 2 * dsd + update_sub_matrix(costs, tile, m, advance=False) if m else 0.0
    up_update = update_sub_matrix(costs, m, tile, advance=True) + dsd if m else 0.0
    return [
        d + update_sub_matrix(costs, m, m, advance=True) + 2 * dsd,  # 144-147
        low + dsd + low_update,  # 196-201: the last column updates nothing (198, 203)
        up + up_update,  # 218-220: nor here (218, 222)
        inner + update_sub_matrix(costs, tile, tile, advance=False),  # 163
    ]


def lu_compute(costs: Costs, tile: int, mesh: int) -> float:
    """Block step k, column by column (:func:`lu_column`); the I PEs of column and row k + 1
    first advance their switches (154-158, two control wavelets on PE (k + 1, k + 1)). Step
    k + 1 starts when the step's I PEs are done: they leave ``elimination_step`` with their
    control wavelets (166-175) and PE (k + 1, k + 1) activates ``compute`` (179). The last
    diagonal PE ends alone."""
    one, activation = costs.fabric_cycles_per_wavelet, costs.task_activation_cycles
    end, leader, panels = 0.0, activation, 0.0  # start() activates compute on (0, 0) (230)
    for k in range(mesh - 1):
        hops = mesh - 1 - k  # the farthest receiver of a stream along a row or a column
        free = [leader, panels, panels, end + 2 * one]
        for col in range(tile):
            free = lu_column(costs, tile, hops, tile - col - 1, free)
        end = max(free)
        controls = 1 if k == mesh - 2 else 2  # the last diagonal PE sends east only (174)
        leader = end + controls * one + activation
        panels = end + one  # the next L and U PEs leave with a control wavelet (171, 174)
    return leader + lu_diagonal_alone(costs, tile)


def lu(costs: Costs, n: int, mesh: int) -> float:
    """run.py: copy A in, launch ``start``, copy the factors out."""
    words = (n // mesh) ** 2
    copies = memcpy_h2d(costs, words, mesh, mesh) + memcpy_d2h(costs, words, mesh, mesh)
    return copies + launch(costs, mesh, mesh) + lu_compute(costs, n // mesh, mesh)


# --- QR by Givens rotations (QR_factorization/many_elements_per_pe/pe_program.csl) ---------
# The numbers in comments are that file's lines. Block step k: the panel PEs (k, y), y >= k,
# zero their tiles' lower triangles (make_lower_zeros), then rows of PEs pair north and south
# column by column of the tile, in a chain up the panel column (make_upper_zeros, and
# diagonal_recv_update on PE (k, k)); every rotation's sine and cosine go east along the row,
# and the PEs east of the panel (recv_sin_cos_and_update) apply it to their own tiles a
# rotation behind. A row moves as one: its panel PE and its east PEs at the slower one's pace.


def iteration(costs: Costs, instructions: int) -> float:
    """A loop iteration (or a recursive call) issuing ``instructions`` vector instructions:
    Cannon's iteration holds one instruction's issue, each further one costs its issue."""
    return costs.loop_iteration_cycles + (instructions - 1) * costs.vector_issue_cycles


def sin_cos(costs: Costs) -> float:
    """``compute_sin_cos`` (95-111): tau by a division, then 1 / sqrt(1 + tau^2); the
    comparisons and products are folded into the iteration's scalar part."""
    return 2 * costs.division_cycles + costs.sqrt_cycles


def panel_rotations(costs: Costs, lengths: np.ndarray, east: bool, moves: int) -> np.ndarray:
    """A panel PE's rotation of two rows of ``lengths`` words (294-297, 262-267):
    compute_sin_cos, the two words sent east (129-130, none on the east edge), and
    update_local_rows' six instructions (114-125); ``moves`` DSD updates, one of them
    Cannon's iteration's."""
    sends = 2 if east else 0
    return (iteration(costs, 6 + sends) + sin_cos(costs) + sends * costs.fabric_cycles_per_wavelet
            + 6 * lengths * costs.fmac_cycles_per_element
            + (moves - 1) * costs.dsd_update_cycles)  # fmt: skip


def east_rotation(costs: Costs, tile: int) -> float:
    """An east PE's rotation (186-188, 218-220): two one-word receives (165-168), then
    update_local_rows over whole rows of the tile; three DSD moves."""
    return (iteration(costs, 8) + 2 * costs.fabric_cycles_per_wavelet
            + 6 * tile * costs.fmac_cycles_per_element + 2 * costs.dsd_update_cycles)  # fmt: skip


def rotations(costs: Costs, lengths: np.ndarray, tile: int, east: bool, moves: int):
    """The row's rotations over row pairs of ``lengths`` words, each at the slower of its
    panel PE and its east PEs (the east PEs take the sine and cosine the panel sends)."""
    panel = panel_rotations(costs, lengths, east, moves)
    return np.maximum(panel, east_rotation(costs, tile)) if east else panel


def exchange(costs: Costs, words: int | np.ndarray) -> float | np.ndarray:
    """Two PEs of a column swap a row (134-137, 146-147, 156-157): the south one sends its
    row and a control wavelet north, then receives the north one's, a hop each way."""
    wavelets = 2 * words + 1
    return wavelets * costs.fabric_cycles_per_wavelet + 2 * costs.hop_latency_cycles


def exchange_steps(costs: Costs, tile: int, east: bool) -> np.ndarray:
    """Per column c of the tile, one pair's swap of the panel's t - c words and its update
    (recv_A_from_south_and_update 145-153 or send_A_to_north_and_update 155-163: compute_sin_cos,
    the sine and cosine east, three instructions over the row), at the slower of the panel
    PE and its east PEs (which receive the two words first and swap whole rows, 212-216)."""
    lengths = tile - np.arange(tile)
    sends = 2 if east else 0
    panel = (iteration(costs, 6 + sends) + sin_cos(costs) + exchange(costs, lengths)
             + sends * costs.fabric_cycles_per_wavelet
             + 3 * lengths * costs.fmac_cycles_per_element)  # fmt: skip
    if not east:
        return panel
    other = (iteration(costs, 8) + 2 * costs.fabric_cycles_per_wavelet + exchange(costs, tile)
             + 3 * tile * costs.fmac_cycles_per_element)  # fmt: skip
    return np.maximum(panel, other)


def qr_local(costs: Costs, tile: int, east: bool) -> float:
    """make_lower_zeros (289-309) and the east PEs' first loop (182-192): for column col of
    the tile, t - col - 1 rotations of t - col words (three DSD lengths and a move a column,
    four DSD updates at the end)."""
    cols = np.arange(tile - 1)
    steps = rotations(costs, tile - cols, tile, east, moves=3)
    return float(np.sum((tile - cols - 1) * steps) + 4 * (len(cols) + 1) * costs.dsd_update_cycles)


def qr_chain(costs: Costs, tile: int, middle: bool) -> float:
    """make_upper_zeros (255-287) on the row that sets the pace: for each column c of the
    tile a swap with the row south (a middle row's only), a swap with the row north, then
    t - c - 1 rotations restoring the tile's triangle over t - c - 1 down to 1 words (seven DSD
    updates each, 262-267; six more after, 269-273). The row north and south move a swap
    apart, so the chain's climb is paid once (:func:`qr_compute`)."""
    steps = exchange_steps(costs, tile, east=True)
    restoring = np.cumsum(rotations(costs, np.arange(1, tile), tile, east=True, moves=7))
    restore = np.concatenate([restoring[::-1], [0.0]])  # column c: t - c - 1 rotations
    swaps = 2 if middle else 1
    return float(np.sum(swaps * steps + restore) + tile * 6 * costs.dsd_update_cycles)


def qr_compute(costs: Costs, tile: int, mesh: int) -> float:
    """start (315-326) on every PE: block steps 0 to mesh - 2 (h = mesh - k rows; the rows
    under the diagonal are middle rows while h >= 3, then the bottom row alone sets the pace)
    each begin when the first sine and cosine reach the farthest east PE; step k + 1 follows
    step k row by row as each row finishes (count == x, 226-230), so the chain's climb from
    the bottom row to the diagonal (one swap a row) is paid once, at step 0. The last
    diagonal PE then zeros its tile alone (no east PEs, 303-305)."""
    if mesh < 2:
        return qr_local(costs, tile, east=False)
    first = sin_cos(costs) + qr_local(costs, tile, east=True)
    climb = (mesh - 2) * float(exchange_steps(costs, tile, east=True)[0])
    middles = (mesh - 2) * (first + qr_chain(costs, tile, middle=True))
    last_pair = first + qr_chain(costs, tile, middle=False)
    hops = mesh * (mesh - 1) / 2 * costs.hop_latency_cycles  # mesh - 1 - k at step k
    return climb + middles + last_pair + hops + qr_local(costs, tile, east=False)


def qr(costs: Costs, n: int, mesh: int) -> float:
    """run.py: copy A in, launch ``start``, copy R out."""
    words = (n // mesh) ** 2
    copies = memcpy_h2d(costs, words, mesh, mesh) + memcpy_d2h(costs, words, mesh, mesh)
    return copies + launch(costs, mesh, mesh) + qr_compute(costs, n // mesh, mesh)


# Ported programs by the series' first word (a series of a program not here would be listed,
# unmodelled).
PROGRAMS: dict[str, Callable[[Costs, int, int], float]] = {"cannon": cannon, "lu": lu, "qr": qr}


# --- The fit -------------------------------------------------------------------------------


def _with(base: Costs, names: Sequence[str], values: np.ndarray) -> Costs:
    return dataclasses.replace(base, **{k: float(v) for k, v in zip(names, values, strict=True)})


def _residuals(rows: Sequence[Published], base: Costs, names: Sequence[str]):
    """Relative errors of ``rows`` as a function of the log of the fitted costs."""

    def residual(log_values: np.ndarray) -> np.ndarray:
        costs = _with(base, names, np.exp(np.clip(log_values, -LOG_BOUND, LOG_BOUND)))
        return np.array([PROGRAMS[r.program](costs, r.n_matrix, r.n_mesh) / r.cycles - 1
                         for r in rows])  # fmt: skip

    return residual


def _jacobian(residual: Callable[[np.ndarray], np.ndarray], x: np.ndarray) -> np.ndarray:
    step = 1e-6
    columns = [(residual(x + step * e) - residual(x - step * e)) / (2 * step)
               for e in np.eye(len(x))]  # fmt: skip
    return np.stack(columns, axis=1)


def _levenberg_marquardt(residual, x0: np.ndarray, iterations: int = 200) -> np.ndarray:
    """Least squares from ``x0`` (numpy only): damped Gauss-Newton steps, the damping raised
    when a step does not lower the sum of squares and lowered when it does."""
    x, damping = x0.copy(), 1e-3
    cost = float(np.sum(residual(x) ** 2))
    for _ in range(iterations):
        r, jac = residual(x), _jacobian(residual, x)
        normal = jac.T @ jac
        step = np.linalg.solve(normal + damping * np.diag(np.diag(normal) + 1e-12), -jac.T @ r)
        trial = float(np.sum(residual(x + step) ** 2))
        if trial < cost:
            done = cost - trial < 1e-12 * cost or np.max(np.abs(step)) < 1e-9
            x, cost, damping = x + step, trial, damping / 3
            if done:
                break
        else:
            damping *= 4
    return x


def _starts(names: Sequence[str]) -> list[np.ndarray]:
    """Starting points on a grid from 0.5 to 128 cycles for the copies' two costs (the
    objective has kinks where a copy's bound changes from the rows to the channel), the
    other costs from 8 cycles."""
    grid = np.log([0.5, 8.0, 128.0])
    copies = [name in ("channel_cycles_per_word", "row_cycles_per_word") for name in names]
    points = itertools.product(*[grid if copy else grid[1:2] for copy in copies])
    return [np.array(point) for point in points]


def _check_identifiable(residual, x: np.ndarray, names: Sequence[str], series) -> None:
    """Refuse a fit whose series cannot tell its costs apart (a near-singular Jacobian)."""
    singular = np.linalg.svd(_jacobian(residual, x), compute_uv=False)
    if singular[-1] * CONDITION_LIMIT < singular[0]:
        ratio = singular[0] / singular[-1] if singular[-1] > 1e-12 * singular[0] else np.inf
        raise ValueError(
            f"the series {', '.join(series)} cannot separate {', '.join(names)} "
            f"(condition number {ratio:.3g}): some of them grow in the same proportion there, "
            "or do not bind; fit on other series"
        )


def fit(rows: Sequence[Published], names: Sequence[str], base: Costs, series) -> Costs:
    """The costs ``names`` that minimise the squared relative error over ``rows``."""
    residual = _residuals(rows, base, names)
    found = [_levenberg_marquardt(residual, x0) for x0 in _starts(names)]
    best = min(found, key=lambda x: (float(np.sum(residual(x) ** 2)), tuple(x)))
    _check_identifiable(residual, best, names, series)
    return _with(base, names, np.exp(best))


def _role(row: Published, fit_series: Sequence[str], fitted_runs: set) -> str:
    if row.program not in PROGRAMS:
        return "not ported"
    if row.series in fit_series:
        return "fitted"
    if (row.program, row.n_matrix, row.n_mesh) in fitted_runs:
        return "shared"
    return "held out"


def derive(fit_series: Sequence[str] = DEFAULT_FIT, free: Sequence[str] = DEFAULT_FREE,
           path: Path = DATA) -> Derivation:  # fmt: skip
    """Fit the costs ``free`` on the series ``fit_series``; model every published row."""
    published = load(path)
    known = {row.series for row in published}
    unknown = sorted(set(fit_series) - known)
    if unknown or not fit_series:
        raise ValueError(f"fit series {unknown or '(none)'}: choose from {sorted(known)}")
    bad = sorted(set(free) - set(MEANING))
    if bad or not free:
        raise ValueError(f"free costs {bad or '(none)'}: choose from {sorted(MEANING)}")
    unquoted = [name for name in FITTED if name not in free]
    if unquoted:
        raise ValueError(f"free costs must include {', '.join(unquoted)}: no source gives them")
    rows = [row for row in published if row.series in fit_series]
    if SPLIT not in free and any(row.program == "qr" for row in rows):
        raise ValueError(f"free costs must include {SPLIT} to fit a QR series")
    if any(row.program not in PROGRAMS for row in rows):
        raise ValueError(f"fit series must be of a ported program: {sorted(PROGRAMS)}")
    base = Costs(channel_cycles_per_word=1.0, row_cycles_per_word=1.0, loop_iteration_cycles=1.0)
    costs = fit(rows, tuple(free), base, fit_series)
    fitted_runs = {(r.program, r.n_matrix, r.n_mesh) for r in rows}
    modelled = tuple(
        Row(row, PROGRAMS[row.program](costs, row.n_matrix, row.n_mesh)
            if row.program in PROGRAMS else None, _role(row, fit_series, fitted_runs))
        for row in published
    )  # fmt: skip
    return Derivation(costs, tuple(fit_series), tuple(free), modelled)


# --- Output --------------------------------------------------------------------------------


def constants_table(derivation: Derivation) -> list[str]:
    lines = ["| constant | value | unit | meaning | source |", "|---|---|---|---|---|"]
    for name, (unit, meaning, source) in MEANING.items():
        value = getattr(derivation.costs, name)
        how = "fitted" if name in derivation.fitted else source
        lines.append(f"| `{name}` | {value:.4g} | {unit} | {meaning} | {how} |")
    return lines


def rows_table(derivation: Derivation) -> list[str]:
    lines = ["| series | n | mesh | published cycles | modelled cycles | error | role |",
             "|---|---|---|---|---|---|---|"]  # fmt: skip
    for row in derivation.rows:
        p = row.published
        if row.modelled_cycles is None:
            lines.append(f"| {p.series} | {p.n_matrix} | {p.n_mesh} | {p.cycles} | - | - | "
                         f"{row.role} |")  # fmt: skip
            continue
        lines.append(f"| {p.series} | {p.n_matrix} | {p.n_mesh} | {p.cycles} | "
                     f"{row.modelled_cycles:.0f} | {row.error:+.1%} | {row.role} |")  # fmt: skip
    return lines


def summary_table(derivation: Derivation) -> list[str]:
    lines = ["| series | role | rows | median \\|error\\| | largest \\|error\\| |",
             "|---|---|---|---|---|"]  # fmt: skip
    for series, (role, median, largest, count) in derivation.series_errors().items():
        lines.append(f"| {series} | {role} | {count} | {median:.1%} | {largest:.1%} |")
    return lines


def sensitivity() -> Derivation:
    """The fmacs element cost fitted too, on both Cannon series (each alone cannot separate
    it from the loop iteration: the tile is fixed in one, the mesh in the other); with a QR
    series and the split free as well the fit drives the split to nothing and is refused, so
    the split stays wafer/presets.py's here."""
    return derive(("cannon_const", "cannon_increasing"), (*FITTED, "fmac_cycles_per_element"))


def what_ifs(derivation: Derivation, other: Derivation) -> dict[str, Costs]:
    """Costs under which to rerun the held-out LU rows, each taking one mechanism of the port
    out or pricing it otherwise, to show what moves them: diagnostics, not fits."""
    costs = derivation.costs
    replace = dataclasses.replace
    # division_cycles appears only in division_loop: less the loop iteration, an iteration
    # there costs the division alone, as the earlier port charged it
    bare = costs.division_cycles - costs.loop_iteration_cycles
    return {
        "as ported": costs,
        "division loops pay the division alone (no loop iteration)": replace(
            costs, division_cycles=bare
        ),
        "streams wait for their receivers (no input queue)": replace(
            costs, north_queue_wavelets=0, west_queue_wavelets=0
        ),
        "no DSD updates, no task activations": replace(
            costs, dsd_update_cycles=0.0, task_activation_cycles=0.0
        ),
        "the sensitivity's costs (`fmac_cycles_per_element` fitted)": other.costs,
        "divisions at twice the quoted 50 cycles": replace(
            costs, division_cycles=2 * costs.division_cycles
        ),
    }


def qr_what_ifs(derivation: Derivation) -> dict[str, Costs]:
    """Costs under which to rerun QR: the split and the square root priced otherwise, to
    show what moves its rows: diagnostics, not fits."""
    costs, replace = derivation.costs, dataclasses.replace
    startup = float(WSE2_PE.op_startup_cycles)
    return {
        "as fitted": costs,
        "wafer/presets.py's split (each further instruction its start-up alone)": replace(
            costs, vector_issue_cycles=startup
        ),
        "each further instruction a whole loop iteration": replace(
            costs, vector_issue_cycles=costs.loop_iteration_cycles
        ),
        "a free square root": replace(costs, sqrt_cycles=0.0),
        "a square root of twice the quoted division": replace(
            costs, sqrt_cycles=2 * costs.division_cycles
        ),
    }


def what_if_table(derivation: Derivation, program: str, what_ifs: dict[str, Costs]) -> list[str]:
    """A program's median |error| and its errors' range, per series, under each of
    ``what_ifs``' costs (the signs tell a missing cost from an extra one)."""
    rows = [row.published for row in derivation.rows if row.published.program == program]
    series = list(dict.fromkeys(row.series for row in rows))
    lines = ["| costs | " + " | ".join(f"{s} median \\|error\\| (lowest to highest)"
                                     for s in series)
             + " |", "|---|" + "---|" * len(series)]  # fmt: skip
    for label, costs in what_ifs.items():
        cells = []
        for name in series:
            errors = [PROGRAMS[program](costs, r.n_matrix, r.n_mesh) / r.cycles - 1
                      for r in rows if r.series == name]  # fmt: skip
            median = statistics.median(abs(e) for e in errors)
            cells.append(f"{median:.1%} ({min(errors):+.1%} to {max(errors):+.1%})")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return lines


def markdown(derivation: Derivation, other: Derivation) -> str:
    """The page's generated part: constants, rows, per-series errors, the sensitivity, and
    LU and QR under the what-ifs."""
    fit_on = ", ".join(f"`{s}`" for s in derivation.fit_series)
    other_on = ", ".join(f"`{s}`" for s in other.fit_series)
    parts = [
        f"Fitted on {fit_on}.", "", *constants_table(derivation), "",
        *rows_table(derivation), "",
        "<!-- --8<-- [start:summary] -->", *summary_table(derivation),
        "<!-- --8<-- [end:summary] -->", "",
        f"Sensitivity: `fmac_cycles_per_element` fitted as well, on {other_on}.", "",
        *constants_table(other), "", *summary_table(other), "",
        "LU (held out) under other costs: diagnostics, not fits.", "",
        *what_if_table(derivation, "lu", what_ifs(derivation, other)), "",
        "QR under other costs (`qr_const` is fitted, `qr_increasing` held out): diagnostics, "
        "not fits.", "",
        *what_if_table(derivation, "qr", qr_what_ifs(derivation)),
    ]  # fmt: skip
    return "\n".join(parts)


def write_doc(path: Path, text: str) -> None:
    """Put ``text`` between the page's markers (atomically)."""
    page = path.read_text()
    if START not in page or END not in page:
        raise ValueError(f"{path} has no {START} ... {END} markers")
    head, rest = page.split(START, 1)
    _, tail = rest.split(END, 1)
    write_text(path, f"{head}{START}\n{text}\n{END}{tail}")


def summary(derivation: Derivation) -> dict:
    """The JSON record: the costs with their units, meanings and sources, and every row."""
    constants = {name: {"value": getattr(derivation.costs, name), "unit": unit,
                        "meaning": meaning,
                        "source": "fitted" if name in derivation.fitted else source}
                 for name, (unit, meaning, source) in MEANING.items()}  # fmt: skip
    rows = [{**dataclasses.asdict(row.published), "modelled_cycles": row.modelled_cycles,
             "error": row.error, "role": row.role} for row in derivation.rows]  # fmt: skip
    citation = [line.lstrip("# ").rstrip() for line in DATA.read_text().splitlines()
                if line.startswith("#")]  # fmt: skip
    return {"data": str(DATA.relative_to(DATA.parents[2])), "citation": " ".join(citation),
            "wafersim_version": __version__, "fit_series": derivation.fit_series,
            "fitted": derivation.fitted, "constants": constants, "rows": rows}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fit", nargs="+", default=list(DEFAULT_FIT), metavar="SERIES")
    parser.add_argument("--free", nargs="+", default=list(DEFAULT_FREE), metavar="COST",
                        help=f"costs to fit (default: {' '.join(DEFAULT_FREE)})")  # fmt: skip
    parser.add_argument("--json", help="write the constants and rows here (JSON)")
    parser.add_argument("--doc", help="a page whose tables between the markers to rewrite")
    args = parser.parse_args()
    if args.doc and (tuple(args.fit) != DEFAULT_FIT or tuple(args.free) != DEFAULT_FREE):
        parser.error("--doc: the page shows the default fit (drop --fit and --free)")
    try:
        derivation = derive(args.fit, args.free)
    except ValueError as error:
        parser.error(str(error))
    print("\n".join(rows_table(derivation)), "", "\n".join(summary_table(derivation)), "",
          "\n".join(constants_table(derivation)), sep="\n")  # fmt: skip
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        write_json(Path(args.json), summary(derivation))
        print(f"saved {args.json}")
    if args.doc:
        try:
            write_doc(Path(args.doc), markdown(derivation, sensitivity()))
        except (OSError, ValueError) as error:
            parser.error(str(error))
        print(f"rewrote the tables of {args.doc}")


if __name__ == "__main__":
    main()
