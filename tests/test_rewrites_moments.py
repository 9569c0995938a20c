"""Second moments across arrays (issue 35): covariance matrices, the batch statistics of a vmapped
batch norm (a pmean of per-device means) and the naive merge of two batches' moments.

References: mpmath at 50 digits on the inputs as rounded. Errors are stated in ulps of a scale of
the result (the largest |entry| or sqrt(var_i·var_j)): an entry far below that scale is known only
to the rounding of the centred data, an ulp of the spread, as ``test_rewrites_center.py`` states.
"""

from __future__ import annotations

import contextlib

import jax
import jax.numpy as jnp
import mpmath
import numpy as np
import pytest
from jax import lax

import pytest_jaxstab as jst
from pytest_jaxstab._compat import enable_x64
from pytest_jaxstab.rewrites import forms

mpmath.mp.dps = 50
EPS = 1e-5


def _x64(dtype):
    return enable_x64() if np.dtype(dtype) == np.float64 else contextlib.nullcontext()


def _ulps_of(got, exact, scale, dtype):
    """|got - exact| in ulps of ``scale`` (broadcast against them), at least the smallest normal's."""
    got, exact = np.asarray(got, np.float64), np.asarray(exact, np.float64)
    spacing = np.spacing(np.asarray(np.abs(scale), dtype)).astype(np.float64)
    return np.abs(got - exact) / np.maximum(spacing, np.spacing(np.finfo(dtype).tiny))


def _mp_cols(x):
    return [[mpmath.mpf(float(v)) for v in col] for col in np.asarray(x).T]


def _mp_cov(x, y):
    """The biased covariance matrix of the columns of x (n, d) and y (n, e), exact then rounded."""
    xs, ys = _mp_cols(x), _mp_cols(y)
    n = len(xs[0])
    mx = [mpmath.fsum(c) / n for c in xs]
    my = [mpmath.fsum(c) / n for c in ys]
    return np.array([[float(mpmath.fsum((xi[k] - mx[i]) * (yj[k] - my[j]) for k in range(n)) / n)
                      for j, yj in enumerate(ys)] for i, xi in enumerate(xs)])


def _cov_scale(x, y):
    """sqrt(var_i·var_j): the bound of |cov_ij| (Cauchy-Schwarz), the scale its error is stated in."""
    vx, vy = np.diag(_mp_cov(x, x)), np.diag(_mp_cov(y, y))
    return np.sqrt(np.outer(vx, vy))


# ---------------------------------------------------------------------------- covariance matrix
def cov_matmul(x):
    mu = jnp.mean(x, axis=0)
    return x.T @ x / x.shape[0] - jnp.outer(mu, mu)


def cov_einsum(x):
    mu = jnp.mean(x, axis=0)
    return jnp.einsum("ni,nj->ij", x, x) / x.shape[0] - mu[:, None] * mu[None, :]


def cross_cov(x, y):
    return x.T @ y / x.shape[0] - jnp.outer(jnp.mean(x, 0), jnp.mean(y, 0))


rng = np.random.default_rng(3035)
DATA = {
    "mean 1e4, std 1": lambda shape: 1e4 + rng.standard_normal(shape),
    "mean 300, std 0.01": lambda shape: 300 + 0.01 * rng.standard_normal(shape),
    "-1753.93 +- 1e-4": lambda shape: -1753.93 + 1e-4 * rng.standard_normal(shape),
}


