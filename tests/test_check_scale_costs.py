"""What keeps a failing check cheap at the sizes ML code runs (issue 46), asserted as mechanisms.

* The oracle's fast path encloses ``1 - sigmoid(z)``, ``log(sigmoid(z))`` and ``1 + tanh(v)`` by exact
  identities where the functions saturate (``oracles/fast/_identities``): a binary cross-entropy's
  elements stay out of Arb, and every value it decides is correctly rounded (mpmath, independently) and
  the Arb path's, bit for bit.
* The mixed pass follows an elementwise operand that spreads along an axis of extent 1 (a dense layer's
  bias) element by element: an escalated element of ``gelu(x @ w + b)`` recomputes its own dot product
  in Arb, not the whole product.
* A stabilized variant that reads an exponent off its bits (``bitcast_convert_type``) is still
  row-separable (``oracles/interpreter/_rows``): its conditioning rows come one pass per column, and the
  oracle's row-masked escalation gives what the whole-program one gives.
* The conditioning's reverse passes skip the rows the lower bounds' float64 pass already lost (they go
  to the stabilized variant at once), with the same figures; their results depend on the pass size
  only by a float64 sum's order; the joint moves step floats by ordinals exactly as ``nextafter`` does.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_dtypes
import mpmath
import numpy as np
import pytest
from jax import lax

import pytest_jaxstab as jst
from pytest_jaxstab._check import _conditioning, _derivatives
from pytest_jaxstab._check._conditioning import _step, conditioning_lower, conditioning_ulps
from pytest_jaxstab.oracles import evaluate, fast
from pytest_jaxstab.oracles.fast._interval import Interval, ends
from pytest_jaxstab.oracles.interpreter import _evaluate as oracle_evaluate
from pytest_jaxstab.oracles.interpreter._rows import batched

F32 = np.dtype("float32")
C = 0.7978845608  # the approximate GELU's sqrt(2 / pi)

# Saturating arguments: sigmoid and tanh round to their limits in float64 beyond ~37 and ~19, and
# sigmoid(-800) underflows float64 itself.
_Z = np.asarray([-1000.0, -800.0, -300.0, -50.0, -30.0, -0.5, 0.0, 0.5, 20.0, 30.0, 50.0, 300.0, 800.0,
                 1000.0], F32)

FORMS = {
    "1 - sigmoid": (lambda z: 1.0 - jax.nn.sigmoid(z), lambda z: 1 / (1 + mpmath.exp(z))),
    "sigmoid - 1": (lambda z: jax.nn.sigmoid(z) - 1.0, lambda z: -1 / (1 + mpmath.exp(z))),
    "log sigmoid": (lambda z: jnp.log(jax.nn.sigmoid(z)), lambda z: -mpmath.log1p(mpmath.exp(-z))),
    "log(1 - sigmoid)": (lambda z: jnp.log(1.0 - jax.nn.sigmoid(z)), lambda z: -mpmath.log1p(mpmath.exp(z))),
    "1 + tanh": (lambda v: 1.0 + jnp.tanh(v / 40), lambda v: 1 + mpmath.tanh(v / 40)),
    "1 - tanh": (lambda v: 1.0 - jnp.tanh(v / 40), lambda v: 1 - mpmath.tanh(v / 40)),
    "tanh - 1": (lambda v: jnp.tanh(v / 40) - 1.0, lambda v: mpmath.tanh(v / 40) - 1),
}


def _within_half_ulp(got: np.ndarray, exact: list) -> bool:
    """Each float32 value within half an ulp of the exact real (mpmath): correctly rounded."""
    for g, e in zip(got.reshape(-1), exact):
        spacing = mpmath.mpf(float(np.spacing(np.abs(g)))) if g != 0 else mpmath.mpf(2.0**-149)
        if abs(mpmath.mpf(float(g)) - e) > spacing / 2:
            return False
    return True


@pytest.mark.parametrize("form", list(FORMS))
def test_the_fast_path_decides_the_saturated_forms_correctly_rounded(form):
    fn, exact_fn = FORMS[form]
    z = _Z  # the tanh forms read v / 40: (-25, 25), where 1 - |tanh| reaches 2e-22
    got = evaluate(fn, z)
    assert got.escalated == 0, "a saturated element went to Arb"
    with mpmath.workprec(3000):  # 1 - sigmoid(1000) is e^-1000: 1,443 bits below 1
        exact = [exact_fn(mpmath.mpf(float(v))) for v in z]
        assert _within_half_ulp(np.asarray(got.values), exact)
    # The Arb path: the same floats, bit for bit; a zero's sign aside (a ball about 0 takes its
    # midpoint's, where the fast path's relative enclosure keeps the exact one's: ``_decide``).
    a, b = np.asarray(got.values), np.asarray(evaluate(fn, z, fast=False).values)
    assert ((a.view(np.uint32) == b.view(np.uint32)) | ((a == 0) & (b == 0))).all()


def test_the_identity_enclosures_contain_the_exact_value():
    z = np.concatenate([_Z, np.random.default_rng(3).uniform(-60, 60, 200).astype(F32)])
    program = jax.make_jaxpr(lambda z: (jnp.log(jax.nn.sigmoid(z)), jnp.log(1.0 - jax.nn.sigmoid(z)),
                                        1.0 + jnp.tanh(z), 1.0 - jnp.tanh(z)))(z)
    outs = fast.run(program, [z])
    assert outs is not None
    exact = [lambda v: -mpmath.log1p(mpmath.exp(-v)), lambda v: -mpmath.log1p(mpmath.exp(v)),
             lambda v: 1 + mpmath.tanh(v), lambda v: 1 - mpmath.tanh(v)]
    with mpmath.workprec(3000):
        for out, f in zip(outs, exact):
            assert isinstance(out, Interval)
            lo, hi = ends(out)
            assert not np.isnan(lo).any()
            for v, a, b in zip(z, lo, hi):
                e = f(mpmath.mpf(float(v)))
                assert mpmath.mpf(float(a)) <= e <= mpmath.mpf(float(b)), (v, a, b)


def _bce(z, y):
    p = jax.nn.sigmoid(z)
    return -jnp.mean(y * jnp.log(p) + (1 - y) * jnp.log(1 - p), -1)


def test_a_binary_cross_entropy_on_saturated_logits_stays_out_of_arb():
    rng = np.random.default_rng(0)
    z = (rng.choice([-1.0, 1.0], (8, 64)) * 10 ** rng.uniform(1.5, 3, (8, 64))).astype(F32)
    y = rng.uniform(0, 1, (8, 64)).astype(F32)
    got = evaluate(_bce, z, y)
    assert got.escalated == 0  # before the identities: every row (a log of an interval touching 0)


def test_a_check_of_the_naive_binary_cross_entropy_escalates_a_few_elements():
    # The whole check: the naive form fails (its float32 log(1 - sigmoid) is -inf), and of the oracle's
    # output elements only those of rows whose terms cancel (labels of both signs) need Arb: the seeded
    # draws leave under 5% (43% before the identities, at these shapes and 100 inputs).
    r = jst.check(_bce, shapes=[(4, 32), (4, 32)], dtype="float32", domain=(-1e3, 1e3), seed=0,
                  max_examples=30)
    assert r.outcome == "failed"
    assert r.escalated is not None and r.escalated < 0.05


def _scaled_variance(x):
    # A stable form's shape: each row scaled by the power of two read off its largest magnitude's bits.
    m = jnp.max(jnp.abs(x), -1, keepdims=True)
    exponent = lax.bitcast_convert_type(m, jnp.uint32) & jnp.uint32(0x7F800000)
    p = lax.bitcast_convert_type(exponent, jnp.float32)
    y = x / p
    return jnp.mean(jnp.exp(y), -1) - jnp.exp(jnp.mean(y, -1))  # a Jensen gap: it cancels in a cluster


def _clustered_rows() -> np.ndarray:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 16)).astype(F32)
    x[1] = (1e4 + rng.standard_normal(16) * 1e-2).astype(F32)  # a row the fast path cannot decide
    return x


def test_a_program_that_bitcasts_per_row_is_row_separable_and_evaluates_alike(monkeypatch):
    x = _clustered_rows()
    closed = jax.make_jaxpr(_scaled_variance)(x)
    assert batched(closed) == (4, [True], [True])
    assert _derivatives.Derivatives(closed, [0]).rows == [4]  # one reverse pass per column
    masks = []
    real = oracle_evaluate.masked
    monkeypatch.setattr(oracle_evaluate, "masked", lambda *a: masks.append(a[3]) or real(*a))
    rows = evaluate(closed, x, mixed=False)
    # the clustered row went to Arb, the others were left out of its passes (None: the bitcast's too)
    assert rows.escalated > 0 and masks and not masks[0].all()
    monkeypatch.setattr(oracle_evaluate, "batched", lambda closed: None)  # whole-program passes
    whole = evaluate(closed, x, mixed=False)
    assert np.asarray(rows.values[0]).tobytes() == np.asarray(whole.values[0]).tobytes()
    assert np.array_equal(rows.certain[0], whole.certain[0])


def _tanh_spelled_out(v):
    e = jnp.exp(2 * v)
    return (e - 1) / (e + 1)


def _dense_gelu_spelled_out(x, w, b):
    h = x @ w + b  # the bias spreads along the batch axis: an elementwise operand of shape (1, 16)
    return 0.5 * h * (1 + _tanh_spelled_out(C * (h + 0.044715 * h**3)))


def test_the_mixed_pass_recomputes_only_the_products_a_biased_layer_needs():
    # One column in the left tail, where 1 + tanh cancels in float64 (spelled out: no identity encloses
    # it): its elements are recomputed in Arb, accurately back to x @ w + b. That add reads the bias
    # along an axis of extent 1; it was a whole-operand dependency, so every pass recomputed the whole
    # product in Arb (8,384 element operations here); now the 8 rows' dot products of that column.
    rng = np.random.default_rng(6)
    x = rng.uniform(-0.1, 0.1, (8, 32)).astype(F32)
    w = rng.uniform(-1, 1, (32, 16)).astype(F32)
    b = rng.uniform(-0.5, 0.5, 16).astype(F32)
    b[3] = -6.0
    got = evaluate(_dense_gelu_spelled_out, x, w, b)
    arb = evaluate(_dense_gelu_spelled_out, x, w, b, fast=False)
    assert got.escalated == 8 and got.decided_mixed == 8
    assert got.recomputed < 8 * 16 * 32  # less than one whole product, over every pass
    assert np.asarray(got.values).tobytes() == np.asarray(arb.values).tobytes()
    assert np.array_equal(got.certain, arb.certain)


def _gelu_tanh(h):
    return 0.5 * h * (1.0 + jnp.tanh(C * (h + 0.044715 * h**3)))


def _gelu_sigmoid(h):  # the same function: 0.5 (1 + tanh t) = sigmoid(2 t)
    return h * jax.nn.sigmoid(2 * C * (h + 0.044715 * h**3))


def test_rows_the_lower_bounds_lost_go_to_the_stabilized_variant_at_once(monkeypatch):
    # A GELU layer whose left tail (h about -9: 1 + tanh cancels to 0 in float64 too) the float64
    # reference loses: its reverse passes there would not be trusted, so they are not run; the figures
    # are the ones computed with them.
    rng = np.random.default_rng(2)
    x = rng.uniform(0.5, 1.5, (4, 32)).astype(F32)
    w = rng.uniform(-0.6, 0.1, (32, 8)).astype(F32)
    args = [x, w]
    ref = jax.make_jaxpr(lambda x, w: _gelu_tanh(x @ w))(*args)
    alt = jax.make_jaxpr(lambda x, w: _gelu_sigmoid(x @ w))(*args)
    assert x.size + w.size > _conditioning.FD_LIMIT
    exact = [np.asarray(evaluate(ref, *args).values[0])]
    calls = []
    real = _derivatives.Derivatives.weighted_rows
    monkeypatch.setattr(_derivatives.Derivatives, "weighted_rows", lambda self, a, t, flat: (
        calls.append((self.closed is ref, len(flat))) or real(self, a, t, flat)))
    conditioning_lower(ref, args, exact, [0], [F32])
    got = conditioning_ulps(ref, args, exact, [0], [F32], alternate=alt)[0]
    asked_ref = sum(n for is_ref, n in calls if is_ref)
    assert 0 < asked_ref < exact[0].size and any(not is_ref for is_ref, _ in calls)
    calls.clear()
    monkeypatch.setattr(_conditioning, "far_off", lambda v, e, s: np.zeros(np.shape(v), dtype=bool))
    conditioning_lower(ref, args, exact, [0], [F32])
    every = conditioning_ulps(ref, args, exact, [0], [F32], alternate=alt)[0]
    assert sum(n for is_ref, n in calls if is_ref) == exact[0].size  # without the skip: every element
    assert np.array_equal(got, every, equal_nan=True)


def test_the_reverse_passes_give_the_same_rows_whatever_their_size(monkeypatch):
    rng = np.random.default_rng(4)
    args = [rng.standard_normal((6, 20)).astype(F32), rng.standard_normal((20, 12)).astype(F32)]
    closed = jax.make_jaxpr(lambda x, w: jnp.tanh(x @ w))(*args)
    flat = np.arange(6 * 12)
    results = []
    for chunk in (1, 5, 16, 256):
        d = _derivatives.Derivatives(closed, [0])
        d.chunk = chunk
        sizes = []
        run = d._pass(0)
        monkeypatch.setattr(d, "_pass", lambda t, run=run, sizes=sizes: (
            lambda wide, cols: sizes.append(int(cols.shape[0])) or run(wide, cols)))
        results.append(d.weighted_rows(args, 0, flat))
        assert set(sizes) <= {chunk, min(_derivatives.SMALL_CHUNK, chunk)}  # two compilations at most
    # XLA may order a row's sum differently at another batch size: its terms are magnitudes, so the sums
    # agree to the float64 error of a sum of the 360 terms (360 * 2^-53 < 1e-13), far below the bit
    # the conditioning is read to.
    for sums, values in results[1:]:
        np.testing.assert_allclose(sums, results[0][0], rtol=1e-13, atol=0)
        np.testing.assert_allclose(values, results[0][1], rtol=1e-13, atol=0)


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16, np.float32, np.float64])
def test_a_joint_move_steps_floats_as_nextafter_does(dtype):
    info = ml_dtypes.finfo(dtype)
    rng = np.random.default_rng(5)
    special = [0.0, -0.0, info.max, -info.max, info.tiny, -info.tiny, info.smallest_subnormal,
               -info.smallest_subnormal, 3 * info.smallest_subnormal, np.inf, -np.inf]
    with np.errstate(over="ignore"):
        a = np.concatenate([rng.standard_normal(500) * 10.0 ** rng.integers(-30, 30, 500),
                            np.asarray(special, np.float64)]).astype(dtype)
    for steps in (1, 3, 16):
        up = rng.random(a.shape) < 0.5
        want = a.copy()
        with np.errstate(over="ignore"):
            for _ in range(steps):
                want = np.nextafter(want, np.where(up, np.inf, -np.inf).astype(dtype))
        got = _step(a, np.where(up, steps, -steps))
        assert got.dtype == a.dtype and got.tobytes() == want.tobytes()
