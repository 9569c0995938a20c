"""The stable forms the catalogue rewrites into, as ordinary JAX functions.

Each is usable on its own (``jst.rewrites.forms.logsumexp(x, axes=(0,))``) and is what the
benchmarks compare against the library's hand-written functions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

__all__ = ["hypot", "inv_jitter", "log_softmax", "logsumexp", "norm", "one_minus_cos", "softmax",
           "variance"]

Axes = Sequence[int] | int | None


def _axes(x: Any, axes: Axes) -> tuple[int, ...]:
    if axes is None:
        return tuple(range(jnp.ndim(x)))
    if isinstance(axes, int):
        axes = (axes,)
    return tuple(int(a) % max(jnp.ndim(x), 1) for a in axes)


def _max_shift(x: Any, axes: tuple[int, ...]) -> tuple[Any, Any]:
    """``(m, shift)``: the max over ``axes`` (keepdims) and the same with ±inf/NaN replaced by 0.

    The shift is under ``stop_gradient``: it cancels mathematically, so it must not be differentiated
    (its derivative would be 0 * inf at ties of ±inf, or a wrong one-hot term).
    """
    m = lax.stop_gradient(jnp.max(x, axis=axes, keepdims=True))
    return m, jnp.where(jnp.isfinite(m), m, jnp.zeros_like(m))


def _log1p_rest(x: Any, axes: tuple[int, ...]) -> tuple[Any, Any]:
    """``(shift, log1p(s))`` with ``s`` = sum of exp(x_j - m) over the non-maximal terms.

    The maximal term is exp(0) = 1 exactly and is taken out so the small rest keeps its digits
    (log(1 + s) through ``log1p``). Ties: the other maximal terms contribute exactly 1 each
    (``count - 1``). Each maximal term enters as ``expm1(x_j - m)``, which is exactly 0 but has
    derivative 1: the gradient stays softmax without differentiating the max.
    """
    m, shift = _max_shift(x, axes)
    z = x - shift
    is_max = x == m
    count = jnp.sum(is_max, axis=axes, keepdims=True).astype(x.dtype)
    terms = jnp.where(is_max, jnp.expm1(z), jnp.exp(z))
    rest = jnp.sum(terms, axis=axes, keepdims=True) + (count - 1)
    return shift, jnp.log1p(rest)


def logsumexp(x: Any, axes: Axes = None) -> Any:
    """log(sum(exp(x))) over ``axes`` as ``m + log1p(sum_{j not max} exp(x_j - m))``, m = max(x).

    Exact to the last bit where the library's ``m + log(sum(exp(x - m)))`` loses the small terms
    (x = [1e-20, -20, ...]: the result is about 3e-8, and ``log(1 + 3e-8)`` is 0 in float32).
    All -inf gives -inf; +inf gives +inf; the gradient is softmax(x) and finite.
    """
    ax = _axes(x, axes)
    shift, l1p = _log1p_rest(x, ax)
    return jnp.squeeze(shift + l1p, axis=ax)


def log_softmax(x: Any, axes: Axes = -1) -> Any:
    """x - logsumexp(x) as ``(x - m) - log1p(sum_{j not max} exp(x_j - m))``.

    ``x - logsumexp(x)`` subtracts two nearly equal large numbers for the maximal entry; this form
    gives (x - m) exactly and subtracts only the small log1p term.
    """
    ax = _axes(x, axes)
    shift, l1p = _log1p_rest(x, ax)
    return (x - shift) - l1p


def softmax(x: Any, axes: Axes = -1) -> Any:
    """exp(x) / sum(exp(x)) as ``exp(x - m) / sum(exp(x - m))``, m = max(x) (no overflow)."""
    ax = _axes(x, axes)
    _, shift = _max_shift(x, ax)
    e = jnp.exp(x - shift)
    return e / jnp.sum(e, axis=ax, keepdims=True)


def hypot(x: Any, y: Any) -> Any:
    """sqrt(x² + y²) without overflow or underflow of the squares (``jnp.hypot``)."""
    return jnp.hypot(x, y)


def norm(x: Any, axes: Axes = None) -> Any:
    """sqrt(sum(x²)) scaled by m = max|x|: ``m * sqrt(sum((x/m)²))``; 0 for the zero vector.

    The scale is under ``stop_gradient`` (it cancels), so the gradient is x / norm(x).
    """
    ax = _axes(x, axes)
    m = lax.stop_gradient(jnp.max(jnp.abs(x), axis=ax, keepdims=True))
    safe = (m > 0) & jnp.isfinite(m)
    scale = jnp.where(safe, m, jnp.ones_like(m))
    y = x / scale
    r = scale * jnp.sqrt(jnp.sum(y * y, axis=ax, keepdims=True))
    return jnp.squeeze(r, axis=ax)


def variance(x: Any, axes: Axes = None) -> Any:
    """mean(x²) - mean(x)² as the corrected two-pass form (Chan, Golub and LeVeque).

    ``d = x - mean(x)``; ``mean(d²) - mean(d)²``. The second term corrects the rounding error of the
    first mean; the one-pass form loses every digit when the spread is below the rounding error of
    mean(x²) (values clustered around 1e4 in float32).
    """
    ax = _axes(x, axes)
    mu = jnp.mean(x, axis=ax, keepdims=True)
    d = x - mu
    return jnp.mean(d * d, axis=ax) - jnp.square(jnp.mean(d, axis=ax))


def one_minus_cos(x: Any) -> Any:
    """1 - cos(x) as 2·sin(x/2)², exact near 0 where 1 - cos(x) cancels to 0."""
    s = jnp.sin(x * 0.5)
    return 2 * (s * s)


def inv_jitter(a: Any) -> Any:
    """inv(A + εI), ε = 8·eps(dtype)·mean|diag(A)|: regularised inverse (CHANGES the result)."""
    n = a.shape[-1]
    eps = jnp.finfo(a.dtype).eps
    scale = jnp.mean(jnp.abs(jnp.diagonal(a, axis1=-2, axis2=-1)), axis=-1)[..., None, None]
    jitter = 8 * eps * jnp.where(scale > 0, scale, jnp.ones_like(scale))
    return jnp.linalg.inv(a + jitter * jnp.eye(n, dtype=a.dtype))


def softplus(x: Any) -> Any:
    """log(1 + exp(x)) = max(x, 0) + log1p(exp(-|x|)) (``jax.nn.softplus``)."""
    return jax.nn.softplus(x)