@pytest.mark.parametrize("dtype", ["float32", pytest.param("float64", marks=pytest.mark.slow)])
@pytest.mark.parametrize("data", DATA)
@pytest.mark.parametrize("fn", [cov_matmul, cov_einsum, cross_cov], ids=lambda f: f.__name__)
def test_covariance_matrix_is_accurate_after_stabilize(fn, data, dtype):
    # 8 ulps of sqrt(var_i·var_j): the centred columns carry 2 ulps of their spread (center's
    # contract), the contraction of 16 products rounds each sum once more per level (log2 16 = 4).
    # As written (float32) the error is 2^10 to 2^30 ulps of that scale: the subtraction rounds to
    # an ulp of mean², not of the covariance.
    x = np.asarray(DATA[data]((16, 3)), dtype)
    y = np.asarray(DATA[data]((16, 4)), dtype)
    args = (x,) if fn is not cross_cov else (x, y)
    other = x if fn is not cross_cov else y
    with _x64(dtype):
        got = np.asarray(jax.jit(jst.stabilize(fn))(*map(jnp.asarray, args)))
        written = np.asarray(jax.jit(fn)(*map(jnp.asarray, args)))
        assert [a.rule for a in jst.explain(fn, *args)] == ["covariance_matrix"]
    exact, scale = _mp_cov(x, other), _cov_scale(x, other)
    assert _ulps_of(got, exact, scale, dtype).max() <= 8
    if dtype == "float32":
        assert _ulps_of(written, exact, scale, dtype).max() > 2 ** 10


@pytest.mark.parametrize("fn", [cov_matmul, cov_einsum], ids=lambda f: f.__name__)
def test_a_constant_column_has_exactly_zero_covariance(fn):
    x = np.asarray(1e4 + rng.standard_normal((16, 3)), np.float32)
    x[:, 1] = np.float32(1e4 + 0.3)
    got = np.asarray(jst.stabilize(fn)(jnp.asarray(x)))
    assert np.all(got[1, :] == 0) and np.all(got[:, 1] == 0)
    assert np.any(np.asarray(fn(jnp.asarray(x)))[1, :] != 0)  # as written: rounding noise


def test_covariance_gradient_is_the_formulas():
    # d/dx_ki sum_ij W_ij cov_ij = sum_j (W_ij + W_ji)(x_kj - mean_j) / n (the mean terms cancel:
    # the centred columns sum to 0). Stated in ulps of the largest exact component: the cotangent
    # meets the centred columns (2 ulps of the spread) and a 3-term sum, then center's ẋ - mean(ẋ).
    x = np.asarray(1e4 + rng.standard_normal((16, 3)), np.float32)
    w = np.asarray(rng.standard_normal((3, 3)), np.float32)
    got = np.asarray(jax.grad(lambda x: jnp.sum(w * jst.stabilize(cov_matmul)(x)))(jnp.asarray(x)))
    cols = _mp_cols(x)
    n = x.shape[0]
    means = [mpmath.fsum(c) / n for c in cols]
    exact = np.array([[float(mpmath.fsum((mpmath.mpf(float(w[i, j])) + mpmath.mpf(float(w[j, i])))
                                          * (cols[j][k] - means[j]) for j in range(3)) / n)
                       for i in range(3)] for k in range(n)])
    assert _ulps_of(got, exact, np.max(np.abs(exact)), np.float32).max() <= 8
    written = np.asarray(jax.grad(lambda x: jnp.sum(w * cov_matmul(x)))(jnp.asarray(x)))
    assert _ulps_of(written, exact, np.max(np.abs(exact)), np.float32).max() > 2 ** 8


@pytest.mark.parametrize("fn", [
    lambda x, y, z: x.T @ y / 16 - jnp.outer(jnp.mean(x, 0), jnp.mean(z, 0)),   # another array's mean
    lambda x, y, z: x.T @ y / 16 - jnp.outer(jnp.mean(y, 0), jnp.mean(x, 0)),   # the means swapped
    lambda x, y, z: x.T @ y / 15 - jnp.outer(jnp.mean(x, 0), jnp.mean(y, 0)),   # not the count
    lambda x, y, z: x.T @ y / 16 - jnp.outer(jnp.mean(x, 1), jnp.mean(y, 1)),   # means over the columns
    lambda x, y, z: x @ y / 16 - jnp.outer(jnp.mean(x, 0), jnp.mean(y, 0)),     # not x.T
], ids=["other-array", "swapped", "wrong-count", "other-axis", "no-transpose"])
def test_covariance_near_misses_are_not_rewritten(fn):
    x, y, z = (jnp.asarray(rng.standard_normal((16, 16)), jnp.float32) for _ in range(3))
    assert "covariance_matrix" not in [a.rule for a in jst.explain(fn, x, y, z)]
    # jitted both ways, as for the mean of means below (a division by 15 may become a product)
    got = jax.jit(jst.stabilize(fn))(x, y, z)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(jax.jit(fn)(x, y, z)))


