import itertools

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from wafersim.kernels.collectives import ALGOS, OPS, SCOPES, collective, collective_cycles
from wafersim.kernels.grid import kernel_grid
from wafersim.wafer.errors import ConfigError
from wafersim.wafer.presets import preset

SPEC = preset("tiny")
REDUCING = ("reduce", "allreduce")


def scope_pes(scope, rows, cols):
    return {"row": cols, "column": rows, "grid": rows * cols}[scope]


def reference(op, n_words, pes, dtype="fp32", seed=0):
    """What numpy says every PE that should hold the result holds (the module's data recipe:
    one standard-normal float32 vector at the root, or one per PE for reductions)."""
    values = n_words * (2 if dtype == "fp16" else 1)
    rng = np.random.default_rng(seed)
    if op in REDUCING:
        total = rng.standard_normal((pes, values)).astype(np.float32).astype(np.float64).sum(0)
        return total if op == "reduce" else np.tile(total, (pes, 1))
    vector = rng.standard_normal(values).astype(np.float32)
    if dtype == "fp16":
        vector = vector.astype(np.float16).astype(np.float32)
    return np.tile(vector, (pes, 1)) if op == "broadcast" else vector


def holed_grid(rows, cols, dead_rows):
    """A rows x cols kernel on a patch with one spare row; column ``j`` loses the PE in row
    ``dead_rows[j]`` (None: no hole)."""
    dead = np.zeros((rows + 1, cols), bool)
    for j, row in enumerate(dead_rows):
        if row is not None:
            dead[row, j] = True
    return kernel_grid(rows, cols, dead)


HOLED = holed_grid(3, 4, [None, 0, 2, 3])


@pytest.mark.parametrize(("op", "algo", "scope"), list(itertools.product(OPS, ALGOS, SCOPES)))
def test_every_collective_matches_numpy_on_a_grid_with_holes(op, algo, scope):
    """Each (op, algo, scope) leaves numpy's answer on every PE that should hold it."""
    pes = scope_pes(scope, HOLED.rows, HOLED.cols)
    result = collective(op, algo, 13, HOLED, SPEC, scope=scope, seed=3)
    expected = reference(op, 13, pes, seed=3)
    np.testing.assert_allclose(result.output, expected, rtol=1e-5, atol=1e-5)
    assert result.max_abs_error == pytest.approx(np.max(np.abs(result.output - expected)))


@settings(max_examples=30, deadline=None)
@given(
    op=st.sampled_from(list(OPS)),
    algo=st.sampled_from(ALGOS),
    scope=st.sampled_from(list(SCOPES)),
    rows=st.integers(1, 4),
    cols=st.integers(1, 6),
    extra=st.integers(0, 9),
    fp16=st.booleans(),
    data=st.data(),
)
def test_collectives_match_numpy_on_random_grids(op, algo, scope, rows, cols, extra, fp16, data):
    """Any grid (non-square, with or without holes), length and dtype: numpy's answer."""
    pes = scope_pes(scope, rows, cols)
    assume(pes >= 2)
    # holes in every other column: each detour has a hole-free column beside it (the wiring
    # looks for detours near the endpoints only, and reduce_line's streams of one color share
    # their channels, which a long detour can close into a cycle)
    hole = st.one_of(st.none(), st.integers(0, rows))
    dead_rows = [data.draw(hole) if cols > 1 and j % 2 == 0 else None for j in range(cols)]
    n_words = extra + (pes if op in ("scatter", "gather") else 1)
    dtype = "fp16" if fp16 and op not in REDUCING else "fp32"
    grid = holed_grid(rows, cols, dead_rows)
    result = collective(op, algo, n_words, grid, SPEC, dtype=dtype, scope=scope, seed=extra)
    expected = reference(op, n_words, pes, dtype, seed=extra)
    np.testing.assert_allclose(result.output, expected, rtol=1e-5, atol=1e-5)


