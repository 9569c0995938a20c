"""_compat/ on the running JAX (make test: 0.12.x; make test-compat: 0.10.2)."""

from __future__ import annotations

import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from pytest_jaxstab import _compat


def _line_of(fn, marker: str) -> int:
    lines, start = inspect.getsourcelines(fn)
    for k, text in enumerate(lines):
        if marker in text:
            return start + k
    raise AssertionError(marker)


def _program(x, y):
    c, ys = lax.scan(lambda c, a: (c + a * y, c * a), 0.0, x)
    w = lax.while_loop(lambda s: s[0] < 3, lambda s: (s[0] + 1, s[1] * 2.0), (0, x[0]))
    k = lax.cond(x[0] > 0, jnp.exp, lambda v: v, x[1])
    unused = jnp.sin(x)  # noqa: F841  (dead code for dce)
    return ys.sum() + w[1] + k + jax.nn.softplus(x).sum() + c  # MARK-RETURN


def _declared(name: str):
    import pathlib
    import tomllib

    from packaging.requirements import Requirement

    root = pathlib.Path(__file__).resolve().parents[1]
    deps = tomllib.loads((root / "pyproject.toml").read_text())["project"]["dependencies"]
    (req,) = [Requirement(d) for d in deps if Requirement(d).name == name]
    return req.specifier


def test_declared_jax_range_admits_exactly_the_tested_releases():
    # pyproject's range, _compat/_versions.py and the Makefile's compat version are one fact in three
    # places: the range admits every tested release and none of the untested ones the registry had
    # between them, its bounds are the oldest and the newest tested, and test-compat runs the oldest.
    import pathlib
    import re

    root = pathlib.Path(__file__).resolve().parents[1]
    tested = [v for v, _ in _compat.TESTED_JAX]
    for name in ("jax", "jaxlib"):
        spec = _declared(name)
        assert [v for v in _compat.RELEASES_BETWEEN if spec.contains(v)] == tested, (name, str(spec))
        assert not spec.contains("0.10.1") and not spec.contains("0.12.2") and not spec.contains("0.13.0")
    assert str(_declared("jax")) == str(_declared("jaxlib"))
    make = re.search(r"^JAX_COMPAT_VERSION \?= (\S+)$", (root / "Makefile").read_text(), re.MULTILINE)
    assert make is not None and make.group(1) == tested[0]
    assert f"jax {tested[0]}" in (_compat.__doc__ or "")
    assert f"{tested[-1]}" in (_compat.__doc__ or "")


def test_the_installed_jax_is_a_tested_release():
    # Fails, naming the version, when this environment runs a JAX the suite was never passed on: a
    # patch release may change how library code lowers (0.12.1 did), so its results mean nothing yet.
    message = _compat.untested_jax()
    assert message is None, message


def test_enable_x64_is_scoped():
    with _compat.enable_x64():
        inside = jnp.zeros(1, dtype=jnp.float64).dtype
    outside = jax.config.read("jax_enable_x64")
    assert inside == np.float64
    assert outside is False  # the test config never enables x64 globally: the block restored it


def test_trace_flattens_pytrees_and_kwargs():
    def f(d, *, scale):
        return {"s": d["a"] * scale, "t": (d["b"],)}

    closed, in_tree, out_tree = _compat.trace(f, {"a": jnp.ones(2), "b": jnp.zeros(3)}, scale=2.0)
    assert len(_compat.invars(closed)) == 3  # a, b, scale
    assert out_tree.num_leaves == 2
    outs = _compat.eval_jaxpr(closed, jnp.ones(2), jnp.zeros(3), 2.0)
    leaves = jax.tree_util.tree_unflatten(out_tree, outs)
    np.testing.assert_array_equal(leaves["s"], np.full(2, 2.0))
    assert in_tree.num_leaves == 3


def test_walk_reaches_every_sub_jaxpr():
    closed, _, _ = _compat.trace(_program, jnp.ones(3), 2.0)
    seen = {(_compat.primitive_name(e), path[-1].split("(")[0] if path else "") for path, e in
            _compat.walk(closed)}
    names = {n for n, _ in seen}
    for prim in ("scan", "while", "cond", "jit", "custom_jvp_call", "log1p", "exp"):
        assert prim in names, prim
    parents = {p for _, p in seen}
    for parent in ("scan", "while", "cond", "jit", "custom_jvp_call"):
        assert parent in parents, parent


