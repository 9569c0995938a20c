"""The catalogue's normal-distribution and inverse-hyperbolic rules (``catalogue/_stability_special.py``).

Each family is written in several spellings users write (constants folded or traced, ``jax.lax`` vs
``jax.scipy``, operand order, the library's own ``ndtr``/``log_ndtr``/``ndtri``), and judged against
mpmath at 256 bits on grids that include the tails, in float32 and float64:

- accuracy: max <= 8 bits and mean <= 2 bits. The forms are a handful of roundings of accurate
  pieces (``erfcx``, ``exp``, ``log1p``, JAX's ``ndtri``/``asinh``: each within 2 bits measured), so a
  correct form sits at 0-3 bits; 8 bits max leaves room for the ``x²``-conditioned tail of Φ where
  the scaled argument rounds, and is far below what the written forms lose (all 24/53 bits, or
  0/-inf/NaN). The mean bound says the typical point is within a few ulps;
- no overflow or NaN where the exact value is finite (and not in the subnormal range XLA:CPU
  flushes: there a zero or subnormal result scores 0 bits, docs/architecture.md section 3);
- never worse than the original where the original was fine (<= 1 bit): at most 3 bits there;
- the rule fired (``jst.explain``), near-misses are not rewritten, gradients are finite and within
  4 bits of the exact derivative where they are meaningful.

A Φ spelling whose constant is √2 rounded (``x * 0.7071067811865476``, ``x / 1.4142135``) is judged
against its exact meaning, Φ(x·c·√2) with the program's c (as the oracle judges it): the rewrite
keeps the program's value over the reals (module docstring of ``_stability_special``). JAX's own
``ndtr`` (``norm.cdf``), inlined with its rounded 1/√2 up to jax 0.12.0, is judged as Φ itself, as the
oracle judges it; jax 0.12.1's own ``ndtr``/``log_ndtr`` called bare are accurate and left alone
(``Case.own``), held to the same bounds.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import jax.scipy.special as S
import numpy as np
import pytest

import pytest_jaxstab as jst
from pytest_jaxstab._compat import enable_x64
from pytest_jaxstab.oracles import error_bits
from pytest_jaxstab.oracles.core._rounding import round_to_dtype
from tests.test_rewrites_generalise import MP, _mp

# The slow tier (`make test-slow`, run in full by CI; `make test` leaves it out): docs/architecture.md,
# "Tests and their tiers".
pytestmark = pytest.mark.slow

erf, erfc, erfinv = S.erf, jax.lax.erfc, S.erfinv
OLD_JAX = tuple(int(v) for v in jax.__version__.split(".")[:2]) < (0, 11)


def _x64(dtype: Any) -> Any:
    """JAX's 64-bit mode for float64 cases (the suite runs without it)."""
    return enable_x64() if np.dtype(dtype) == np.float64 else contextlib.nullcontext()


def _per_element_bits(got: Any, exact: list[Any], dtype: Any) -> np.ndarray:
    """Error bits per element; a zero or subnormal result where the exact one is subnormal scores 0
    (XLA:CPU flushes subnormals)."""
    got = np.asarray(got)
    want = round_to_dtype(np.array(exact, dtype=object).reshape(got.shape), dtype)
    bits = np.asarray(error_bits(got, want), np.float64)
    tiny = np.finfo(dtype).tiny
    flushed = (np.abs(want.astype(np.float64)) < tiny) & (np.abs(got.astype(np.float64)) < tiny)
    return np.where(flushed, 0.0, bits)


# ----------------------------------------------------------------------------- exact references
def _phi(v: Any) -> Any:
    return MP.ncdf(v)


def _log_phi(v: Any) -> Any:
    return MP.log(MP.ncdf(v)) if v < 0 else MP.log1p(-MP.ncdf(-v))


def _ndtri(p: Any) -> Any:
    return -MP.sqrt(2) * MP.erfinv(1 - 2 * p)


