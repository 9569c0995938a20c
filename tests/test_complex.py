"""Complex dtypes end to end: the oracle's complex balls against mpmath, the normwise metric, the complex
strategies' classes, and checks where a naive complex formula fails and the library function passes."""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import mpmath
import numpy as np
import pytest
from hypothesis import given, settings

import pytest_jaxstab as jst
from pytest_jaxstab.oracles import UnsupportedPrimitive, error_bits, evaluate
from pytest_jaxstab.strategies import _arrays, arguments, arrays

DTYPES = ["complex64", "complex128"]
_MPC: Any = mpmath.mpc  # its stubs take ints only
PART_BITS = {"complex64": 24, "complex128": 53}


def _round(x: Any, p: int) -> float:
    """``x`` rounded to ``p`` significant bits by mpmath (normal range only), as a Python float: the
    reference rounding, independent of the oracle's."""
    with mpmath.workprec(p):
        return float(+mpmath.mpf(x))


def _reference(values: list[Any], dtype: str) -> np.ndarray:
    p = PART_BITS[dtype]
    with np.errstate(over="ignore"):  # a part beyond the largest float: inf, as IEEE rounding gives
        parts = [complex(_round(mpmath.re(v), p), _round(mpmath.im(v), p)) for v in values]
        return np.array(parts, dtype=dtype)


def _inputs(dtype: str) -> tuple[np.ndarray, np.ndarray]:
    big = 1e30 if dtype == "complex64" else 1e300
    z = np.array([1 + 2j, -3.5 + 1e-3j, 2e-20 - 7e-21j, big + big * 1j, 0.75 - 0.25j, -1e-3 + 5j], dtype)
    w = np.array([2 - 1j, 1e10 + 3j, -1 + 1e-30j, big * 0.5 - big * 1j, 0.5 + 0.5j, 3 + 4j], dtype)
    return z, w


def _mpc(a: np.ndarray) -> list[Any]:
    return [_MPC(complex(v)) for v in a]  # exact: the parts are floats


CASES = {
    "add": (lambda z, w: z + w, lambda a, b: a + b),
    "mul": (lambda z, w: z * w, lambda a, b: a * b),
    "div": (lambda z, w: z / w, lambda a, b: a / b),
    "log": (lambda z, w: jnp.log(z), lambda a, b: mpmath.log(a)),
    "sqrt": (lambda z, w: jnp.sqrt(z), lambda a, b: mpmath.sqrt(a)),
    "conj_mul": (lambda z, w: jnp.conj(z) * w, lambda a, b: mpmath.conj(a) * b),
    "complex_of_parts": (lambda z, w: jax.lax.complex(jnp.real(z), jnp.imag(w)),
                         lambda a, b: _MPC(mpmath.re(a), mpmath.im(b))),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ["add", "mul", "div", "log", "sqrt", "conj_mul", "complex_of_parts"])
def test_complex_primitives_are_correctly_rounded(dtype: str, name: str) -> None:
    fn, ref = CASES[name]
    z, w = _inputs(dtype)
    with jax.enable_x64(dtype == "complex128"):
        result = evaluate(fn, z, w)
    with mpmath.workprec(4000):
        expected = _reference([ref(a, b) for a, b in zip(_mpc(z), _mpc(w))], dtype)
    assert result.values.dtype == np.dtype(dtype)
    assert bool(np.all(result.certain))
    np.testing.assert_array_equal(result.values, expected)


@pytest.mark.parametrize("dtype", DTYPES)
def test_exp_abs_real_imag_against_mpmath(dtype: str) -> None:
    z = np.array([1 + 2j, -30 + 0.5j, 1e-10 - 3j, 20 + 100j, -0.5 - 0.25j], dtype)
    with jax.enable_x64(dtype == "complex128"):
        result = evaluate(lambda z: (jnp.exp(z), jnp.abs(z), jnp.real(z), jnp.imag(z)), z)
    part = "float32" if dtype == "complex64" else "float64"
    p = PART_BITS[dtype]
    with mpmath.workprec(4000):
        zs = _mpc(z)
        exp = _reference([mpmath.exp(a) for a in zs], dtype)
        mod = np.array([_round(abs(a), p) for a in zs], part)
    np.testing.assert_array_equal(result.values[0], exp)
    np.testing.assert_array_equal(result.values[1], mod)
    np.testing.assert_array_equal(result.values[2], np.real(z))
    np.testing.assert_array_equal(result.values[3], np.imag(z))
    assert all(bool(np.all(c)) for c in result.certain)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("inverse", [False, True])
