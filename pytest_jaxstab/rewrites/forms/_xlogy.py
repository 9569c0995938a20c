"""Products of a factor and a log that are 0 where the factor is 0 (``xlogy``-style forms).

KL divergences, cross-entropies and entropies with probabilities or counts write ``t * log(p)``,
``t * log(t / p)`` or ``t * (log t - log p)``: where a target ``t`` is 0 and so is the log's argument,
``0 * -inf`` is NaN, and the sum over a distribution is NaN, where the limit along ``t = 0`` is 0
(SciPy's and JAX's ``xlogy`` convention). JAX's own ``xlogy`` has the value but not the derivative: its
rule is ``dx·log(y) + dy·x/y``, NaN at ``x = y = 0`` for either argument.

These forms replace the log's argument by 1 exactly where the factor and the argument are both 0
(the ratio's numerator and denominator both, for ``log(a / b)``), *before* the log, so no branch
ever evaluates ``log 0``: the value is the program's own expression everywhere else (same
operations, same rounding), 0 there, and the derivative is ordinary autodiff of that expression:
``log(y)`` in ``x`` (0 at ``x = y = 0``, the limit along ``y = 1``), ``x/y`` in ``y`` (0 where
``x = 0``), finite wherever the program's was, and finite where it was NaN.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp

__all__ = ["exp_times_difference", "xlog1py", "xlog_ratio", "xlogy", "xlogy_difference"]


def _safe(zero: Any, v: Any) -> Any:
    return jnp.where(zero, jnp.ones_like(v), v)


def xlogy(x: Any, y: Any) -> Any:
    """x·log(y), 0 where x = y = 0. Example: ``xlogy(0.0, 0.0)`` is 0 (``0 * log(0)`` is NaN)."""
    return x * jnp.log(_safe((x == 0) & (y == 0), y))


def xlog1py(x: Any, y: Any) -> Any:
    """x·log1p(y) (the ``(1 - t)·log(1 - p)`` of a binary cross-entropy, y = -p), 0 where x = 0 and
    y = -1. Example: ``xlog1py(0.0, -1.0)`` is 0."""
    return x * jnp.log1p(jnp.where((x == 0) & (y == -1), jnp.zeros_like(y), y))


def xlog_ratio(x: Any, a: Any, b: Any) -> Any:
    """x·log(a / b), 0 where x = a = 0 (the ratio 0/0 or 0/b): the KL term ``t·log(t / p)``.
    The quotient is formed once, as written (``log a - log b`` would cancel where a ≈ b)."""
    zero = (x == 0) & (a == 0)
    return x * jnp.log(_safe(zero, a) / _safe(zero, b))


def xlogy_difference(x: Any, a: Any, b: Any = None, c: Any = None, sign: float = 1.0) -> Any:
    """x·(log a - log b) (``c`` None), or x·(log a - c) (``b`` None), times ``sign`` on the bracket
    (-1: x·(c - log a) and x·(log b - log a)); a log's argument is 1 where x and it are 0. Example:
    ``xlogy_difference(0.0, 0.0, 0.0)`` is 0 (written: NaN)."""
    zx = x == 0
    first = jnp.log(_safe(zx & (a == 0), a))
    second = jnp.log(_safe(zx & (b == 0), b)) if b is not None else _safe(zx & jnp.isinf(c), c)
    return x * (sign * (first - second))


def exp_times_difference(a: Any, b: Any) -> Any:
    """exp(a)·(a - b), 0 where a = -inf: the KL term ``t·log(t/p)`` in log space (``a = log t``,
    ``b = log p``), whose written value at a log target of -inf is ``0·-inf = NaN`` (optax's
    ``kl_divergence_with_log_targets`` at a masked class). Each operand reads 0 there, so neither the
    value nor the derivative (0 in both) meets an inf. Example: ``exp_times_difference(-inf, 0.0)`` is 0.
    """
    gone = a == -jnp.inf
    a_safe = jnp.where(gone, jnp.zeros_like(a), a)
    b_safe = jnp.where(gone, jnp.zeros_like(b), b)
    return jnp.where(gone, jnp.zeros_like(a_safe), jnp.exp(a_safe) * (a_safe - b_safe))
