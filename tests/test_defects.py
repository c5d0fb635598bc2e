"""Defect maps: random models, explicit files, HDF5 files and parameter validation."""

import json
import math

import h5py
import numpy as np
import pytest
from wafersim.wafer.defects import (
    DEFECT_MODELS,
    LINK_DEFECT_FRACTION,
    SPARSE_LAMBDA,
    DefectMap,
    generate,
    tile_defect_counts,
)
from wafersim.wafer.errors import ConfigError, DefectMapError
from wafersim.wafer.geometry import E, N, S, W, mirror_links
from wafersim.wafer.presets import preset

LAMBDA = 0.05  # defects per tile used by the statistical tests
P_LAMBDA = -math.expm1(-LAMBDA)  # the pe_defect_prob that gives LAMBDA
BLOCK = 8  # block side (tiles) for the clustering tests


def square_spec(side):
    """A wafer of ``side`` x ``side`` physical tiles with WSE-2 PEs."""
    return preset("small").replace(
        {"logical_width_pes": side, "logical_height_pes": side, "spare_rows": 0}
    )


def block_sums(grid, size):
    """Sum of ``grid`` over each full ``size`` x ``size`` block."""
    h, w = (grid.shape[0] // size) * size, (grid.shape[1] // size) * size
    g = grid[:h, :w].astype(np.int64)
    return g.reshape(h // size, size, w // size, size).sum(axis=(1, 3)).ravel()


def variance_and_error(samples):
    """Sample variance and its standard error sqrt((m4 - s^4) / n)."""
    centred = samples - samples.mean()
    var = centred.var(ddof=1)
    m4 = np.mean(centred**4)
    return var, math.sqrt((m4 - var**2) / samples.size)


def test_poisson_dead_count_matches_its_mean():
    """Poisson dead-PE counts lie within 4 sd of n*(1-exp(-lambda*(1-f))) for 20 seeds."""
    spec = preset("small")
    n = spec.physical_pes
    q = -math.expm1(-0.1 * (1 - LINK_DEFECT_FRACTION))
    for seed in range(20):
        dead = generate(spec, "poisson", seed, pe_defect_prob=-math.expm1(-0.1)).dead_pes
        assert abs(dead - n * q) <= 4 * math.sqrt(n * q * (1 - q)), seed


@pytest.mark.parametrize("lam", [LAMBDA, 0.9 * SPARSE_LAMBDA, 1.1 * SPARSE_LAMBDA, 2.0])
def test_poisson_tile_counts_follow_the_poisson_law(lam):
    """Tiles with 0, 1, 2 and 3 defects come at Poisson(lambda) frequencies (4 sd), on
    both sides of SPARSE_LAMBDA (one total split over tiles, or a draw per tile)."""
    spec = square_spec(256)
    counts = tile_defect_counts(spec, "poisson", 7, pe_defect_prob=-math.expm1(-lam)).ravel()
    for k in range(4):
        q = math.exp(-lam) * lam**k / math.factorial(k)
        seen = np.count_nonzero(counts == k) / counts.size
        assert abs(seen - q) <= 4 * math.sqrt(q * (1 - q) / counts.size), (lam, k)


def test_wires_are_cut_at_the_modelled_rate():
    """Each tile's east wire is cut with probability 1-exp(-lambda*f/2)."""
    spec = square_spec(256)
    f = 0.5
    cut = [
        generate(spec, "poisson", s, pe_defect_prob=P_LAMBDA, link_defect_fraction=f).dead_link
        for s in range(4)
    ]
    east = np.stack([c[:, :, E] for c in cut])
    q = -math.expm1(-LAMBDA * f / 2)
    assert abs(east.mean() - q) <= 4 * math.sqrt(q * (1 - q) / east.size)


def test_link_fraction_extremes():
    """link_defect_fraction=0 cuts no wire; 1 kills no PE but cuts wires."""
    spec = preset("small")
    no_links = generate(spec, "poisson", 1, pe_defect_prob=0.2, link_defect_fraction=0.0)
    assert no_links.dead_links == 0
    assert no_links.dead_pes > 0
    no_pes = generate(spec, "poisson", 1, pe_defect_prob=0.2, link_defect_fraction=1.0)
    assert no_pes.dead_pes == 0
    assert no_pes.dead_links > 0


def test_certain_defects_kill_every_pe(tiny):
    """pe_defect_prob=1 kills every PE in both random models."""
    spec = tiny
    for model in ("poisson", "clustered"):
        assert generate(spec, model, 0, pe_defect_prob=1.0).working_pes == 0


def test_defects_only_on_hit_tiles():
    """Dead PEs and cut east/south wires appear only on tiles the counts say were hit."""
    spec = preset("small")
    for model in ("poisson", "clustered"):
        params = {"pe_defect_prob": 0.1, "link_defect_fraction": 0.3}
        counts = tile_defect_counts(spec, model, 5, **params)
        m = generate(spec, model, 5, **params)
        own = m.dead_pe | m.dead_link[:, :, E] | m.dead_link[:, :, S]
        assert not np.any(own & (counts == 0))
        assert counts.sum() >= own.sum()


def test_clustered_block_counts_are_negative_binomial():
    """Clustered block defect counts have mean n*lambda, variance n*l + (n*l)^2/alpha."""
    spec, alpha = square_spec(512), 2.0
    params = {"pe_defect_prob": P_LAMBDA, "cluster_size_pes": BLOCK, "alpha": alpha}
    sums = np.concatenate(
        [block_sums(tile_defect_counts(spec, "clustered", s, **params), BLOCK) for s in range(5)]
    )
    mean = BLOCK * BLOCK * LAMBDA
    var, var_error = variance_and_error(sums)
    assert abs(sums.mean() - mean) <= 4 * math.sqrt(var / sums.size)
    assert abs(var - (mean + mean**2 / alpha)) <= 4 * var_error


def test_clustered_is_overdispersed_against_poisson():
    """Poisson block counts have variance n*lambda; clustered ones more than twice that."""
    spec = square_spec(512)
    mean = BLOCK * BLOCK * LAMBDA
    poisson = block_sums(tile_defect_counts(spec, "poisson", 3, pe_defect_prob=P_LAMBDA), BLOCK)
    p_var, p_error = variance_and_error(poisson)
    assert abs(p_var - mean) <= 4 * p_error
    clustered = tile_defect_counts(
        spec, "clustered", 3, pe_defect_prob=P_LAMBDA, cluster_size_pes=BLOCK
    )
    assert block_sums(clustered, BLOCK).var(ddof=1) > 2 * p_var


def dispersion(dead_pe):
    """Variance over mean of the dead PEs per block."""
    sums = block_sums(dead_pe, BLOCK)
    return sums.var(ddof=1) / sums.mean()


def test_clustered_dead_pes_cluster_in_space():
    """Clustered dead PEs bunch into blocks; shuffling their positions removes it."""
    spec = square_spec(512)
    m = generate(spec, "clustered", 4, pe_defect_prob=P_LAMBDA, cluster_size_pes=BLOCK)
    assert dispersion(m.dead_pe) > 1.8
    shuffled = np.random.default_rng(0).permutation(m.dead_pe.ravel()).reshape(m.dead_pe.shape)
    assert dispersion(shuffled) < 1.2
    uniform = generate(spec, "poisson", 4, pe_defect_prob=P_LAMBDA)
    assert dispersion(uniform.dead_pe) < 1.2


@pytest.mark.parametrize("model", ["poisson", "clustered"])
def test_same_seed_same_map(model):
    """The same seed gives identical arrays; a different seed gives different ones."""
    spec = preset("small")
    a = generate(spec, model, 11, pe_defect_prob=0.05)
    b = generate(spec, model, 11, pe_defect_prob=0.05)
    c = generate(spec, model, 12, pe_defect_prob=0.05)
    assert np.array_equal(a.dead_pe, b.dead_pe)
    assert np.array_equal(a.dead_link, b.dead_link)
    assert a == b
    assert not np.array_equal(a.dead_pe, c.dead_pe)


@pytest.mark.parametrize("model", ["poisson", "clustered"])
def test_dead_links_are_symmetric(model):
    """A dead wire is dead in both directions, and edge wires can die too."""
    m = generate(preset("small"), model, 2, pe_defect_prob=0.5, link_defect_fraction=0.5)
    assert np.array_equal(mirror_links(m.dead_link), m.dead_link)
    assert m.dead_link[:, -1, E].any()
    assert m.dead_link[-1, :, S].any()


def test_params_are_resolved_and_stored(tiny):
    """The map records its model, the resolved parameters (defaults filled in) and seed."""
    m = generate(tiny, "clustered", 9, defect_density_per_cm2=3)
    assert m.model == "clustered"
    assert m.seed == 9
    assert m.params == {
        "defect_density_per_cm2": 3.0,
        "link_defect_fraction": LINK_DEFECT_FRACTION,
        "cluster_size_pes": 16,
        "alpha": 2.0,
    }
    json.dumps(m.params)


def test_map_arrays_are_read_only(tiny):
    """A defect map cannot be changed in place."""
    m = generate(tiny, pe_defect_prob=0.1)
    with pytest.raises(ValueError, match="read-only"):
        m.dead_pe[0, 0] = True


# --- explicit files ----------------------------------------------------------------------

EXPLICIT = {"dead_pes": [[1, 2], [7, 8]], "dead_links": [[3, 3, "E"], [0, 0, "n"], [5, 1, "S"]]}


def write_defect_file(tmp_path, suffix, data):
    """Write ``data`` as a .json, .toml or .yaml defect list and return its path."""
    path = tmp_path / f"defects{suffix}"
    if suffix == ".json":
        path.write_text(json.dumps(data))
    elif suffix == ".toml":
        lines = [f"{key} = {json.dumps(value)}" for key, value in data.items()]
        path.write_text("\n".join(lines) + "\n")
    else:
        import yaml

        path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize("suffix", [".json", ".toml", ".yaml"])
def test_explicit_file_gives_exact_map(tmp_path, suffix, tiny):
    """An explicit file yields exactly its dead PEs and (mirrored) dead wires."""
    path = write_defect_file(tmp_path, suffix, EXPLICIT)
    m = generate(tiny, "explicit", 123, path=str(path))
    assert sorted(zip(*np.nonzero(m.dead_pe), strict=True)) == [(2, 1), (8, 7)]
    expected = np.zeros_like(m.dead_link)
    expected[3, 3, E] = expected[3, 4, W] = True
    expected[0, 0, N] = True
    expected[1, 5, S] = expected[2, 5, N] = True
    assert np.array_equal(m.dead_link, expected)
    assert (m.dead_pes, m.dead_links, m.working_pes) == (2, 3, 72 - 2)
    assert m.seed is None


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"dead_pes": [[8, 0]]}, r"dead_pes\[0\] = \[8, 0\]: x=8 is outside"),
        ({"dead_pes": [[0, 0], [0, 9]]}, r"dead_pes\[1\] = \[0, 9\]: y=9 is outside"),
        ({"dead_pes": [[-1, 0]]}, r"dead_pes\[0\].*x=-1 is outside"),
        ({"dead_pes": [[1]]}, r"dead_pes\[0\] = \[1\] must look like \[x, y\]"),
        ({"dead_pes": [[1, True]]}, r"y must be an integer"),
        ({"dead_links": [[1, 1, "Q"]]}, r"dead_links\[0\].*direction must be one of N, E, S, W"),
        ({"dead_links": [[1, 1, 2]]}, r"direction must be one of"),
        ({"dead_links": [[1, 1]]}, r"dead_links\[0\] = \[1, 1\] must look like"),
        ({"dead_pes": {"x": 1}}, r"dead_pes must be a list"),
        ({"dead_cores": []}, r"unknown key\(s\) dead_cores"),
    ],
)
def test_bad_explicit_entries_are_rejected(tmp_path, data, message, tiny):
    """A bad entry in an explicit file raises DefectMapError naming the entry."""
    path = write_defect_file(tmp_path, ".json", data)
    with pytest.raises(DefectMapError, match=message):
        generate(tiny, "explicit", path=path)


