"""Energy and cost: the spec's constants, the events counted from a plan against the engine's
counters, the split in kernel and run outputs, the timeline's counter, the defect-free yield."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from wafersim.kernels.gemm_algorithms import GEMM_ALGORITHMS
from wafersim.kernels.grid import kernel_grid
from wafersim.kernels.sparse_weights import prune_to_density
from wafersim.memoryx.report import performance
from wafersim.memoryx.run import run
from wafersim.memoryx.run_config import load_run_config
from wafersim.memoryx.run_timeline import run_timeline
from wafersim.wafer.defects import defect_free_probability, generate
from wafersim.wafer.energy import LABELS, Events, energy, hop_mm
from wafersim.wafer.errors import ConfigError
from wafersim.wafer.spec import spec_from_dict

from tests.test_memoryx_run import write_config
from wafersim.cli import main

CASES = [(name, {}) for name in GEMM_ALGORITHMS] + [
    ("weight_stream", {"reduce": "tree"}),
    ("weight_stream", {"reduce": "chain", "density": 0.25}),
]


@pytest.mark.parametrize(("algo", "options"), CASES)
@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
def test_each_algorithm_counts_the_hops_the_engine_makes(algo, options, dtype, tiny):
    """A record's wavelet-hops (what a run's fabric energy uses on every tier) equal the
    engine's link counters, within 1 % (compressed blocks, and ragged 16-bit tiles rounded
    up to whole wavelets, are counted from the totals)."""
    record, options = GEMM_ALGORITHMS[algo], dict(options)
    density = options.pop("density", 1.0)
    rows, cols = (4, 4) if record.square else (5, 3)
    m, k, n = 40, 60, 36
    rng = np.random.default_rng(1)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = prune_to_density(rng.standard_normal((k, n)).astype(np.float32), density)
    result = record.apply(a, b, kernel_grid(rows, cols), tiny, dtype, **options)
    shape = {"m": m, "k": k, "n": n}
    counted = record.hops(shape, rows, cols, dtype, density=density, **options)
    assert counted == pytest.approx(result.wavelet_hops, rel=0.01)


def test_a_split_prices_each_event_by_the_spec(tiny):
    """One of each event costs the spec's constant (a hop: 32 bits over one PE pitch of wire,
    and a router); leakage is the SRAM's nW per KiB over the PE-seconds given."""
    e = tiny.energy
    one = {"fp32_fmacs": e.fp32_fmac_pj, "half_fmacs": e.half_fmac_pj,
           "sram_read_words": e.sram_read_pj_per_word,
           "sram_write_words": e.sram_write_pj_per_word,
           "wavelet_hops": 32 * e.wire_pj_per_bit_mm * hop_mm(tiny) + e.router_pj_per_wavelet,
           "edge_bytes": 8 * e.edge_io_pj_per_bit,
           "memoryx_bytes": 8 * e.memoryx_pj_per_bit}  # fmt: skip
    for name, picojoules in one.items():
        split = energy(Events(**{name: 1.0}), tiny)
        assert split.total_j == pytest.approx(picojoules * 1e-12)
    leak = energy(Events(), tiny, pe_seconds=2.0)
    assert leak.sram_j == pytest.approx(2.0 * e.sram_leakage_nw_per_kib * 1e-9 * 48)
    assert math.sqrt(tiny.pe.area_mm2) == hop_mm(tiny)


def test_the_energy_section_is_optional_checked_and_overridable(tiny):
    data = tiny.to_dict()
    del data["energy"], data["cost"]
    assert spec_from_dict(data) == tiny  # an older spec file: the cited defaults
    with pytest.raises(ConfigError, match=r"EnergySpec.router_pj_per_wavelet=-1 .*range"):
        tiny.replace({"energy.router_pj_per_wavelet": -1})
    with pytest.raises(ConfigError, match="unknown key.*energy"):
        spec_from_dict({**tiny.to_dict(), "energy": {"pj": 1}})
    doubled = tiny.replace({"energy.wire_pj_per_bit_mm": 2 * tiny.energy.wire_pj_per_bit_mm,
                            "energy.router_pj_per_wavelet": 0.0})  # fmt: skip
    hops = Events(wavelet_hops=100.0)
    wire_only = tiny.replace({"energy.router_pj_per_wavelet": 0.0})
    assert energy(hops, doubled).fabric_j == pytest.approx(2 * energy(hops, wire_only).fabric_j)


