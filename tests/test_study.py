"""Defect study: the table, its determinism, its measurements and its statistics."""

from __future__ import annotations

import json
import math

import h5py
import numpy as np
import pytest
from wafersim.compiler.working import WorkingGrid
from wafersim.fabric.mesh import Mesh
from wafersim.fabric.traffic import ROUTINGS
from wafersim.wafer.defects import generate
from wafersim.wafer.errors import ConfigError
from wafersim.wafer.geometry import NUM_DIRS, E, S, W, mirror_links
from wafersim.wafer.presets import preset
from wafersim.wafer.repair import repair

from wafersim.plots.study import plot_study
from wafersim.stats import T_CRITICAL_95, mean_ci, t_critical_95
from wafersim.studies.config import StudyConfig
from wafersim.studies.result import (
    FORMAT,
    METRIC_COLUMNS,
    ROW_COLUMNS,
    WINDOW_COLUMNS,
    StudyResult,
    column_ranges,
)
from wafersim.studies.routes import main_island, route_stretch
from wafersim.studies.run import run_study
from wafersim.studies.traffic import (
    CLEAN_ROUTING,
    FAULT_ROUTING,
    MAP_FIGURES,
    TRAFFIC_STATUS,
    Window,
    baselines,
    draw_windows,
    reference_figures,
    saturation_throughput,
    window_faults,
    window_mesh,
    window_traffic,
)

SPEC = preset("small")  # 64 x 64 logical PEs and one spare row
HIGH_DENSITY = 50.0  # per cm^2: about 110 dead PEs on `small`, so most windows have faults
WINDOWS = 4  # windows per map
CONFIG = StudyConfig(
    densities_per_cm2=(0.0, HIGH_DENSITY), seeds=2, window_pes=8, windows_per_map=WINDOWS
)


@pytest.fixture(scope="module")
def study() -> StudyResult:
    return run_study(SPEC, CONFIG)


def rows_where(result: StudyResult, **match) -> dict[str, np.ndarray]:
    mask = np.ones(len(result), bool)
    for name, value in match.items():
        mask &= result.rows[name] == value
    return {name: column[mask] for name, column in result.rows.items()}


def mesh_from_picture(picture: str, dead_wires: tuple = ()) -> Mesh:
    """A mesh from rows of ``.`` (working) and ``X`` (hole), dead wires as ``(x, y, dir)``."""
    alive = np.array([[c == "." for c in line] for line in picture.split()])
    dead = np.zeros((*alive.shape, NUM_DIRS), bool)
    for x, y, d in dead_wires:
        dead[y, x, d] = True
    return Mesh(alive.shape[1], alive.shape[0], alive, mirror_links(dead))


# --- the table ---------------------------------------------------------------------------


def test_one_row_per_density_strategy_and_seed(study):
    """The table has densities x strategies x seeds rows, each combination exactly once."""
    assert len(study) == 2 * 3 * 2
    assert set(study.rows) == set(ROW_COLUMNS)
    keys = set(
        zip(
            study.rows["defect_density_per_cm2"].tolist(),
            study.rows["strategy"].tolist(),
            study.rows["seed_index"].tolist(),
            strict=True,
        )
    )
    assert keys == {
        (d, s, i) for d in (0.0, HIGH_DENSITY) for s in CONFIG.strategies for i in (0, 1)
    }


