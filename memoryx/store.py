"""MemoryX's weight store: the off-wafer home of named weight tensors and optimizer state.

A store is either *materialised* (float32 numpy arrays, drawn from a seed) or *timing-only*
(shapes, dtypes and byte counts only, for models too large to hold in host memory). Reading or
writing values of a timing-only store raises :class:`~wafer.errors.ConfigError`.

Initialisation (materialised mode): every tensor is drawn from N(0, ``init_std`` ** 2), the
GPT-2 scheme with ``init_std = 0.02`` by default (Radford et al. 2019, "Language Models are
Unsupervised Multitask Learners"; the released code initialises weights with std 0.02). One
user seed feeds ``np.random.SeedSequence``, which spawns one independent stream per tensor in
sorted name order, so a tensor's values depend on the seed and its name's rank only, never on
the order of the ``shapes`` dict.

Optimizer state lives beside the weights as named *slots* (``"momentum"``, ``"exp_avg"``...),
one float32 array per (slot, tensor), created as zeros on first use.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from wafersim.wafer.dtypes import DTYPE_BYTES, DType
from wafersim.wafer.errors import ConfigError, excerpt

MATERIALISED_DTYPES: tuple[DType, ...] = ("fp32",)  # numpy holds these; bf16 has no numpy type
DEFAULT_INIT_STD = 0.02  # GPT-2 initialiser standard deviation
NP_DTYPE = np.float32


@dataclass(frozen=True, eq=False)
class WeightStore:
    """Named weight tensors (and, when materialised, their values and optimizer state)."""

    shapes: dict[str, tuple[int, ...]]
    dtype: DType
    seed: int | None
    init_std: float
    _weights: dict[str, np.ndarray] | None = field(repr=False)  # None: timing-only
    _state: dict[str, dict[str, np.ndarray]] = field(repr=False)  # slot -> name -> array

    @classmethod
    def materialised(
        cls,
        shapes: dict[str, tuple[int, ...]],
        seed: int,
        dtype: DType = "fp32",
        init_std: float = DEFAULT_INIT_STD,
    ) -> WeightStore:
        """A store holding float32 values drawn from N(0, init_std**2), one stream per name."""
        shapes = _check_shapes(shapes)
        _check_dtype(dtype, MATERIALISED_DTYPES)
        seed = _check_seed(seed)
        init_std = check_init_std(init_std)
        names = sorted(shapes)
        streams = np.random.SeedSequence(seed).spawn(len(names))
        weights = {}
        for name, stream in zip(names, streams, strict=True):
            rng = np.random.default_rng(stream)
            weights[name] = (rng.standard_normal(shapes[name]) * init_std).astype(NP_DTYPE)
        return cls(shapes, dtype, seed, init_std, weights, {})

    @classmethod
    def timing_only(cls, shapes: dict[str, tuple[int, ...]], dtype: DType = "fp32") -> WeightStore:
        """A store of shapes and byte counts only; its values cannot be read."""
        shapes = _check_shapes(shapes)
        _check_dtype(dtype, tuple(DTYPE_BYTES))
        return cls(shapes, dtype, None, DEFAULT_INIT_STD, None, {})

    @classmethod
    def from_arrays(
        cls,
        weights: dict[str, np.ndarray],
        state: dict[str, dict[str, np.ndarray]],
        seed: int | None,
        init_std: float,
    ) -> WeightStore:
        """A materialised store holding copies of ``weights`` and ``state`` (for loading)."""
        shapes = _check_shapes({name: np.shape(a) for name, a in weights.items()})
        own = {name: _as_fp32(f"weights[{excerpt(name)}]", a, shapes[name])
               for name, a in weights.items()}  # fmt: skip
        store = cls(shapes, "fp32", seed, float(init_std), own, {})
        for slot, arrays in state.items():
            for name, values in arrays.items():
                store.put_slot(name, slot, values)
        return store

    @property
    def is_materialised(self) -> bool:
        return self._weights is not None

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.shapes)

    def numel(self, name: str) -> int:
        """Number of elements of tensor ``name``."""
        return math.prod(self._shape(name))

    def bytes(self, name: str) -> int:
        """Bytes of tensor ``name`` in the store's dtype (optimizer state not included)."""
        return self.numel(name) * DTYPE_BYTES[self.dtype]

    def total_bytes(self) -> int:
        """Bytes of all weight tensors in the store's dtype (optimizer state not included)."""
        return sum(self.bytes(name) for name in self.shapes)

    def get(self, name: str) -> np.ndarray:
        """A read-only view of tensor ``name``'s float32 values."""
        return _read_only(self._values()[self._name(name)])

    def put(self, name: str, values: np.ndarray) -> None:
        """Overwrite tensor ``name`` with ``values`` (same shape, cast to float32)."""
        weights = self._values()
        weights[self._name(name)] = _as_fp32(
            f"values for {excerpt(name)}", values, self.shapes[name]
        )

    def slot(self, name: str, slot: str) -> np.ndarray:
        """A read-only view of optimizer state ``slot`` of tensor ``name`` (zeros if unset)."""
        self._values()
        arrays = self._state.get(slot, {})
        if self._name(name) not in arrays:
            return _read_only(np.zeros(self.shapes[name], dtype=NP_DTYPE))
        return _read_only(arrays[name])

    def put_slot(self, name: str, slot: str, values: np.ndarray) -> None:
        """Overwrite optimizer state ``slot`` of tensor ``name`` (same shape as the tensor)."""
        self._values()
        shape = self.shapes[self._name(name)]
        if not isinstance(slot, str) or not slot or "/" in slot:
            raise ConfigError(f"slot name {excerpt(slot)} must be a non-empty string without '/'")
        self._state.setdefault(slot, {})[name] = _as_fp32(
            f"slot {excerpt(slot)} of {excerpt(name)}", values, shape
        )

    def state(self) -> dict[str, dict[str, np.ndarray]]:
        """Read-only views of all optimizer state: slot -> tensor name -> array."""
        self._values()
        return {
            s: {n: _read_only(a) for n, a in arrays.items()} for s, arrays in self._state.items()
        }

    def _values(self) -> dict[str, np.ndarray]:
        if self._weights is None:
            raise ConfigError(
                "store is timing-only (shapes and byte counts only); values need "
                "WeightStore.materialised"
            )
        return self._weights

    def _name(self, name: str) -> str:
        if name not in self.shapes:
            raise ConfigError(
                f"unknown tensor {excerpt(name)}; the store holds {excerpt(sorted(self.shapes))}"
            )
        return name

    def _shape(self, name: str) -> tuple[int, ...]:
        return self.shapes[self._name(name)]


