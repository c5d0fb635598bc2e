"""IEEE half precision inside Numba kernels (Numba has no float16 on the CPU).

fp16 is a storage format: two values per 32-bit SRAM word or wavelet, element ``i`` of a
vector in the low half of word ``i // 2`` when ``i`` is even and in the high half when odd.
Arithmetic happens in fp32; results are rounded to nearest even when stored.
"""

from __future__ import annotations

import numpy as np
from numba import njit


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
def word_half(word, which):
    """The fp16 value in half ``which`` (0 low, 1 high) of a float32-typed word."""
    bits = np.int64(np.float32(word).view(np.uint32))
    return half_to_float((bits >> (16 * which)) & 0xFFFF)


@njit(cache=True, _nrt=False, inline="always")
def get_half(mem, base, i):
    """Element ``i`` of the fp16 vector starting at word ``base``."""
    return word_half(mem[base + (i >> 1)], i & 1)


@njit(cache=True, _nrt=False, inline="always")
def set_half(mem, base, i, value):
    """Store ``value`` rounded to fp16 as element ``i`` of the vector at word ``base``."""
    word = base + (i >> 1)
    shift = 16 * (i & 1)
    bits = np.int64(np.float32(mem[word]).view(np.uint32))
    bits = (bits & ~(0xFFFF << shift)) | (float_to_half(value) << shift)
    mem[word] = np.uint32(bits).view(np.float32)