def test_fft_is_the_exact_dft(dtype: str, inverse: bool) -> None:
    z = np.array([1 + 2j, -3e5 + 1j, 2e-7 - 1j, 7 + 0j, 0.1 - 0.2j, -1 + 1e3j], dtype)
    fn = jnp.fft.ifft if inverse else jnp.fft.fft
    with jax.enable_x64(dtype == "complex128"):
        result = evaluate(fn, z)
    n = len(z)
    with mpmath.workprec(4000):
        xs = _mpc(z)
        sign = 1 if inverse else -1
        dft = [mpmath.fsum(xs[j] * mpmath.expjpi(mpmath.mpf(2 * sign * j * k) / n) for j in range(n))
               / (n if inverse else 1) for k in range(n)]
        expected = _reference(dft, dtype)
    assert bool(np.all(result.certain))
    np.testing.assert_array_equal(result.values, expected)


def test_rfft_and_irfft_are_exact() -> None:
    x = np.array([1.0, -2.5, 3e-3, 4.0, 0.5, -7.0], np.float64)
    with jax.enable_x64(True):
        spec = evaluate(jnp.fft.rfft, x)
        back = evaluate(jnp.fft.irfft, np.asarray(spec.values))
    n = len(x)
    with mpmath.workprec(4000):
        dft = [mpmath.fsum(mpmath.mpf(float(x[j])) * mpmath.expjpi(mpmath.mpf(-2 * j * k) / n)
                           for j in range(n)) for k in range(n // 2 + 1)]
        np.testing.assert_array_equal(spec.values, _reference(dft, "complex128"))
        ys = [_MPC(complex(v)) for v in spec.values]
        full = [ys[k] if k <= n // 2 else mpmath.conj(ys[n - k]) for k in range(n)]
        full[0], full[n // 2] = _MPC(mpmath.re(full[0])), _MPC(mpmath.re(full[n // 2]))
        inv = [mpmath.re(mpmath.fsum(full[k] * mpmath.expjpi(mpmath.mpf(2 * j * k) / n)
                                     for k in range(n)) / n) for j in range(n)]
    np.testing.assert_array_equal(back.values, np.array([_round(v, 53) for v in inv]))


def test_a_branch_cut_point_is_uncertain_and_log_zero_has_no_value() -> None:
    # On the cut the float result is chosen by the sign of a zero imaginary part: sqrt(-4 + 0j) = 2j,
    # sqrt(-4 - 0j) = -2j. Reals have one zero: never guessed.
    z = np.array([-4 + 0j, -4 + 1e-30j, 0j], np.complex64)
    result = evaluate(jnp.sqrt, z)
    assert result.certain.tolist() == [False, True, True]
    assert result.values[2] == 0
    logs = evaluate(jnp.log, np.array([0j], np.complex64))
    assert bool(logs.certain[0]) and np.isnan(np.real(logs.values[0]))  # complex log(0): no value, not judged


def test_an_unsupported_complex_primitive_is_named_with_the_reason() -> None:
    # (scatter-mul, the example here before, now has a complex rule: tests/test_complex_order.py)
    with pytest.raises(UnsupportedPrimitive, match=r"'lu'.*complex values has no exact rule"):
        evaluate(lambda z: jnp.linalg.solve(jnp.eye(2, dtype=z.dtype) + z.reshape(2, 2), z[:2]),
                 np.ones(4, np.complex64))


# --------------------------------------------------------------------------------------- the metric
def test_complex_error_bits_is_normwise_at_the_larger_part() -> None:
    one = np.float32(1)
    up = float(np.nextafter(one, np.float32(2)))
    e = np.array([1 + 1e-30j, 1 + 1j, 1 + 1j, 1e-3 + 1j, 1 + 1j], np.complex64)
    a = np.array([1 + 0j, up + 1j, 1 + 1j * float(np.nextafter(one, np.float32(0))), 0 + 1j, np.inf + 1j],
                 np.complex64)
    # 1e-30 is below half an ulp of 1 (2**-24): 0 ulps; one ulp up in a part: 1 ulp; one ulp below 1
    # is half an ulp of 1 (2**-24 / 2**-23): log2(1.5); 1e-3 against ulp(1) = 2**-23: log2(1 + 1e-3 * 2**23);
    # a non-finite part where the exact value is finite: the part's width.
    expected = [0.0, 1.0, math.log2(1.5), math.log2(1 + float(np.float32(1e-3)) * 2.0**23), 32.0]
    np.testing.assert_allclose(error_bits(a, e), expected, rtol=1e-12)


def test_complex_error_bits_special_values() -> None:
    e = np.array([complex(np.inf, 1.0), complex(np.nan, 0.0), complex(np.inf, -np.inf)], np.complex128)
    a = np.array([complex(np.inf, 5.0), 0j, complex(np.inf, np.inf)], np.complex128)
    bits = error_bits(a, e)
    assert bits[0] == 0.0 and np.isnan(bits[1]) and bits[2] == 64.0


# ----------------------------------------------------------------------------------- the strategies
def test_complex_classes_and_binades_appear() -> None:
    seen: dict[str, list[np.ndarray]] = {}
    drawn: list[np.ndarray] = []

    def observer(name: str, values: np.ndarray) -> None:
        seen.setdefault(name, []).append(values)

    @settings(max_examples=500, database=None, derandomize=True)
    @given(arguments("complex64", [(8,), (8,)]))
    def draw(args: tuple[np.ndarray, ...]) -> None:
        drawn.extend(args)

    _arrays.DRAW_OBSERVERS.append(observer)
    try:
        draw()
    finally:
        _arrays.DRAW_OBSERVERS.remove(observer)
    for cls in ("parts", "polar", "near-real", "near-imaginary", "diagonal", "unit-circle", "equal"):
        assert f"complex:{cls}" in seen, cls
    assert all(a.dtype == np.complex64 for a in drawn)
    # near-real: some element with its imaginary part at least 2**8 below a nonzero real part, or zero
    near_real = np.concatenate(seen["complex:near-real"])
    re, im = np.real(near_real), np.imag(near_real)
    assert bool(np.any((re != 0) & (np.abs(im) <= np.abs(re) * 2.0**-8)))
    near_imag = np.concatenate(seen["complex:near-imaginary"])
    re, im = np.real(near_imag), np.imag(near_imag)
    assert bool(np.any((im != 0) & (np.abs(re) <= np.abs(im) * 2.0**-8)))
    diagonal = np.concatenate(seen["complex:diagonal"])
    close = (np.real(diagonal) != 0) & (np.abs(np.abs(np.imag(diagonal)) - np.abs(np.real(diagonal)))
                                    <= np.abs(np.real(diagonal)) * 2.0**-10)
    assert bool(np.any(close))
    mags = np.abs(np.concatenate(drawn).astype(np.complex128))
    binades = set(np.floor(np.log2(mags[mags > 0])).astype(int).tolist())
    # complex64's moduli span binades -149 .. 128; the draws reach both ends and most of the middle.
    assert min(binades) < -120 and max(binades) > 120 and len(binades) >= 150


@settings(max_examples=50, database=None, derandomize=True)
@given(arrays("complex128", (5,), domain=(-10.0, 10.0)))
def test_complex_arrays_respect_the_domain_per_part(z: np.ndarray) -> None:
    assert z.dtype == np.complex128
    assert bool(np.all(np.abs(np.real(z)) <= 10)) and bool(np.all(np.abs(np.imag(z)) <= 10))


# ------------------------------------------------------------------- naive formulas fail, library passes
def _naive_abs(z: Any) -> Any:
    return jnp.sqrt(jnp.real(z) ** 2 + jnp.imag(z) ** 2)


def _naive_div(z: Any, w: Any) -> Any:
    d = jnp.real(w) * jnp.real(w) + jnp.imag(w) * jnp.imag(w)
    zr, zi, wr, wi = jnp.real(z), jnp.imag(z), jnp.real(w), jnp.imag(w)
    return jax.lax.complex((zr * wr + zi * wi) / d, (zi * wr - zr * wi) / d)


def _naive_log1p(z: Any) -> Any:
    return jnp.log(1 + z)


def _naive_expm1(z: Any) -> Any:
    return jnp.exp(z) - 1


_BIG = {"complex64": 1e30, "complex128": 1e300}
PAIRS = {
    # modulus: the squares overflow for |z| > sqrt(max); jnp.abs is a hypot
    "abs": (_naive_abs, jnp.abs, [(4,)], None),
    # division through |w|^2: overflows; XLA's division scales (inside 1e30 / 1e300, see the report)
    "div": (_naive_div, jnp.divide, [(4,), (4,)], "big"),
    # cancellation in the real part: Re log(1 + z) = log|1 + z| for small z
    "log1p": (_naive_log1p, jnp.log1p, [(4,)], (-1e-3, 1e-3)),
    # cancellation in the real part: Re(exp(z) - 1) = exp(x) cos(y) - 1 for small z
    "expm1": (_naive_expm1, jnp.expm1, [(4,)], (-1e-3, 1e-3)),
}


@pytest.mark.parametrize("dtype", [DTYPES[0], pytest.param(DTYPES[1], marks=pytest.mark.slow)])
@pytest.mark.parametrize("case", sorted(PAIRS))
def test_naive_complex_formula_fails_and_the_library_passes(dtype: str, case: str) -> None:
    naive, library, shapes, domain = PAIRS[case]
    if domain == "big":
        domain = (-_BIG[dtype], _BIG[dtype])
    bad = jst.check(naive, shapes=shapes, dtype=dtype, domain=domain, max_examples=80, seed=3)
    good = jst.check(library, shapes=shapes, dtype=dtype, domain=domain, max_examples=80, seed=3)
    assert bad.outcome == "failed", bad.original
    assert bad.dtype == dtype
    # far beyond the tolerance: an overflow or most of the significand lost
    assert bad.original.max_error_bits >= 20
    assert good.outcome == "passed", good.message
    # passing means within the tolerance (8 bits) beyond conditioning; XLA's complex64 division loses up
    # to ~7 bits at magnitudes near 1e30 (measured), so no tighter bound is claimed for it
    assert good.original.beyond_bits is not None and good.original.beyond_bits <= 8


# ------------------------------------------------------------------------------- rewrites on complex
def _fired(fn: Any, *args: Any) -> list[str]:
    return [a.rule for a in jst.explain(fn, *args)]


def test_real_only_rules_do_not_fire_on_complex_operands() -> None:
    z = np.array([1 + 4j, -2 + 0.5j], np.complex64)
    # log(exp(z)) = z fails for complex z: at z = 4j the principal log gives (4 - 2 pi) j
    assert "log_exp" not in _fired(lambda z: jnp.log(jnp.exp(z)), z)
    exact = evaluate(lambda z: jnp.log(jnp.exp(z)), z[:1]).values[0]
    assert abs(exact - np.complex64(4j - 2j * np.pi + 1)) < 1e-5 and abs(exact - z[0]) > 6
    # sqrt(x*x + y*y) is not hypot(x, y) for complex x, y (x*x is not |x|^2)
    assert "hypot" not in _fired(lambda x, y: jnp.sqrt(x * x + y * y), z, z)
    # the same patterns on real operands still fire
    x = np.array([1.0, 2.0], np.float32)
    assert "log_exp" in _fired(lambda x: jnp.log(jnp.exp(x)), x)
    assert "hypot" in _fired(lambda x, y: jnp.sqrt(x * x + y * y), x, x)


@pytest.mark.parametrize("dtype", DTYPES)
def test_complex_valid_rules_fire_and_fix(dtype: str) -> None:
    # log(1 + z) = log1p(z) holds for complex z: the rule fires and the rewritten function passes
    assert "log1p" in _fired(_naive_log1p, np.zeros(2, dtype))
    result = jst.check(_naive_log1p, shapes=[(4,)], dtype=dtype, domain=(-1e-3, 1e-3), max_examples=60,
                       seed=5, apply=True)
    assert result.outcome == "passed", result.message
    assert result.original.verdict == "fail"


# ------------------------------------------------------------------------------------------- diagnostics
def _cancels(z: Any) -> Any:
    shifted = z + 1
    return shifted - 1  # cancels: (1 + z) rounded, minus 1, keeps what rounding left of z


@pytest.mark.parametrize("dtype", DTYPES)
def test_local_error_blames_the_complex_line_that_loses_the_bits(dtype: str) -> None:
    z = np.array([1e-5 + 3e-6j], dtype)
    with jax.enable_x64(dtype == "complex128"):
        found = jst.local_error(_cancels, z)
    worst = found.worst
    assert worst is not None
    # Herbie's localization, as for reals: the subtraction of rounded operands that cancel is blamed.
    assert worst.primitive == "sub" and worst.kind == "cancellation"
    assert "return shifted - 1" in (worst.code or "")
    # Rounding 1 + z moves its real part by at most half an ulp of 1 (2**-24 in float32, 2**-53 in
    # float64), while the result's ulp is that of |Re z| ~ 1e-5 (binade 2**-17): 2**-40 (2**-69); so at
    # most 2**16 ulps, log2(1 + 2**16) < 16.1 bits; and beyond the tolerance (8 bits) for this z.
    assert 8 < worst.max_bits < 16.1


# ----------------------------------------------------------------------------------- the pytest surface
def test_the_marker_checks_complex_functions(pytester: pytest.Pytester, run_jaxstab: Any) -> None:
    pytester.makepyfile(test_cplx='''
        import jax.numpy as jnp
        import pytest

        @pytest.mark.stabilize(dtype="complex64", shapes={"z": (4,)})
        def test_library_modulus(z):
            return jnp.abs(z)

        @pytest.mark.stabilize(dtype="complex128", shapes={"z": (4,)}, search=False)
        def test_naive_modulus(z):
            return jnp.sqrt(jnp.real(z) ** 2 + jnp.imag(z) ** 2)
    ''')
    result = run_jaxstab("--jaxstab-examples=40", "--jaxstab-seed=0")
    result.assert_outcomes(passed=1, failed=1)
    out = result.stdout.str()
    assert "test_naive_modulus" in out and "z.re = float64[4]" in out  # the parts of the failing input
    assert "unsupported dtype" not in out


# ------------------------------------------------------------------------------------ soundness audit
_UNARY = {
    "exp": (jnp.exp, mpmath.exp), "expm1": (jnp.expm1, mpmath.expm1), "log": (jnp.log, mpmath.log),
    "log1p": (jnp.log1p, mpmath.log1p), "sqrt": (jnp.sqrt, mpmath.sqrt),
    "rsqrt": (jax.lax.rsqrt, lambda z: 1 / mpmath.sqrt(z)), "sin": (jnp.sin, mpmath.sin),
    "cos": (jnp.cos, mpmath.cos), "tan": (jnp.tan, mpmath.tan), "sinh": (jnp.sinh, mpmath.sinh),
    "cosh": (jnp.cosh, mpmath.cosh), "tanh": (jnp.tanh, mpmath.tanh), "asin": (jnp.arcsin, mpmath.asin),
    "acos": (jnp.arccos, mpmath.acos), "atan": (jnp.arctan, mpmath.atan),
    "asinh": (jnp.arcsinh, mpmath.asinh), "acosh": (jnp.arccosh, mpmath.acosh),
    "atanh": (jnp.arctanh, mpmath.atanh), "sign": (jnp.sign, lambda z: z / abs(z)),
    "cube": (lambda z: z ** 3, lambda z: z ** 3), "recip_square": (lambda z: z ** -2, lambda z: z ** -2),
}


def _audit_points(dtype: str, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    mag = 2.0 ** rng.uniform(-60, 6, n)  # moderate: exp, cosh stay finite, mpmath stays quick
    theta = rng.uniform(-np.pi, np.pi, n)
    z = mag * np.exp(1j * theta)
    z[: n // 4] = z[: n // 4].real + 0j  # on the real axis, where the cuts lie
    z[n // 4: n // 2] = 1j * z[n // 4: n // 2].imag  # on the imaginary axis
    return z.astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(_UNARY))
def test_no_certain_complex_value_is_wrong(dtype: str, name: str) -> None:
    jfn, mfn = _UNARY[name]
    z = _audit_points(dtype, 24, seed=len(name))
    with jax.enable_x64(dtype == "complex128"):
        result = evaluate(jfn, z)
    p = PART_BITS[dtype]
    tiny = float(np.finfo(np.float32 if dtype == "complex64" else np.float64).tiny)
    checked = 0
    with mpmath.workprec(3000):
        for v, got, sure in zip(z, result.values, result.certain):
            if not sure:
                continue
            a = _MPC(complex(v))
            if a == 0 and name in ("log", "rsqrt", "recip_square"):
                assert np.isnan(got.real)  # no value: complex infinity
                continue
            want = mfn(a)
            for part, g in ((mpmath.re(want), got.real), (mpmath.im(want), got.imag)):
                if part != 0 and not tiny <= abs(part) < 1e300:
                    continue  # subnormal or beyond the format: _round's mpmath rounding has no range
                assert g == _round(part, p), (name, complex(v), complex(got), mpmath.nstr(want, 20))
            checked += 1
    assert checked >= 12  # most points are decided (the cut points of log, sqrt, ... are not)


@pytest.mark.parametrize("dtype", DTYPES)
def test_complex_reductions_and_routing_are_exact(dtype: str) -> None:
    z = np.array([1 + 2j, 3e10 - 1j, -0.5 + 0.25j, 2j, -3e10 + 1e-3j], dtype)
    with jax.enable_x64(dtype == "complex128"):
        result = evaluate(lambda z: (jnp.cumsum(z), jnp.prod(z), jnp.cumprod(z[:3]), jnp.sum(z),
                                     z @ jnp.conj(z), jnp.pad(z, 1)[jnp.array([6, 0, 2])],
                                     z.at[jnp.array([1, 1])].add(z[:2])), z)
    with mpmath.workprec(4000):
        zs = _mpc(z)
        cums = [mpmath.fsum(zs[: k + 1]) for k in range(len(zs))]
        prod = mpmath.fprod(zs)
        cprod = [mpmath.fprod(zs[: k + 1]) for k in range(3)]
        dot = mpmath.fsum(a * mpmath.conj(a) for a in zs)
    np.testing.assert_array_equal(result.values[0], _reference(cums, dtype))
    np.testing.assert_array_equal(result.values[1], _reference([prod], dtype)[0])
    np.testing.assert_array_equal(result.values[2], _reference(cprod, dtype))
    np.testing.assert_array_equal(result.values[3], _reference([cums[-1]], dtype)[0])
    np.testing.assert_array_equal(result.values[4], _reference([dot], dtype)[0])
    np.testing.assert_array_equal(result.values[5], np.array([0, 0, z[1]], dtype))  # padding, gather
    with mpmath.workprec(4000):  # scatter-add: z[1] + z[0] + z[1] at index 1
        added = _reference([zs[1] + zs[0] + zs[1]], dtype)[0]
    np.testing.assert_array_equal(result.values[6], np.array([z[0], added, *z[2:]], dtype))
    assert all(bool(np.all(c)) for c in result.certain)


def test_a_complex_case_round_trips_through_the_baseline(pytester: pytest.Pytester, run_jaxstab: Any) -> None:
    pytester.makepyfile(test_cbase='''
        import jax.numpy as jnp
        import pytest

        @pytest.mark.stabilize(dtype="complex64", shapes={"z": (4,)}, search=False)
        def test_naive_modulus(z):
            return jnp.sqrt(jnp.real(z) ** 2 + jnp.imag(z) ** 2)
    ''')
    saved = run_jaxstab("--jaxstab-examples=30", "--jaxstab-seed=1", "--jaxstab-save-baseline=base.json")
    saved.assert_outcomes(failed=1)
    text = (pytester.path / "base.json").read_text()
    assert '"complex64"' in text and '"float32"' in text  # the case's dtype; its witnesses' parts
    # Compared with itself: still unstable but not worse, so "known", not failed.
    again = run_jaxstab("--jaxstab-examples=30", "--jaxstab-seed=1", "--jaxstab-compare=base.json")
    again.assert_outcomes(passed=1)
    assert "known" in again.stdout.str()


def _re_of_square(z: Any) -> Any:  # Re(z*z) as written: re^2 - im^2 cancels near the diagonals
    return jnp.real(z) ** 2 - jnp.imag(z) ** 2


def _re_of_square_factored(z: Any) -> Any:  # (re - im)(re + im): the subtraction is exact there
    re, im = jnp.real(z), jnp.imag(z)
    return (re - im) * (re + im)


@pytest.mark.parametrize("dtype", DTYPES)
def test_the_diagonal_cancellation_is_found_and_explained(dtype: str) -> None:
    # The diagonal class (im = +-re (1 + d)) puts Re(z^2) at its cancellation; the factored form is
    # accurate to a few ulps there (one rounding in re + im, one in the product, re - im exact).
    dom = (-1e15, 1e15)
    naive = jst.check(_re_of_square, shapes=[(4,)], dtype=dtype, domain=dom, max_examples=100, seed=2,
                      judge="accuracy")
    factored = jst.check(_re_of_square_factored, shapes=[(4,)], dtype=dtype, domain=dom, max_examples=100,
                         seed=2, judge="accuracy")
    assert naive.outcome == "failed" and naive.original.max_error_bits >= 16
    # two roundings, each relative <= 2**-p: < 2 ulps of the result, plus the exact value's own rounding:
    # at most 3 floats apart, log2(4) = 2 bits (3 allows one straddled power of two)
    assert factored.outcome == "passed" and factored.original.max_error_bits <= 3
    # The cancellation is the problem's conditioning in the parts (each part moved by one ulp moves the
    # exact result by as many ulps as were lost): the stability lens passes it, with its note.
    stable = jst.check(_re_of_square, shapes=[(4,)], dtype=dtype, domain=dom, max_examples=100, seed=2)
    assert stable.outcome == "passed" and "ill-conditioned" in stable.note


_BINARY = {
    "div": (lambda z, w: z / w, lambda a, b: a / b),
    "mul": (lambda z, w: z * w, lambda a, b: a * b),
    "sub": (lambda z, w: z - w, lambda a, b: a - b),
    "pow": (lambda z, w: z ** w, lambda a, b: mpmath.power(a, b)),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(_BINARY))
def test_no_certain_complex_value_of_a_binary_primitive_is_wrong(dtype: str, name: str) -> None:
    jfn, mfn = _BINARY[name]
    rng = np.random.default_rng(len(name))
    n = 24
    span = 100 if dtype == "complex64" else 900  # magnitudes 2**+-span/2: products near the range's ends
    def draw() -> np.ndarray:
        mag = 2.0 ** rng.uniform(-span / 2, span / 2, n)
        return (mag * np.exp(1j * rng.uniform(-np.pi, np.pi, n))).astype(dtype)

    z, w = draw(), draw()
    if name == "sub":
        w[: n // 2] = z[: n // 2] * np.asarray(1 + 1e-6j, dtype)  # cancellation in both parts
    if name == "pow":
        w = (rng.uniform(-3, 3, n) + 1j * rng.uniform(-3, 3, n)).astype(dtype)
    with jax.enable_x64(dtype == "complex128"):
        result = evaluate(jfn, z, w)
    p = PART_BITS[dtype]
    finfo = np.finfo(np.float32 if dtype == "complex64" else np.float64)
    checked = 0
    with mpmath.workprec(3000):
        for a, b, got, sure in zip(z, w, result.values, result.certain):
            if not sure:
                continue
            want = mfn(_MPC(complex(a)), _MPC(complex(b)))
            for part, g in ((mpmath.re(want), got.real), (mpmath.im(want), got.imag)):
                if part != 0 and not float(finfo.tiny) <= abs(part) <= float(finfo.max):
                    continue  # subnormal or overflowing: _round's mpmath rounding has no range
                assert g == _round(part, p), (name, complex(a), complex(b), complex(got))
            checked += 1
    assert checked == n  # all decided: no cuts or exact ties among these points


def test_inv_matmul_fires_on_complex_matrices_and_solves() -> None:
    # inv(A) @ b = solve(A, b) over any field: the rule may rewrite complex programs
    a = np.array([[2 + 1j, 1 - 1j], [0.5j, 3 + 0j]], np.complex64)
    b = np.array([1 - 2j, 4 + 0.5j], np.complex64)

    def fn(a: Any, b: Any) -> Any:
        return jnp.linalg.inv(a) @ b

    assert "inv_matmul" in _fired(fn, a, b)
    got = np.asarray(jst.stabilize(fn)(a, b))
    # the exact solution by Cramer's rule in complex128 (2x2: no cancellation at these entries)
    det = complex(a[0, 0]) * complex(a[1, 1]) - complex(a[0, 1]) * complex(a[1, 0])
    want = np.array([(complex(b[0]) * complex(a[1, 1]) - complex(a[0, 1]) * complex(b[1])) / det,
                     (complex(a[0, 0]) * complex(b[1]) - complex(b[0]) * complex(a[1, 0])) / det])
    # cond(a) < 3 and LU's backward error is a few eps: 8 eps (relative to the largest entry) bounds it
    assert np.max(np.abs(got - want)) <= 8 * np.finfo(np.float32).eps * np.max(np.abs(want))