@pytest.mark.slow
def test_a_seed_gives_the_same_table_and_another_seed_another():
    """Two runs from one seed give identical tables; a different seed gives other maps."""
    config = StudyConfig(
        densities_per_cm2=(HIGH_DENSITY,),
        strategies=("none",),
        seeds=2,
        window_pes=8,
        windows_per_map=2,
    )
    first, again = run_study(SPEC, config), run_study(SPEC, config)
    for table, columns in (("rows", ROW_COLUMNS), ("window_rows", WINDOW_COLUMNS)):
        for name in columns:
            column, other_column = getattr(first, table)[name], getattr(again, table)[name]
            assert np.array_equal(column, other_column, equal_nan=column.dtype.kind == "f"), name
    assert np.array_equal(first.positions, again.positions)
    other = run_study(SPEC, StudyConfig(**{**config.to_dict(), "seed": 1}))
    assert not np.array_equal(first.rows["defect_seed"], other.rows["defect_seed"])
    assert not np.array_equal(first.positions, other.positions)
    # maps differ: their counts and window figures, taken together (one count alone may tie)
    map_columns = ("dead_pes", "unrepaired_links", "mean_route_stretch_hops")
    assert any(not np.array_equal(first.rows[c], other.rows[c]) for c in map_columns)


def test_strategies_share_each_seeds_map_traffic_and_windows(study):
    """Within a seed index every density and strategy uses the same defect, traffic and window
    seed, so the same windows."""
    for index in (0, 1):
        rows = rows_where(study, seed_index=index)
        for name in ("defect_seed", "traffic_seed", "window_seed"):
            assert np.unique(rows[name]).size == 1, name
        windows = {name: column[study.window_rows["seed_index"] == index]
                   for name, column in study.window_rows.items()}  # fmt: skip
        for axis in ("x0", "y0"):
            per_point = windows[axis].reshape(-1, WINDOWS)
            assert (per_point == study.positions[index, :, "xy".index(axis[0])]).all()
        dead = rows_where(study, seed_index=index, defect_density_per_cm2=HIGH_DENSITY)["dead_pes"]
        assert np.unique(dead).size == 1  # one map per (density, seed), repaired three ways
    assert study.rows["defect_seed"][0] != rows_where(study, seed_index=1)["defect_seed"][0]


def test_zero_density_has_no_holes_no_stretch_and_equal_throughput(study):
    """At density 0 every strategy sees a perfect mesh: no holes, no stretch, every window
    routed xy with the same throughput as the defect-free window."""
    zero = rows_where(study, defect_density_per_cm2=0.0)
    assert (zero["dead_pes"] == 0).all()
    assert (zero["unrepaired_pes"] == 0).all()
    assert (zero["working_pes"] == 64 * 64).all()
    assert (zero["stranded_pes"] == 0).all()
    assert (zero["routes"] == 128).all()  # 64 row and 64 column multicasts
    assert (zero["mean_route_stretch_hops"] == 0).all()
    assert (zero["max_route_stretch_hops"] == 0).all()
    assert (zero["fault_routed_windows"] == 0).all()
    assert (zero["measured_windows"] == WINDOWS).all()
    zero_windows = study.window_rows["defect_density_per_cm2"] == 0.0
    assert (study.window_rows["traffic_routing"][zero_windows] == "xy").all()
    for index in (0, 1):
        throughput = rows_where(study, defect_density_per_cm2=0.0, seed_index=index)[
            "saturation_throughput_flits_per_pe_cycle"
        ]
        assert throughput.size == 3
        assert throughput[0] > 0
        assert (throughput == throughput[0]).all()
    assert (zero["relative_saturation_throughput"] == 1.0).all()
    assert (zero["relative_saturation_throughput_vs_xy"] == 1.0).all()


def test_none_leaves_every_dead_logical_pe_a_hole_and_column_shift_fewer(study):
    """With `none` the holes are exactly the dead PEs of the logical rows (counted from the
    map again); `column_shift` repairs some of them, so it leaves strictly fewer."""
    for index in (0, 1):
        none = rows_where(
            study, defect_density_per_cm2=HIGH_DENSITY, strategy="none", seed_index=index
        )
        shift = rows_where(
            study, defect_density_per_cm2=HIGH_DENSITY, strategy="column_shift", seed_index=index
        )
        defects = generate(
            SPEC, "poisson", int(none["defect_seed"][0]), defect_density_per_cm2=HIGH_DENSITY
        )
        logical_dead = int(defects.dead_pe[:64, :64].sum())
        assert logical_dead > 0
        assert none["unrepaired_pes"][0] == logical_dead
        assert shift["unrepaired_pes"][0] < none["unrepaired_pes"][0]
        assert none["working_pes"][0] + none["unrepaired_pes"][0] == 64 * 64
    zero_none = rows_where(study, defect_density_per_cm2=0.0, strategy="none")
    high_none = rows_where(study, defect_density_per_cm2=HIGH_DENSITY, strategy="none")
    assert high_none["unrepaired_pes"].min() > zero_none["unrepaired_pes"].max()