# Hand-derived cycle counts on a defect-free row (scope "row", root at position 0) with
# s = 2 op startup cycles, L = hop latency; one stream of n words over h hops takes
# p2p(h, n) = s + 1 + h*L + n. Streams that wait on each other add up.
#   op, algo, PEs, L, n_words, cycles
LINE_CYCLES = [
    # chain broadcast: store-and-forward, (PEs-1) * p2p(1, n)
    ("broadcast", "chain", 2, 1, 1, 5),  # 2+1+1+1
    ("broadcast", "chain", 5, 1, 4, 32),  # 4 * 8
    ("broadcast", "chain", 4, 2, 3, 24),  # 3 * (2+1+2+3)
    # tree broadcast: one multicast, p2p(PEs-1, n)
    ("broadcast", "tree", 8, 1, 16, 26),  # 2+1+7+16
    ("broadcast", "tree", 6, 2, 10, 23),  # 2+1+10+10
    # ktree broadcast: g = isqrt(PEs-1)+1; root -> leaders, then leaders -> their groups
    ("broadcast", "ktree", 5, 1, 16, 42),  # g=3: p2p(3) to PE 3, then p2p(1) to PE 4: 22+20
    ("broadcast", "ktree", 10, 1, 8, 31),  # g=4: p2p(8) to PE 8, then p2p(1) to PE 9: 19+12
    # chain gather/scatter, pieces of m = n/PEs: the stream into PE d-1 carries PEs-d pieces
    ("gather", "chain", 3, 1, 6, 14),  # m=2: p2p(1, 2) + p2p(1, 4) = 6+8
    ("scatter", "chain", 3, 1, 6, 14),  # the same streams reversed
    ("gather", "chain", 3, 2, 6, 16),  # 7+9
    # tree gather/scatter: round k carries 2^k pieces over 2^k hops
    ("gather", "tree", 4, 1, 8, 15),  # m=2: p2p(1, 2) + p2p(2, 4) = 6+9
    ("scatter", "tree", 4, 1, 8, 15),
    # reductions: chain (PEs-1) * p2p(1, n); tree sum_k p2p(2^k, n)
    ("reduce", "chain", 3, 1, 4, 16),  # 2 * 8
    ("reduce", "tree", 4, 1, 4, 17),  # 8+9
    ("reduce", "tree", 4, 2, 4, 20),  # 9+11
    # tree allreduce: tree reduce to PE 0, then one multicast p2p(PEs-1, n)
    ("allreduce", "tree", 4, 1, 4, 27),  # 17 + 10
]


@pytest.mark.parametrize(("op", "algo", "pes", "latency", "n_words", "cycles"), LINE_CYCLES)
def test_line_cycles_follow_the_point_to_point_rule(op, algo, pes, latency, n_words, cycles):
    """On a row, each collective takes the cycles its chain of p2p streams adds up to."""
    spec = SPEC.replace({"link.hop_latency_cycles": latency})
    result = collective(op, algo, n_words, kernel_grid(1, pes), spec, scope="row")
    assert result.cycles == cycles


# Whole grid (R x C, root (0, 0)): along the root column, then every row at once (or the
# reverse), so the two levels add up; a tree broadcast is one multicast over R-1+C-1 hops.
#   op, algo, rows, cols, n_words, cycles
GRID_CYCLES = [
    ("broadcast", "chain", 2, 3, 4, 24),  # (1 + 2) * p2p(1, 4) = 3 * 8
    ("broadcast", "tree", 3, 4, 4, 12),  # p2p(5, 4) = 2+1+5+4
    ("gather", "chain", 2, 2, 8, 14),  # rows p2p(1, 2) = 6, column p2p(1, 4) = 8
    ("scatter", "chain", 2, 2, 8, 14),
    ("reduce", "chain", 2, 3, 4, 24),  # rows 2 * 8, column 8
    ("allreduce", "tree", 2, 2, 4, 25),  # rows 8, column 8, multicast p2p(2, 4) = 9
]