def test_eval_and_jit_of_closed_jaxpr_match_the_function():
    closed, _, _ = _compat.trace(_program, jnp.ones(3), 2.0)
    want = _program(jnp.ones(3), 2.0)
    (got,) = _compat.eval_jaxpr(closed, jnp.ones(3), 2.0)
    (got_jit,) = jax.jit(_compat.as_fun(closed))(jnp.ones(3), 2.0)
    np.testing.assert_allclose(got, want, rtol=0)
    np.testing.assert_allclose(got_jit, want, rtol=1e-6)  # XLA may fuse differently: 1e-6 ≈ 8 ulps


def test_location_names_the_user_line():
    closed, _, _ = _compat.trace(_program, jnp.ones(3), 2.0)
    last = _compat.eqns(closed)[-1]
    src = _compat.source_line(last)
    assert src is not None
    assert src.line == _line_of(_program, "MARK-RETURN")
    assert src.file == __file__
    assert "MARK-RETURN" in src.text
    assert _compat.location(last) == f"{__file__}:{src.line}"


def test_scan_parts_split_consts_carry_xs():
    def f(x, y, z):
        def body(carry, xs):
            a, b = carry
            u, v = xs
            return (a + u * y, b * v), (a * u, b + v)

        return lax.scan(body, (0.0, 1.0), (x, z))

    closed, _, _ = _compat.trace(f, jnp.ones(4), 3.0, jnp.ones(4))
    (eqn,) = [e for e in _compat.eqns(closed) if _compat.primitive_name(e) == "scan"]
    p = _compat.scan_parts(eqn)
    assert (len(p.consts), len(p.carry), len(p.xs)) == (1, 2, 2)
    assert (len(p.carry_out), len(p.ys)) == (2, 2)
    assert p.length == 4 and p.reverse is False
    assert len(_compat.invars(p.body)) == 5 and len(_compat.outvars(p.body)) == 4
    assert [_compat.aval(v).shape for v in p.xs] == [(4,), (4,)]


def test_while_and_cond_parts():
    closed, _, _ = _compat.trace(_program, jnp.ones(3), 2.0)
    by_name = {_compat.primitive_name(e): e for e in _compat.eqns(closed)}
    w = _compat.while_parts(by_name["while"])
    assert len(w.carry) == 2 and len(_compat.outvars(w.body)) == 2
    idx, ops, branches = _compat.cond_parts(by_name["cond"])
    assert len(branches) == 2 and len(ops) == 1
    assert _compat.aval(idx).dtype == jnp.int32


def test_rebuild_with_new_sub_jaxpr_keeps_semantics_and_source():
    def f(x):
        return lax.scan(lambda c, a: (c + jnp.exp(a), c), 0.0, x)[0]

    closed, _, _ = _compat.trace(f, jnp.arange(3.0))
    (eqn,) = _compat.eqns(closed)
    ((site, _body),) = _compat.subjaxprs(eqn)
    # a new body computing exp(a) * 2 instead of exp(a)
    new_body = jax.make_jaxpr(lambda c, a: (c + 2 * jnp.exp(a), c))(0.0, 0.0)
    params = _compat.replace_subjaxprs(eqn, {site: new_body})
    (out, _) = _compat.bind(eqn, [0.0, jnp.arange(3.0)], params)
    np.testing.assert_allclose(out, 2 * np.exp(np.arange(3.0)).sum(), rtol=1e-6)
    # binding inside make_jaxpr keeps the original equation's user line
    rebuilt = jax.make_jaxpr(lambda x: _compat.bind(eqn, [0.0, x], params)[0])(jnp.arange(3.0))
    assert _compat.location(_compat.eqns(rebuilt)[0]) == _compat.location(eqn)


def test_custom_jvp_primal_body_is_replaceable_and_rule_kept():
    @jax.custom_jvp
    def g(x):
        return jnp.sin(x)

    g.defjvp(lambda p, t: (g(p[0]), 10.0 * t[0]))  # a recognisable (wrong on purpose) derivative
    closed, _, _ = _compat.trace(g, 1.0)
    (eqn,) = _compat.eqns(closed)
    _body, nconsts = _compat.custom_call_parts(eqn)
    assert nconsts == 0
    ((site, _),) = _compat.subjaxprs(eqn)
    new_body = jax.make_jaxpr(jnp.cos)(1.0)
    params = _compat.replace_subjaxprs(eqn, {site: new_body})

    def run(x):
        return _compat.bind(eqn, [x], params)[0]

    assert float(run(1.0)) == pytest.approx(np.cos(1.0), rel=1e-6)
    assert float(jax.grad(run)(1.0)) == pytest.approx(10.0)  # the user's rule, not -sin


