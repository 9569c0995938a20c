"""Every identity the search saturates with holds over the reals: the exact oracle at random points.

Each rule's two sides are evaluated by ``jst.oracles.evaluate`` (exact, correctly rounded to float64) at
random points where both are real; a true identity gives the same float on both sides at every such point
(two roundings of one real number). The check itself is shown to catch a false identity.
"""

from __future__ import annotations

import numpy as np
import pytest

from pytest_jaxstab import oracles
from pytest_jaxstab._check._trace import x64_scope
from pytest_jaxstab._search._expr import evaluate_jax
from pytest_jaxstab._search._rules import RULES, Rule, parse

_NAMES = "abcd"


def _as_function(pattern):
    def rename(t):
        if t[0] == "pvar":
            return ("var", _NAMES.index(t[1]))
        if t[0] == "const":
            return t
        return (t[0], *(rename(c) for c in t[1:]))

    term = rename(pattern)
    return lambda *args: evaluate_jax(term, args, np.float64)


def _points(seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    # Positive values (the domain of sqrt, log, ...), mixed signs, and values in (-1, 1) (asin, atanh).
    pos = rng.uniform(0.05, 2.5, (4, 16))
    mixed = rng.uniform(-2.5, 2.5, (4, 16))
    unit = rng.uniform(-0.95, 0.95, (4, 16))
    return list(np.concatenate([pos, mixed, unit], axis=1))


def _compared(rule: Rule, seed: int = 0) -> tuple[int, list[tuple[float, ...]]]:
    """How many points both sides were real and certain at, and the points where they differ."""
    args = _points(seed)
    with x64_scope(np.dtype(np.float64)):
        left = oracles.evaluate(_as_function(rule.lhs), *args, dtype=np.float64)
        right = oracles.evaluate(_as_function(rule.rhs), *args, dtype=np.float64)
    lv, rv = np.asarray(left.values), np.asarray(right.values)
    ok = np.asarray(left.certain) & np.asarray(right.certain) & np.isfinite(lv) & np.isfinite(rv)
    bad = ok & (lv != rv)
    return int(ok.sum()), [tuple(float(a[i]) for a in args) for i in np.flatnonzero(bad)]


def test_there_are_at_least_100_identities_over_every_family():
    assert len(RULES) >= 100
    families = {r.family for r in RULES}
    assert families >= {"commutativity", "associativity", "distributivity", "fractions", "squares-cubes",
                        "sqrt-cbrt", "exp-log", "trigonometric", "hyperbolic", "pow"}
    introduced = {op for r in RULES for op in _ops(r.rhs) - _ops(r.lhs)}
    assert {"expm1", "log1p", "hypot", "logaddexp", "tan", "sinh", "atan2"} <= introduced


def _ops(term):
    if term[0] in ("pvar", "const"):
        return set()
    return {term[0]}.union(*(_ops(c) for c in term[1:]))


#: Operators whose JAX form is an approximation (``log_ndtr``'s asymptotic branches, a rounded
#: 1/sqrt(2)): the oracle evaluates that formula exactly, not the function. Their rules are checked with
#: mpmath's functions at 50 digits instead (an independent reference).
_APPROXIMATE = {"log_ndtr", "lgammadiff"}


def _compared_mp(rule: Rule, seed: int = 0) -> tuple[int, list[tuple[float, ...]]]:
    import mpmath

    from pytest_jaxstab._search._expr import evaluate_mp

    def rename(t):
        if t[0] == "pvar":
            return ("var", _NAMES.index(t[1]))
        return t if t[0] == "const" else (t[0], *(rename(c) for c in t[1:]))

    left, right = rename(rule.lhs), rename(rule.rhs)
    args = _points(seed)
    count, bad = 0, []
    with mpmath.workdps(50):
        for i in range(len(args[0])):
            point = [mpmath.mpf(float(a[i])) for a in args]
            try:
                lv, rv = evaluate_mp(left, point), evaluate_mp(right, point)
            except (ValueError, ZeroDivisionError):
                continue
            if not (mpmath.isfinite(lv) and mpmath.isfinite(rv)) or isinstance(lv, mpmath.mpc) \
                    or isinstance(rv, mpmath.mpc):
                continue
            count += 1
            if abs(lv - rv) > mpmath.mpf(10) ** -40 * max(1, abs(lv)):
                bad.append(tuple(float(a[i]) for a in args))
    return count, bad


@pytest.mark.parametrize("rule", RULES, ids=[r.name for r in RULES])
def test_identity_holds_at_random_points(rule):
    approximate = bool(_ops(rule.lhs) & _APPROXIMATE or _ops(rule.rhs) & _APPROXIMATE)
    count, differing = (_compared_mp if approximate else _compared)(rule)
    need = 8 if "pvar" in repr(rule.lhs) else 1  # a rule between constants is one point
    assert count >= need, f"{rule.name}: both sides real at only {count} points"
    assert not differing, f"{rule.name}: the two sides differ at {differing[:3]}"


def test_the_check_catches_a_false_identity():
    # x**0.3333333333333333 is not cbrt(x): the exponent is a float just below 1/3.
    wrong = Rule("pow-third-float", "pow", parse("(pow a 0.3333333333333333)"), parse("(cbrt a)"))
    count, differing = _compared(wrong)
    assert count >= 8 and differing
    wrong2 = Rule("sqrt-sub", "sqrt", parse("(sqrt (sub a b))"), parse("(sub (sqrt a) (sqrt b))"))
    assert _compared(wrong2)[1]


def test_reduction_identities_hold_on_arrays():
    # The identities over reductions (log of products, log-sum-exp, softmax, scaled norms and root mean
    # squares, the guarded forms) and those that need the element count N, instantiated for whole-array
    # reductions of 5 elements, evaluated exactly by the oracle on 16 random positive arrays and on 16
    # of mixed signs: both sides must round to the same float wherever both are real.
    import jax
    import jax.numpy as jnp

    from pytest_jaxstab._search._judge import jax_function
    from pytest_jaxstab._search._rules import rules_for

    probe = ("add", ("sum_all", ("var", 0)), ("add", ("prod_all", ("var", 0)), ("max_all", ("var", 0))))
    rules = rules_for(probe, {"sum_all": 5, "prod_all": 5})
    assert {"rms-scaled_all", "log-prod-ratio-guarded_all", "norm-scaled_all", "power-mean_all",
            "power-mean-scaled_all", "power-sum-root_all"} <= {r.name for r in rules}
    rng = np.random.default_rng(4)
    arrays = [np.concatenate([rng.uniform(0.05, 2.5, (16, 5)), rng.uniform(-2.5, 2.5, (16, 5))])
              for _ in range(2)]
    # c, a mask (where(c, ...) takes the entries where c != 0): each row keeps one entry and drops one.
    mask = rng.integers(0, 2, (32, 5)).astype(np.float64)
    mask[:, 0], mask[:, 1] = 1.0, 0.0
    arrays.append(mask)
    # pow(prod(a), b) = prod(a ** b) holds for a scalar exponent b only (the search binds it to 1/n), and
    # the power means and p-norms are over one p: there b is the same number at every element of an example.
    scalar_b = [arrays[0], np.repeat(arrays[1][:, :1], 5, axis=1), arrays[2]]
    for rule in rules:
        sides = []
        args = scalar_b if rule.name.startswith(("pow-of-prod", "power-")) else arrays
        for side in (rule.lhs, rule.rhs):
            term = _rename(side)
            fn = jax.vmap(lambda *a, t=term: jnp.broadcast_to(jax_function(t, np.float64)(*a), (5,)))
            with x64_scope(np.dtype(np.float64)):
                sides.append(oracles.evaluate(fn, *args, dtype=np.float64))
        lv, rv = (np.asarray(s.values) for s in sides)
        ok = np.asarray(sides[0].certain) & np.asarray(sides[1].certain) & np.isfinite(lv) & np.isfinite(rv)
        assert ok.sum() >= 8, f"{rule.name}: both sides real at only {ok.sum()} arrays"
        assert np.array_equal(lv[ok], rv[ok]), f"{rule.name}: the sides differ"


def _rename(t):
    if t[0] == "pvar":
        return ("var", _NAMES.index(t[1]))
    return t if t[0] == "const" else (t[0], *(_rename(c) for c in t[1:]))