def test_kernel_json_splits_its_energy(capsys, tiny):
    """``kernel --json``: the parts sum to the total; compute is the FMACs at the spec's
    constant; the fabric prices the measured hops."""
    assert main(["kernel", "gemm", "--grid", "4x4", "--dtype", "fp16", "--preset", "tiny",
                 "--json"]) == 0  # fmt: skip
    r = json.loads(capsys.readouterr().out)
    split = r["energy"]
    assert sum(split[name] for name in LABELS) == pytest.approx(split["total_j"])
    assert split["compute_j"] == pytest.approx(r["flops"] / 2 * tiny.energy.half_fmac_pj * 1e-12)
    assert split["fabric_j"] == pytest.approx(
        energy(Events(wavelet_hops=r["wavelet_hops"]), tiny).fabric_j
    )


def test_a_run_reports_energy_per_step_per_layer_and_as_a_timeline_counter(tmp_path):
    """performance.json's split sums to its total; the layers' joules and a step's leakage
    add up to it; the timeline's energy counter ends at it; cost names the wafer's price."""
    config = load_run_config(write_config(tmp_path, steps=2, tier="fast"))
    result = run(config, tmp_path / "out")
    perf = performance(result)
    report = perf["energy"]
    split = report["per_step_j"]
    assert sum(split[name] for name in LABELS) == pytest.approx(split["total_j"])
    assert report["total_j"] == pytest.approx(2 * split["total_j"])
    assert min(split[name] for name in LABELS) > 0
    leak = energy(Events(), config.spec,  # over the run's time, waits for input included
                  pe_seconds=perf["working_pes"] * perf["total_time_s"] / 2).total_j  # fmt: skip
    layers = sum(row["energy_j"] for row in perf["layers"])
    assert layers + 2 * leak == pytest.approx(report["total_j"])
    assert all(row["gflop_per_j"] >= 0 for row in perf["layers"])
    events = run_timeline(result).events
    counter = [e["args"]["joules"] for e in events if e.get("name") == "energy (J)"]
    assert counter[-1] == pytest.approx(report["total_j"], rel=1e-6)
    assert counter == sorted(counter)
    assert report["mean_power_w"] == pytest.approx(report["total_j"] / perf["total_time_s"])
    cost = perf["cost"]
    assert cost["usable_wafer_usd"] == config.spec.cost.wafer_usd
    assert cost["samples_per_sec_per_kusd"] == pytest.approx(
        perf["samples_per_sec"] / cost["wafer_usd"] * 1000
    )
    assert 0 <= cost["defect_free_yield"] < 1  # the test config draws dead PEs


@pytest.mark.parametrize(
    ("model", "params"),
    [("poisson", {"defect_density_per_cm2": 30.0}), ("clustered", {"defect_density_per_cm2": 30.0}),
     ("poisson", {"pe_defect_prob": 0.01})],
)  # fmt: skip
def test_the_defect_free_yield_is_what_the_maps_show(model, params, tiny):
    """The chance of a wafer without a defect, against 1,500 drawn maps (4 standard errors)."""
    clean = [not (m.dead_pe.any() or m.dead_link.any())
             for m in (generate(tiny, model, seed, **params) for seed in range(1500))]  # fmt: skip
    p = defect_free_probability(tiny, model, params)
    assert 0.1 < p < 0.9
    assert np.mean(clean) == pytest.approx(p, abs=4 * math.sqrt(p * (1 - p) / 1500))


@pytest.mark.parametrize("algo", ["weight_stream", "summa"])
def test_every_kernel_tier_reports_the_same_energy(capsys, algo):
    """``kernel gemm --tier analytic|fast`` split as the cycle tier measures it: the same
    multiply-adds and hops (the record's count equals the engine's), leakage by its cycles."""
    splits = {}
    for tier in ("cycle", "fast", "analytic"):
        assert main(["kernel", "gemm", "--algo", algo, "--grid", "4x4", "--preset", "tiny",
                     "--tier", tier, "--json"]) == 0  # fmt: skip
        splits[tier] = json.loads(capsys.readouterr().out)["energy"]
    for tier in ("fast", "analytic"):
        assert splits[tier]["compute_j"] == pytest.approx(splits["cycle"]["compute_j"])
        assert splits[tier]["fabric_j"] == pytest.approx(splits["cycle"]["fabric_j"])
        assert splits[tier]["total_j"] == pytest.approx(splits["cycle"]["total_j"], rel=0.02)


def test_a_cluster_pays_for_each_wafer(tmp_path):
    """Two data-parallel wafers: samples/s per k$ divides by both wafers' price."""
    config = load_run_config(write_config(tmp_path, steps=1, tier="fast", swarmx={"wafers": 2}))
    perf = performance(run(config, tmp_path / "out"))
    cost = perf["cost"]
    assert cost["wafers"] == 2
    assert cost["samples_per_sec_per_kusd"] == pytest.approx(
        perf["samples_per_sec"] / (2 * cost["wafer_usd"]) * 1000
    )