def test_unreadable_explicit_files_are_rejected(tmp_path, tiny):
    """Missing, unparsable or wrongly named explicit files raise DefectMapError."""
    with pytest.raises(DefectMapError, match="no such file"):
        generate(tiny, "explicit", path=tmp_path / "nope.json")
    bad_json = tmp_path / "bad.json"
    bad_json.write_text("{not json")
    with pytest.raises(DefectMapError, match="cannot parse"):
        generate(tiny, "explicit", path=bad_json)
    bad_toml = tmp_path / "bad.toml"
    bad_toml.write_text("dead_pes = [[")
    with pytest.raises(DefectMapError, match="cannot parse"):
        generate(tiny, "explicit", path=bad_toml)
    text = tmp_path / "defects.txt"
    text.write_text("1 2\n")
    with pytest.raises(DefectMapError, match="unknown file type"):
        generate(tiny, "explicit", path=text)


# --- HDF5 files --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "params"),
    [
        ("poisson", {"pe_defect_prob": 0.1}),
        ("clustered", {"defect_density_per_cm2": 300.0, "alpha": 0.5}),
    ],
)
def test_hdf5_round_trip(tmp_path, model, params):
    """A saved map loads back equal: arrays, model, params, seed and spec."""
    m = generate(preset("small"), model, 17, **params)
    m.save(tmp_path / "map.h5")
    back = DefectMap.load(tmp_path / "map.h5")
    assert back == m
    assert back.params == m.params
    assert back.spec == m.spec
    assert back.seed == 17


