"""16-bit floats inside Numba kernels (Numba has no float16 on the CPU): IEEE half (fp16)
and bfloat16 (bf16: the top 16 bits of an fp32).

Both are storage formats: two values per 32-bit SRAM word or wavelet, element ``i`` of a
vector in the low half of word ``i // 2`` when ``i`` is even and in the high half when odd.
Arithmetic happens in fp32; results are rounded to nearest even when stored. ``fmt`` names the
format: :data:`FP16` or :data:`BF16` (the engine's dtype codes).
"""

from __future__ import annotations

import numpy as np
from numba import njit

FP16, BF16 = 1, 2  # the engine's dtype codes (fabric._engine_jit; FP32 is 0)


@njit(cache=True, _nrt=False, inline="always")
def half_to_float(h):
    """fp16 bits (an int in [0, 65535]) to float32."""
    sign = np.uint32((h >> 15) & 1) << np.uint32(31)
    exp = (h >> 10) & 0x1F
    mant = h & 0x3FF
    if exp == 0:  # zero or subnormal: exact in float32
        value = np.float32(mant) * np.float32(2.0**-24)
        return -value if sign else value
    if exp == 31:  # inf or NaN
        bits = sign | np.uint32(0x7F800000) | np.uint32(mant << 13)
    else:
        bits = sign | np.uint32((exp + 112) << 23) | np.uint32(mant << 13)
    return np.uint32(bits).view(np.float32)


@njit(cache=True, _nrt=False, inline="always")
def float_to_half(x):
    """float32 to fp16 bits, rounding to nearest even (as numpy's astype(float16))."""
    bits = np.int64(np.float32(x).view(np.uint32))
    sign = (bits >> 16) & 0x8000
    raw_exp = (bits >> 23) & 0xFF
    mant = bits & 0x7FFFFF
    if raw_exp == 0xFF:
        return sign | 0x7C00 | (0x200 if mant else 0)
    exp = raw_exp - 127 + 15
    if exp >= 31:
        return sign | 0x7C00
    if exp <= 0:
        if exp < -10:
            return sign
        mant |= 0x800000
        shift = 14 - exp
        h = mant >> shift
        rest = mant & ((1 << shift) - 1)
        half = 1 << (shift - 1)
        if rest > half or (rest == half and h & 1):
            h += 1
        return sign | h
    h = (exp << 10) | (mant >> 13)
    rest = mant & 0x1FFF
    if rest > 0x1000 or (rest == 0x1000 and h & 1):
        h += 1  # may carry into the exponent: up to infinity, as it should
    return sign | h


@njit(cache=True, _nrt=False, inline="always")
def bf16_to_float(h):
    """bf16 bits (an int in [0, 65535]) to float32: they are its top 16 bits."""
    return np.uint32(h << 16).view(np.float32)


@njit(cache=True, _nrt=False, inline="always")
def float_to_bf16(x):
    """float32 to bf16 bits, rounding to nearest even (as ``ml_dtypes.bfloat16``); a NaN
    stays a NaN (quiet), never rounds to infinity."""
    bits = np.int64(np.float32(x).view(np.uint32))
    if bits & 0x7F800000 == 0x7F800000 and bits & 0x7FFFFF:
        return ((bits >> 16) | 0x40) & 0xFFFF
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF


@njit(cache=True, _nrt=False, inline="always")
def _to_float(h, fmt):
    return bf16_to_float(h) if fmt == BF16 else half_to_float(h)


@njit(cache=True, _nrt=False, inline="always")
def _to_bits(x, fmt):
    return float_to_bf16(x) if fmt == BF16 else float_to_half(x)


@njit(cache=True, _nrt=False, inline="always")
def word_half(word, which, fmt):
    """The 16-bit value (format ``fmt``) in half ``which`` (0 low, 1 high) of a
    float32-typed word."""
    bits = np.int64(np.float32(word).view(np.uint32))
    return _to_float((bits >> (16 * which)) & 0xFFFF, fmt)


@njit(cache=True, _nrt=False, inline="always")
def half_bits(word, which):
    """The raw 16 bits in half ``which`` (0 low, 1 high) of a float32-typed word."""
    return (np.int64(np.float32(word).view(np.uint32)) >> (16 * which)) & 0xFFFF


@njit(cache=True, _nrt=False, inline="always")
def get_half(mem, base, i, fmt):
    """Element ``i`` of the 16-bit vector (format ``fmt``) starting at word ``base``."""
    return word_half(mem[base + (i >> 1)], i & 1, fmt)


@njit(cache=True, _nrt=False, inline="always")
def set_half(mem, base, i, value, fmt):
    """Store ``value`` rounded to ``fmt`` as element ``i`` of the vector at word ``base``."""
    word = base + (i >> 1)
    shift = 16 * (i & 1)
    bits = np.int64(np.float32(mem[word]).view(np.uint32))
    bits = (bits & ~(0xFFFF << shift)) | (_to_bits(value, fmt) << shift)
    mem[word] = np.uint32(bits).view(np.float32)