@pytest.mark.parametrize(("op", "algo", "rows", "cols", "n_words", "cycles"), GRID_CYCLES)
def test_grid_cycles_add_up_their_levels(op, algo, rows, cols, n_words, cycles):
    """On a grid, the row and column levels run one after the other."""
    result = collective(op, algo, n_words, kernel_grid(rows, cols), SPEC)
    assert result.cycles == cycles
    assert result.analytic_cycles == cycles


# Analytic estimate vs engine on defect-free grids: worst relative error per op allowed.
# Broadcasts are exact; gathers and scatters use mean pieces (ragged pieces are larger near
# the root). Reductions inherit lines.reduce_cycles, which charges a two-sided root one more
# vector even when its sides differ in length (chain: up to +12 % on 8x8) and one stream
# per side while a ktree root takes two (ktree: -17 % on 5x7, n=256).
ESTIMATE_TOLERANCE = {"broadcast": 0.0, "scatter": 0.07, "gather": 0.07, "reduce": 0.02}


@pytest.mark.parametrize(("rows", "cols", "n_words"), [(8, 8, 64), (5, 7, 256)])
@pytest.mark.parametrize(("op", "algo"), list(itertools.product(ESTIMATE_TOLERANCE, ALGOS)))
def test_analytic_estimate_is_close(op, algo, rows, cols, n_words):
    """collective_cycles is within the op's tolerance of the engine."""
    result = collective(op, algo, n_words, kernel_grid(rows, cols), SPEC)
    estimate = collective_cycles(op, algo, n_words, rows, cols, SPEC)
    assert estimate == result.analytic_cycles
    assert abs(estimate - result.cycles) <= ESTIMATE_TOLERANCE[op] * result.cycles


@pytest.mark.parametrize("algo", ALGOS)
def test_allreduce_estimate_is_within_25_percent(algo):
    """The allreduce estimate (reduce, then broadcast) is within 25 % on 8x8 and 5x7."""
    for rows, cols in ((8, 8), (5, 7)):
        result = collective("allreduce", algo, 256, kernel_grid(rows, cols), SPEC)
        assert abs(result.analytic_cycles - result.cycles) <= 0.25 * result.cycles


def test_tree_broadcast_is_one_multicast_and_beats_chain():
    """The tree broadcast of a whole grid uses one color and is faster than the chain."""
    grid = kernel_grid(4, 4)
    tree = collective("broadcast", "tree", 16, grid, SPEC)
    chain = collective("broadcast", "chain", 16, grid, SPEC)
    assert tree.colors_used == 1
    assert tree.cycles < chain.cycles


@pytest.mark.parametrize("op", list(OPS))
def test_flops_count_additions_only(op):
    """Reductions do n_words * (PEs - 1) additions; data movement does none."""
    result = collective(op, "tree", 24, kernel_grid(3, 4), SPEC)
    flops = 24 * 11 if op in REDUCING else 0
    assert result.flops == flops
    assert result.utilization == pytest.approx(flops / (12 * 2 * result.cycles))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"op": "alltoall"}, "op='alltoall' is not one of: broadcast, scatter, gather"),
        ({"algo": "ring"}, "algo='ring' is not one of: chain, tree, ktree"),
        ({"scope": "diagonal"}, "scope='diagonal' is not one of: row, column, grid"),
        ({"n_words": 0}, "n_words=0 must be an integer >= 1"),
        ({"op": "scatter", "n_words": 5}, "n_words=5 must be >= 6"),
        ({"op": "reduce", "dtype": "fp16"}, "dtype='fp16': reduce adds fp32 words"),
        ({"dtype": "fp8"}, "dtype='fp8' is not one of: fp32, fp16, bf16"),
        ({"grid": kernel_grid(3, 1), "scope": "row"}, "scope='row' of a 3x1 grid has 1 PE"),
        ({"n_words": 20_000}, "pe.sram_bytes"),
        ({"spec": SPEC.replace({"router.colors": 8})}, "needs 10 colors: router.colors=8 leaves 4"),
    ],
)
def test_bad_input_names_the_field(kwargs, message):
    """Bad op, algo, scope, length, dtype, grid, SRAM or colors: a ConfigError saying so."""
    args = {"op": "allreduce", "algo": "ktree", "n_words": 8, "grid": kernel_grid(2, 3)}
    args |= {"spec": SPEC} | kwargs
    with pytest.raises(ConfigError, match=message):
        collective(**args)