def test_hdf5_round_trip_keeps_no_seed(tmp_path, tiny):
    """An explicit map's missing seed survives a save and load."""
    path = write_defect_file(tmp_path, ".json", EXPLICIT)
    m = generate(tiny, "explicit", path=path)
    m.save(tmp_path / "map.h5")
    assert DefectMap.load(tmp_path / "map.h5") == m


def test_save_is_atomic(tmp_path, monkeypatch, tiny):
    """save leaves only the target file; a failed save leaves the old file untouched."""
    m = generate(tiny, pe_defect_prob=0.1)
    m.save(tmp_path / "map.h5")
    assert [p.name for p in tmp_path.iterdir()] == ["map.h5"]
    before = (tmp_path / "map.h5").read_bytes()

    def fail(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(h5py.Group, "create_dataset", fail)
    with pytest.raises(RuntimeError, match="disk full"):
        generate(tiny, seed=5, pe_defect_prob=0.5).save(tmp_path / "map.h5")
    assert [p.name for p in tmp_path.iterdir()] == ["map.h5"]
    assert (tmp_path / "map.h5").read_bytes() == before


def test_loading_non_maps_fails_clearly(tmp_path):
    """Missing, text and foreign HDF5 files raise one-line DefectMapErrors naming the file."""
    text = tmp_path / "notes.h5"
    text.write_text("hello\n")
    foreign = tmp_path / "foreign.h5"
    with h5py.File(foreign, "w") as f:
        f.create_dataset("x", data=np.arange(3))
    cases = [
        (tmp_path / "missing.h5", "no such file"),
        (text, "not an HDF5 file"),
        (foreign, "format attribute is None"),
    ]
    for path, message in cases:
        with pytest.raises(DefectMapError, match=message) as info:
            DefectMap.load(path)
        assert str(path) in str(info.value)
        assert "\n" not in str(info.value)


ONE_WAY = np.zeros((9, 8, 4), bool)
ONE_WAY[3, 3, E] = True  # the wire from (3, 3) east, dead one way only


def corrupt(tmp_path, edit):
    """Save a valid tiny map, apply ``edit`` to the open file, and return its path."""
    path = tmp_path / "map.h5"
    generate(preset("tiny"), pe_defect_prob=0.1).save(path)
    with h5py.File(path, "r+") as f:
        edit(f)
    return path


def _set_attr(name, value):
    def edit(f):
        f.attrs[name] = value

    return edit


def _replace_dataset(name, data):
    def edit(f):
        del f[name]
        f.create_dataset(name, data=data)

    return edit


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (_set_attr("format", "something-else"), "format attribute is 'something-else'"),
        (_set_attr("format_version", 2), "format_version is 2"),
        (_set_attr("spec", json.dumps(preset("small").to_dict())), r"dead_pe has shape"),
        (_set_attr("spec", "{"), "not a valid wafersim defect map"),
        (_replace_dataset("dead_pe", np.zeros((9, 8), np.uint8)), "dtype uint8, expected bool"),
        (_replace_dataset("dead_link", np.zeros((9, 8), bool)), r"dead_link has shape \(9, 8\)"),
        (_replace_dataset("dead_link", ONE_WAY), "not symmetric"),
    ],
)
def test_loading_broken_maps_fails_clearly(tmp_path, edit, message):
    """A defect map with a wrong attribute, shape, dtype or spec raises DefectMapError."""
    path = corrupt(tmp_path, edit)
    with pytest.raises(DefectMapError, match=message) as info:
        DefectMap.load(path)
    assert str(path) in str(info.value)