def test_faulty_windows_use_fault_routing_and_clean_ones_xy(study):
    """A window with holes or dead wires is routed with FAULT_ROUTING (NaN figures and a
    status code if the fabric lacks it); a clean window with xy, always measured."""
    windows = study.window_rows
    faulty = (windows["window_holes"] > 0) | (windows["window_dead_links"] > 0)
    assert faulty.any()
    assert (~faulty).any()
    assert (windows["traffic_routing"][faulty] == FAULT_ROUTING).all()
    assert (windows["traffic_routing"][~faulty] == "xy").all()
    assert (windows["traffic_status"][~faulty] == TRAFFIC_STATUS["measured"]).all()
    throughput = windows["saturation_throughput_flits_per_pe_cycle"]
    assert (throughput[~faulty] > 0).all()
    if FAULT_ROUTING in ROUTINGS:
        assert (windows["traffic_status"][faulty] == TRAFFIC_STATUS["measured"]).all()
        assert (throughput[faulty] > 0).all()
    else:
        assert (windows["traffic_status"][faulty] == TRAFFIC_STATUS["no_fault_routing"]).all()
        assert np.isnan(throughput[faulty]).all()


def test_each_rows_traffic_is_the_mean_over_its_windows(study):
    """A row's traffic figures are the means over its windows_per_map windows (measured
    ones), its fault counts the mean per window and fault_routed_windows their share."""
    windows = study.window_rows
    assert windows["seed_index"].size == len(study) * WINDOWS
    for i in range(len(study)):
        mine = {name: column[i * WINDOWS : (i + 1) * WINDOWS] for name, column in windows.items()}
        for key in ("defect_density_per_cm2", "strategy", "seed_index"):
            assert (mine[key] == study.rows[key][i]).all()
        assert mine["window_index"].tolist() == list(range(WINDOWS))
        measured = mine["traffic_status"] == TRAFFIC_STATUS["measured"]
        assert study.rows["measured_windows"][i] == measured.sum()
        routed = np.mean(mine["traffic_routing"] == FAULT_ROUTING)
        assert study.rows["fault_routed_windows"][i] == pytest.approx(routed)
        for name in ("window_holes", "window_dead_links"):
            assert study.rows[name][i] == pytest.approx(mine[name].mean())
        for name in MAP_FIGURES:
            assert study.rows[name][i] == pytest.approx(np.nanmean(mine[name][measured]))
    high = study.rows["defect_density_per_cm2"] == HIGH_DENSITY
    assert (study.rows["fault_routed_windows"][high] > 0).all()


def test_windows_are_drawn_over_the_whole_grid_from_the_seed():
    """Window positions are uniform over every place a window fits (not the centre), the
    same for one seed and different for another."""
    positions = draw_windows(SPEC, 8, 2000, seed=3)
    assert positions.shape == (2000, 2)
    assert positions.min() == 0
    assert positions.max() == 64 - 8
    assert abs(positions.mean() - (64 - 8) / 2) < 1.5
    assert np.array_equal(positions, draw_windows(SPEC, 8, 2000, seed=3))
    assert not np.array_equal(positions, draw_windows(SPEC, 8, 2000, seed=4))
    wse2 = draw_windows(preset("wse2"), 16, 64, seed=0)
    assert np.unique(wse2, axis=0).shape[0] == 64  # spread over the wafer, none repeated


