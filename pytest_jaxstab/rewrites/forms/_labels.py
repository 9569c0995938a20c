"""The negative log-likelihood of a label's logit, ``logsumexp(x) - x[label]``, value and gradient.

The cross-entropy with integer labels (optax's ``softmax_cross_entropy_with_integer_labels``, the
tutorial's ``-log(softmax(x)[label])``, ``logsumexp(x) - x[rows, labels]``) cancels where the label's
logit dominates its row: the loss is then ``log1p(r)``, ``r = sum_{j != label} exp(x_j - x_label)``,
a small number. The log-softmax form keeps the value, but its derivative in the label's logit is
``softmax_label - 1``, which cancels just the same (23 bits lost in float32 at x = [22, 0, 1, -3]).
The form below computes ``r`` without the cancelled 1, and its derivative is written out from the
same sum: ``-r / (1 + r)`` in the label's logit, ``exp(x_j - x_label) / (1 + r)`` in another, each a
few roundings from exact (autodiff of ``log1p(r)`` would give the first as minus the sum of the
others' derivatives, which loses the subnormal ones XLA:CPU flushes to zero: 5% of it at
x = [90, 0, -20, 3] in float32).

``logit_likelihood`` is the log-likelihood of ``k`` successes in ``n`` trials with logit ``x`` (the
Bernoulli's at ``n = 1``), ``k·x - n·softplus(x)`` written as ``-k·softplus(-x) - (n - k)·softplus(x)``
where ``0 <= k <= n`` (both terms <= 0: nothing cancels), with its partial derivatives written out.

``masked_log_prob`` is the log-probability a weight multiplies, read as 0 where the weight is 0 and the
log-probability -inf (a masked class: ``0·-inf`` is NaN as written, 0 in the limit along the weight).

A catalogue replacement, not exported in ``jst.rewrites.forms`` (its arguments describe the label
by a mask that the rule builds from the program's selection).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

from ._core import _log1p_rest, softmax, softplus

__all__ = ["label_nll", "logit_likelihood", "masked_log_prob"]


def label_nll(x: Any, picked: Any, mask: Any, axes: Sequence[int]) -> Any:
    """``logsumexp(x, axes) - picked``, where ``picked`` is the entry of each row of ``x`` (the row
    being what ``axes`` reduces) that ``mask`` (bool, ``x``'s shape) marks, one per row.

    ``picked`` must be that entry as the program selected it (its derivative flows back through the
    selection to the label's logit), with the shape of the rows (``x`` without ``axes``).

    Where the label's logit is its row's largest (finite): ``log1p(sum_{j != label} exp(x_j -
    x_label))``, every term <= 1 and none cancelled, so value and derivative are accurate. Elsewhere
    ``(m - picked) + log1p(sum_{j != argmax} exp(x_j - m))`` (m the max, the difference exact where
    it is small), and the derivatives are ``softmax - onehot`` with ``softmax_label <= 1/2``: no
    cancellation there. Non-finite rows (an inf or NaN logit) take that form too, so they are what
    the program gave (NaN for ``inf - inf``).

    Example: at ``x = [22., 0., 1., -3.]``, label 0, ``label_nll(x, x[0], jnp.arange(4) == 0, (0,))``
    is 3.8e-10 in float32 and its gradient in ``x[0]`` is -3.8e-10, each within an ulp or two (the
    written ``logsumexp(x) - x[0]`` is 0, its gradient there 0).
    """
    ax = tuple(int(a) % max(x.ndim, 1) for a in axes)
    return _label_nll(x, picked, mask, ax)


def _parts(x: Any, picked: Any, mask: Any, ax: tuple[int, ...]) -> tuple[Any, Any, Any]:
    """The loss, ``P`` (x's shape) and ``Q`` (the rows'): its derivative is ``sum(P·dx) - Q·dpicked``."""
    xl = jnp.expand_dims(picked, ax)
    z = x - xl
    row_max = lax.stop_gradient(jnp.max(x, axis=ax, keepdims=True))
    top = (xl >= row_max) & jnp.isfinite(xl)
    # z <= 0 everywhere in a row whose label is its max; in the other rows the branch is not taken,
    # and 0 keeps its exp finite there
    zs = jnp.where(z <= 0, z, jnp.zeros_like(z))
    # r = exp(m)·sum exp(z_j - m) over the others, m their largest z (a constant: it cancels): no
    # term is subnormal where r is normal (XLA:CPU flushes subnormals to zero, which lost 5% of
    # r = e^-87 + e^-90 in float32), and no rounding of an exponent (exp(m + log(sum)) would
    # lose |m|·eps relative)
    others = jnp.where(mask, jnp.full_like(zs, -jnp.inf), zs)
    m = jnp.max(others, axis=ax, keepdims=True)
    m = jnp.where(jnp.isfinite(m), m, jnp.zeros_like(m))  # no other finite logit: r = 0
    e, em = jnp.exp(others - m), jnp.exp(m)
    rest = em * jnp.sum(e, axis=ax, keepdims=True)
    near = jnp.log1p(rest)
    # the label below the max: (m - x_label) + log1p(the rest), as -log_softmax(x)[label] is, not
    # logsumexp(x) - x_label, whose rounding of a large logsumexp is not small beside a loss near
    # log 2 (10 bits at float64 logits near 6e3 that tie to the last bits)
    shift, l1p = _log1p_rest(x, ax)
    far = (shift - xl) + l1p
    p = jnp.where(top, e * (em / (1 + rest)), softmax(x, ax))
    q = jnp.where(top, rest / (1 + rest), jnp.ones_like(rest))
    return (jnp.squeeze(jnp.where(top, near, far), axis=ax), p, jnp.squeeze(q, axis=ax))


@functools.partial(jax.custom_jvp, nondiff_argnums=(3,))
def _label_nll(x: Any, picked: Any, mask: Any, ax: tuple[int, ...]) -> Any:
    return _parts(x, picked, mask, ax)[0]


@_label_nll.defjvp
def _label_nll_jvp(ax: tuple[int, ...], primals: Any, tangents: Any) -> Any:
    (x, picked, mask), (tx, tp, _) = primals, tangents
    out, p, q = _parts(x, picked, mask, ax)
    return out, jnp.sum(p * tx, axis=ax) - q * tp


def masked_log_prob(t: Any, log_p: Any) -> Any:
    """``log_p`` with 0 where ``t`` is 0 and ``log_p`` is -inf, so that ``t · log_p`` is 0 there (the
    limit along ``t = 0``; ``0·-inf`` is NaN) and its gradient is finite: ``d/dlog_p`` is ``t``, 0
    at the masked class, and ``d/dt`` reads 0 there.

    Example: ``0.0 * masked_log_prob(0.0, -jnp.inf)`` is 0 (``0.0 * -jnp.inf`` is NaN).
    """
    masked = (t == 0) & jnp.isneginf(log_p)
    return jnp.where(masked, jnp.zeros_like(log_p), log_p)


@functools.partial(jax.custom_jvp, nondiff_argnums=(1, 2))
def softmax_complement(x: Any, ax: tuple[int, ...], written: bool = False) -> Any:
    """``1 - softmax(x)`` over the axes ``ax`` as ``-expm1(log_softmax(x))``: the other classes' mass,
    a normal float where softmax rounds to 1 and the difference as written to 0.

    Its derivative is the program's own: autodiff of ``1 - exp(x) / sum(exp(x))`` where the program
    wrote the quotient (``written``), of ``1 - jax.nn.softmax(x)`` where it called the library, the same
    operations as the program as written. The rule repairs the value and leaves the derivative as the
    program had it: the form's own derivative, ``-exp(l)·dl``, differs from it by a rounding where the
    exact derivative is identically 0 (``grad(sum(1 - softmax(x)))``, whose written spellings give
    exactly 0), which a soundness check of the gradient counts against a rule."""
    from ._core import log_softmax

    return -jnp.expm1(log_softmax(x, ax))


@softmax_complement.defjvp
def _softmax_complement_jvp(ax: tuple[int, ...], written: bool, primals: Any, tangents: Any) -> Any:
    (x,), (t,) = primals, tangents

    def as_written(v: Any) -> Any:
        if written:
            e = jnp.exp(v)
            return 1 - e / jnp.sum(e, axis=ax, keepdims=True)
        return 1 - jax.nn.softmax(v, axis=ax)

    return softmax_complement(x, ax, written), jax.jvp(as_written, (x,), (t,))[1]


@jax.custom_jvp
def logit_likelihood(x: Any, k: Any, n: Any) -> Any:
    """``k·x - n·softplus(x)``: ``-k·softplus(-x) - (n - k)·softplus(x)`` where ``0 <= k <= n``, the
    difference as written (with softplus's stable form) elsewhere. Its partials are written out:
    ``x`` in ``k`` (autodiff of the split would give ``softplus(x) - softplus(-x)``, 0 for tiny x),
    ``-softplus(x)`` in ``n``, and ``k·sigmoid(-x) - (n - k)·sigmoid(x)`` in ``x`` inside
    (``k - n·sigmoid(x)`` outside).

    Example: ``logit_likelihood(20.0, 1.0, 1.0)`` is ``-2.06e-9`` in float32 (written: 0).
    """
    return _logit_value(x, k, n)


def _times_tail(c: Any, y: Any, tail: Any) -> Any:
    """``c·tail(y)`` for ``tail`` softplus or the logistic, both ``e^y`` to within ``e^y`` relative where
    ``e^y`` is below the dtype's smallest normal: there ``tail(y)`` is subnormal, which XLA:CPU flushes to
    0, while ``c·e^y`` may be normal (20 successes at logit 90 in float32: -1.6e-38, written 0). Computed
    as ``(c·e^(y+K))·e^-K`` with an integer ``K``: ``y + K`` is exact (an integer added where it lowers
    the magnitude), so three roundings; elsewhere ``c·tail(y)``."""
    dtype = jnp.result_type(y)
    tiny = float(jnp.finfo(dtype).tiny)
    shift = float(int(-math.log(tiny) / 4))  # e^-K stays normal; y + K < 0 for every y below log(tiny)
    low = y < math.log(tiny)
    scaled = (c * jnp.exp(jnp.where(low, y, -shift) + shift)) * jnp.asarray(math.exp(-shift), dtype)
    return jnp.where(low, scaled, c * tail(y))


def _logit_value(x: Any, k: Any, n: Any) -> Any:
    inside = (k >= 0) & (k <= n)
    split = -(_times_tail(k, -x, softplus) + _times_tail(n - k, x, softplus))
    return jnp.where(inside, split, k * x - n * softplus(x))


@logit_likelihood.defjvp
def _logit_likelihood_jvp(primals: Any, tangents: Any) -> Any:
    (x, k, n), (tx, tk, tn) = primals, tangents
    inside = (k >= 0) & (k <= n)
    up = lax.logistic(x)
    slope = jnp.where(inside, _times_tail(k, -x, lax.logistic) - _times_tail(n - k, x, lax.logistic),
                      k - n * up)
    return _logit_value(x, k, n), slope * tx + x * tk - softplus(x) * tn
