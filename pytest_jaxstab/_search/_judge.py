"""Judging candidates: points drawn by ``_sampler`` (bit-uniform, valid outputs), exact values by ``oracles``.

A :class:`Samples` holds scalar points (one array per input), the exact results of the ORIGINAL program
at them (``oracles.evaluate``, correctly rounded to the dtype) and which points count: those where the
oracle is certain and the exact result is real (docs/architecture.md, "The error metric"). A candidate's
error at each point is ``oracles.error_bits`` of its float result; points that do not count are NaN.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from .. import oracles
from .._dtypes import dtype_info
from ._expr import Term, const_array, evaluate_jax, is_array_program, op

__all__ = ["Samples", "jax_function", "program_callable"]


def _flush(a: np.ndarray) -> np.ndarray:
    tiny = float(dtype_info(a.dtype).tiny)
    wide = np.abs(a.astype(np.float64))
    sub = (wide < tiny) & (wide > 0)
    return np.where(sub, np.copysign(np.zeros((), a.dtype), a), a).astype(a.dtype) if sub.any() else a


def jax_function(term: Term, dtype: Any, out_shape: tuple[int, ...] | None = None) -> Callable[..., Any]:
    """``term`` as a JAX function of its inputs (positional scalars or arrays); with ``out_shape``, the
    result has that shape (reductions keep their axes in the term)."""
    def fn(*args: Any) -> Any:
        out = evaluate_jax(term, args, dtype)
        return out if out_shape is None else _shaped(out, out_shape)

    return fn


def _shaped(out: Any, out_shape: tuple[int, ...]) -> Any:
    """One example's result as ``out_shape``: reshaped where it has as many elements, else broadcast."""
    if math.prod(jax.numpy.shape(out)) == math.prod(out_shape):
        return jax.numpy.reshape(out, out_shape)
    return jax.numpy.broadcast_to(out, out_shape)


#: The bytes of sub-term values a :class:`Samples` keeps for the candidates it judges (it forgets them
#: all when they exceed this, and starts again).
_VALUES_BUDGET = 256 * 2**20