# a regular grid and as many full-mantissa points (a multiple of 1/8 has few bits: the split of x²
# in the forms is exact there, and only arbitrary inputs test its low part)
GRID_X = np.concatenate([np.linspace(-40, 40, 321), np.random.default_rng(0).uniform(-40, 40, 320),
                         [-1e-30, 1e-30, -1e-5, 1e-5, -0.3, 0.7]])
GRID_P = np.concatenate([np.logspace(-30, -1, 120), np.linspace(0.1, 0.9, 33),
                         1 - np.logspace(-1, -7, 25)])
GRID_Y = 2 * GRID_P  # for erfinv(1 - y) / erfinv(y - 1): y in (0, 2)
GRID_H = np.concatenate([-np.logspace(-30, 30, 121), np.logspace(-30, 30, 121), [0.0, 1.0, -1.0]])
GRID_C = np.concatenate([[1.0], 1 + np.logspace(-7, 0, 30), np.logspace(0.5, 30, 60)])
GRID_T = np.concatenate([-np.logspace(-30, -1e-9, 100), np.logspace(-30, -1e-9, 100), [0.0],
                         1 - np.logspace(-7, -1, 20), -1 + np.logspace(-7, -1, 20)])


@dataclasses.dataclass(frozen=True)
class Case:
    id: str
    rule: str
    fn: Callable[..., Any]
    grid: np.ndarray
    exact: Callable[[Any], Any]  # mpf -> mpf
    deriv: Callable[[Any], Any] | None = None  # the exact derivative, or None (not checked)
    written_fails: bool = True  # the spelling as written loses bits on the grid (False: a canonical form)
    # the program's x/√2 written with a literal ("mul", c) or ("div", c): its exact meaning is
    # Φ(x·c·√2) with c rounded to the dtype (the constant is the program's, not √2 itself)
    literal: tuple[str, float] | None = None
    x_factor: bool = False  # the exact value is x·Φ(x·c·√2): ``exact`` gets v·c·√2, times x/(v·c·√2)
    # JAX's own routine called bare (norm.cdf, norm.logcdf): rewritten where that routine is inaccurate
    # (jax 0.10 to 0.12.0), left alone where it is not (0.12.1: _compat.ACCURATE); held to the same bounds
    own: bool = False

    def argument(self, v: Any, dtype: Any) -> Any:
        if self.literal is None:
            return v
        kind, c = self.literal
        c_dt = MP.mpf(float(np.dtype(dtype).type(c)))
        return v * c_dt * MP.sqrt(2) if kind == "mul" else v / c_dt * MP.sqrt(2)

    def __str__(self) -> str:
        return self.id


def _dphi(v: Any) -> Any:
    return MP.npdf(v)


def _dlog_phi(v: Any) -> Any:
    return MP.npdf(v) / MP.ncdf(v)


def _dquantile(p: Any) -> Any:
    return 1 / MP.npdf(_ndtri(p))


