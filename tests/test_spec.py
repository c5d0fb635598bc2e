"""Wafer specs: presets, validation, files and overrides."""

import dataclasses

import pytest
from wafersim.wafer.config_io import load_spec, parse_overrides, resolve_spec
from wafersim.wafer.errors import ConfigError
from wafersim.wafer.presets import PRESETS, preset


def test_wse2_has_published_figures():
    """wse2 carries the published WSE-2 numbers."""
    s = preset("wse2")
    assert (s.logical_width_pes, s.logical_height_pes) == (750, 994)
    assert s.pe.sram_bytes == 48 * 1024
    assert (s.pe.fp16_fmac_per_cycle, s.pe.fp32_fmac_per_cycle) == (4, 1)
    assert (s.pe.sram_read_bytes_per_cycle, s.pe.sram_write_bytes_per_cycle) == (16, 8)
    assert (s.link.wavelet_bits, s.link.wavelets_per_cycle, s.link.hop_latency_cycles) == (32, 1, 1)
    assert s.router.colors == 24
    assert (s.clock_hz, s.max_clock_hz) == (0.85e9, 1.1e9)
    assert s.io.edge_ports * s.io.edge_port_bits_per_s == pytest.approx(1.2e12)


def test_physical_grid_is_logical_plus_spares():
    """Every preset's physical grid is its logical grid plus spare rows and columns."""
    for name in PRESETS:
        s = preset(name)
        assert s.physical_height_pes == s.logical_height_pes + s.spare_rows
        assert s.physical_width_pes == s.logical_width_pes + s.spare_cols
        assert s.spare_rows >= 1


def test_unknown_preset_lists_valid_names():
    """An unknown preset is an error naming the valid ones."""
    with pytest.raises(ConfigError, match="tiny, small, wse2, wse3"):
        preset("wse9")


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("pe.sram_bytes", -1, r"PESpec.sram_bytes=-1 is out of range \[1024, inf\]"),
        ("router.colors", 0, r"RouterSpec.colors=0 is out of range"),
        ("pe.sram_bytes", 1.5e4 + 0.5, "must be an integer"),
        ("link.hop_latency_cycles", "fast", "must be a number"),
        ("clock_hz", 2e9, "exceeds max_clock_hz"),
        ("pe.nonsense", 1, "unknown spec key 'pe.nonsense'"),
        ("turbo", 1, "unknown spec key 'turbo'"),
    ],
)
def test_bad_overrides_name_the_field(key, value, message, tiny):
    """A bad override raises ConfigError naming the field and the allowed range."""
    with pytest.raises(ConfigError, match=message):
        tiny.replace({key: value})


def test_overrides_parse_types():
    """key=value text parses to int, float, bool or text."""
    parsed = parse_overrides(["a=3", "b=1e-3", "c=true", "d=wse2"])
    assert parsed == {"a": 3, "b": 0.001, "c": True, "d": "wse2"}
    with pytest.raises(ConfigError, match="key=value"):
        parse_overrides(["novalue"])


def test_override_numbers_are_ascii_digits_only(tiny):
    """An override's number is ASCII digits only: other scripts' digits and ``1_000`` stay
    text, so a value that looks like no number is refused instead of setting one."""
    words = ["a=\u0661\u0662", "b=\uff16\uff15\uff15\uff13\uff16", "c=1_000", "d=1_0.5"]
    parsed = parse_overrides([*words, "e=-7", "f=+3", "g=2.5e3"])
    assert parsed == {**dict(w.split("=") for w in words), "e": -7, "f": 3, "g": 2500.0}
    with pytest.raises(ConfigError, match="PESpec.sram_bytes must be a number"):
        tiny.replace(parse_overrides(["pe.sram_bytes=\uff16\uff15\uff15\uff13\uff16"]))


def test_spec_from_toml_and_yaml(tmp_path):
    """A spec file is a preset plus changed keys, in TOML or YAML, and rejects unknown keys."""
    toml = tmp_path / "w.toml"
    toml.write_text('preset = "small"\nspare_rows = 3\n[pe]\nsram_bytes = 65536\n')
    s = load_spec(toml)
    assert (s.spare_rows, s.pe.sram_bytes, s.logical_width_pes) == (3, 65536, 64)
    yaml = tmp_path / "w.yaml"
    yaml.write_text("preset: tiny\nrouter:\n  colors: 8\n")
    assert load_spec(yaml).router.colors == 8
    bad = tmp_path / "bad.toml"
    bad.write_text('preset = "tiny"\n[pe]\nsram_kb = 3\n')
    with pytest.raises(ConfigError, match="pe.sram_kb"):
        load_spec(bad)


def test_full_spec_round_trips_through_dict():
    """A whole spec written as a dict builds the same spec back."""
    from wafersim.wafer.spec import spec_from_dict

    s = preset("wse3")
    assert spec_from_dict(s.to_dict()) == s


def test_resolve_spec_rejects_two_sources():
    """--preset and --spec together are an error."""
    with pytest.raises(ConfigError, match="either --preset or --spec"):
        resolve_spec("tiny", "x.toml", {})


def test_a_spec_built_directly_checks_its_sections(tiny):
    """A section out of range is refused however the spec is built, not only from a dict
    (a hop latency of 0 would make the engine read and write the same link slot)."""
    spec = tiny
    link = dataclasses.replace(spec.link, hop_latency_cycles=0)
    with pytest.raises(
        ConfigError, match=r"LinkSpec.hop_latency_cycles=0 is out of range \[1, 64\]"
    ):
        dataclasses.replace(spec, link=link)


def test_an_integer_too_large_for_a_float_is_out_of_range_not_an_overflow():
    """A 400-digit override is refused by its range check, not an OverflowError."""
    from wafersim.wafer.errors import ConfigError
    from wafersim.wafer.presets import preset

    with pytest.raises(ConfigError, match="logical_width_pes=.* is out of range"):
        preset("tiny").replace({"logical_width_pes": int("9" * 400)})
