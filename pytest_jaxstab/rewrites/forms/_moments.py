"""Stable forms for second moments across arrays: covariance matrices and merged batches.

``covariance`` contracts centred columns instead of subtracting the outer product of the means
from the mean outer product (the one-pass form loses every digit of the covariance where the
spread is below the rounding of ``mean(x·y)``); ``merged_variance`` is the variance of two batches
taken together, which programs write as the naive merge of their sums and sums of squares. Both
are ordinary JAX functions, exported through ``jst.rewrites.forms``.
"""

from __future__ import annotations

import math
from typing import Any

import jax.numpy as jnp
from jax import lax

from ._core import _axes, variance
from ._stats import center

__all__ = ["covariance", "merged_variance"]


def covariance(x: Any, y: Any = None, mean_x: Any = None, mean_y: Any = None) -> Any:
    """The (biased, divided by n) covariance matrix of the columns of ``x`` (n, d) with those of
    ``y`` (n, e), of shape (d, e): ``x.T @ y / n - outer(mean(x, 0), mean(y, 0))`` computed as
    ``xc.T @ yc / n`` with ``xc = forms.center(x, 0)`` (``y`` defaults to ``x``). Leading axes
    are batch axes: ``x`` (..., n, d) and ``y`` (..., n, e) give (..., d, e).

    As written, the one-pass form subtracts two numbers of the size of the squared mean: for
    columns of mean 1e4 and standard deviation 1 in float32 its rounding (an ulp of 1e8) is the
    size of the covariance itself. The centred columns carry an ulp of the spread, not of the
    mean (see :func:`center`), so the contraction is accurate to a few ulps of the product of the
    spreads, and a constant column gives exactly 0 in its row and column. ``mean_x``, ``mean_y``:
    the program's column means, used only to pick the shift of the centring. The contraction runs
    at ``Precision.HIGHEST``: a reduced-precision matmul (TF32 on GPUs) would round the centred
    values to 10 bits. The derivative is the formula's (``center``'s derivative is ẋ - mean(ẋ)).

    Example: ``forms.covariance(1e4 + jnp.eye(3, dtype=jnp.float32))`` is
    ``eye(3)/3 - 1/9`` to an ulp (the one-pass form gives -8 for every entry).
    """
    x = jnp.asarray(x)
    rows = x.ndim - 2
    xc = center(x, (rows,), mean=mean_x)
    yc = xc if y is None else center(jnp.asarray(y), (rows,), mean=mean_y)
    n = x.shape[rows]
    prod = jnp.einsum("...ni,...nj->...ij", xc, yc, precision=lax.Precision.HIGHEST)
    return prod / jnp.asarray(n, prod.dtype)


def merged_variance(a: Any, b: Any, axes_a: Any = 0, axes_b: Any = 0) -> Any:
    """The variance (divided by the count) of ``a`` over ``axes_a`` and ``b`` over ``axes_b`` taken
    together: what ``(sum(a²) + sum(b²)) / n - ((sum(a) + sum(b)) / n)²``, n the two counts'
    sum, means. The kept axes of ``a`` and ``b`` must have equal shapes; the result has that shape.

    The batches are flattened along their reduced axes and concatenated, and the variance is the
    corrected two-pass form of :func:`variance` over the concatenation (scaled, and with its
    written derivative). A merge of the two batches' own statistics (Chan, Golub and LeVeque) would
    avoid the copy but needs the difference of the two means, which carries an ulp of the mean
    unless both batches are shifted by a common value first; the concatenation is the simpler
    exact-where-the-mathematics-is form.

    Example: batches of 16 and 5 values 1e4 + 1e-3·N(0, 1) in float32: the naive merge returns 0
    (its rounding, ulps of 1e8, dwarfs the variance 6e-7); this form the variance to an ulp.
    """
    a, b = jnp.asarray(a), jnp.asarray(b)
    ax_a, ax_b = _axes(a, axes_a), _axes(b, axes_b)
    flat = [_front(v, ax) for v, ax in ((a, ax_a), (b, ax_b))]
    if flat[0].shape[1:] != flat[1].shape[1:]:
        raise ValueError(f"merged_variance: the kept axes differ ({flat[0].shape[1:]} and "
                         f"{flat[1].shape[1:]})")
    dtype = jnp.result_type(a, b)
    both = jnp.concatenate([flat[0].astype(dtype), flat[1].astype(dtype)], axis=0)
    return variance(both, (0,))


def _front(v: Any, ax: tuple[int, ...]) -> Any:
    """``v`` with the axes ``ax`` moved to the front and flattened into one (the rest in order)."""
    rest = tuple(i for i in range(v.ndim) if i not in ax)
    moved = jnp.transpose(v, ax + rest)
    count = math.prod(v.shape[i] for i in ax)
    return moved.reshape((count, *(v.shape[i] for i in rest)))