def test_dce_drops_dead_equations_only():
    closed, _, _ = _compat.trace(_program, jnp.ones(3), 2.0)
    pruned = _compat.dce(closed)
    names = [_compat.primitive_name(e) for e in _compat.eqns(pruned)]
    assert "sin" not in names
    assert len(names) == len(_compat.eqns(closed)) - 1
    (a,) = _compat.eval_jaxpr(pruned, jnp.ones(3), 2.0)
    (b,) = _compat.eval_jaxpr(closed, jnp.ones(3), 2.0)
    assert float(a) == float(b)


def test_literals_and_new_vars():
    closed, _, _ = _compat.trace(lambda x: x + 1.5, 1.0)
    (eqn,) = _compat.eqns(closed)
    lits = [a for a in eqn.invars if _compat.is_literal(a)]
    assert len(lits) == 1 and float(_compat.literal_value(lits[0])) == 1.5
    v = _compat.new_var(_compat.aval(eqn.outvars[0]))
    assert _compat.aval(v).shape == () and not _compat.is_literal(v)


def test_is_tracer():
    seen = []
    jax.jit(lambda x: seen.append(_compat.is_tracer(x)) or x)(1.0)
    assert seen == [True]
    assert not _compat.is_tracer(jnp.ones(2))


def _norm_first(x):
    return jnp.linalg.norm(x)  # MARK-FIRST


def _norm_second(x):
    y = x * 2.0
    return jnp.linalg.norm(y)  # MARK-SECOND


def test_library_callee_positions_follow_the_current_call_not_the_first_trace():
    # jnp.linalg.norm is a cached jit: its inner equations keep the user frame of the call that traced
    # it first. source_line_in must report the current call's line for both callers.
    for fn, marker in ((_norm_first, "MARK-FIRST"), (_norm_second, "MARK-SECOND")):
        closed, _, _ = _compat.trace(fn, jnp.ones(3))
        (call,) = [e for e in _compat.eqns(closed) if _compat.primitive_name(e) == "jit"]
        ((_, body),) = _compat.subjaxprs(call)
        inner = next(e for e in _compat.eqns(body) if _compat.primitive_name(e) == "sqrt")
        src = _compat.source_line_in([call, inner])
        assert src is not None and src.line == _line_of(fn, marker)


def _helper_line(x):
    return jnp.log(x)  # MARK-HELPER


_helper = jax.jit(_helper_line)


def test_user_callee_positions_keep_their_own_line():
    def caller(x):
        return _helper(x) + 1.0

    closed, _, _ = _compat.trace(caller, jnp.ones(3))
    (call,) = [e for e in _compat.eqns(closed) if _compat.primitive_name(e) == "jit"]
    ((_, body),) = _compat.subjaxprs(call)
    (log,) = [e for e in _compat.eqns(body) if _compat.primitive_name(e) == "log"]
    src = _compat.source_line_in([call, log])
    assert src is not None and src.line == _line_of(_helper_line, "MARK-HELPER")


def test_only_compat_touches_jax_internals():
    # issue 2's contract: a JAX release that moves an internal breaks _compat/ and nothing else
    import pathlib
    import re

    root = pathlib.Path(_compat.__file__).parents[1]  # _compat/ is a package: its parent is the package
    pattern = re.compile(r"jax\._src|jax\.extend|jax\.core")
    offenders = [str(p.relative_to(root)) for p in root.rglob("*.py")
                 if p.relative_to(root).parts[0] != "_compat" and pattern.search(p.read_text())]
    assert pattern.search((root / "_compat" / "_jaxpr.py").read_text())  # the pattern does find it
    assert offenders == []


def test_only_hypothesis_compat_touches_hypothesis_internals():
    # the same contract for Hypothesis: its private API (hypothesis.internal, _private names) is used
    # in _hypothesis_compat.py and nowhere else in the package.
    import pathlib
    import re

    root = pathlib.Path(_compat.__file__).parents[1]
    pattern = re.compile(r"hypothesis\.internal|from hypothesis[\w.]* import [^\n]*\b_[a-z]|"
                         r"hypothesis\.[\w.]*\._[a-z]|\._local_constants\b")
    offenders = [str(p.relative_to(root)) for p in root.rglob("*.py")
                 if p.name != "_hypothesis_compat.py" and pattern.search(p.read_text())]
    assert offenders == []
    assert pattern.search((root / "_hypothesis_compat.py").read_text())  # the pattern does find it
