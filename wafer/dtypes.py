"""The number formats a PE stores values in, by name: one type for annotations, one tuple
for the tables keyed by them and for the checks of user input.

The tables take their keys from :data:`DTYPE_NAMES`: :data:`DTYPE_BYTES` here, and
``fabric.program.DTYPES`` (each format's engine code and bytes). A name from a user (a CLI
flag, a config file, an API call) is still checked where it is first used
(``fabric.program.value_bytes``): an annotation checks nothing at run time.
"""

from __future__ import annotations

from typing import Literal

DType = Literal["fp32", "fp16", "bf16"]  # IEEE single, IEEE half, bfloat16 (fp32's top half)
DTYPE_NAMES: tuple[DType, ...] = ("fp32", "fp16", "bf16")  # DType's names, in this order
DTYPE_BYTES: dict[DType, int] = dict(zip(DTYPE_NAMES, (4, 2, 2), strict=True))  # a value's
HALF_DTYPES: tuple[DType, ...] = ("fp16", "bf16")  # two values a word, fp32 arithmetic