# jax.nn.gelu(approximate=False) writes its own x * (1/√2 rounded), not a call of ndtr: it is judged
# as written, the constant's exact value included
_GELU_CONST = ("mul", 0.7071067811865476)
CASES = [
    # Φ(x), its complement, their logs
    Case("phi[0.5*(1+erf(x/sqrt(2)))]", "normal_cdf", lambda x: 0.5 * (1 + erf(x / jnp.sqrt(2.0))),
         GRID_X, _phi, _dphi),
    Case("phi[(1+lax.erf(x*0.7071..))/2]", "normal_cdf",
         lambda x: (1 + jax.lax.erf(x * 0.7071067811865476)) / 2, GRID_X, _phi, _dphi,
         literal=("mul", 0.7071067811865476)),
    Case("phi[0.5+0.5*erf(x/1.4142135)]", "normal_cdf", lambda x: 0.5 + 0.5 * erf(x / 1.4142135),
         GRID_X, _phi, literal=("div", 1.4142135)),
    Case("phi[erfc(-x/sqrt2)/2]", "normal_cdf", lambda x: erfc(-x / math.sqrt(2)) / 2, GRID_X, _phi,
         _dphi, literal=("div", math.sqrt(2))),
    Case("phi[(x-1)/(2*sqrt2)]", "normal_cdf", lambda x: 0.5 * (1 + erf((x - 1.0) / (2.0 * jnp.sqrt(2.0)))),
         GRID_X, lambda v: MP.ncdf((v - 1) / 2)),
    # JAX's ndtr, inlined up to jax 0.12.0, computes x * 0.7071067811865476 but means Φ(x): the oracle
    # recognises it by its source location and judges it by Φ, and so does the rewrite
    Case("phi[norm.cdf]", "normal_cdf", jax.scipy.stats.norm.cdf, GRID_X, _phi, _dphi, own=True),
    Case("sf[1-0.5*(1+erf)]", "normal_cdf", lambda x: 1 - 0.5 * (1 + erf(x / jnp.sqrt(2.0))), GRID_X,
         lambda v: _phi(-v), lambda v: -_dphi(v)),
    Case("sf[0.5*erfc(x/sqrt2)]", "normal_cdf", lambda x: 0.5 * erfc(x / np.sqrt(2)), GRID_X,
         lambda v: _phi(-v), literal=("div", math.sqrt(2))),
    Case("sf[1-ndtr]", "normal_cdf", lambda x: 1 - S.ndtr(x), GRID_X, lambda v: _phi(-v)),
    Case("logphi[log(0.5*(1+erf))]", "log_normal_cdf", lambda x: jnp.log(0.5 * (1 + erf(x / jnp.sqrt(2.0)))),
         GRID_X, _log_phi, _dlog_phi),
    Case("logphi[log(ndtr)]", "log_normal_cdf", lambda x: jnp.log(S.ndtr(x)), GRID_X, _log_phi,
         _dlog_phi),
    Case("logphi[norm.logcdf]", "log_normal_cdf", jax.scipy.stats.norm.logcdf, GRID_X, _log_phi,
         _dlog_phi, own=True),
    Case("logsf[log(1-ndtr)]", "log_normal_cdf", lambda x: jnp.log(1 - S.ndtr(x)), GRID_X,
         lambda v: _log_phi(-v)),
    Case("logsf[log1p(-cdf)]", "log_normal_cdf",
         lambda x: jnp.log1p(-(0.5 * erfc(-x * 0.7071067811865476))), GRID_X, lambda v: _log_phi(-v),
         literal=("mul", 0.7071067811865476)),
    Case("logsf[log(0.5*erfc)]", "log_normal_cdf", lambda x: jnp.log(0.5 * erfc(x / jnp.sqrt(2.0))),
         GRID_X, lambda v: _log_phi(-v)),
    # x·Φ(x): the exact GELU, written and jax.nn's (which computes 0.5·x·erfc(-x·0.7071067811865476))
    Case("gelu[0.5*x*(1+erf(x/sqrt2))]", "scaled_normal_cdf",
         lambda x: 0.5 * x * (1 + erf(x / jnp.sqrt(2.0))), GRID_X, lambda v: v * _phi(v)),
    Case("gelu[x*(1+erf(x/sqrt2))/2]", "scaled_normal_cdf", lambda x: x * (1 + erf(x / jnp.sqrt(2.0))) / 2,
         GRID_X, lambda v: v * _phi(v)),
    Case("gelu[jax.nn.gelu exact]", "scaled_normal_cdf", lambda x: jax.nn.gelu(x, approximate=False),
         GRID_X, lambda v: v * _phi(v), literal=_GELU_CONST, x_factor=True),
    # log erfc(z) with z itself (no √2)
    Case("log_erfc[log(erfc)]", "log_erfc", lambda z: jnp.log(erfc(z)), GRID_X, lambda v: MP.log(MP.erfc(v)),
         lambda v: -2 * MP.exp(-v * v) / (MP.sqrt(MP.pi) * MP.erfc(v))),
    Case("log_erfc[log(1-erf)]", "log_erfc", lambda z: jnp.log(1 - erf(z)), GRID_X,
         lambda v: MP.log(MP.erfc(v))),
    Case("log_erfc[log1p(erf)]", "log_erfc", lambda z: jnp.log1p(erf(z)), GRID_X,
         lambda v: MP.log(MP.erfc(-v))),
    # quantiles
    Case("quantile[sqrt2*erfinv(2p-1)]", "normal_quantile",
         lambda p: jnp.sqrt(2.0) * erfinv(2 * p - 1), GRID_P, _ndtri, _dquantile),
    Case("quantile[erfinv(2*p-1)*sqrt2]", "normal_quantile",
         lambda p: erfinv(2.0 * p - 1.0) * math.sqrt(2), GRID_P, _ndtri, _dquantile),
    Case("quantile[-sqrt2*erfinv(1-2p)]", "normal_quantile",
         lambda p: -math.sqrt(2) * erfinv(1 - 2 * p), GRID_P, _ndtri),
    Case("quantile[erfinv(2(p-0.5))/0.7071]", "normal_quantile",
         lambda p: erfinv(2 * (p - 0.5)) / 0.7071067811865476, GRID_P, _ndtri),
    Case("ndtri(1-p)", "ndtri_complement", lambda p: S.ndtri(1 - p), GRID_P, lambda v: -_ndtri(v),
         lambda v: -_dquantile(v)),
    Case("erfinv(1-y)", "normal_quantile", lambda y: erfinv(1 - y), GRID_Y, lambda v: MP.erfinv(1 - v)),
    Case("erfinv(y-1)", "normal_quantile", lambda y: erfinv(y - 1), GRID_Y, lambda v: MP.erfinv(v - 1)),
    # inverse hyperbolics
    Case("asinh[log(x+sqrt(x**2+1))]", "asinh", lambda x: jnp.log(x + jnp.sqrt(x**2 + 1)), GRID_H, MP.asinh,
         lambda v: 1 / MP.sqrt(1 + v * v)),
    Case("asinh[square, 1+]", "asinh", lambda x: jnp.log(x + jnp.sqrt(1 + jnp.square(x))), GRID_H, MP.asinh),
    Case("asinh[x*x]", "asinh", lambda x: jnp.log(jnp.sqrt(x * x + 1.0) + x), GRID_H, MP.asinh),
    Case("-asinh[log(sqrt(x**2+1)-x)]", "asinh", lambda x: jnp.log(jnp.sqrt(x**2 + 1) - x), GRID_H,
         lambda v: -MP.asinh(v)),
    Case("acosh[log(x+sqrt(x*x-1))]", "acosh", lambda x: jnp.log(x + jnp.sqrt(x * x - 1)), GRID_C, MP.acosh,
         lambda v: 1 / MP.sqrt(v * v - 1) if v > 1 else None),
    Case("acosh[sqrt((x-1)(x+1))]", "acosh", lambda x: jnp.log(x + jnp.sqrt((x - 1) * (x + 1))), GRID_C,
         MP.acosh),
    Case("atanh[0.5*log((1+x)/(1-x))]", "atanh", lambda x: 0.5 * jnp.log((1 + x) / (1 - x)), GRID_T,
         MP.atanh, lambda v: 1 / (1 - v * v) if abs(v) < 1 else None),
    # accurate as written (log1p of each side): rewritten to one atanh, as accurate and cheaper
    Case("atanh[(log1p(x)-log1p(-x))/2]", "atanh", lambda x: (jnp.log1p(x) - jnp.log1p(-x)) / 2, GRID_T,
         MP.atanh, written_fails=False),
    Case("atanh[0.5*(log(1+x)-log(1-x))]", "atanh", lambda x: 0.5 * (jnp.log(1 + x) - jnp.log(1 - x)),
         GRID_T, MP.atanh),
]
# JAX 0.10's log1p, expm1 and erfcx round differently (log1p(-0.404) 6 bits off): where the spelling
# as written was within a bit, the rewrite is 3.3-6.1 bits (float64), still within 8. Its asinh and
# acosh derivatives square x (0 at 3e19 in float32), and its erf derivative rounds z² inside
# exp(-z²) (log erfc's derivative 5.9 / 8.7 bits at z = -8.7 / -24), where 0.11+ do not.
OLD_JAX_SPELLING = {(n, "float64") for n in (
    "phi[0.5+0.5*erf(x/1.4142135)]", "logphi[log(0.5*(1+erf))]", "logphi[log(ndtr)]", "logphi[norm.logcdf]",
    "logsf[log(1-ndtr)]", "logsf[log(0.5*erfc)]")}
