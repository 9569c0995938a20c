"""Coverage of the exact oracle: every primitive JAX registers is evaluated or refused with a reason, and
every function of ``jax.scipy.special`` and ``jax.nn`` runs through the oracle.

The first test walks JAX's own registry (``_compat.registered_primitives``) after importing the public
API (jax.lax, jax.numpy, jax.scipy, jax.nn, jax.random; not jax.experimental) in a fresh interpreter:
a JAX release that adds a primitive fails it until the primitive gets a rule or a documented refusal
(``oracles.REFUSED_PRIMITIVES``, listed in docs/architecture.md).
"""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from pathlib import Path

import jax
import jax.nn
import jax.random
import jax.scipy.linalg
import jax.scipy.special as jsp
import numpy as np
import pytest
from test_oracle import rounded

from pytest_jaxstab import UnsupportedPrimitive, oracles
from pytest_jaxstab.oracles.primitives._random import KEY_PRIMITIVES

# Not primitives of a traced program: the rewrite engine's and JAX's glue names the registry also holds.
_NOT_IN_JAXPRS = frozenset({"copy_p"})


# The public API whose primitives the oracle answers for; jax.experimental (sparse, Pallas, multi-host
# transfers, ...) is outside. Walked in a fresh interpreter, so other tests' imports do not change it.
_SCOPE = ("jax", "jax.lax", "jax.lax.linalg", "jax.numpy", "jax.numpy.linalg", "jax.scipy.special",
          "jax.scipy.linalg", "jax.scipy.stats", "jax.nn", "jax.random", "jax.extend.random")


def _registered_in_scope() -> set[str]:
    code = ("import importlib, sys\n"
            f"for m in {_SCOPE!r}: importlib.import_module(m)\n"
            "from pytest_jaxstab import _compat\n"
            "print('\\n'.join(sorted(_compat.registered_primitives())))\n")
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env,
                          timeout=300)
    return set(done.stdout.split())


def _unclassified(registered: set[str]) -> list[str]:
    supported = set(oracles.SUPPORTED_PRIMITIVES) | set(KEY_PRIMITIVES)
    return sorted(registered - supported - set(oracles.REFUSED_PRIMITIVES) - _NOT_IN_JAXPRS)


def test_every_registered_primitive_is_evaluated_or_refused_with_a_reason():
    registered = _registered_in_scope()
    assert len(registered) > 150  # the walk found JAX's primitives (not an empty registry)
    unknown = _unclassified(registered)
    assert not unknown, (f"primitives neither evaluated by the oracle nor refused with a reason: {unknown}; "
                         "add a rule, or an entry of oracles.REFUSED_NUMERIC (a numeric primitive) or of a "
                         "category of oracles.REFUSED_CATEGORIES (and docs/architecture.md)")
    supported, refused = set(oracles.SUPPORTED_PRIMITIVES), set(oracles.REFUSED_PRIMITIVES)
    assert not (supported & refused), f"both supported and refused: {sorted(supported & refused)}"
    assert all(isinstance(r, str) and len(r) > 20 for r in oracles.REFUSED_PRIMITIVES.values())
    # A primitive JAX adds tomorrow is caught by the same walk.
    assert _unclassified(registered | {"a_primitive_jax_adds_tomorrow"}) == ["a_primitive_jax_adds_tomorrow"]