def test_covariance_form_directly():
    # forms.covariance on its own: eye(3) shifted by 1e4 has covariance eye/3 - 1/9 (3 rows)
    got = np.asarray(forms.covariance(1e4 + jnp.eye(3, dtype=jnp.float32)))
    exact = np.eye(3) / 3 - 1 / 9
    assert _ulps_of(got, exact, 1 / 3, np.float32).max() <= 2


# ----------------------------------------------------- batch statistics under jax.vmap(axis_name)
def _per_device_var(xd):  # flax BatchNorm's statistics with axis_name, as written per device
    mean = jnp.mean(xd, axis=0)
    mean2 = jnp.mean(jnp.square(xd), axis=0)
    mean, mean2 = lax.pmean(mean, "batch"), lax.pmean(mean2, "batch")
    return jnp.maximum(0.0, mean2 - jnp.square(mean))


def _per_device_norm(xd):
    mean = jnp.mean(xd, axis=0)
    mean2 = jnp.mean(jnp.square(xd), axis=0)
    mean, mean2 = lax.pmean(mean, "batch"), lax.pmean(mean2, "batch")
    var = jnp.maximum(0.0, mean2 - jnp.square(mean))
    return (xd - mean) * lax.rsqrt(var + EPS)


def _per_device_psum(xd):  # sums and a psum instead: the count is n · psum(1)
    s = lax.psum(jnp.sum(xd, 0), "batch")
    ss = lax.psum(jnp.sum(xd * xd, 0), "batch")
    n = xd.shape[0] * lax.psum(1, "batch")
    return ss / n - (s / n) ** 2


def vmapped_var(x):
    return jax.vmap(_per_device_var, axis_name="batch")(x)


def vmapped_psum(x):
    return jax.vmap(_per_device_psum, axis_name="batch")(x)


def nested_means(x):  # the same statistics without vmap: means of per-group means
    m = jnp.mean(jnp.mean(x, 1), 0)
    return jnp.mean(jnp.mean(x * x, 1), 0) - m * m


def _mp_var_union(x):
    """The variance per channel (last axis) over every other axis of x."""
    cols = x.reshape(-1, x.shape[-1])
    return np.diag(_mp_cov(cols, cols))


@pytest.mark.parametrize("dtype", ["float32", pytest.param("float64", marks=pytest.mark.slow)])
@pytest.mark.parametrize("data", DATA)
@pytest.mark.parametrize("fn", [vmapped_var, vmapped_psum, nested_means], ids=lambda f: f.__name__)
def test_batch_variance_across_groups_is_accurate_after_stabilize(fn, data, dtype):
    # 4 ulps of the variance: variance's corrected two-pass form (an ulp of the deviations, one of
    # their squares' sum, the scaling exact). As written float32 loses 24-32 bits here.
    x = np.asarray(DATA[data]((4, 8, 3)), dtype)
    with _x64(dtype):
        got = np.asarray(jax.jit(jst.stabilize(fn))(jnp.asarray(x)))
        written = np.asarray(jax.jit(fn)(jnp.asarray(x)))
        rules = [a.rule for a in jst.explain(fn, jnp.asarray(x))]
    assert rules == ["mean_of_means", "mean_of_means", "variance"]
    exact = _mp_var_union(x)
    got = got.reshape(-1, 3)  # the vmapped result repeats the statistics on every device
    assert _ulps_of(got, exact, exact, dtype).max() <= 4
    if dtype == "float32":
        assert _ulps_of(written.reshape(-1, 3), exact, exact, dtype).max() > 2 ** 10