OLD_JAX_GRADIENT = {("asinh[log(x+sqrt(x**2+1))]", "float32"), ("acosh[log(x+sqrt(x*x-1))]", "float32"),
                    ("log_erfc[log(erfc)]", "float32"), ("log_erfc[log(erfc)]", "float64")}
# JAX 0.10 inlines ndtri (no custom rule to recognise): ndtri_complement cannot fire there
OLD_JAX_BOTH = {"ndtri(1-p)"}


def _params(cases: list[Case], old_jax_misses: set[tuple[str, str]]) -> list[Any]:
    out = []
    for case in cases:
        for dtype in (np.float32, np.float64):
            name = np.dtype(dtype).name
            missed = OLD_JAX and ((case.id, name) in old_jax_misses or case.id in OLD_JAX_BOTH)
            marks = [pytest.mark.xfail(reason="jax 0.10 rounding, see OLD_JAX_*")] if missed else []
            out.append(pytest.param(case, dtype, marks=marks, id=f"{case}-{name}"))
    return out


_EXACT_CACHE: dict[tuple[str, str], list[Any]] = {}


def _exact(case: Case, x: np.ndarray, dtype: Any) -> list[Any]:
    key = (case.id, np.dtype(dtype).name)
    if key not in _EXACT_CACHE:
        values = []
        for v in _mp(x):
            u = case.argument(v, dtype)
            values.append(case.exact(u) * v / u if case.x_factor and u != 0 else case.exact(u))
        _EXACT_CACHE[key] = values
    return _EXACT_CACHE[key]