def test_a_clean_window_is_the_defect_free_window():
    """A window without faults is not run again: the defect-free window's run under the same
    traffic seed is the same simulation, so its throughput is the baseline's exactly."""
    config = StudyConfig(densities_per_cm2=(0.0,), window_pes=8)
    reference = reference_figures(baselines(SPEC, config, [7]), 0)
    clean = window_mesh(Mesh.full(12, 12), Window(2, 3, 8))
    assert window_faults(clean) == (0, 0)
    assert saturation_throughput(SPEC, config, clean, CLEAN_ROUTING, 7) == reference["xy"][1]
    figures = window_traffic(SPEC, config, clean, 7, reference)
    assert figures["saturation_throughput_flits_per_pe_cycle"] == reference["xy"][1]
    assert figures["relative_saturation_throughput"] == 1.0


def test_one_dead_link_is_compared_under_its_own_routing():
    """A window with one dead link is routed up*/down*, which alone about halves an 8x8
    window's throughput against xy; compared with the defect-free window under up*/down*, the
    link itself costs a few per cent, so the relative figure stays above 0.9."""
    config = StudyConfig(densities_per_cm2=(1.0,), window_pes=8)
    dead = np.zeros((8, 8, NUM_DIRS), bool)
    dead[4, 4, E] = True
    mesh = Mesh(8, 8, np.ones((8, 8), bool), mirror_links(dead))
    for seed in (1, 2, 3):
        reference = reference_figures(baselines(SPEC, config, [seed]), 0)
        figures = window_traffic(SPEC, config, mesh, seed, reference)
        assert figures["traffic_routing"] == FAULT_ROUTING
        assert figures["relative_saturation_throughput"] > 0.9
        assert figures["relative_saturation_throughput_vs_xy"] < 0.65  # the routing switch


def test_zero_load_latency_matches_hops_plus_flits(study):
    """On a clean k x k window the zero-load latency is the mean hop count of uniform traffic,
    2 * (k^2 - 1) / (3k) * k^2 / (k^2 - 1) = 2k/3, plus the 4 flits (fabric/traffic.py)."""
    clean = rows_where(study, defect_density_per_cm2=0.0)["zero_load_latency_cycles"]
    assert clean == pytest.approx(2 * 8 / 3 + 4, rel=0.03)
    latency = study.rows["zero_load_latency_cycles"]
    measured = latency[np.isfinite(latency)]
    assert (measured >= 1 + 4).all()


# --- measurements on hand-built meshes ---------------------------------------------------


def test_route_stretch_of_a_centre_hole():
    """3x3 with the centre dead: row 1 and column 1 multicasts detour 2 hops, the other four
    routes none: mean 4/6, max 2."""
    mesh = mesh_from_picture("...\n.X.\n...")
    stretch = route_stretch(mesh)
    assert stretch["routes"] == 6
    assert stretch["stranded_pes"] == 0
    assert stretch["mean_route_stretch_hops"] == pytest.approx(4 / 6)
    assert stretch["max_route_stretch_hops"] == 2


def test_route_stretch_counts_stranded_pes_and_routes_the_main_island():
    """A corner PE cut off by its two dead wires is stranded; the rest routes without detour
    (4x4 row 0 and column 0 multicasts start at the next working PE)."""
    mesh = mesh_from_picture("....\n....\n....\n....", dead_wires=((0, 0, E), (0, 0, S)))
    stretch = route_stretch(mesh)
    assert stretch["stranded_pes"] == 1
    assert stretch["routes"] == 8
    assert stretch["mean_route_stretch_hops"] == 0
    assert stretch["max_route_stretch_hops"] == 0