@pytest.mark.parametrize("dtype", ["float32", pytest.param("float64", marks=pytest.mark.slow)])
@pytest.mark.parametrize("data", [*DATA, "a constant channel"])
def test_vmapped_batch_norm_is_accurate_after_stabilize(data, dtype):
    # 4 ulps of the largest output (as test_rewrites_center.py: the deviations carry the shifted
    # mean's rounding and their own, the variance and rsqrt one each); as written float32 is 2^20
    # ulps off on the clustered rows, and a constant channel gives ±ulp instead of 0
    if data == "a constant channel":
        x = np.asarray(1e4 + rng.standard_normal((4, 8, 3)), dtype)
        x[..., 2] = 0.1
    else:
        x = np.asarray(DATA[data]((4, 8, 3)), dtype)
    fn = jax.vmap(_per_device_norm, axis_name="batch")
    with _x64(dtype):
        got = np.asarray(jax.jit(jst.stabilize(fn))(jnp.asarray(x)))
        written = np.asarray(jax.jit(fn)(jnp.asarray(x)))
    var = _mp_var_union(x)
    cols = x.reshape(-1, 3)
    means = [mpmath.fsum(mpmath.mpf(float(v)) for v in cols[:, j]) / len(cols) for j in range(3)]
    inv = [1 / mpmath.sqrt(mpmath.mpf(float(v)) + mpmath.mpf(float(np.asarray(EPS, dtype))))
           for v in var]
    exact = np.array([[float((mpmath.mpf(float(v)) - means[j]) * inv[j]) for j, v in enumerate(r)]
                      for r in cols]).reshape(x.shape)
    scale = np.max(np.abs(exact))
    assert _ulps_of(got, exact, scale, dtype).max() <= 4
    if data == "a constant channel":
        assert np.all(got[..., 2] == 0)
    elif dtype == "float32":
        assert _ulps_of(written, exact, scale, dtype).max() > 2 ** 10


def test_vmapped_variance_gradient_is_the_formulas():
    # d/dx sum_c w_c var_c = w_c · 2(x - mean_c)/N, N = 32 (every device's value is the same:
    # the vmapped result repeats it 4 times, so the gradient is 4 times that)
    x = np.asarray(1e4 + rng.standard_normal((4, 8, 3)), np.float32)
    w = np.asarray([0.5, -1.0, 2.0], np.float32)
    got = np.asarray(jax.grad(lambda x: jnp.sum(w * jst.stabilize(vmapped_var)(x)))(jnp.asarray(x)))
    cols = x.reshape(-1, 3)
    means = [mpmath.fsum(mpmath.mpf(float(v)) for v in cols[:, j]) / 32 for j in range(3)]
    exact = np.array([[float(4 * w[j] * 2 * (mpmath.mpf(float(v)) - means[j]) / 32)
                       for j, v in enumerate(r)] for r in cols]).reshape(x.shape)
    # 4 ulps of the largest component: the deviation rounds once against its mean (an ulp of the
    # spread) and the written derivative scales it exactly but for one product
    assert _ulps_of(got, exact, np.max(np.abs(exact)), np.float32).max() <= 4


@pytest.mark.parametrize("fn", [
    # a mean of two means of unequal counts (8 and 4 values) is not the mean of the 12
    lambda x: (jnp.mean(x[:, :8], 1) + jnp.mean(x[:, 8:], 1)) / 2,
    lambda x: jnp.sum(jnp.mean(x, 1), 0) / 5,               # not the count of the means (4)
    lambda x: jnp.mean(jnp.sum(x, 1) / 11, 0),              # the inner divisor not its count
    lambda x: jnp.mean(jnp.max(x, 1), 0),                   # a mean of maxima
], ids=["unequal-groups", "outer-count", "inner-count", "of-maxima"])
def test_mean_of_means_near_misses_are_not_rewritten(fn):
    x = jnp.asarray(rng.standard_normal((4, 12)), jnp.float32)
    assert "mean_of_means" not in [a.rule for a in jst.explain(fn, x)]
    # both under jit: one compiled program each, the same when nothing was rewritten (op by op, XLA
    # may compile a division by a constant as a product by the reciprocal in one and not the other)
    np.testing.assert_array_equal(np.asarray(jax.jit(jst.stabilize(fn))(x)), np.asarray(jax.jit(fn)(x)))