def _inputs(case: Case, dtype: Any) -> np.ndarray:
    x = case.grid.astype(dtype)
    return x[np.isfinite(x)]


@pytest.mark.parametrize(("case", "dtype"), _params(CASES, OLD_JAX_SPELLING))
def test_spelling_is_fixed_by_stabilize(case: Case, dtype: Any):
    x = _inputs(case, dtype)
    exact = _exact(case, x, dtype)
    with _x64(dtype):
        fired = case.rule in jst.explain(case.fn, x[:4]).rules
        assert fired or case.own, f"{case}: {case.rule} did not fire"
        got = np.asarray(jax.jit(jst.stabilize(case.fn))(x))
        before = np.asarray(jax.jit(case.fn)(x))
    bits, orig = _per_element_bits(got, exact, dtype), _per_element_bits(before, exact, dtype)
    finite = np.isfinite(round_to_dtype(np.array(exact, dtype=object), dtype).astype(np.float64))
    worst = int(np.argmax(bits))
    detail = (f"{case} {np.dtype(dtype).name}: max {bits.max():.1f} bits at x={x[worst]!r} "
              f"(got {got[worst]!r}), mean {bits.mean():.2f}; as written max {orig.max():.1f} mean "
              f"{orig.mean():.2f}")
    assert bits.max() <= 8.0, detail
    assert bits.mean() <= 2.0, detail
    assert np.isfinite(got[finite]).all(), detail
    # never worse than the program as written where that was fine (a few roundings placed differently)
    fine = orig <= 1.0
    assert (bits[fine] <= 3.0).all(), detail
    # JAX's own routine left alone must be as good as a form (0-3 bits); where it is not, the rule fired
    if case.own and orig.max() > 3.0:
        assert fired, detail
    # and the written form really failed somewhere on the grid (the case tests something)
    if case.written_fails and fired:
        assert orig.max() > bits.max(), detail