def test_the_study_strands_exactly_the_pes_a_compile_cuts_off():
    """On random repaired maps, the island a study routes is the compiler's working grid
    (one largest island, compiler.working's): it strands the PEs a compile cuts off."""
    spec = preset("tiny").replace({"logical_width_pes": 12, "logical_height_pes": 12})
    stranded_somewhere = False
    for seed in range(8):
        defects = generate(spec, "poisson", seed, pe_defect_prob=0.15, link_defect_fraction=0.6)
        for strategy in ("none", "row", "column_shift"):
            grid = repair(defects, strategy)
            main, stranded = main_island(Mesh.from_logical_grid(grid))
            working = WorkingGrid.from_logical(grid)
            assert (main.alive == ~working.hole).all()
            assert stranded == working.cut_off
            stranded_somewhere |= stranded > 0
    assert stranded_somewhere  # the maps do cut PEs off


def test_a_window_keeps_only_its_inner_faults():
    """A hole and a dead wire inside a window count, a dead wire leaving the window does not
    (and is not left in the window's mesh)."""
    alive = np.ones((6, 6), bool)
    alive[2, 2] = False
    dead = np.zeros((6, 6, NUM_DIRS), bool)
    dead[3, 3, E] = True  # inside the 4x4 window at (1, 1)
    dead[1, 1, W] = True  # from the window's west edge to outside it
    mesh = Mesh(6, 6, alive, mirror_links(dead))
    window = window_mesh(mesh, Window(1, 1, 4))
    assert window_faults(window) == (1, 1)
    assert not window.dead_link[:, 0, W].any()
    assert window.alive.sum() == 15


def test_a_window_larger_than_the_grid_is_refused(tiny):
    """window_pes beyond the logical grid is an error naming the field and the limit."""
    with pytest.raises(ConfigError, match=r"window_pes=16 .* \[4, 8\]"):
        run_study(tiny, StudyConfig(densities_per_cm2=(0.0,), window_pes=16))


# --- statistics --------------------------------------------------------------------------


def test_ci_half_width_is_zero_for_identical_samples_and_positive_otherwise():
    """Identical samples have a zero-width interval; spread samples a positive one, equal to
    t(n-1) * s / sqrt(n); NaN samples are left out."""
    same = mean_ci(np.array([3.0, 3.0, 3.0]))
    assert same == (3.0, 0.0, 3, 3.0, 3.0)
    spread = mean_ci(np.array([1.0, 2.0, 3.0, math.nan]))
    assert spread.n == 3
    assert spread.mean == 2.0
    assert spread.half_width == pytest.approx(4.303 * 1.0 / math.sqrt(3))
    assert spread.half_width > 0
    assert (spread.low, spread.high) == (2.0 - spread.half_width, 2.0 + spread.half_width)


def test_ci_of_too_few_samples_is_nan():
    """One finite sample has a mean but no interval; none has neither."""
    one = mean_ci(np.array([5.0, math.nan]))
    assert one.mean == 5.0
    assert math.isnan(one.half_width)
    assert math.isnan(one.low)
    assert math.isnan(one.high)
    assert math.isnan(mean_ci(np.array([math.nan])).mean)


def test_ci_is_clipped_to_the_quantitys_range():
    """An interval passing the range of its quantity is cut at the range's ends; the mean and
    the t half-width are kept; an empty range is an error."""
    count = mean_ci(np.array([0.0, 0.0, 2.0]), 0.0, math.inf)
    assert count.mean - count.half_width < 0
    assert count.low == 0.0
    assert count.high == pytest.approx(count.mean + count.half_width)
    share = mean_ci(np.array([0.5, 1.0]), 0.0, 1.0)
    assert (share.low, share.high) == (0.0, 1.0)
    inside = np.array([0.45, 0.5, 0.55])
    assert mean_ci(inside, 0.0, 1.0) == mean_ci(inside)  # nothing to clip
    with pytest.raises(ConfigError, match="empty"):
        mean_ci(np.array([1.0, 2.0]), 1.0, 0.0)