@dataclasses.dataclass
class Samples:
    """Points, exact values of the original program, and the mask of points that count."""

    dtype: np.dtype[Any]
    args: list[np.ndarray]
    exact: np.ndarray
    valid: np.ndarray  # bool: the oracle is certain and the exact result is real
    #: For array programs: the output shape of one example; the args are stacked examples, and a term is
    #: evaluated per example (``vmap``). None: scalar points, the term evaluated elementwise.
    out_shape: tuple[int, ...] | None = None
    #: Per point: drawn uniformly over the domain's values (True) or its bit patterns (False); None for
    #: points not drawn by ``_sampler.sample``. The never-worse rule holds on each apart.
    strata: np.ndarray | None = None
    #: Sub-term -> (value at these points, whether it varies along the examples' axis): the search judges
    #: thousands of candidates that share most of their sub-terms (measured on a localized search:
    #: 190,000 operator evaluations, 4,300 distinct sub-terms), so ``eager_errors`` computes each once.
    _values: dict[Term, Any] = dataclasses.field(default_factory=dict, init=False, repr=False, compare=False)
    _values_bytes: int = dataclasses.field(default=0, init=False, repr=False, compare=False)

    @classmethod
    def build(cls, original: Term, dtype: np.dtype[Any], args: list[np.ndarray],
              out_shape: tuple[int, ...] | None = None) -> Samples:
        # XLA treats subnormal inputs as zeros on CPU and GPU: the oracle must see what the code computes.
        args = [_flush(a) for a in args]
        empty = cls(dtype, args, np.zeros(0, dtype), np.zeros(0, bool), out_shape)
        result = oracles.evaluate(empty.function(original), *args, dtype=dtype)
        exact = np.asarray(result.values, dtype)
        valid = np.asarray(result.certain, bool) & ~np.isnan(exact)
        return cls(dtype, args, exact, valid, out_shape)

    def function(self, term: Term) -> Callable[..., Any]:
        """``term`` as the JAX function these samples judge (per example for array programs)."""
        if self.out_shape is None:
            return jax_function(term, self.dtype)
        return jax.vmap(jax_function(term, self.dtype, self.out_shape))

    @property
    def count(self) -> int:
        return int(self.valid.sum())

    def errors(self, values: Any) -> np.ndarray:
        """Bits of error of ``values`` (a float result at the points); NaN where a point does not count."""
        vals = np.asarray(values).astype(self.dtype, copy=False)
        vals = np.broadcast_to(vals, self.exact.shape)
        bits = np.full(self.exact.shape, np.nan)
        approx, exact = vals[self.valid], self.exact[self.valid]
        got = oracles.error_bits(approx, exact)
        # XLA flushes subnormal results to zero (docs/architecture.md, "The error metric"): that is the
        # platform, not the code.
        tiny = float(dtype_info(self.dtype).tiny)
        flushed = (np.abs(approx.astype(np.float64)) < tiny) & (np.abs(exact.astype(np.float64)) < tiny)
        bits[self.valid] = np.where(flushed, 0.0, got)
        return bits

    def eager_errors(self, term: Term) -> np.ndarray:
        """Errors of ``term`` evaluated op by op (no compile; the search's inner loop).

        The values are ``self.function(term)``'s run eagerly, to the bit: op by op nothing is fused, so
        a sub-term's value is the same in every candidate holding it and is computed once (``_values``).
        An array program's operators run batched over the examples' axis one at a time, as ``vmap``
        runs them in ``self.function``; a sub-term of constants alone is not batched there either."""
        if self._values_bytes > _VALUES_BUDGET:
            self._values.clear()
            self._values_bytes = 0
        value, batched = self._value(term)
        shape = self.out_shape
        if shape is None:
            return self.errors(value)
        if batched:
            return self.errors(jax.vmap(lambda v: _shaped(v, shape))(value))
        n = self.args[0].shape[0] if self.args else 1
        return self.errors(jax.numpy.broadcast_to(_shaped(value, shape), (n, *shape)))

    def _value(self, t: Term) -> tuple[Any, bool]:
        hit = self._values.get(t)
        if hit is not None:
            return hit
        if t[0] == "var":
            out: tuple[Any, bool] = (jax.numpy.asarray(self.args[t[1]]), True)
        elif t[0] == "const":
            out = (const_array(t, self.dtype), False)
        else:
            kids = [self._value(c) for c in t[1:]]
            fn, values = op(t[0]).jax, [v for v, _ in kids]
            if self.out_shape is not None and any(b for _, b in kids):
                out = (jax.vmap(fn, in_axes=tuple(0 if b else None for _, b in kids))(*values), True)
            else:  # scalar points: every operator is elementwise over them
                out = (fn(*values), any(b for _, b in kids))
            self._values_bytes += int(getattr(out[0], "nbytes", 0))
        self._values[t] = out
        return out

    def jit_errors(self, fn: Callable[..., Any]) -> np.ndarray:
        """Errors of a JAX function, jitted as users run it."""
        return self.errors(jax.jit(fn)(*self.args))


def program_callable(fn: Callable[..., Any], term: Term, dt: np.dtype[Any], names: list[str],
                     by_keyword: bool, out_shape: tuple[int, ...]) -> Callable[..., Any]:
    """``term`` as a callable with ``fn``'s signature (positional or keyword arguments ``names``); an
    array program's result reshaped or broadcast to ``out_shape``."""
    import jax.numpy as jnp

    array = is_array_program(term)

    @functools.wraps(fn)
    def improved(*args: Any, **kwargs: Any) -> Any:
        if by_keyword:
            bound = dict(zip(names, args))
            bound.update(kwargs)
            vals = [jnp.asarray(bound[n]) for n in names]
        else:
            vals = [jnp.asarray(a) for a in args]
        out = evaluate_jax(term, vals, dt)
        if not array:
            return out
        if int(np.prod(jnp.shape(out))) == int(np.prod(out_shape)):
            return jnp.reshape(out, out_shape)
        return jnp.broadcast_to(out, out_shape)

    return improved