GRAD_CASES = [c for c in CASES if c.deriv is not None]


@pytest.mark.parametrize(("case", "dtype"), _params(GRAD_CASES, OLD_JAX_GRADIENT))
def test_gradient_is_finite_and_accurate(case: Case, dtype: Any):
    x = _inputs(case, dtype)
    assert case.deriv is not None
    derivs = [case.deriv(case.argument(v, dtype)) for v in _mp(x)]
    if case.literal is not None:  # the chain rule's factor c·√2
        factor = case.argument(MP.one, dtype)
        derivs = [None if d is None else d * factor for d in derivs]
    keep = np.array([d is not None for d in derivs])
    x = x[keep]
    exact = [d for d in derivs if d is not None]
    with _x64(dtype):
        got = np.asarray(jax.jit(jax.vmap(jax.grad(jst.stabilize(case.fn))))(x))
    bits = _per_element_bits(got, exact, dtype)
    finite = np.isfinite(round_to_dtype(np.array(exact, dtype=object), dtype).astype(np.float64))
    worst = int(np.argmax(bits))
    detail = f"{case} {np.dtype(dtype).name}: max {bits.max():.1f} bits at x={x[worst]!r}, got {got[worst]!r}"
    assert np.isfinite(got[finite]).all(), detail
    assert bits.max() <= 4.0, detail


def test_jax_log_ndtr_gradient_is_jax_own_error_and_the_rewrite_is_accurate():
    # jax 0.10 to 0.12.0's grad(log_ndtr) at -20 (float64) is 24 bits off (its asymptotic series'
    # derivative): the rewritten norm.logcdf carries the exact derivative φ/Φ = √(2/π)/erfcx(20/√2).
    # jax 0.12.1's is accurate and left alone. On every JAX the result is within 2 bits, and where the
    # installed JAX's own gradient is not (measured against mpmath), log_normal_cdf fired.
    x = np.array([-20.0])
    exact = [_dlog_phi(MP.mpf(-20))]
    with enable_x64():
        fired = "log_normal_cdf" in jst.explain(jax.scipy.stats.norm.logcdf, x).rules
        jax_grad = np.asarray(jax.vmap(jax.grad(S.log_ndtr))(x))
        our_grad = np.asarray(jax.vmap(jax.grad(jst.stabilize(jax.scipy.stats.norm.logcdf)))(x))
    jax_bits = _per_element_bits(jax_grad, exact, np.float64)
    ours = _per_element_bits(our_grad, exact, np.float64)
    assert ours.max() <= 2.0, (jax_bits, ours)
    assert fired or jax_bits.max() <= 2.0, (jax_bits, ours)


# (not in -13.4 < x < -12.95 float32 / -38.4 < x < -37.5 float64, where Φ(x) is subnormal and the
# derivative is not: grad's transpose adds the flushed Φ(x) on its own, 0.6% short; see
# forms/_special._scaled_ndtr_jvp)
@pytest.mark.parametrize(("dtype", "points"), [(np.float32, [-12.9, -12.5, -9.5, -5.0, 3.0]),
                                               (np.float64, [-37.0, -30.3, -12.9, -5.0, 3.0])],
                         ids=["float32", "float64"])
def test_gelu_gradient_in_the_tail(dtype: Any, points: list[float]):
    # d/dx x·Φ(x) = Φ(x) + x·φ(x) (no cancellation for x << -1; near x = -0.75 it is zero, and any
    # form's derivative cancels there as the problem does): y·φ is formed before φ can be subnormal
    x = np.array(points, dtype)
    f = lambda v: 0.5 * v * (1 + erf(v / jnp.sqrt(2.0)))
    with _x64(dtype):
        got = np.asarray(jax.vmap(jax.grad(jst.stabilize(f)))(x))
    exact = [_phi(v) + v * _dphi(v) for v in _mp(x)]
    assert np.isfinite(got).all(), got
    assert _per_element_bits(got, exact, dtype).max() <= 4.0, got