def test_wire_count_counts_each_wire_once(tiny):
    """dead_links counts a dead wire once, and a dead edge wire once."""
    spec = tiny
    links = np.zeros((9, 8, 4), bool)
    links[3, 3, E] = links[3, 4, W] = True
    links[0, 0, N] = links[8, 7, S] = links[2, 0, W] = True
    m = DefectMap(np.zeros((9, 8), bool), links, "explicit", {}, None, spec)
    assert m.dead_links == 4


def test_map_rejects_bad_arrays(tiny):
    """Building a map from wrong shapes, dtypes or one-way wires raises DefectMapError."""
    spec = tiny
    links = np.zeros((9, 8, 4), bool)
    with pytest.raises(DefectMapError, match="dead_pe has shape"):
        DefectMap(np.zeros((8, 8), bool), links, "explicit", {}, None, spec)
    with pytest.raises(DefectMapError, match="bool array"):
        DefectMap(np.zeros((9, 8), int), links, "explicit", {}, None, spec)
    links[3, 3, E] = True
    with pytest.raises(DefectMapError, match="not symmetric"):
        DefectMap(np.zeros((9, 8), bool), links, "explicit", {}, None, spec)


# --- validation --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "params", "message"),
    [
        ("weibull", {}, "unknown defect model 'weibull'; valid models: poisson, clustered"),
        ("poisson", {"pe_defect_prob": 0.1, "sigma": 1}, "unknown parameter.*sigma"),
        ("poisson", {"alpha": 2, "pe_defect_prob": 0.1}, "unknown parameter.*alpha"),
        ("poisson", {"defect_density_per_cm2": -1}, r"defect_density_per_cm2=-1 .*\[0, 10000\]"),
        ("poisson", {"defect_density_per_cm2": 1e30}, r"=1e\+30 is out of range \[0, 10000\]"),
        ("poisson", {"defect_density_per_cm2": math.inf}, "defect_density_per_cm2 must be"),
        ("poisson", {"pe_defect_prob": 1.5}, r"pe_defect_prob=1.5 is out of range \[0, 1\]"),
        ("poisson", {"pe_defect_prob": "0.1"}, "pe_defect_prob must be a number"),
        ("poisson", {}, "exactly one of pe_defect_prob or defect_density_per_cm2"),
        (
            "poisson",
            {"pe_defect_prob": 0.1, "defect_density_per_cm2": 1.0},
            "got pe_defect_prob and defect_density_per_cm2",
        ),
        ("clustered", {"pe_defect_prob": 0.1, "link_defect_fraction": 2}, "link_defect_fraction"),
        ("clustered", {"pe_defect_prob": 0.1, "alpha": 0}, r"alpha=0 is out of range \(0, inf\)"),
        ("clustered", {"pe_defect_prob": 0.1, "cluster_size_pes": 0}, "cluster_size_pes=0"),
        ("clustered", {"pe_defect_prob": 0.1, "cluster_size_pes": 2.5}, "cluster_size_pes must"),
        ("explicit", {}, "needs parameter path"),
        ("explicit", {"path": "x.json", "seed_file": 1}, "unknown parameter.*seed_file"),
    ],
)
def test_bad_parameters_name_the_field(model, params, message, tiny):
    """Bad model names or parameters raise ConfigError naming the field and allowed values."""
    with pytest.raises(ConfigError, match=message):
        generate(tiny, model, 0, **params)


@pytest.mark.parametrize("seed", [-1, 1.5, None, True])
def test_bad_seed_is_rejected(seed, tiny):
    """A seed must be a non-negative integer."""
    with pytest.raises(ConfigError, match="seed must be a non-negative integer"):
        generate(tiny, "poisson", seed, pe_defect_prob=0.1)


def test_registry_lists_the_models():
    """The registry holds the poisson, clustered and explicit models."""
    assert list(DEFECT_MODELS) == ["poisson", "clustered", "explicit"]
