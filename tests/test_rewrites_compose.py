"""The catalogue composes (issue 26, item 3): forms fixed alone stay fixed inside larger expressions.

Four kinds, each in several spellings written here (shared intermediates, operand order, constants
folded or not, ``jax.nn`` vs written sigmoid, axes, batch shapes), in float32 and float64:

1. a stable log form behind a selection (``log(where(c, p, 1 - p))``, the focal loss's ``1 - pt``);
2. logs of quotients whose parts have stable log forms (``log(exp(a) / sum(exp(v)))``, InfoNCE);
3. constants folded between rules (``log(0.5 * (1 + tanh(x / 2)))`` ends as a log-sigmoid);
4. the expanded covariance ``mean(x*y) - mean(x)*mean(y)``.

Each family is drawn with a fixed seed over magnitudes where the written form fails, and judged
against mpmath at 256 bits (``tests.test_rewrites_generalise``): ``jst.stabilize(f)`` is within
8 bits max and 2 bits mean, never non-finite where the exact value is finite, never worse than the
program as written (one bit, one ulp, of slack: a rounding placed differently), and the rules named
fired. The covariance of offset data is ill-conditioned with respect to the inputs; its test bounds
the error by the conditioning (stated there). Gradients are finite and, where written out here,
within stated bits of the exact derivative. Negative tests: a ``where`` with nothing to fix is left
as written, and the passes reach a fixed point.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import pytest_jaxstab as jst
from pytest_jaxstab.oracles import error_bits
from pytest_jaxstab.oracles.core._rounding import round_to_dtype
from pytest_jaxstab.rewrites import STABILITY, rewrite_jaxpr
from tests.test_rewrites_generalise import MP

F32, F64 = np.float32, np.float64


def _sig(v: Any) -> Any:
    return 1 / (1 + MP.exp(-v))


def _sp(v: Any) -> Any:  # softplus
    return MP.log1p(MP.exp(v))


def _lse_minus(r: list[Any], a: Any) -> Any:
    """logsumexp(r) - a without cancellation at 256 bits (where a is r's dominant entry the result
    is e^-250 or smaller, below the working precision of lse(r) - a): the terms equal to a count
    exactly, the others enter a log1p."""
    ties = sum(1 for u in r if u == a)
    rest = MP.fsum(MP.exp(u - a) for u in r if u != a)
    return MP.log(rest) if ties == 0 else MP.log(ties) + MP.log1p(rest / ties)


def _err(got: Any, exact: np.ndarray, dtype: Any) -> np.ndarray:
    """Bits of error per element against exact values (an object array of mpf)."""
    want = round_to_dtype(exact.reshape(np.shape(got)), dtype)
    return error_bits(np.asarray(got), want)


def _x64(dtype: Any) -> Any:
    return jax.enable_x64(dtype == F64)


@dataclasses.dataclass(frozen=True)
class Family:
    """A spelling, its inputs per dtype (a seeded generator), its exact value and the rules that
    must fire."""

    id: str
    fn: Callable[..., Any]
    draw: Callable[[np.random.Generator, Any], tuple[np.ndarray, ...]]
    exact: Callable[..., np.ndarray]  # numpy float64 arrays -> object array of mpf, output's shape
    rules: tuple[str, ...]

    def __str__(self) -> str:
        return self.id


def _elementwise(f: Callable[..., Any]) -> Callable[..., np.ndarray]:
    def exact(*args: np.ndarray) -> np.ndarray:
        b = np.broadcast_arrays(*args)
        out = [f(*(MP.mpf(float(a.flat[k])) for a in b)) for k in range(b[0].size)]
        return np.array(out, dtype=object).reshape(b[0].shape)

    return exact


# ------------------------------------------------------------------------------ 1. log of a where
def _focal(z: Any, y: Any) -> Any:  # the focal loss as torchvision / detectron write it
    p = jax.nn.sigmoid(z)
    pt = jnp.where(y == 1, p, 1 - p)
    return -((1 - pt) ** 2) * jnp.log(pt)


def _focal_alpha(z: Any, y: Any) -> Any:  # alpha-weighted, the other branch order, gamma 1.5
    p = 1.0 / (1.0 + jnp.exp(-z))
    pt = jnp.where(y == 0, 1.0 - p, p)
    alpha = jnp.where(y == 0, 0.75, 0.25)  # a where of constants: nothing to fix
    return -alpha * (1.0 - pt) ** 1.5 * jnp.log(pt)


def _bce_where(z: Any, y: Any) -> Any:  # -log(pt) alone, a lax.select, a batch of rows
    p = lax.logistic(z)
    pt = lax.select(y > 0.5, p, 1 - p)
    return -jnp.log(pt)


def _bce_where_mean(z: Any, y: Any) -> Any:  # sigmoid also returned: the shared p stays
    p = jax.nn.sigmoid(z)
    return -jnp.mean(jnp.log(jnp.where(y == 1, p, 1 - p)), axis=-1), p


def _mp_focal(gamma: float, alpha: tuple[float, float] | None = None) -> Callable[..., Any]:
    def f(z: Any, y: Any) -> Any:
        # 1 - pt and log(pt) from z (1 - sigmoid(189) at 256 bits would be 0)
        s = 1 if y == 1 else -1
        a = 1 if alpha is None else (alpha[0] if y == 1 else alpha[1])
        return a * _sig(-s * z) ** gamma * _sp(-s * z)

    return f


def _mp_bce(z: Any, y: Any) -> Any:
    return _sp(-z) if y == 1 else _sp(z)


def _labels_logits(scale32: float, scale64: float, shape: tuple[int, ...] = (64,)) -> Any:
    def draw(rng: np.random.Generator, dtype: Any) -> tuple[np.ndarray, ...]:
        scale = scale32 if dtype == F32 else scale64
        # half the logits spread over the whole range, half near 0 (well inside the body)
        z = np.where(rng.random(shape) < 0.5, rng.uniform(-scale, scale, shape), rng.normal(0, 3, shape))
        return z.astype(dtype), (rng.random(shape) < 0.5).astype(dtype)

    return draw


def _mean_rows(f: Callable[..., Any]) -> Callable[..., np.ndarray]:
    per = _elementwise(f)

    def exact(z: np.ndarray, y: np.ndarray) -> np.ndarray:
        e = per(z, y)
        return np.array([MP.fsum(r) / e.shape[-1] for r in e], dtype=object)

    return exact


# Logits up to 25 (float32) for the focal loss: beyond, (1 - pt)**2 * log(pt) is ~exp(-3|z|) and
# falls below the smallest normal float32, which XLA:CPU flushes (docs/architecture.md, section 3).
# -log(pt) alone is ~exp(-|z|): up to 80 in float32, 700 in float64.
WHERE = [
    Family("focal[jax.nn.sigmoid, where(y == 1, p, 1 - p)]", _focal, _labels_logits(25.0, 200.0),
           _elementwise(_mp_focal(2.0)),
           ("log_where", "one_minus_where", "log_sigmoid", "one_minus_sigmoid")),
    Family("focal[written sigmoid, alpha, where(y == 0, 1 - p, p), gamma 1.5]", _focal_alpha,
           _labels_logits(25.0, 200.0), _elementwise(_mp_focal(1.5, (0.25, 0.75))),
           ("log_where", "one_minus_where")),
    Family("bce[lax.select(y > 0.5, p, 1 - p), rows]", _bce_where, _labels_logits(80.0, 700.0, (4, 16)),
           _elementwise(_mp_bce), ("log_where", "log_sigmoid")),
]


# ------------------------------------------------------------------------- 2. log of a quotient
def _infonce_separate(a: Any, v: Any) -> Any:  # the positive logit's exp computed on its own
    return -jnp.log(jnp.exp(a) / jnp.sum(jnp.exp(v), axis=-1))


def _infonce_selected(v: Any) -> Any:  # the positive selected from exp(v / t), a temperature
    e = jnp.exp(v / 0.1)
    return -jnp.log(e[:, 0] / jnp.sum(e, axis=1))


def _infonce_keepdims(v: Any) -> Any:  # keepdims, the entry picked as a column, t written as 1/t
    logits = v * 4.0
    e = jnp.exp(logits)
    return -jnp.log(jnp.exp(logits[:, :1]) / jnp.sum(e, axis=1, keepdims=True))


def _log_ratio_softplus(a: Any, b: Any) -> Any:  # log(exp(a) / (1 + exp(b))) = a - softplus(b)
    return jnp.log(jnp.exp(a) / (1 + jnp.exp(b)))


def _draw_rows(scale32: float, scale64: float, shape: tuple[int, ...] = (4, 16)) -> Any:
    def draw(rng: np.random.Generator, dtype: Any) -> tuple[np.ndarray, ...]:
        scale = scale32 if dtype == F32 else scale64
        v = rng.normal(0, 1, shape) * scale
        v[0, 0] = v[0].max() + 40 * scale / 8  # a dominant positive: the loss is a tiny log1p
        return (v.astype(dtype),)

    return draw


def _draw_pos_and_rows(rng: np.random.Generator, dtype: Any) -> tuple[np.ndarray, ...]:
    scale = 30.0 if dtype == F32 else 200.0
    v = rng.normal(0, 1, (4, 16)) * scale
    v[1, 3] += 40.0  # one row with a dominant term
    a = v[:, 3].copy()  # the positive is an entry of its row
    return a.astype(dtype), v.astype(dtype)


def _rows_exact(pick: Callable[[list[Any]], Any], scale: float = 1.0) -> Callable[..., np.ndarray]:
    def exact(*args: np.ndarray) -> np.ndarray:
        v = args[-1]
        rows = [[MP.mpf(float(u)) * scale for u in r] for r in v]
        return np.array([_lse_minus(r, pick(r)) for r in rows], dtype=object)

    return exact


def _sep_exact(a: np.ndarray, v: np.ndarray) -> np.ndarray:
    rows = [[MP.mpf(float(u)) for u in r] for r in v]
    return np.array([_lse_minus(r, MP.mpf(float(x))) for x, r in zip(a, rows)], dtype=object)


def _infonce_selected_exact(v: np.ndarray) -> np.ndarray:
    # the program divides by the float 0.1 (0.1 rounded to the dtype), so the reference does too
    t = MP.mpf(float(np.asarray(0.1, v.dtype)))
    rows = [[MP.mpf(float(u)) / t for u in r] for r in v]
    return np.array([_lse_minus(r, r[0]) for r in rows], dtype=object)


def _infonce_split(a: Any, v: Any) -> Any:  # the positive added to the negatives' sum
    pos = jnp.exp(a)
    return -jnp.log(pos / (pos + jnp.sum(jnp.exp(v), axis=-1)))


def _split_exact(a: np.ndarray, v: np.ndarray) -> np.ndarray:
    rows = [[MP.mpf(float(u)) for u in r] for r in v]
    return np.array([_sp(_lse_minus(r, MP.mpf(float(x)))) for x, r in zip(a, rows)], dtype=object)


def _draw_split(rng: np.random.Generator, dtype: Any) -> tuple[np.ndarray, ...]:
    # logits of similarities scaled by 1/t: the positive within ±8 of the negatives' max (beyond,
    # the loss's relative condition number |a| grows with the logits' size, not the algorithm's)
    scale = 30.0 if dtype == F32 else 300.0
    v = rng.normal(0, 1, (4, 16)) * scale
    a = v.max(axis=1) + rng.uniform(-8, 8, 4)
    return a.astype(dtype), v.astype(dtype)


def _clip_diagonal(logits: Any) -> Any:  # CLIP-style: the positives on a similarity matrix's diagonal
    e = jnp.exp(logits / 0.5)  # a temperature that is a power of two: the reference needs no rounding
    return -jnp.log(jnp.diagonal(e) / jnp.sum(e, axis=1))


def _draw_square(rng: np.random.Generator, dtype: Any) -> tuple[np.ndarray, ...]:
    scale = 20.0 if dtype == F32 else 150.0
    v = rng.normal(0, 1, (6, 6)) * scale
    v[2, 2] = v[2].max() + 30.0  # a dominant positive
    return (v.astype(dtype),)


def _clip_exact(v: np.ndarray) -> np.ndarray:
    rows = [[MP.mpf(float(u)) * 2 for u in r] for r in v]
    return np.array([_lse_minus(r, r[k]) for k, r in enumerate(rows)], dtype=object)


QUOTIENT = [
    Family("clip[diagonal(exp(logits / t)) / sum(axis=1)]", _clip_diagonal, _draw_square, _clip_exact,
           ("log_softmax_entry",)),
    Family("infonce[exp(a) / (exp(a) + sum(exp(neg)))]", _infonce_split, _draw_split, _split_exact,
           ("log_positive_over_all",)),
    Family("infonce[exp(a) / sum(exp(v))]", _infonce_separate, _draw_pos_and_rows, _sep_exact,
           ("log_softmax_entry",)),
    Family("infonce[exp(v / t)[:, 0] / sum]", _infonce_selected, _draw_rows(3.0, 30.0),
           _infonce_selected_exact, ("log_softmax_entry",)),
    Family("infonce[keepdims, v * 4, exp(logits[:, :1])]", _infonce_keepdims, _draw_rows(20.0, 150.0),
           _rows_exact(lambda r: r[0], 4.0), ("log_softmax_entry",)),
    Family("log(exp(a) / (1 + exp(b)))", _log_ratio_softplus,
           lambda rng, d: tuple(rng.uniform(-1, 1, (2, 64)).astype(d) * (80 if d == F32 else 700)),
           _elementwise(lambda a, b: a - _sp(b)), ("log_quotient_exp", "softplus")),
]


# ---------------------------------------------------------------------- 3. constants folded
def _gelu_like_half(x: Any) -> Any:
    return jnp.log(0.5 * (1 + jnp.tanh(x / 2)))


def _half_over_two(x: Any) -> Any:
    return jnp.log((1.0 + jnp.tanh(0.5 * x)) / 2)


def _half_minus(x: Any) -> Any:  # 1 - tanh: the log-sigmoid of -x
    return jnp.log(0.5 * (1 - jnp.tanh(x / 2)))


def _draw_wide(rng: np.random.Generator, dtype: Any) -> tuple[np.ndarray, ...]:
    scale = 80.0 if dtype == F32 else 700.0
    x = np.where(rng.random(64) < 0.5, rng.uniform(-scale, scale, 64), rng.normal(0, 3, 64))
    return (x.astype(dtype),)


def _half_plus_half(x: Any) -> Any:  # the logistic written as 0.5 + 0.5 tanh(x / 2)
    return jnp.log(0.5 + 0.5 * jnp.tanh(x / 2))


FOLDED = [
    Family("log(0.5 + 0.5 * tanh(x / 2))", _half_plus_half, _draw_wide,
           _elementwise(lambda x: -_sp(-x)), ("half_tanh", "log_form_sigmoid")),
    Family("log(0.5 * (1 + tanh(x / 2)))", _gelu_like_half, _draw_wide,
           _elementwise(lambda x: -_sp(-x)), ("one_plus_tanh", "fold_scale", "log_form_sigmoid")),
    Family("log((1 + tanh(0.5 * x)) / 2)", _half_over_two, _draw_wide,
           _elementwise(lambda x: -_sp(-x)), ("one_plus_tanh", "fold_scale", "log_form_sigmoid")),
    Family("log(0.5 * (1 - tanh(x / 2)))", _half_minus, _draw_wide,
           _elementwise(lambda x: -_sp(x)), ("one_plus_tanh", "fold_scale", "log_form_sigmoid")),
]


# --------------------------------------------------------------------------------- 4. covariance
def _cov_mean(x: Any, y: Any) -> Any:
    return jnp.mean(x * y, axis=-1) - jnp.mean(x, axis=-1) * jnp.mean(y, axis=-1)


def _cov_sum(x: Any, y: Any) -> Any:  # sums, n**2 folded by the user, operands swapped
    n = x.shape[-1]
    return jnp.sum(y * x, axis=-1) / n - jnp.sum(x, axis=-1) * jnp.sum(y, axis=-1) / n**2


def _cov_keepdims(x: Any, y: Any) -> Any:  # E[xy] - E[x]E[y] with keepdims, the means also returned
    ex = jnp.mean(x, axis=1, keepdims=True)
    ey = jnp.mean(y, axis=1, keepdims=True)
    return jnp.mean(x * y, axis=1, keepdims=True) - ex * ey, ex


def _pearson(x: Any, y: Any) -> Any:  # next to the variance rule's form
    mx, my = jnp.mean(x, axis=-1), jnp.mean(y, axis=-1)
    cov = jnp.mean(x * y, axis=-1) - mx * my
    vx = jnp.mean(x * x, axis=-1) - mx**2
    vy = jnp.mean(y * y, axis=-1) - my**2
    return cov / jnp.sqrt(vx * vy)


def _draw_centred(rng: np.random.Generator, dtype: Any) -> tuple[np.ndarray, ...]:
    # well-conditioned data (centred, correlated): the written form is accurate here too
    x = rng.normal(0, 1, (4, 64))
    y = 0.8 * x + 0.6 * rng.normal(0, 1, (4, 64))
    return x.astype(dtype), y.astype(dtype)


def _draw_offset(rng: np.random.Generator, dtype: Any) -> tuple[np.ndarray, ...]:
    # values 1e4 + small in float32 (1e12 + small in float64), correlated: the expanded form cancels
    off = 1e4 if dtype == F32 else 1e12
    x = rng.normal(0, 1, (4, 64))
    y = 0.8 * x + 0.6 * rng.normal(0, 1, (4, 64))
    return (off + x).astype(dtype), (off + 2 * y).astype(dtype)


def _mp_cov(r: list[Any], s: list[Any]) -> Any:
    n = len(r)
    mr, ms = MP.fsum(r) / n, MP.fsum(s) / n
    return MP.fsum((u - mr) * (w - ms) for u, w in zip(r, s)) / n


def _cov_exact(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.array([_mp_cov(_row(r), _row(s)) for r, s in zip(x, y)], dtype=object)


def _row(r: np.ndarray) -> list[Any]:
    return [MP.mpf(float(u)) for u in r]


def _pearson_exact(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    out = []
    for r, s in zip(x, y):
        r, s = _row(r), _row(s)
        out.append(_mp_cov(r, s) / MP.sqrt(_mp_cov(r, r) * _mp_cov(s, s)))
    return np.array(out, dtype=object)


COVARIANCE = [
    Family("cov[mean(x*y) - mean(x)*mean(y), centred]", _cov_mean, _draw_centred, _cov_exact,
           ("covariance",)),
    Family("cov[sum(y*x)/n - sum(x)*sum(y)/n**2, centred]", _cov_sum, _draw_centred, _cov_exact,
           ("covariance",)),
]

FAMILIES = WHERE + QUOTIENT + FOLDED + COVARIANCE
# Each family's float64 row runs its rules again in the other dtype: the slow tier's (issue 48: `make
# test` within 5 minutes), with the family's float32 row in the fast tier.
CASES: list[Any] = [(f, F32) for f in FAMILIES] + [pytest.param(f, F64, marks=pytest.mark.slow)
                                                   for f in FAMILIES]


def _first(out: Any) -> Any:
    return out[0] if isinstance(out, tuple) else out


@pytest.mark.parametrize(("family", "dtype"), CASES,
                         ids=[f"{v[0].id}-{np.dtype(v[1]).name}"
                              for v in (getattr(c, "values", c) for c in CASES)])
def test_family_is_fixed_by_stabilize(family: Family, dtype: Any):
    rng = np.random.default_rng(7)
    with _x64(dtype):
        args = family.draw(rng, dtype)
        rules = jst.explain(family.fn, *args).rules
        for name in family.rules:
            assert name in rules, (family.id, rules)
        written = np.asarray(_first(jax.jit(family.fn)(*args)))
        fixed = np.asarray(_first(jax.jit(jst.stabilize(family.fn))(*args)))
    exact = family.exact(*[np.asarray(a, np.float64) for a in args])
    before, after = _err(written, exact, dtype), _err(fixed, exact, dtype)
    finite = np.isfinite(round_to_dtype(exact, dtype)).reshape(fixed.shape)
    detail = (f"{family.id} {np.dtype(dtype).name}: written {before.mean():.2f} mean / "
              f"{before.max():.1f} max bits, stabilized {after.mean():.2f} / {after.max():.1f}")
    assert np.isfinite(fixed[finite]).all(), detail
    assert after.max() <= 8.0, detail
    assert after.mean() <= 2.0, detail
    assert after.max() <= before.max() + 1.0, detail  # one ulp: a rounding placed differently
    assert after.mean() <= before.mean() + 0.5, detail


# The drawn inputs are where the written forms fail: each row of this table is the reason the
# rules exist (float32, the same draws as above).
# (The InfoNCE with the positive added to the negatives is drawn where its logits stay below 88 in
# float32, its loss's relative condition number growing with |a|: its point test follows.)
FAILING_AS_WRITTEN = [f for f in FAMILIES if "centred" not in f.id and "sum(exp(neg))" not in f.id]


def test_infonce_with_the_positive_added_overflows_as_written_and_not_stabilized():
    a = np.array([100.0, 95.0], F32)
    v = np.array([[95.0, 0.0, -3.0, 1.0], [99.0, 98.0, 90.0, 0.0]], F32)
    written = np.asarray(_infonce_split(a, v))
    fixed = np.asarray(jst.stabilize(_infonce_split)(a, v))
    assert not np.isfinite(written).any()  # exp(100) overflows: inf / inf
    # the loss softplus(lse(v) - a) has relative condition number |a|·sigmoid(d)/softplus(d) with
    # respect to a, d = lse(v) - a: about 100 here (6.6 bits); 8 bits is that and one rounding
    assert _err(fixed, _split_exact(a.astype(np.float64), v.astype(np.float64)), F32).max() <= 8.0


def _positive_apart(s: Any) -> Any:
    """The positive's logit computed apart from the row's: XLA rounds ``s[1] / 0.1`` in its own
    fusion, not as the entry of ``s / 0.1`` the max reads."""
    return -jnp.log(jnp.exp(s[1] / 0.1) / jnp.sum(jnp.exp(s / 0.1)))


@pytest.mark.parametrize("dtype", [F32, F64])
def test_a_positive_computed_apart_from_its_row_is_the_rows_maximum_under_jit(dtype: Any):
    # Where the positive dominates, the loss is log1p(rest), far below ulp(max); a positive XLA
    # rounded 1 ulp away from the max's copy (before the snap: 14 bits in float64) would be the
    # whole result. 8 bits: the inputs' rounding through s / 0.1 (|v| <= 10, condition <= 10,
    # 3.3 bits) and a few roundings.
    rng = np.random.default_rng(11)
    with _x64(dtype):
        rows = rng.uniform(-1, 1, (60, 5)).astype(dtype)
        rows[:, 1] = np.abs(rows).max(axis=1) + rng.uniform(0, 0.3, 60).astype(dtype)
        fixed = jax.jit(jst.stabilize(_positive_apart))
        got = np.array([fixed(r) for r in rows])
    t = MP.mpf(float(dtype(0.1)))
    exact = np.array([_lse_minus([MP.mpf(float(u)) / t for u in r], MP.mpf(float(r[1])) / t)
                      for r in rows], dtype=object)
    assert _err(got, exact, dtype).max() <= 8.0


@pytest.mark.parametrize("family", FAILING_AS_WRITTEN, ids=str)
def test_the_written_form_fails_on_the_draws(family: Family):
    args = family.draw(np.random.default_rng(7), F32)
    written = np.asarray(_first(jax.jit(family.fn)(*args)))
    exact = family.exact(*[np.asarray(a, np.float64) for a in args])
    assert _err(written, exact, F32).max() > 8.0


# ------------------------------------------------------------------ covariance of offset data
COV_OFFSET = [
    ("mean(x*y) - mean(x)*mean(y)", _cov_mean),
    ("sum(y*x)/n - sum(x)*sum(y)/n**2", _cov_sum),
    ("E[xy] - E[x]E[y], keepdims, means returned", _cov_keepdims),
]


@pytest.mark.parametrize(("dtype"), [F32, F64], ids=["float32", "float64"])
@pytest.mark.parametrize(("name", "fn"), COV_OFFSET, ids=[c[0] for c in COV_OFFSET])
def test_covariance_of_offset_data_is_within_its_conditioning(name: str, fn: Any, dtype: Any):
    """The covariance's condition number with respect to relative input perturbations is
    kappa = mean(|x| |dy| + |y| |dx|) / |cov| (dx = x - mean x): about 2e4 for data at 1e4 with unit
    spread, so no algorithm working on the rounded inputs owes more than eps * kappa. The bound
    asserted is the componentwise one of the two-pass form on exact inputs: |error| <= 8 eps S, S =
    mean(|dx| |dy|) + |mean dx| |mean dy| (a product, a pairwise sum over 64 terms, a subtraction:
    each deviation x - mean(x) is exact, x and mean(x) being within a factor 2). The written form
    misses it by orders of magnitude (its error is about eps * mean(x) * mean(y))."""
    rng = np.random.default_rng(11)
    with _x64(dtype):
        x, y = _draw_offset(rng, dtype)
        assert "covariance" in jst.explain(fn, x, y).rules
        written = np.asarray(_first(jax.jit(fn)(x, y)), np.float64).ravel()
        fixed = np.asarray(_first(jax.jit(jst.stabilize(fn))(x, y)), np.float64).ravel()
        if isinstance(fn(x, y), tuple):  # the returned means keep their values
            np.testing.assert_array_equal(np.asarray(jst.stabilize(fn)(x, y)[1]),
                                          np.asarray(fn(x, y)[1]))
    eps = float(np.finfo(dtype).eps)
    for k, (r, s) in enumerate(zip(x.astype(np.float64), y.astype(np.float64))):
        r_mp, s_mp = _row(r), _row(s)
        exact = _mp_cov(r_mp, s_mp)
        n = len(r_mp)
        mr, ms = MP.fsum(r_mp) / n, MP.fsum(s_mp) / n
        size = MP.fsum(abs((u - mr) * (w - ms)) for u, w in zip(r_mp, s_mp)) / n
        bound = 8 * eps * float(size)
        assert abs(fixed[k] - float(exact)) <= bound, (name, k, fixed[k], float(exact), bound)
        assert abs(written[k] - float(exact)) > 100 * bound, (name, k, written[k], float(exact))


def test_pearson_correlation_of_offset_data_is_accurate():
    """Correlation (variance rule for the denominators, covariance for the numerator): with exact
    deviations the correlation of strongly correlated data is well determined by the rounded
    inputs; within 8 bits max, 2 mean of the exact value (float32, values at 1e4)."""
    x, y = _draw_offset(np.random.default_rng(3), F32)
    rules = jst.explain(_pearson, x, y).rules
    assert rules.count("variance") == 2 and "covariance" in rules, rules
    fixed = np.asarray(jax.jit(jst.stabilize(_pearson))(x, y))
    bits = _err(fixed, _pearson_exact(x.astype(np.float64), y.astype(np.float64)), F32)
    assert bits.max() <= 8.0 and bits.mean() <= 2.0, bits
    written = np.asarray(jax.jit(_pearson)(x, y))
    assert not (np.abs(written) <= 1).all() or _err(
        written, _pearson_exact(x.astype(np.float64), y.astype(np.float64)), F32).max() > 8


# ------------------------------------------------------------------------------------ gradients
def test_focal_loss_gradient_is_finite_and_accurate():
    # d/dz of -log(sigmoid(±z)) is ∓sigmoid(∓z); of the focal loss, written out below in mpmath
    # the focal loss's derivative where the label is right is about 3 exp(-3|z|): down to 8e-33 here
    # (below float32's smallest normal, 1.2e-38, XLA:CPU flushes)
    z = np.array([-60.0, -25.0, -5.0, 0.0, 5.0, 25.0, 60.0, 20.0], F32)
    y = np.array([1, 0, 1, 0, 1, 1, 0, 1], F32)
    got = np.asarray(jax.jit(jax.grad(lambda z: jnp.sum(jst.stabilize(_bce_where)(z, y))))(z))
    assert np.isfinite(got).all(), got
    want = np.array([-_sig(-MP.mpf(float(v))) if t == 1 else _sig(MP.mpf(float(v)))
                     for v, t in zip(z, y)], dtype=object)
    assert _err(got, want, F32).max() <= 2.0
    focal = np.asarray(jax.jit(jax.grad(lambda z: jnp.sum(jst.stabilize(_focal)(z, y))))(z))
    assert np.isfinite(focal).all(), focal
    naive = np.asarray(jax.jit(jax.grad(lambda z: jnp.sum(_focal(z, y))))(z))
    assert not np.isfinite(naive).all()  # the written form's gradient is NaN where pt rounds to 0

    def mp_focal_grad(v: Any, t: float) -> Any:
        return MP.diff(lambda u: _mp_focal(2.0)(u, t), v)

    want = np.array([mp_focal_grad(MP.mpf(float(v)), float(t)) for v, t in zip(z, y)], dtype=object)
    # a product of four stable factors (sigmoids, a softplus): a few ulps each
    assert _err(focal, want, F32).max() <= 4.0


def test_infonce_and_covariance_gradients_are_finite():
    v = _draw_rows(3.0, 30.0)(np.random.default_rng(5), F32)[0]
    g = np.asarray(jax.jit(jax.grad(lambda v: jnp.sum(jst.stabilize(_infonce_selected)(v))))(v))
    assert np.isfinite(g).all()
    # d/dv_j (lse(v/t) - v_0/t) = (softmax(v/t)_j - [j = 0]) / t: rows sum to 0
    np.testing.assert_allclose(g.sum(axis=1), 0.0, atol=1e-3)
    x, y = _draw_offset(np.random.default_rng(2), F32)
    gx = np.asarray(jax.grad(lambda x: jnp.sum(jst.stabilize(_cov_mean)(x, y)))(x))
    # d cov / dx_i = (y_i - mean y) / n, exact deviations: the offset cancels in the gradient too
    want = (y.astype(np.float64) - y.astype(np.float64).mean(axis=-1, keepdims=True)) / 64
    np.testing.assert_allclose(gx, want, rtol=0, atol=4 * 1.2e-7 * np.abs(want).max() + 1e-6)


def test_folded_log_sigmoid_gradient_is_finite():
    x = np.array([-100.0, -30.0, 0.0, 30.0, 80.0], F32)  # sigmoid(-80): still a normal float32
    got = np.asarray(jax.grad(lambda x: jnp.sum(jst.stabilize(_gelu_like_half)(x)))(x))
    want = np.array([_sig(-MP.mpf(float(v))) for v in x], dtype=object)  # d log_sigmoid = sigmoid(-x)
    assert _err(got, want, F32).max() <= 2.0


# ------------------------------------------------------------------------------ negative tests
def test_a_where_with_nothing_to_fix_is_left_as_written():
    x = np.array([0.5, 2.0, 3.0], F32)
    for fn in (lambda x: jnp.log(jnp.where(x > 1, x, 1.0)),
               lambda x: 1 - jnp.where(x > 1, x * x, x + 2),
               lambda x: jnp.log(lax.select(x > 1, x, x + 1))):
        rules = jst.explain(fn, x).rules
        assert "log_where" not in rules and "one_minus_where" not in rules, rules


def test_a_log_quotient_with_a_constant_or_a_written_sigmoid_is_left_to_its_rule():
    x = np.array([80.0, -100.0, 3.0], F32)
    # log(exp(a) / (1 + exp(a))) is a log-sigmoid: a - log(1 + exp(a)) would cancel for large a
    rules = jst.explain(lambda a: jnp.log(jnp.exp(a) / (1 + jnp.exp(a))), x).rules
    assert "log_quotient_exp" not in rules, rules
    got = jst.stabilize(lambda a: jnp.log(jnp.exp(a) / (1 + jnp.exp(a))))(x)
    want = np.array([-_sp(-MP.mpf(float(v))) for v in x], dtype=object)
    assert _err(np.asarray(got), want, F32).max() <= 2.0
    assert jst.explain(lambda a: jnp.log(3.0 * jnp.exp(a)), x).rules == ["log_scaled_exp"]


def test_fold_scale_leaves_products_that_are_not_one():
    x = np.array([1.0, 2.0], F32)
    assert "fold_scale" not in jst.explain(lambda x: 0.25 * (2.0 * x), x).rules
    assert "fold_scale" not in jst.explain(lambda x: 0.5 * (3.0 * x), x).rules  # 3: not a power of 2
    assert jst.explain(lambda x: 0.5 * (2.0 * x), x).rules == ["fold_scale"]


def test_covariance_refuses_mismatched_axes_and_counts():
    x = np.ones((4, 8), F32)
    other_axes = lambda x, y: jnp.mean(x * y, axis=1) - jnp.mean(x, axis=0)[:4] * jnp.mean(y, axis=1)
    wrong_n = lambda x, y: jnp.sum(x * y, axis=1) / 7 - jnp.mean(x, axis=1) * jnp.mean(y, axis=1)
    for fn in (other_axes, wrong_n):
        assert "covariance" not in jst.explain(fn, x, x + 1).rules


def test_the_passes_reach_a_fixed_point():
    # nested composable rules: a where in a where, 1 - (1 - where(...)), folded constants
    def f(z: Any, y: Any) -> Any:
        p = jax.nn.sigmoid(z)
        inner = jnp.where(y > 0, p, 1 - p)
        outer = jnp.where(y > 1, 1 - inner, inner)
        return jnp.log(outer) + jnp.log(0.5 * (1 + jnp.tanh(z / 2))) + (1 - (1 - outer))

    z, y = np.linspace(-50, 50, 8).astype(F32), np.array([0, 1, 2, 0, 1, 2, 0, 1], F32)
    closed = jax.make_jaxpr(f)(z, y)
    once, applied = rewrite_jaxpr(closed, STABILITY)
    assert {"log_where", "one_minus_where", "fold_scale"} <= {a.rule for a in applied}
    _, more = rewrite_jaxpr(once, STABILITY)
    assert more == []  # the first call ended at a fixed point, not at the pass limit
    exact = np.array([_mp_nested(MP.mpf(float(a)), float(b)) for a, b in zip(z, y)], dtype=object)
    got = np.asarray(jst.stabilize(f)(z, y))
    assert np.isfinite(got).all() and _err(got, exact, F32).max() <= 8.0


def _mp_nested(z: Any, y: float) -> Any:
    inner = z if y > 0 else -z  # inner = sigmoid(±z); 1 - sigmoid(t) = sigmoid(-t)
    outer = -inner if y > 1 else inner
    return -_sp(-outer) - _sp(-z) + _sig(outer)