def test_a_collective_over_a_named_mesh_axis_is_not_rewritten():
    # under shard_map the psum is over the mesh axis "batch": the other shards' data is not in the
    # program, so no mean over a union of axes exists to rewrite to (left as written)
    try:
        from jax import shard_map
    except ImportError:
        from jax.experimental.shard_map import shard_map
    from jax.sharding import Mesh
    from jax.sharding import PartitionSpec as P

    mesh = Mesh(np.array(jax.devices()[:1]), ("batch",))
    fn = shard_map(_per_device_var, mesh=mesh, in_specs=P("batch"), out_specs=P())
    x = jnp.asarray(1e4 + rng.standard_normal((8, 3)), jnp.float32)
    assert "mean_of_means" not in [a.rule for a in jst.explain(fn, x)]


# -------------------------------------------------------------------- merge of two batches
def naive_merge(xa, xb):
    s = jnp.sum(xa, 0) + jnp.sum(xb, 0)
    ss = jnp.sum(xa * xa, 0) + jnp.sum(xb * xb, 0)
    n = xa.shape[0] + xb.shape[0]
    return ss / n - (s / n) ** 2


@pytest.mark.parametrize("dtype", ["float32", pytest.param("float64", marks=pytest.mark.slow)])
@pytest.mark.parametrize("data", DATA)
def test_merged_batches_variance_is_accurate_after_stabilize(data, dtype):
    # 4 ulps of the variance (the corrected two-pass form over the concatenation); as written the
    # float32 merge is 2^28 ulps off here
    a = np.asarray(DATA[data]((16, 3)), dtype)
    b = np.asarray(DATA[data]((5, 3)), dtype)
    with _x64(dtype):
        got = np.asarray(jax.jit(jst.stabilize(naive_merge))(jnp.asarray(a), jnp.asarray(b)))
        written = np.asarray(jax.jit(naive_merge)(jnp.asarray(a), jnp.asarray(b)))
        assert [r.rule for r in jst.explain(naive_merge, a, b)] == ["merged_variance"]
    both = np.concatenate([a, b])
    exact = np.diag(_mp_cov(both, both))
    assert _ulps_of(got, exact, exact, dtype).max() <= 4
    if dtype == "float32":
        assert _ulps_of(written, exact, exact, dtype).max() > 2 ** 10


def test_merged_constant_batches_give_exactly_zero():
    a, b = jnp.full((16, 2), 1e4 + 0.3, jnp.float32), jnp.full((5, 2), 1e4 + 0.3, jnp.float32)
    np.testing.assert_array_equal(np.asarray(jst.stabilize(naive_merge)(a, b)), np.zeros(2))


def test_merged_variance_gradient_is_the_formulas():
    # d var / d a_k = 2(a_k - mean)/n, the mean over both batches (n = 21)
    a = np.asarray(1e4 + rng.standard_normal((16, 2)), np.float32)
    b = np.asarray(1e4 + rng.standard_normal((5, 2)), np.float32)
    ga, gb = jax.grad(lambda a, b: jnp.sum(jst.stabilize(naive_merge)(a, b)), argnums=(0, 1))(
        jnp.asarray(a), jnp.asarray(b))
    both = np.concatenate([a, b])
    means = [mpmath.fsum(mpmath.mpf(float(v)) for v in both[:, j]) / 21 for j in range(2)]
    exact = np.array([[float(2 * (mpmath.mpf(float(v)) - means[j]) / 21) for j, v in enumerate(r)]
                      for r in both])
    got = np.concatenate([np.asarray(ga), np.asarray(gb)])
    # 4 ulps of the largest component: the deviation's rounding against the mean, then one product
    assert _ulps_of(got, exact, np.max(np.abs(exact)), np.float32).max() <= 4