# ------------------------------------------------------------------------------- near misses
NEAR_MISSES = [
    ("0.5*(1+erf(x/3)) is not Φ", "normal_cdf", lambda x: 0.5 * (1 + erf(x / 3))),
    ("x*0.7071 is not x/√2 to 7 digits", "normal_cdf", lambda x: 0.5 * (1 + erf(x * 0.7071))),
    ("0.4*(1+erf(x/√2)) is not Φ", "normal_cdf", lambda x: 0.4 * (1 + erf(x / jnp.sqrt(2.0)))),
    ("log(x + sqrt(x²+2)) is not asinh", "asinh", lambda x: jnp.log(x + jnp.sqrt(x**2 + 2))),
    ("log(y + sqrt(x²+1)) is not asinh", "asinh", lambda x: jnp.log(2 * x + jnp.sqrt(x**2 + 1))),
    ("log(x + sqrt(x²-2)) is not acosh", "acosh", lambda x: jnp.log(x + jnp.sqrt(x**2 - 2))),
    ("0.5*log((2+x)/(1-x)) is not atanh", "atanh", lambda x: 0.5 * jnp.log((2 + x) / (1 - x))),
    ("0.25*log((1+x)/(1-x)) is not atanh", "atanh", lambda x: 0.25 * jnp.log((1 + x) / (1 - x))),
    ("erfinv(2p - 0.5) is no quantile", "normal_quantile", lambda p: erfinv(2 * p - 0.5)),
]


@pytest.mark.parametrize(("why", "rule", "fn"), NEAR_MISSES, ids=[n[0] for n in NEAR_MISSES])
def test_near_miss_is_not_rewritten(why: str, rule: str, fn: Callable[..., Any]):
    assert rule not in jst.explain(fn, np.array([0.25, 0.5], np.float32)).rules, why


def test_one_plus_erf_is_erfc_of_minus_z_and_its_value_is_kept():
    # the near-miss 0.5*(1+erf(x/3)) still gets the general identity 1 + erf(z) = erfc(-z)
    f = lambda x: 0.5 * (1 + erf(x / 3))
    x = np.array([-30.0, -15.0, -3.0, 0.0, 1.5, 6.0], np.float64)  # x/3 exact
    with enable_x64():
        assert jst.explain(f, x).rules == ["erfc_identities"]
        got = np.asarray(jst.stabilize(f)(x))
    exact = [MP.erfc(-v / 3) / 2 for v in _mp(x)]
    assert _per_element_bits(got, exact, np.float64).max() <= 2.0


# ------------------------------------------------------------------------------ jst.check
CHECKED = [
    ("phi", lambda x: 0.5 * (1 + erf(x / jnp.sqrt(2.0))), (-40.0, 40.0)),
    ("logsf", lambda x: jnp.log(0.5 * erfc(x * 0.7071067811865476)), (-1e4, 1e4)),
    ("quantile", lambda p: jnp.sqrt(2.0) * erfinv(2 * p - 1), (1e-30, 1.0)),
    ("asinh", lambda x: jnp.log(x + jnp.sqrt(x * x + 1)), (-1e30, 1e30)),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(("name", "fn", "domain"), CHECKED, ids=[c[0] for c in CHECKED])
def test_check_passes_after_stabilize(name: str, fn: Callable[..., Any], domain: Any, dtype: str):
    result = jst.check(fn, shapes=[(8,)], dtype=dtype, domain=domain, judge="accuracy", seed=0,
                       max_examples=40, name=name)
    rewritten, original = result.rewritten, result.original
    detail = (f"{name} {dtype}: original {original.mean_error_bits:.1f} / {original.max_error_bits:.1f}, "
              f"rewritten {rewritten.mean_error_bits:.1f} / {rewritten.max_error_bits:.1f} / "
              f"{rewritten.overflows}")
    assert result.rewrites, detail
    assert rewritten.max_error_bits <= 8.0, detail
    assert rewritten.mean_error_bits <= 2.0, detail
    assert rewritten.overflows == 0, detail