def test_refusals_are_a_short_numeric_list_and_categories_each_with_its_reason():
    numeric, categories = oracles.REFUSED_NUMERIC, oracles.REFUSED_CATEGORIES
    # The numeric refusals are the ones a user's arithmetic can meet: few, each with a reason of its own.
    assert len(numeric) <= 20, sorted(numeric)
    assert all(len(reason) > 30 for reason in numeric.values())
    # Every other refusal belongs to exactly one category, whose reason it carries.
    seen: dict[str, str] = {}
    for category, (reason, names) in categories.items():
        assert len(reason) > 30 and names, category
        for name in names:
            assert name not in seen and name not in numeric, (name, category, seen.get(name))
            seen[name] = category
            assert oracles.REFUSED_PRIMITIVES[name] == f"{category}: {reason}"
    assert set(oracles.REFUSED_PRIMITIVES) == set(numeric) | set(seen)
    assert all(oracles.REFUSED_PRIMITIVES[n] == r for n, r in numeric.items())
    # The architecture page lists every numeric refusal by name.
    page = (Path(__file__).parents[1] / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = page[page.index("### What the oracle evaluates, and what it refuses"):]
    assert [n for n in numeric if f"`{n}`" not in section] == []
    # What this change made evaluable is no longer refused.
    assert not {"eigh", "svd", "qr", "cholesky_update", "symmetric_product"} & set(oracles.REFUSED_PRIMITIVES)


def test_a_refused_primitive_says_why():
    # (eigh, the example here before, is evaluated now: tests/test_oracle_eigen.py)
    with pytest.raises(UnsupportedPrimitive, match=r"'schur'.*the Schur form is not unique") as info:
        oracles.evaluate(lambda a: jax.scipy.linalg.schur(a)[0], np.eye(2, dtype=np.float32))
    assert info.value.reason == oracles.REFUSED_PRIMITIVES["schur"]


V = np.asarray([0.25, 0.5, 3.0])
# Functions whose arguments are not plain float arrays of one shape, with arguments that fit.
SPECIAL_ARGS = {
    "bernoulli": (lambda: jsp.bernoulli(6), ()),
    "bessel_jn": (lambda z: jsp.bessel_jn(z, v=2), (V,)),
    # JAX 0.12.1's integer-order Bessel functions: the order is a static Python int
    **{name: (lambda z, name=name: getattr(jsp, name)(2, z), (V,)) for name in ("iv", "jn", "kn", "yn")},
    "multigammaln": (lambda a: jsp.multigammaln(a, 3), (V + 2,)),
    "polygamma": (lambda x: jsp.polygamma(np.asarray([1, 2, 3]), x), (V,)),
    "zeta": (jsp.zeta, (V + 1.5, V)),
    "glu": (jax.nn.glu, (np.asarray([0.25, 0.5, 3.0, -1.0]),)),
    "one_hot": (lambda i: jax.nn.one_hot(i, 4), (np.asarray([0, 2, 3]),)),
    "dot_product_attention": (lambda q: jax.nn.dot_product_attention(q, q, q), (np.ones((1, 2, 1, 4)),)),
}
# Refused on purpose, with the reason.
SPECIAL_REFUSED = {
    "sph_harm_y": "complex-valued (spherical harmonics)",
    "sph_harm": "complex-valued (spherical harmonics)",
    "scaled_matmul": "block-scaled fp8/mx formats",
    "scaled_dot_general": "block-scaled fp8/mx formats",
    "get_scaled_dot_general_config": "a configuration helper, not a function of arrays",
}


def _public_functions():
    for prefix, module in (("jax.scipy.special", jsp), ("jax.nn", jax.nn)):
        for name in sorted(getattr(module, "__all__", None) or dir(module)):
            fn = getattr(module, name, None)
            if name.startswith("_") or not callable(fn) or inspect.isclass(fn) or inspect.ismodule(fn):
                continue
            if isinstance(fn, jax.custom_jvp | jax.custom_vjp) or inspect.isfunction(fn) \
                    or hasattr(fn, "__wrapped__"):
                yield pytest.param(name, fn, id=f"{prefix}.{name}")


def _positional_count(fn) -> int:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return 1
    return sum(1 for p in params if p.default is p.empty
               and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))


@pytest.mark.parametrize(("name", "fn"), list(_public_functions()))
def test_every_special_and_nn_function_is_evaluated(name, fn):
    if name in SPECIAL_REFUSED:
        pytest.skip(f"refused: {SPECIAL_REFUSED[name]}")
    # Standard promotion: several of these library functions mix dtypes internally (the suite runs strict).
    with jax.enable_x64(True), jax.numpy_dtype_promotion("standard"):
        f, args = SPECIAL_ARGS.get(name, (fn, tuple(V for _ in range(_positional_count(fn)))))
        result = oracles.evaluate(f, *args)
    leaves = jax.tree_util.tree_leaves(result.certain)
    assert leaves and all(np.asarray(c).all() for c in leaves), f"{name}: uncertain elements"


