"""Stability rules for second moments the variance and centering rules do not see (issue 35).

- ``covariance_matrix``: ``x.T @ y / n - outer(mean(x, 0), mean(y, 0))`` (and ``einsum('ni,nj->ij')``,
  ``mu[:, None] * mu[None, :]``) becomes the contraction of centred columns (``forms.covariance``).
- ``mean_of_means``: a mean of equal-count group means is the mean over the union of the axes;
  under ``jax.vmap(..., axis_name=...)`` a ``lax.pmean`` (``psum`` over the batched axis, then a
  division) of per-device means is one. It is rewritten to the one mean, ``composable``: the
  ``variance`` and ``center`` rules then read the batch statistics of a vmapped batch norm as they
  read a plain one. ``psum`` of per-device sums is the sum over the union (no count condition).
- ``merged_variance``: the naive merge of two batches' sums and sums of squares becomes the
  variance of the two taken together (``forms.merged_variance``).

Each identity holds over the reals on the whole domain; each ``where`` checks from the shapes what
makes it hold (equal counts, the means of the same operand the contraction reads).
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

from ..engine._match import Match
from ..engine._pattern import any_of, const, fixed, op, param, square_of, var
from ..engine._rule import Rule
from ..forms import _moments as _fm

__all__ = ["COVARIANCE", "MEAN_OF_MEANS", "MERGED_VARIANCE", "STATS_RULES"]

x, a, b = var("x"), var("a"), var("b")


def _n(name: str) -> Any:
    return const(lambda v: v > 0 and math.isfinite(v), name=name)


def _mean(v: Any, axes: str, n: str, **kw: Any) -> Any:
    return op("div", op("reduce_sum", v, axes=param(axes)), _n(n), **kw)


def _real(m: Match, *names: str) -> bool:
    return all(jnp.issubdtype(m.aval(k).dtype, jnp.floating) for k in names)


def _ints(axes: Any) -> tuple[int, ...] | None:
    """The axes as ints, None where one is a name (a collective over a named mesh axis)."""
    try:
        return tuple(int(i) for i in axes)
    except (TypeError, ValueError):
        return None


# -------------------------------------------------------------------------------- covariance
# x.T @ y (a transpose, then the matmul) or einsum('ni,nj->ij', x, y) (contracting the rows), with
# leading batch axes where the program is vmapped; ``_covariance_where`` checks the numbering
_DOT = any_of(
    op("dot_general", op("transpose", a, permutation=param("perm")), b,
       dimension_numbers=param("dn")),
    op("dot_general", a, b, dimension_numbers=param("dn")))
# outer(mu_a, mu_b) and mu_a[:, None] * mu_b[None, :]: each mean broadcast along its own axis (the
# broadcasts are named: seen through as glue, an outer product would read as an element-wise one;
# glue=False below them, so their dimensions number the mean's own axes)
_OUTER = op("mul",
            op("broadcast_in_dim", _mean(a, "axes_a", "n_a", name="mean_a", keep=True, glue=False),
               broadcast_dimensions=param("bd_a")),
            op("broadcast_in_dim", _mean(b, "axes_b", "n_b", name="mean_b", keep=True, glue=False),
               broadcast_dimensions=param("bd_b")))


def _dn(dn: Any) -> Any:
    (lc, rc), (lb, rb) = dn
    return (_ints(lc), _ints(rc)), (_ints(lb), _ints(rb))


def _covariance_where(m: Match) -> bool:
    sa, sb = tuple(m.aval("a").shape), tuple(m.aval("b").shape)
    rank = len(sa)
    if rank < 2 or len(sb) != rank or sa[:-1] != sb[:-1] or sa[-2] == 0 or not _real(m, "a", "b"):
        return False
    k = rank - 2  # the row axis; the axes before it are batch axes (a vmapped program)
    batch = tuple(range(k))
    if "perm" in m.captures:  # x.T @ y: the transpose swaps the last two axes
        if _ints(m.captures["perm"]) != (*batch, k + 1, k):
            return False
        want = (((k + 1,), (k,)), (batch, batch))
    else:
        want = (((k,), (k,)), (batch, batch))
    if _dn(m.captures["dn"]) != want:
        return False
    if (_ints(m.captures["bd_a"]) != (*batch, k) or _ints(m.captures["bd_b"]) != (*batch, k + 1)
            or _ints(m.captures["axes_a"]) != (k,) or _ints(m.captures["axes_b"]) != (k,)):
        return False
    rows = float(sa[k])
    return m.captures["n"] == m.captures["n_a"] == m.captures["n_b"] == rows


def _covariance(a: Any, b: Any, mean_a: Any, mean_b: Any, **_: Any) -> Any:
    """x.T @ y / n - outer(mean(x), mean(y)) = (x - mean(x)).T @ (y - mean(y)) / n, each column
    centred by ``forms.center`` (exact deviations, 0 for a constant column)."""
    return _fm.covariance(a, None if b is a else b, mean_x=mean_a, mean_y=mean_b)


COVARIANCE = Rule(
    "covariance_matrix", op("sub", op("div", _DOT, _n("n")), _OUTER), _covariance, where=_covariance_where,
    example=lambda x: x.T @ x / x.shape[0] - jnp.outer(jnp.mean(x, 0), jnp.mean(x, 0)),
    example_shapes=((8, 3),), example_domain=(-1e15, 1e15),
    examples=((lambda x: jnp.einsum("ni,nj->ij", x, x) / 8 - jnp.mean(x, 0)[:, None]
               * jnp.mean(x, 0)[None, :], ((8, 3),), (-1e15, 1e15)),))


# ----------------------------------------------------------------------------- mean of means
# The inner reduction feeds the outer one directly (glue=False): the outer axes are then numbered
# in the inner result's own shape, which ``_union`` relies on.
_INNER_MEAN = _mean(x, "inner_axes", "n_in", name="inner", glue=False)
_MEAN_OF_MEANS = any_of(
    op("div", op("reduce_sum", _INNER_MEAN, axes=param("outer_axes")), _n("n_out")),
    # lax.pmean under jax.vmap(axis_name=...): a psum over the batched (positional) axis
    op("div", op("psum", _INNER_MEAN, axes=param("outer_axes"), axis_index_groups=None),
       _n("n_out")),
    fixed(op("psum", op("reduce_sum", x, axes=param("inner_axes"), name="inner", glue=False),
             axes=param("outer_axes"), axis_index_groups=None), sums=True))


def _union(m: Match) -> tuple[tuple[int, ...], int, int] | None:
    """The union of the inner and outer axes in x's numbering and the inner and outer counts;
    None where an axis is a name or the inner result is not x without its inner axes."""
    shape = tuple(m.aval("x").shape)
    inner, outer = _ints(m.captures["inner_axes"]), _ints(m.captures["outer_axes"])
    if inner is None or outer is None or not inner or not outer:
        return None
    kept = [i for i in range(len(shape)) if i not in inner]
    if tuple(m.aval("inner").shape) != tuple(shape[i] for i in kept):
        return None
    if any(j < 0 or j >= len(kept) for j in outer):
        return None
    union = tuple(sorted({*inner, *(kept[j] for j in outer)}))
    return (union, math.prod(shape[i] for i in inner),
            math.prod(shape[kept[j]] for j in outer))


def _mean_of_means_where(m: Match) -> bool:
    u = _union(m)
    if u is None or not _real(m, "x"):
        return False
    _, n_in, n_out = u
    if m.captures.get("sums"):
        return True  # a sum of sums is the sum over the union: no count condition
    # a mean of means is the mean only where every group has the same count: true of a reduction
    # over a rectangular array, checked here against the divisors the program wrote
    return m.captures["n_in"] == float(n_in) and m.captures["n_out"] == float(n_out) and n_in > 0


def _mean_of_means(x: Any, inner_axes: Any, outer_axes: Any, n_in: Any = None, n_out: Any = None,
                   sums: bool = False, **_: Any) -> Any:
    """mean(mean(x, inner), outer) = mean(x, inner + outer axes) for groups of equal count (each group
    is a slice of one array); sum(sum(x, inner), outer) = sum(x, inner + outer axes). Under jax.vmap a
    pmean (psum) over the batch axis is such an outer reduction."""
    inner = tuple(int(i) for i in inner_axes)
    kept = [i for i in range(x.ndim) if i not in inner]
    union = tuple(sorted({*inner, *(kept[int(j)] for j in outer_axes)}))
    total = jnp.sum(x, axis=union)
    if sums:
        return total
    count = math.prod(x.shape[i] for i in union)
    return total / jnp.asarray(count, x.dtype)  # div(reduce_sum, n): what variance/center read


# The examples' shapes: tests/test_rules_in_transforms.py holds a rewrite inside jit/cond/scan to 1
# bit of the top-level one; a cancelling sum of 24 or 13 uniform(-3, 3) values differs by 2 ulps
# between eager and compiled XLA (the program as written too), so shapes where it does not are used.
MEAN_OF_MEANS = Rule(
    "mean_of_means", _MEAN_OF_MEANS, _mean_of_means, where=_mean_of_means_where, composable=True,
    example=lambda x: jnp.mean(jnp.mean(x, 1), 0), example_shapes=((3, 5),),
    example_domain=(-1e30, 1e30),
    examples=(lambda x: jax.vmap(lambda r: lax.pmean(jnp.mean(r), "i"), axis_name="i")(x),
              lambda x: jax.vmap(lambda r: lax.psum(jnp.sum(r), "i"), axis_name="i")(x)))


# --------------------------------------------------------------------------- merged variance
def _sum_of(v: Any, axes: str) -> Any:
    return op("reduce_sum", v, axes=param(axes))


_MERGED = op("sub",
             op("div", op("add", _sum_of(square_of(a), "axes_a"), _sum_of(square_of(b), "axes_b")),
                _n("n")),
             # named: ``m * m`` reads one equation twice (an unnamed sub-pattern is swallowed once)
             square_of(op("div", op("add", _sum_of(a, "axes_a2"), _sum_of(b, "axes_b2")), _n("n2"),
                          name="merged_mean")))


def _merged_where(m: Match) -> bool:
    if not _real(m, "a", "b"):
        return False
    sa, sb = tuple(m.aval("a").shape), tuple(m.aval("b").shape)
    ax_a, ax_b = _ints(m.captures["axes_a"]), _ints(m.captures["axes_b"])
    if ax_a is None or ax_b is None or not ax_a or not ax_b:
        return False
    if ax_a != _ints(m.captures["axes_a2"]) or ax_b != _ints(m.captures["axes_b2"]):
        return False
    # the two sums add element by element (no broadcast): their kept shapes are equal
    if tuple(s for i, s in enumerate(sa) if i not in ax_a) != tuple(
            s for i, s in enumerate(sb) if i not in ax_b):
        return False
    count = math.prod(sa[i] for i in ax_a) + math.prod(sb[i] for i in ax_b)
    return count > 0 and m.captures["n"] == m.captures["n2"] == float(count)


def _merged_variance(a: Any, b: Any, axes_a: Any, axes_b: Any, **_: Any) -> Any:
    """(sum(a²) + sum(b²)) / n - ((sum(a) + sum(b)) / n)², n the two counts' sum, = the variance
    of a and b taken together, corrected two-pass over their concatenation."""
    return _fm.merged_variance(a, b, tuple(axes_a), tuple(axes_b))


def _merge_written(square: Any) -> Any:
    """The naive merge of two batches (rows), squares written with ``square``."""
    def merge(a: Any, b: Any) -> Any:
        n = a.shape[0] + b.shape[0]
        s, ss = jnp.sum(a, 0) + jnp.sum(b, 0), jnp.sum(square(a), 0) + jnp.sum(square(b), 0)
        return ss / n - square(s / n)
    return merge


# one program per spelling of the squares (x**2, jnp.square, x*x, x**2.0), all alike in one program
_MERGE_SPELLINGS = [_merge_written(f) for f in (lambda v: v ** 2, jnp.square, lambda v: v * v,
                                                lambda v: v ** 2.0)]
MERGED_VARIANCE = Rule(
    "merged_variance", _MERGED, _merged_variance, where=_merged_where,
    example=_MERGE_SPELLINGS[0], example_shapes=((8, 3), (4, 3)), example_domain=(-1e15, 1e15),
    examples=tuple(_MERGE_SPELLINGS[1:]))

#: The rules of this module, in the order the catalogue tries them (see ``_stability.STABILITY``).
STATS_RULES: tuple[Rule, ...] = (COVARIANCE, MERGED_VARIANCE, MEAN_OF_MEANS)
