"""A GEMM's sizes as one typed record: ``C = A @ B``, ``A`` of ``m x k`` and ``B`` of
``k x n`` elements.

Inside the kernels and the compiler a GEMM's shape is a :class:`GemmShape`. The dict
``{"m": m, "k": k, "n": n}`` is its form at the edges only: the ``shape`` a script passes to
``kernels.registry.run_kernel`` or ``kernels.tiers.estimate`` (every kernel's own dimensions
by name, a GEMV's ``m`` and ``n``, a stencil's ``n``) and the ``shape`` the JSON results
write (:meth:`GemmShape.as_dict`). :meth:`GemmShape.of` takes either form.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

DIMS = ("m", "k", "n")  # a GEMM's dimensions by name, as records and JSON name them


class GemmShape(NamedTuple):
    """The sizes of ``C = A @ B``: ``A`` is ``m x k``, ``B`` is ``k x n`` (elements)."""

    m: int
    k: int
    n: int

    @classmethod
    def of(cls, shape: GemmShape | Mapping[str, int]) -> GemmShape:
        """``shape`` as a record: a record as it is, a dict by its keys ``m``, ``k``, ``n``."""
        if isinstance(shape, GemmShape):
            return shape
        return cls(shape["m"], shape["k"], shape["n"])

    def size(self, dim: str) -> int:
        """The size of dimension ``dim`` by its name (as an algorithm's record names the
        dimensions it cuts over its grid)."""
        if dim not in DIMS:
            raise KeyError(f"dim={dim!r} is not one of: {', '.join(DIMS)}")
        return getattr(self, dim)

    def with_sizes(self, sizes: Mapping[str, int]) -> GemmShape:
        """This shape with the dimensions named in ``sizes`` set to their values."""
        for dim in sizes:
            self.size(dim)  # an unknown name lists the valid ones
        return self._replace(**sizes)

    def as_dict(self) -> dict[str, int]:
        """The JSON form, keys in the order ``m``, ``k``, ``n``."""
        return {"m": self.m, "k": self.k, "n": self.n}