def _check_shapes(shapes: object) -> dict[str, tuple[int, ...]]:
    if not isinstance(shapes, dict) or not shapes:
        raise ConfigError(
            f"shapes must be a non-empty dict of name -> shape, got {excerpt(shapes)}"
        )
    out: dict[str, tuple[int, ...]] = {}
    for name, shape in shapes.items():
        if not isinstance(name, str) or not name or "/" in name:
            raise ConfigError(f"tensor name {excerpt(name)} must be a non-empty string without '/'")
        dims = tuple(shape) if isinstance(shape, tuple | list) else None
        ok = dims is not None and all(_is_int(d) and d >= 1 for d in dims)
        if not ok:
            raise ConfigError(
                f"shapes[{excerpt(name)}] is {excerpt(shape)}; allowed: a tuple of ints >= 1"
            )
        out[name] = tuple(int(d) for d in dims)
    return out


def _check_dtype(dtype: object, allowed: tuple[str, ...]) -> None:
    if dtype not in allowed:
        raise ConfigError(f"dtype is {excerpt(dtype)}; allowed: {list(allowed)}")


def _check_seed(seed: object) -> int:
    if not _is_int(seed) or seed < 0:
        raise ConfigError(f"seed is {excerpt(seed)}; allowed: an integer >= 0")
    return int(seed)


def check_init_std(init_std: object) -> float:
    ok = isinstance(init_std, int | float) and not isinstance(init_std, bool)
    if not ok or not 0 <= _as_float(init_std) < math.inf:  # NaN compares false
        raise ConfigError(f"init_std is {excerpt(init_std)}; allowed: a finite number >= 0")
    return float(init_std)


def _as_float(value: float) -> float:
    """``value`` as a float; an integer too large for one is infinite."""
    try:
        return float(value)
    except OverflowError:
        return math.inf


def _is_int(value: object) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool)


def _as_fp32(what: str, values: object, shape: tuple[int, ...]) -> np.ndarray:
    array = np.asarray(values)
    if array.shape != shape:
        raise ConfigError(f"{what} has shape {array.shape}; allowed: {shape}")
    if not np.issubdtype(array.dtype, np.floating):
        raise ConfigError(f"{what} has dtype {array.dtype}; allowed: a floating dtype")
    return np.array(array, dtype=NP_DTYPE, copy=True)


def _read_only(array: np.ndarray) -> np.ndarray:
    view = array.view()
    view.setflags(write=False)
    return view