def test_functions_behind_high_level_primitives_are_evaluated():
    # On JAX 0.11+ jnp.searchsorted (so interp, digitize), ldexp, frexp and nonzero are one
    # `call_hi_primitive` each, whose expansion compares in IEEE's total order (lt_to, le_to): once
    # refused as JAX internals. References: numpy's own searchsorted/nonzero and the standard library's
    # frexp/ldexp (independent implementations), interp's exact value by hand, expm by mpmath at 1000 bits.
    import math
    from fractions import Fraction

    import jax.numpy as jnp
    import jax.scipy.linalg as jsl
    import mpmath

    x = np.array([0.25, 1.5, 2.75, -1.0, 3.5, 1.0, 2.0, 0.1], np.float32)
    knots = np.arange(3, dtype=np.float32)
    fns = {
        "searchsorted": lambda x: jnp.searchsorted(knots, x),
        "searchsorted_right": lambda x: jnp.searchsorted(knots, x, side="right"),
        "digitize": lambda x: jnp.digitize(x, knots),
        "interp": lambda x: jnp.interp(x, knots, knots**2),
        "ldexp": lambda x: jnp.ldexp(x, 3),
        "frexp": jnp.frexp,
        "nonzero": lambda x: jnp.nonzero(x > 1, size=3)[0],
    }
    got = {name: oracles.evaluate(f, x) for name, f in fns.items()}
    for name, result in got.items():
        assert all(np.asarray(c).all() for c in jax.tree_util.tree_leaves(result.certain)), name
    np.testing.assert_array_equal(got["searchsorted"].values, np.searchsorted(knots, x))
    np.testing.assert_array_equal(got["searchsorted_right"].values, np.searchsorted(knots, x, side="right"))
    np.testing.assert_array_equal(got["digitize"].values, np.digitize(x, knots))
    np.testing.assert_array_equal(got["nonzero"].values, np.nonzero(x > 1)[0][:3])

    def interp(v: float) -> float:  # piecewise linear through (0, 0), (1, 1), (2, 4), clamped
        q = Fraction(v)
        if q <= 0 or q >= 2:
            return 0.0 if q <= 0 else 4.0
        i = int(q)
        return float(np.float32(float(Fraction(i * i) + (q - i) * (2 * i + 1))))  # exact, then rounded once

    np.testing.assert_array_equal(got["interp"].values, np.array([interp(float(v)) for v in x], np.float32))
    scaled = np.array([math.ldexp(float(v), 3) for v in x], np.float32)
    np.testing.assert_array_equal(got["ldexp"].values, scaled)
    mant, expo = got["frexp"].values
    np.testing.assert_array_equal(mant, np.array([math.frexp(float(v))[0] for v in x], np.float32))
    np.testing.assert_array_equal(expo, np.array([math.frexp(float(v))[1] for v in x], np.int32))

    # searchsorted's expansion divides unsigned integers: XLA's x / 0 is all bits set, for uint too.
    divisors = jnp.array([1, 0, 2, 0], jnp.uint32)
    quotient = oracles.evaluate(lambda n: n // divisors, np.arange(4, dtype=np.uint32))
    np.testing.assert_array_equal(quotient.values, np.array([0, 2**32 - 1, 1, 2**32 - 1], np.uint32))

    a = np.array([[0.5, -1.0], [2.0, 0.25]], np.float32)
    result = oracles.evaluate(jsl.expm, a)
    with mpmath.workprec(1000):
        e = mpmath.expm(mpmath.matrix([[mpmath.mpf(float(v)) for v in row] for row in a.tolist()]))
        expected = np.array([[rounded(e[i, j], np.float32) for j in range(2)] for i in range(2)], np.float32)
    assert np.asarray(result.certain).all()
    np.testing.assert_array_equal(result.values, expected)


def test_empty_arrays_are_exact_where_overwritten_and_uncertain_where_read():
    import jax.numpy as jnp

    from pytest_jaxstab import _compat

    x = np.array([1.0, 2.0, 3.0], np.float32)
    full = oracles.evaluate(lambda x: jnp.empty_like(x).at[:].set(x * 2), x)
    np.testing.assert_array_equal(full.values, x * 2)
    assert np.asarray(full.certain).all()
    partial = oracles.evaluate(lambda x: jnp.empty_like(x).at[:2].set(x[:2] * 2), x)
    np.testing.assert_array_equal(partial.values[:2], x[:2] * 2)
    closed, _, _ = _compat.trace(jnp.empty_like, x)
    if "empty" in {_compat.primitive_name(e) for _, e in _compat.walk(closed)}:
        # JAX 0.11+: XLA leaves the element uninitialized (backend dependent): never claimed.
        assert list(np.asarray(partial.certain)) == [True, True, False]
    else:  # JAX 0.10 defines jnp.empty_like as zeros
        assert np.asarray(partial.certain).all() and partial.values[2] == 0.0
