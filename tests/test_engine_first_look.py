"""The rewrite pass's first look (``Rule.may_match``, ``Graph.head2``) and ``Rule(roots=...)``: they
only save work, so the pass must rewrite every program exactly as it does without them."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
from soundness_programs import programs

import pytest_jaxstab.rewrites as R
from pytest_jaxstab.rewrites import Match, Rule, rewrite_jaxpr
from pytest_jaxstab.rewrites.engine import _rule
from pytest_jaxstab.rewrites.engine._instances import Instance, _x64, alternatives, build

CATALOGUES = {"STABILITY": tuple(R.STABILITY), "STABILITY_FAST": tuple(R.STABILITY_FAST)}


def _built_alternatives() -> list[tuple[str, Instance]]:
    out = []
    for rule in CATALOGUES["STABILITY"]:
        if rule.pattern is None:
            continue
        for k, tree in enumerate(alternatives(rule.pattern)):
            inst = build(tree)
            if inst is not None:
                out.append((f"{rule.name}[{k}]", inst))
    return out


def _rewritten(fn, avals, x64, rules):
    with _x64(x64):
        closed = jax.make_jaxpr(fn)(*avals)
        new, applied = rewrite_jaxpr(closed, rules)
    return str(new), [a.rule for a in applied]


def _without_first_look(monkeypatch, fn, avals, x64, rules):
    with monkeypatch.context() as m:
        m.setattr(_rule.Rule, "may_match", lambda self, name, heads2: True)
        return _rewritten(fn, avals, x64, rules)


@pytest.mark.parametrize("catalogue", ["STABILITY", pytest.param("STABILITY_FAST", marks=pytest.mark.slow)])
def test_first_look_refuses_no_match_of_any_alternative(catalogue, monkeypatch):
    rules = CATALOGUES[catalogue]
    differ = []
    for label, inst in _built_alternatives():
        avals = [jax.ShapeDtypeStruct(s, d) for s, d in zip(inst.shapes, inst.dtypes)]
        with_look = _rewritten(inst.fn, avals, inst.x64, rules)
        if with_look != _without_first_look(monkeypatch, inst.fn, avals, inst.x64, rules):
            differ.append(label)
    assert differ == []


def test_first_look_refuses_no_match_in_random_programs(monkeypatch):
    rules = CATALOGUES["STABILITY"]
    differ = []
    for p in programs(7, 60):
        avals = [jax.ShapeDtypeStruct((p.size,), jnp.float32)] * p.nargs
        plain = _without_first_look(monkeypatch, p.fn, avals, False, rules)
        if _rewritten(p.fn, avals, False, rules) != plain:
            differ.append(p.source)
    assert differ == []


def test_matcher_rule_with_roots_is_asked_only_at_those_primitives():
    asked: list[str] = []

    def matcher(g, i) -> Match | None:
        asked.append(str(g.eqns[i].primitive))
        return None

    rule = Rule("count_asks", None, lambda **kw: None, matcher=matcher, roots=frozenset({"exp"}))
    closed = jax.make_jaxpr(lambda x: jnp.log(jnp.exp(x) + 1.0) * 2.0)(jnp.ones(3))
    rewrite_jaxpr(closed, [rule])
    assert asked == ["exp"]
    assert rule.root_primitives == frozenset({"exp"})
    unrooted = Rule("count_all", None, lambda **kw: None, matcher=matcher)
    asked.clear()
    rewrite_jaxpr(closed, [unrooted])
    assert sorted(asked) == sorted(str(e.primitive) for e in closed.jaxpr.eqns)


def test_a_rules_first_look_is_asked_once_per_distinct_look_and_refuses_its_pattern():
    """``Rule(first_look=...)``: asked with the pattern's look, once per distinct (primitive, heads)
    of a pass; where it says no, the pattern is never matched (a network's 50 identical layers give
    one look; the one ``log(1 + x)`` after them another)."""
    looks: list[tuple[str, tuple]] = []

    def look(name, heads2):
        looks.append((name, heads2))
        return name == "log" and any(head == "add" for (head, _), _ in heads2)

    x = R.pattern.var("x")
    log1p = Rule("counted_log1p", R.pattern.op("log", R.pattern.op("add", R.pattern.const(1.0), x)),
                 lambda x: jnp.log1p(x), first_look=look)

    def net(v):
        for _ in range(50):
            v = jnp.log(jnp.abs(v) + 2.0)
        return jnp.log(1.0 + v * v)

    closed = jax.make_jaxpr(net)(jnp.ones(3))
    _, applied = rewrite_jaxpr(closed, [log1p])
    assert [a.rule for a in applied] == ["counted_log1p"]
    assert len(looks) == len(set(looks)) <= 4  # the first layer, the repeated layer, the last log
    refused = Rule("refused_log1p", log1p.pattern, lambda x: jnp.log1p(x), first_look=lambda n, h: False)
    assert rewrite_jaxpr(closed, [refused])[1] == []