def _student_t_cdf(x: float, df: int) -> float:
    """CDF of Student's t by trapezoidal integration of its density (reference)."""
    grid = np.linspace(0.0, x, 200_001)
    log_norm = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    density = np.exp(log_norm - (df + 1) / 2 * np.log1p(grid**2 / df))
    return 0.5 + float(np.sum((density[1:] + density[:-1]) / 2 * np.diff(grid)))


@pytest.mark.parametrize("df", range(1, 31))
def test_t_table_is_the_0975_quantile(df):
    """Each tabulated critical value is Student's t 0.975 quantile rounded to 3 decimals."""
    t = t_critical_95(df)
    assert t == T_CRITICAL_95[df - 1]
    assert _student_t_cdf(t - 0.0005, df) < 0.975 < _student_t_cdf(t + 0.0005, df)


def test_t_beyond_the_table_is_the_normal_value():
    """Past df = 30 the normal 1.96 is used."""
    assert t_critical_95(31) == 1.96
    assert t_critical_95(1000) == 1.96


# --- outputs -----------------------------------------------------------------------------


def test_aggregates_cover_each_density_and_strategy(study):
    """One aggregate per (density, strategy), each over the two seeds."""
    aggregates = study.aggregates()
    assert [(a.defect_density_per_cm2, a.strategy) for a in aggregates] == [
        (d, s) for d in (0.0, HIGH_DENSITY) for s in CONFIG.strategies
    ]
    for a in aggregates:
        assert a.metrics["working_pes"].n == 2
    zero = aggregates[0].metrics
    assert zero["unrepaired_pes"] == (0.0, 0.0, 2, 0.0, 0.0)
    assert zero["relative_saturation_throughput"] == (1.0, 0.0, 2, 1.0, 1.0)


def test_every_interval_stays_inside_its_columns_range(study):
    """Each aggregate's bounds lie in the declared range of its column (counts >= 0 and at
    most the wafer's or the window's total, shares in [0, 1]), and so does every sample; the
    study's two seeds give wide t-intervals, so some are clipped."""
    ranges = column_ranges(SPEC, CONFIG)
    assert set(ranges) == set(METRIC_COLUMNS)
    assert ranges["working_pes"] == (0.0, 64 * 64)
    assert ranges["fault_routed_windows"] == (0.0, 1.0)
    assert ranges["window_holes"] == (0.0, 64.0)
    clipped = 0
    for name, (low, high) in ranges.items():
        values = study.rows[name][np.isfinite(study.rows[name])]
        assert ((low <= values) & (values <= high)).all(), name
        for aggregate in study.aggregates():
            ci = aggregate.metrics[name]
            assert ci.n == 2, name
            assert low <= ci.low <= ci.mean <= ci.high <= high, (name, aggregate.strategy)
            clipped += ci.mean - ci.half_width < low or ci.mean + ci.half_width > high
    assert clipped > 0


def test_json_is_strict_json_with_the_config_and_aggregates(study):
    """The summary serialises without NaN and carries the config, spec, seed and window."""
    data = json.loads(json.dumps(study.to_json(), allow_nan=False))
    assert data["config"]["densities_per_cm2"] == [0.0, HIGH_DENSITY]
    assert data["spec"]["name"] == "small"
    assert data["seed"] == 0
    window = data["traffic_window"]
    assert window["side_pes"] == 8
    assert window["windows_per_map"] == WINDOWS
    assert np.array_equal(window["positions_x0_y0"], study.positions)
    assert (window["routing_without_faults"], window["routing_with_faults"]) == (
        CLEAN_ROUTING,
        FAULT_ROUTING,
    )
    assert "windows" in window["note"]
    assert data["columns"]["unrepaired_links"] == {"unit": "links", "low": 0.0, "high": 8064.0}
    assert data["columns"]["saturation_throughput_flits_per_pe_cycle"]["high"] is None
    assert len(data["aggregates"]) == 6
    assert data["aggregates"][0]["unrepaired_pes"]["ci95_low"] == 0.0
    assert data["aggregates"][0]["unrepaired_pes"]["ci95_high"] == 0.0


