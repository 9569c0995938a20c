"""The one home of dtype facts: float16, bfloat16, float32, float64 (ranges, significand bits, ordinals),
and the complex dtypes complex64 and complex128, each a pair of float32 / float64 parts.

The strategies draw from these facts, the oracle rounds into these formats, the metrics count ordinals.
This module depends on numpy and ml_dtypes only (ml_dtypes ships with jax and provides bfloat16), so the
oracle, the metrics and the plugin can import it without pulling in Hypothesis or jax.

Ordinals (docs/architecture.md, "The error metric") map the finite floats of a dtype to consecutive
integers, monotonically,
with -0 and +0 both mapped to 0: `from_ordinal(to_ordinal(x) + 1)` is the next float above `x`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import ml_dtypes
import numpy as np
import numpy.typing as npt

from ._errors import ArgumentError

__all__ = [
    "COMPLEX_DTYPE_NAMES",
    "FLOAT_DTYPE_NAMES",
    "complex_dtype",
    "component_dtype",
    "is_complex_dtype",
    "is_real_kind",
    "DtypeInfo",
    "dtype_info",
    "from_ordinal",
    "resolve_dtype",
    "to_ordinal",
]

#: The dtype names accepted everywhere a dtype is expected, narrowest first.
FLOAT_DTYPE_NAMES: tuple[str, ...] = ("float16", "bfloat16", "float32", "float64")

_DTYPES: dict[str, np.dtype[Any]] = {
    "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "float32": np.dtype(np.float32),
    "float64": np.dtype(np.float64),
}
#: The complex dtypes accepted where a check's dtype is expected (`resolve_dtype(..., complex_ok=True)`).
COMPLEX_DTYPE_NAMES: tuple[str, ...] = ("complex64", "complex128")
_COMPLEX: dict[str, np.dtype[Any]] = {
    "complex64": np.dtype(np.complex64), "complex128": np.dtype(np.complex128)}
#: Each complex dtype's part dtype, and back.
_PART: dict[np.dtype[Any], np.dtype[Any]] = {
    np.dtype(np.complex64): np.dtype(np.float32), np.dtype(np.complex128): np.dtype(np.float64)}
_WHOLE: dict[np.dtype[Any], np.dtype[Any]] = {v: k for k, v in _PART.items()}
_UINTS: dict[int, np.dtype[Any]] = {16: np.dtype(np.uint16), 32: np.dtype(np.uint32), 64: np.dtype(np.uint64)}


def resolve_dtype(dtype: Any, *, complex_ok: bool = False) -> np.dtype[Any]:
    """Resolves a dtype given by name, numpy dtype or scalar type (jax's `jnp.float32` too) to a numpy dtype.

    Args:
        dtype: one of "float16", "bfloat16", "float32", "float64", or anything `numpy.dtype` maps to one of
            them (`np.float32`, `np.dtype("float16")`, `ml_dtypes.bfloat16`, `jnp.bfloat16`, ...).
        complex_ok: also accept "complex64" and "complex128" (where the caller handles complex values:
            the check, the strategies, the oracle); `dtype_info` still takes real dtypes only.

    Returns:
        The numpy dtype; bfloat16 is `ml_dtypes.bfloat16`'s.

    Raises:
        ValueError: naming `dtype` and the allowed dtypes, for anything else (None, integer or complex
            dtypes, float8 types, unknown names).

    Example:
        >>> resolve_dtype("bfloat16")
        dtype(bfloat16)
    """
    if isinstance(dtype, str) and dtype in _DTYPES:
        return _DTYPES[dtype]
    if complex_ok and isinstance(dtype, str) and dtype in _COMPLEX:
        return _COMPLEX[dtype]
    resolved: np.dtype[Any] | None = None
    # np.dtype(None) is float64: a missing dtype must not silently mean float64.
    if dtype is not None:
        try:
            resolved = np.dtype(dtype)
        except (TypeError, ValueError):
            resolved = None
    if complex_ok and resolved is not None and resolved in _PART:
        return resolved
    if resolved is None or resolved not in _DTYPES.values():
        names = FLOAT_DTYPE_NAMES + (COMPLEX_DTYPE_NAMES if complex_ok else ())
        raise ArgumentError(f"unsupported dtype {dtype!r}: expected one of {', '.join(names)}")
    return resolved


def is_real_kind(dtype: Any) -> bool:
    """Whether ``dtype`` holds real numbers a constant reader may take as floats: numpy's float, signed
    and unsigned integer kinds, and ml_dtypes' floats (bfloat16, the float8 formats), whose numpy kind
    is ``'V'`` (a constant of a bfloat16 program was no constant to the rewrite engine).

    Example:
        >>> is_real_kind(ml_dtypes.bfloat16), is_real_kind(np.int32), is_real_kind(np.complex64)
        (True, True, False)
    """
    try:
        dt = np.dtype(dtype)
    except (TypeError, ValueError):
        return False
    if dt.kind in "fiu":
        return True
    if dt.kind != "V":  # complex, bool, strings: not real numbers (ml_dtypes.finfo takes complex too)
        return False
    try:
        ml_dtypes.finfo(dt)
    except (TypeError, ValueError):
        return False
    return True


def is_complex_dtype(dtype: Any) -> bool:
    """Whether `dtype` (any form numpy understands) is complex64 or complex128.

    Example:
        >>> is_complex_dtype("complex64"), is_complex_dtype(np.float32)
        (True, False)
    """
    try:
        return np.dtype(dtype) in _PART
    except (TypeError, ValueError):
        return False


def component_dtype(dtype: Any) -> np.dtype[Any]:
    """The dtype of each part of a complex dtype (float32 for complex64, float64 for complex128); a real
    dtype is its own component.

    Example:
        >>> component_dtype("complex64")
        dtype('float32')
    """
    resolved = resolve_dtype(dtype, complex_ok=True)
    return _PART.get(resolved, resolved)


def complex_dtype(dtype: Any) -> np.dtype[Any]:
    """The complex dtype whose parts are `dtype` (float32 -> complex64, float64 -> complex128); a complex
    dtype is returned as is.

    Raises:
        ValueError: no complex dtype has parts of this dtype (float16, bfloat16).
    """
    resolved = resolve_dtype(dtype, complex_ok=True)
    if resolved in _PART:
        return resolved
    if resolved not in _WHOLE:
        raise ValueError(f"no complex dtype has {resolved} parts: complex64 has float32, complex128 float64")
    return _WHOLE[resolved]


@dataclasses.dataclass(frozen=True)
class DtypeInfo:
    """What the fuzzer and the error metric need to know about one floating-point dtype.

    Float-valued fields are numpy scalars of the dtype itself, hence exact.

    Attributes:
        name: "float16", "bfloat16", "float32" or "float64".
        dtype: the numpy dtype.
        bits: total width in bits (16, 32 or 64).
        mantissa_bits: stored fraction bits, without the implicit leading one (10, 7, 23, 52).
        exponent_bits: exponent field width (5, 8, 8, 11).
        min_exponent: exponent of the smallest normal number: `tiny == 2.0**min_exponent`.
        max_exponent: exponent of the largest binade: `max < 2.0**(max_exponent + 1)`.
        max: the largest finite value.
        tiny: the smallest positive normal value.
        smallest_subnormal: the smallest positive value.
        eps: the distance from 1.0 to the next larger value.
        uint_dtype: the unsigned integer dtype of the same width, for viewing bit patterns.
        max_ordinal: `to_ordinal(max)`; finite values have ordinals in [-max_ordinal, max_ordinal].
    """

    name: str
    dtype: np.dtype[Any]
    bits: int
    mantissa_bits: int
    exponent_bits: int
    min_exponent: int
    max_exponent: int
    max: np.floating[Any]
    tiny: np.floating[Any]
    smallest_subnormal: np.floating[Any]
    eps: np.floating[Any]
    uint_dtype: np.dtype[Any]
    max_ordinal: int

    @property
    def significand_bits(self) -> int:
        """Significand bits with the implicit leading one (11, 8, 24, 53): the format's precision."""
        return self.mantissa_bits + 1

    @property
    def exponent_bias(self) -> int:
        """The bias of the stored exponent field: a normal value's exponent is `field - exponent_bias`."""
        return (1 << (self.exponent_bits - 1)) - 1

    @property
    def sign_mask(self) -> int:
        """The sign bit of a bit pattern, as a Python int."""
        return 1 << (self.bits - 1)


def _make_info(name: str) -> DtypeInfo:
    dtype = _DTYPES[name]
    finfo = ml_dtypes.finfo(dtype)
    bits = int(finfo.bits)
    scalar = dtype.type
    max_value = scalar(finfo.max)
    max_ordinal = int(np.asarray(max_value, dtype=dtype).view(_UINTS[bits]))
    return DtypeInfo(
        name=name,
        dtype=dtype,
        bits=bits,
        mantissa_bits=int(finfo.nmant),
        exponent_bits=int(finfo.nexp),
        min_exponent=int(finfo.minexp),
        max_exponent=int(finfo.maxexp) - 1,
        max=max_value,
        tiny=scalar(finfo.tiny),
        smallest_subnormal=scalar(finfo.smallest_subnormal),
        eps=scalar(finfo.eps),
        uint_dtype=_UINTS[bits],
        max_ordinal=max_ordinal,
    )


_INFOS: dict[str, DtypeInfo] = {name: _make_info(name) for name in FLOAT_DTYPE_NAMES}
_INFO_BY_KEY: dict[Any, DtypeInfo] = dict(_INFOS)


def dtype_info(dtype: Any) -> DtypeInfo:
    """Returns the `DtypeInfo` of a dtype given in any form `resolve_dtype` accepts.

    Raises:
        ValueError: for a dtype that is not one of float16, bfloat16, float32, float64.

    Example:
        >>> dtype_info("float32").mantissa_bits
        23
    """
    try:  # the common forms (a name, a numpy dtype) without `resolve_dtype`: hot in the strategies
        return _INFO_BY_KEY[dtype]
    except (KeyError, TypeError):
        pass
    info = _INFOS[resolve_dtype(dtype).name]
    if isinstance(dtype, np.dtype):
        _INFO_BY_KEY[dtype] = info
    return info


def to_ordinal(values: npt.ArrayLike, dtype: Any = None) -> np.ndarray:
    """Maps values of `dtype` to their ordinals (int64): monotone, consecutive, -0 and +0 both 0.

    Values are first converted to `dtype` (rounding to nearest); with `dtype=None` they are taken in
    their own dtype. NaN has no meaningful ordinal: its result is unspecified; infinities map to
    `±(max_ordinal + 1)`. Every ordinal fits in int64: float64's largest magnitude is below 2**63.

    Raises:
        ValueError: the dtype is not one of the four supported.

    Example:
        >>> int(to_ordinal(np.float32(1.0), "float32") - to_ordinal(np.float32(0.0), "float32"))
        1065353216
    """
    arr = np.asarray(values)
    info = dtype_info(arr.dtype if dtype is None else dtype)
    arr = arr.astype(info.dtype, copy=False)
    raw = arr.view(info.uint_dtype)
    sign = info.uint_dtype.type(info.sign_mask)
    magnitude = np.asarray((raw & (sign - info.uint_dtype.type(1))).astype(np.int64))
    negative = (raw & sign) != 0
    if negative.any():
        magnitude = np.where(negative, -magnitude, magnitude)
    return magnitude


def from_ordinal(ordinals: npt.ArrayLike, dtype: Any) -> np.ndarray:
    """Inverse of `to_ordinal`: the values of `dtype` with the given ordinals (0 maps to +0.0).

    Ordinals outside `[-max_ordinal - 1, max_ordinal + 1]` are clipped there, i.e. become ±inf.

    Example:
        >>> float(from_ordinal(to_ordinal(np.float32(1.0), "float32") + 1, "float32")) == 1 + 2.0**-23
        True
    """
    info = dtype_info(dtype)
    limit = info.max_ordinal + 1
    ords = np.minimum(np.maximum(np.asarray(ordinals, dtype=np.int64), -limit), limit)  # np.clip is slower
    negative = ords < 0
    bits = np.asarray(np.abs(ords).astype(info.uint_dtype))
    if negative.any():
        bits |= negative.astype(info.uint_dtype) << info.uint_dtype.type(info.bits - 1)
    return bits.view(info.dtype)