def test_a_reduction_short_of_colors_reuses_them_on_its_upper_level():
    """With colors for one level and the broadcast only, a tree allreduce's column level
    takes its row level's colors again (the root column switches its routers between the
    levels; ``Wiring.new_position``) and still sums right; the estimate charges the
    switches. Every color it may use fits the router; the same op on a grid whose rounds
    need more says how many before it builds anything."""
    spec = SPEC.replace({"router.colors": 8})  # 4 kernel colors: 3 rounds + 1 multicast
    result = collective("allreduce", "tree", 4, kernel_grid(8, 8), spec)
    assert result.max_abs_error < 1e-5
    assert result.colors_used == 4
    assert result.analytic_cycles == collective_cycles("allreduce", "tree", 4, 8, 8, spec)
    assert result.analytic_cycles == result.cycles
    plain = collective("allreduce", "tree", 4, kernel_grid(8, 8), SPEC)
    assert plain.colors_used == 7  # 3 + 3 + 1: no reuse while the colors last
    with pytest.raises(ConfigError, match="needs 5 colors: router.colors=8 leaves 4"):
        collective("allreduce", "tree", 4, kernel_grid(16, 16), spec)


@pytest.mark.parametrize("scope", list(SCOPES))
@pytest.mark.parametrize("grid", [HOLED, kernel_grid(3, 4)], ids=["holed", "clean"])
@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
def test_a_filtered_scatter_hands_each_pe_its_piece(scope, grid, dtype):
    """``scatter`` with ``filter``: one stream a side from the root, each router's counter
    filter taking its PE's piece (ragged pieces of 13 or 26 words), exact on clean and holed
    grids in both dtypes; one color a level on a clean grid (detours take their own)."""
    pes = scope_pes(scope, grid.rows, grid.cols)
    n_words = 13 if pes < 13 else 26
    result = collective("scatter", "filter", n_words, grid, SPEC, dtype=dtype, scope=scope, seed=5)
    expected = reference("scatter", n_words, pes, dtype=dtype, seed=5)
    np.testing.assert_array_equal(result.output, expected)
    if grid is not HOLED:
        assert result.colors_used == (2 if scope == "grid" else 1)


@pytest.mark.parametrize(("rows", "cols", "n_words"), [(8, 8, 64), (5, 7, 256), (1, 16, 100)])
def test_a_filtered_scatter_is_estimated_closely_and_beats_the_chain(rows, cols, n_words):
    """The estimate (each level's stream to its far end) is within 5 % of the engine, and
    the root's one stream beats store-and-forward by more than twice on these grids."""
    grid = kernel_grid(rows, cols)
    result = collective("scatter", "filter", n_words, grid, SPEC)
    assert abs(result.analytic_cycles - result.cycles) <= 0.05 * result.cycles
    assert 2 * result.cycles < collective("scatter", "chain", n_words, grid, SPEC).cycles


def test_only_a_scatter_filters():
    """A filter hands out parts of a stream; it cannot merge one, so the other ops refuse it."""
    with pytest.raises(ConfigError, match="algo='filter' is not one of: chain, tree, ktree"):
        collective("gather", "filter", 16, kernel_grid(2, 2), SPEC)