def test_hdf5_round_trip(study, tmp_path):
    """A saved study loads back with the same table, config, spec and baselines, and the
    write leaves no temporary file."""
    path = tmp_path / "study.h5"
    study.save_hdf5(path)
    loaded = StudyResult.load_hdf5(path)
    assert loaded.config == study.config
    assert loaded.spec == study.spec
    assert np.array_equal(loaded.positions, study.positions)
    for table in ("rows", "window_rows"):
        for name, column in getattr(study, table).items():
            again = getattr(loaded, table)[name]
            assert again.dtype == column.dtype, name
            assert np.array_equal(again, column, equal_nan=column.dtype.kind == "f")
    assert set(loaded.baselines) == set(study.baselines)
    assert loaded.to_json() == study.to_json()
    assert [p.name for p in tmp_path.iterdir()] == ["study.h5"]


def test_a_file_that_is_not_a_study_is_an_error(tmp_path):
    """Loading a text file is a ConfigError naming the file."""
    path = tmp_path / "x.h5"
    path.write_text("hello")
    with pytest.raises(ConfigError, match="x.h5"):
        StudyResult.load_hdf5(path)


def test_a_study_of_another_format_version_is_an_error(tmp_path):
    """A study file of another format version is refused, naming the version."""
    path = tmp_path / "old.h5"
    with h5py.File(path, "w") as f:
        f.attrs.update({"format": FORMAT, "format_version": 1})
    with pytest.raises(ConfigError, match="format_version 1"):
        StudyResult.load_hdf5(path)


def test_plot_writes_a_png(study, tmp_path):
    """plot_study writes a PNG file."""
    path = tmp_path / "study.png"
    plot_study(study, path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert path.stat().st_size > 10_000


def test_progress_is_reported_after_every_point(tiny):
    """The callback sees done = 1..total with the total number of points."""
    seen = []
    config = StudyConfig(
        densities_per_cm2=(0.0,), strategies=("none", "row"), seeds=2, window_pes=4
    )  # density 0: every window is the defect-free one
    run_study(tiny, config, progress=seen.append)
    assert [p.done for p in seen] == [1, 2, 3, 4]
    assert {p.total for p in seen} == {4}
    assert all(b.elapsed_s >= a.elapsed_s for a, b in zip(seen, seen[1:], strict=False))


# --- configuration -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"densities_per_cm2": (-1.0,)}, "densities_per_cm2: -1.0"),
        ({"densities_per_cm2": (math.nan,)}, "densities_per_cm2: nan"),
        ({"densities_per_cm2": ()}, "densities_per_cm2"),
        ({"densities_per_cm2": (1.0, 1.0)}, "twice"),
        ({"strategies": ("magic",)}, "'magic'"),
        ({"seeds": 0}, r"seeds=0 is out of range \[1, 1000\]"),
        ({"seeds": 1001}, "seeds=1001"),
        ({"window_pes": 3}, r"window_pes=3 is out of range \[4, 64\]"),
        ({"window_pes": 65}, "window_pes=65"),
        ({"windows_per_map": 0}, r"windows_per_map=0 is out of range \[1, 256\]"),
        ({"windows_per_map": 257}, "windows_per_map=257"),
        ({"windows_per_map": 2.5}, "windows_per_map=2.5 must be an integer"),
        ({"model": "explicit"}, "model='explicit'"),
        ({"model_params": {"alpha": 2.0}}, "alpha"),  # poisson takes no alpha
        ({"traffic_warmup_cycles": 2000}, "traffic_warmup_cycles=2000"),
    ],
)
def test_config_rejects_bad_values(changes, message):
    """Each bad field is an error naming the field and what is allowed."""
    with pytest.raises(ConfigError, match=message):
        StudyConfig(**{"densities_per_cm2": (1.0,), **changes})