@pytest.mark.parametrize("fn", [
    lambda a, b: ((jnp.sum(a * a, 0) + jnp.sum(b * b, 0)) / 22          # not the count (21)
                  - ((jnp.sum(a, 0) + jnp.sum(b, 0)) / 22) ** 2),
    lambda a, b: ((jnp.sum(a * a, 0) + jnp.sum(b * b, 0)) / 21          # sums of another array
                  - ((jnp.sum(a, 0) + jnp.sum(b[::-1] + 1, 0)) / 21) ** 2),
    lambda a, b: ((jnp.sum(a * a, 0) + jnp.sum(b * b)) / 21             # b summed over all axes
                  - ((jnp.sum(a, 0) + jnp.sum(b)) / 21) ** 2),
], ids=["wrong-count", "other-array", "broadcast-sum"])
def test_merge_near_misses_are_not_rewritten(fn):
    a = jnp.asarray(rng.standard_normal((16, 3)), jnp.float32)
    b = jnp.asarray(rng.standard_normal((5, 3)), jnp.float32)
    assert "merged_variance" not in [r.rule for r in jst.explain(fn, a, b)]


def test_merged_variance_form_refuses_unequal_kept_shapes():
    with pytest.raises(ValueError, match="kept axes differ"):
        forms.merged_variance(jnp.ones((4, 3)), jnp.ones((4, 2)))


def test_covariance_under_vmap_is_rewritten_batched():
    # jax.vmap makes the contraction a batched dot_general (batch axis 0, rows axis 1) and the means
    # broadcast along (0, 1) and (0, 2): the rule reads that numbering
    x = np.asarray(1e4 + rng.standard_normal((2, 16, 3)), np.float32)
    fn = jax.vmap(cov_matmul)
    assert [a.rule for a in jst.explain(fn, x)] == ["covariance_matrix"]
    got = np.asarray(jst.stabilize(fn)(jnp.asarray(x)))
    for k in range(2):
        exact = _mp_cov(x[k], x[k])
        assert _ulps_of(got[k], exact, _cov_scale(x[k], x[k]), np.float32).max() <= 8


def test_covariance_of_a_batched_and_an_unbatched_array_is_left_as_written():
    # vmap over x only: y's means are broadcast without the batch axis, a numbering the rule does not
    # read (refused rather than guessed)
    x = jnp.asarray(rng.standard_normal((2, 16, 3)), jnp.float32)
    y = jnp.asarray(rng.standard_normal((16, 4)), jnp.float32)
    fn = jax.vmap(cross_cov, in_axes=(0, None))
    assert "covariance_matrix" not in [a.rule for a in jst.explain(fn, x, y)]


@pytest.mark.parametrize("ddof", [0, 1])
def test_var_gradient_is_finite_where_only_the_variance_overflows(ddof):
    """``jnp.var`` of float32 values near 1e30: the variance (about 1e60) overflows, its derivative
    2·(x - mean)/(n - ddof) (about 1e30) does not. The rewritten form's derivative, taken through its
    two power-of-two scalings, was inf·0 = NaN there (soundness fuzz, seed 4, program 80). Exact
    reference in mpmath; 2 ulps: the deviations are formed on x / s (exact) and rounded once each,
    summed over 4 terms for the mean."""
    x = np.array([1e30, -2e30, 3e29, 5e29], np.float32)
    fn = lambda v: jnp.var(v, ddof=ddof)
    got = np.asarray(jax.grad(jst.stabilize(fn))(jnp.asarray(x)))
    xs = [mpmath.mpf(float(v)) for v in x]
    mean = mpmath.fsum(xs) / len(xs)
    exact = [2 * (v - mean) / (len(xs) - ddof) for v in xs]
    assert np.all(np.isfinite(got))
    assert np.max(_ulps_of(got, np.array([float(e) for e in exact]), got, np.float32)) <= 2
