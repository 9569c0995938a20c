"""RMSNorm's ``x * rsqrt(mean(x²) + eps)`` where the squares overflow (issue 47: ``rms_epsilon``).

T5's, LLaMA's and Gemma's RMSNorm square the activations before they average them: ``x²`` overflows
past 1.8e19 in float32 and past 256 in float16, where the normalised output is an ordinary number
(``x / rms(x)`` is at most sqrt(n)). The rule scales by a power of two near max(max|x|, √eps), exactly.
References are mpmath's (60 digits) at the inputs as rounded to the dtype; tolerances in ulps of the
exact value, stated per test.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import mpmath as mp
import numpy as np
import pytest
from jax import lax

import pytest_jaxstab as jst

mp.mp.dps = 60


def t5_rms_norm(x, eps=1e-6):  # T5 / LLaMA: variance = mean(x²), x * rsqrt(variance + eps)
    variance = jnp.mean(jnp.square(x), axis=-1, keepdims=True)
    return x * lax.rsqrt(variance + eps)


def written_rms_norm(x, eps=1e-5):  # the same, written with a division by a square root
    return x / jnp.sqrt((x * x).mean(-1, keepdims=True) + eps)


def _exact(rows, eps, dtype):
    eps = mp.mpf(float(np.asarray(eps, dtype)))  # the constant as the program holds it
    out, grads = [], []
    for row in np.asarray(rows, np.float64):
        v = [mp.mpf(float(a)) for a in row]
        ms = mp.fsum(a * a for a in v) / len(v) + eps
        r = 1 / mp.sqrt(ms)
        out.append([a * r for a in v])
        # d/dx_j sum_i x_i r = r - (sum_i x_i) x_j / (n ms^(3/2))
        total = mp.fsum(v)
        grads.append([r - total * a / (len(v) * ms ** mp.mpf(1.5)) for a in v])
    return out, grads


def _ulps(got, ref, dtype):
    info = np.finfo(dtype)
    worst = 0.0
    for g, r in zip(np.ravel(np.asarray(got, np.float64)), [a for row in ref for a in row]):
        assert np.isfinite(g), (g, r)
        unit = max(abs(float(r)), float(info.tiny))
        worst = max(worst, float(abs(mp.mpf(float(g)) - r)) / float(np.spacing(np.array(unit, dtype))))
    return worst


def _rules(fn, *args):
    return {a.rule for a in jst.explain(fn, *args)}


@pytest.mark.parametrize(("fn", "eps"), [(t5_rms_norm, 1e-6), (written_rms_norm, 1e-5)],
                         ids=["t5", "written"])
@pytest.mark.parametrize(("dtype", "scale"), [(np.float32, 1e25), (np.float16, 3e3)], ids=["f32", "f16"])
def test_rms_norm_of_activations_whose_squares_overflow(fn, eps, dtype, scale):
    rng = np.random.default_rng(5)
    rows = (rng.uniform(-1, 1, (3, 16)) * scale).astype(dtype)
    x = jnp.asarray(rows)
    ref, grad = _exact(rows, eps, dtype)
    assert not np.all(np.isfinite(np.asarray(fn(x)))) or _ulps(fn(x), ref, dtype) > 2**8  # as written
    assert "rms_epsilon" in _rules(fn, x)
    fixed = jst.stabilize(fn)
    # the scaled sum of 16 squares, a square root and two products: 8 ulps (float16's own roundings)
    assert _ulps(fixed(x), ref, dtype) <= 8
    g = jax.grad(lambda v: jnp.sum(fixed(v)))(x)
    # a difference of two terms of the size of r: within 16 ulps of r (the largest term)
    scaleg = [[max(abs(a) for a in row)] * len(row) for row in grad]
    errs = np.abs(np.asarray(g, np.float64) - np.array([[float(a) for a in row] for row in grad]))
    assert np.all(errs <= 16 * np.spacing(np.array([[float(a) for a in row] for row in scaleg], dtype)))


def test_ordinary_activations_keep_their_accuracy():
    rows = np.random.default_rng(6).normal(size=(4, 32)).astype(np.float32)
    ref, _ = _exact(rows, 1e-6, np.float32)
    assert _ulps(jst.stabilize(t5_rms_norm)(jnp.asarray(rows)), ref, np.float32) <= 4


def test_a_variance_or_a_difference_under_the_root_is_not_an_rms():
    x = jnp.ones((2, 8), np.float32)
    assert "rms_epsilon" not in _rules(lambda v: lax.rsqrt(jnp.var(v, -1) + 1e-5), x)
    assert "rms_epsilon" not in _rules(lambda v: lax.rsqrt(jnp.mean(v * v, -1) - 1e-5), x)
    assert "rms_epsilon" not in _rules(lambda v: lax.rsqrt(jnp.mean(v * v, -1) + v[:, 0]), x)
