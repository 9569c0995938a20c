"""The log of a product of factors and powers, as a sum of logs where the product leaves the range.

``log(a * b * c)``, ``log(x ** 12)``, ``log(1 / (2 * B) ** d)``, ``log(s / prod(x))``: the product
under the log overflows to inf or underflows to 0 (or a subnormal, which XLA flushes on CPU) long
before its log leaves the range (twelve factors of 1e4 in float32), and the log is then inf, -inf
or a handful of bits. Where the product is a normal float the program's own ``log(p)`` is kept, bit
for bit (near ``p = 1`` it is the better form: ``log a + log b`` carries an ulp of ``log a``); where it
is not, the sum ``sum_i k_i · log|f_i|`` (``k_i`` the factor's power, a reduced product's logs summed,
``log(exp(a)) = a``), NaN where the product's sign is negative (its log is NaN as written). The
derivative is ``sum_i k_i · df_i / f_i`` (a ``custom_jvp``): the program's own product, differentiated,
meets ``0 · inf`` where it overflowed, even where its log is not taken.

The catalogue's replacement for ``log_factors``, not exported by ``jst.rewrites.forms``.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp

from ..._dtypes import dtype_info
from . import _complements as _fc

__all__ = ["Factor", "log_factors"]

#: One factor of the product: ``(kind, power, axes)``; kind "leaf" (a value), "prod" (a reduced
#: product over ``axes``, keepdims=False as ``reduce_prod`` makes it), "exp" (``exp`` of the value),
#: "i0"/"i1" (the modified Bessel function of the value, its log ``log_i0``/``log_i1``).
Factor = tuple[str, float, tuple[int, ...]]


def log_factors(p: Any, factors: Sequence[Factor], values: Sequence[Any]) -> Any:
    """``log(p)`` for ``p = prod_i f_i ** k_i``, the program's ``log(p)`` where ``p`` is a normal
    float, ``sum_i k_i · log|f_i|`` elsewhere (NaN where the product's sign is negative).

    ``factors[i]`` says what ``values[i]`` is (see :data:`Factor`); a power is a Python number. The
    derivative is ``sum_i k_i · df_i / f_i`` everywhere, never through ``p`` (whose own equations,
    differentiated, meet ``0 · inf`` where it overflowed: ``(2B)**12``'s derivative is inf).

    Example: ``log_factors(a * b, [("leaf", 1, ()), ("leaf", 1, ())], [a, b])`` at ``a = 1e-30``,
    ``b = 1e-20`` (float32) is -115.1 (as written: ``log(0) = -inf``).
    """
    p = jnp.asarray(p)
    values = [v if isinstance(v, jax.Array) else jnp.asarray(v, p.dtype) for v in values]
    return _log_factors(tuple(tuple(f) for f in factors), p, *values)


_BESSEL = {"i0": _fc.log_i0, "i1": _fc.log_i1}
_LOGS = {"leaf": jnp.log, "prod": jnp.log, **_BESSEL}


@functools.partial(jax.custom_jvp, nondiff_argnums=(0,))
def _log_factors(factors: tuple[Factor, ...], p: Any, *values: Any) -> Any:
    info = dtype_info(p.dtype)
    ok = jnp.isfinite(p) & (jnp.abs(p) >= info.tiny)
    direct = jnp.log(jnp.where(ok, p, jnp.ones_like(p)))
    total = jnp.zeros_like(p)
    negative = jnp.zeros(p.shape, bool)
    for (kind, power, axes), v in zip(factors, values):
        if kind == "exp":  # log(exp(a)) = a, whatever exp(a) rounds to
            total = total + power * v
            continue
        logs = _LOGS[kind](jnp.abs(v))
        sign_neg = v < 0
        if kind == "prod":
            logs = jnp.sum(logs, axis=axes)
            sign_neg = (jnp.sum(sign_neg.astype(jnp.int32), axis=axes) % 2) == 1
        total = total + (logs if power == 1 else power * logs)
        if float(power).is_integer():
            if int(power) % 2:
                negative = negative ^ sign_neg
        else:  # a fractional power of a negative factor is NaN as written
            negative = negative | sign_neg
    fallback = jnp.where(negative, jnp.full_like(total, jnp.nan), total)
    return jnp.where(ok, direct, fallback)


@_log_factors.defjvp
def _log_factors_jvp(factors: tuple[Factor, ...], primals: Any, tangents: Any) -> Any:
    p, *values = primals
    _, *dvalues = tangents
    out = _log_factors(factors, p, *values)
    dout = jnp.zeros_like(out)
    for (kind, power, axes), v, dv in zip(factors, values, dvalues):
        if kind == "exp":
            dout = dout + power * dv
            continue
        if kind in _BESSEL:  # the forms' own exact derivatives (I1/I0, I0/I1 - 1/x)
            term = jax.jvp(_BESSEL[kind], (v,), (dv,))[1]
        else:
            term = dv / v  # d log|f| = df / f, the derivative of the product's log in its factor
        if kind == "prod":
            term = jnp.sum(term, axis=axes)
        dout = dout + (term if power == 1 else power * term)
    return out, dout


