"""A router's filter of what it hands its PE of a color, as the SDK's color configurations set it.

A route may send a color both to the ramp and on to a neighbour; a filter on that color lets
the PE accept only some of the wavelets while the router forwards them all, which is how the
SDK's programs deliver one stream's parts to the PEs along its way ([SDK-EX] ``tutorials/
topic-08-filters``: "filters allow a PE to selectively accept incoming wavelets"; a receiver
routed ``tx = {RAMP, EAST}`` takes three of the twelve and passes all twelve on). A wavelet
the filter refuses whose only output is the ramp is dropped. Two kinds:

- **counter** (``.kind = .{.counter = true}``): the router counts the color's wavelets from
  ``init_counter``, back to 0 after ``limit1``, and hands its PE those it counts at most
  ``max_counter``, as ``tutorials/topic-16-queue-flush`` reads ("accepts only the first two
  wavelets of each 15-wavelet sequence" with ``init_counter = 0, max_counter = 1, limit1 =
  14``) and as ``benchmarks/fft-1d-2d/ucode_2d.csl``'s transpose needs it (each PE one brick
  of every ``DEPTH - 1``, its ``init_counter`` a multiple of the brick). It counts the
  wavelets it judges, those routed to the ramp (an assumption: where the route bypasses the
  ramp the programs read make it a whole period);
- **range** (``.kind = .{.range = true}``): it hands its PE the wavelets whose upper 16 bits
  (their index field) lie in ``[min_idx, max_idx]`` (``tutorials/topic-08-filters``).

A filter costs no cycle: the router judges a wavelet as it routes it (an assumption; the SDK
gives no figure).
"""

from __future__ import annotations

import numbers

import numpy as np
from wafersim.fabric._engine_jit import (
    F_COUNT,
    F_HIGH,
    F_KIND,
    F_LOW,
    FILTER_COUNTER,
    FILTER_FIELDS,
    FILTER_NONE,
    FILTER_RANGE,
    FILTERED,
)
from wafersim.wafer.errors import ConfigError

MAX_COUNTER = 2**31 - 1  # the engine's counters are int32 (the SDK's width is not public)
MAX_INDEX = 2**16 - 1  # a wavelet's index field: its upper 16 bits


def new_filters(pes: int, colors: int) -> np.ndarray:
    """int32 (P, C, FILTER_FIELDS) of no filter: each router's per color."""
    return np.zeros((pes, colors, FILTER_FIELDS), np.int32)


def filtered_routes(table: np.ndarray, filters: np.ndarray) -> np.ndarray:
    """The engine's copy of route ``table`` (uint8 (P, 5, C)): every input port's route of a
    filtered color carries the :data:`FILTERED` flag (an empty one too, which a switch may
    fill), which the engine tests before it reads the filter."""
    flagged = np.broadcast_to(filters[:, None, :, F_KIND] != FILTER_NONE, table.shape)
    return np.where(flagged, table | FILTERED, table).astype(np.uint8)


def set_counter(filters, pes, color: int, max_counter: int, limit1: int, init_counter: int):
    """A counter filter on ``color`` at routers ``pes``, in the SDK's fields."""
    check_field("limit1", limit1, 0, MAX_COUNTER)
    check_field("max_counter", max_counter, 0, MAX_COUNTER)  # past limit1: it takes every one
    check_field("init_counter", init_counter, 0, limit1)
    filters[pes, color, F_KIND] = FILTER_COUNTER
    filters[pes, color, F_LOW] = max_counter
    filters[pes, color, F_HIGH] = limit1
    filters[pes, color, F_COUNT] = init_counter


def set_range(filters, pes, color: int, min_idx: int, max_idx: int) -> None:
    """A range filter on ``color`` at routers ``pes``, in the SDK's fields."""
    check_field("max_idx", max_idx, 0, MAX_INDEX)
    check_field("min_idx", min_idx, 0, max_idx)
    filters[pes, color, F_KIND] = FILTER_RANGE
    filters[pes, color, F_LOW] = min_idx
    filters[pes, color, F_HIGH] = max_idx
    filters[pes, color, F_COUNT] = 0


def with_index(values, index) -> np.ndarray:
    """float32 words that carry ``values``' low 16 bits (uint16) and ``index`` in their
    upper 16, as a range filter reads them (the SDK's tutorial packs ``index << 16 | value``)."""
    low = np.asarray(values, np.uint32) & 0xFFFF
    return ((np.asarray(index, np.uint32) << 16) | low).astype(np.uint32).view(np.float32)


def check_field(name: str, value, low: int, high: int) -> None:
    """An integer field in ``[low, high]``, else one line naming it and its range."""
    whole = isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if not whole or not low <= int(value) <= high:
        shown = int(value) if whole else repr(value)
        raise ConfigError(f"{name}={shown} is out of range: an integer in [{low}, {high}]")
