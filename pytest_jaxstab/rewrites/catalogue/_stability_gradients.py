"""Derivatives that lose where the value does not (issue 39): kinks, quotients by norms, ``x² + c``.

Each rule keeps the program's value (bit for bit, or within an ulp where a form replaces it) and
gives autodiff a spelling whose derivative is the function's:

- ``softplus_kink``: softplus written through kinks, ``relu(x) + log1p(exp(-|x|))`` (``max(x, 0)``,
  ``where(x > 0, x, 0)`` and their orders; ``log(1 + exp(-|x|))``; ``|x|`` as ``abs`` or
  ``max(x, -x)``). At x = 0 the kinks' one-sided derivatives meet (``relu'(0) = 0``, ``abs'(0) = 1``
  or ``max``'s split ``1/2``; JAX issue 2107) and autodiff gives 0 or -1/2 where softplus'(0) = 1/2.
  The whole sum becomes ``forms.softplus(x)``, whose derivative is ``sigmoid(x)`` everywhere.
- ``norm_quotient`` (structural): ``x / d`` where ``d`` is a square root (a norm, an RMS, a hypot,
  ``jnp.linalg.norm``, optax's ``safe_norm`` through its ``where``) becomes ``forms.quotient``: the
  same value, and the derivative ``(dx - q·dd)/d`` in place of JAX's ``-x·d^-2·dd``, whose ``d^-2``
  overflows for a tiny vector (``x / norm(x)`` at 1e-30 in float32: gradient NaN, exactly ~1e30).
- ``logistic_derivative``, ``tanh_derivative`` (derivative only): the primitives ``logistic``
  (``jax.nn.sigmoid``, ``expit``, ``silu``, ``logistic.cdf``) and ``tanh`` themselves, kept (the
  same primitive computes the value, bit for bit) with an accurate derivative: JAX's ``s·(1 - s)``
  and ``1 - t²`` are 0 once ``s`` or ``|t|`` rounds to 1 (x > 17 and |x| > 9 in float32), where
  the exact ``e^-x`` and ``4e^-2|x|`` are normal floats.
- ``soft_sign_derivative`` (derivative only): ``x / (|x| + 1)`` (``jax.nn.soft_sign`` to jax 0.12.0),
  the same operations, with the derivative ``1/(|x| + 1)²`` where JAX's quotient rule cancels (``|x|``
  ulps, 0 past 1e8 in float32). jax 0.12.1's soft_sign is a ``custom_jvp`` with that derivative
  (``_soft_sign_and_scale``): its body is never differentiated, so nothing there is rewritten.
- ``hypot_constant``: ``sqrt(x² + c)``, ``rsqrt(x² + c)`` and ``1/sqrt(x² + c)`` (``c > 0`` a constant)
  as ``hypot(x, √c)`` or its reciprocal: ``x²`` overflows for ``|x| > 1.8e19`` in float32 (value inf
  or 0, derivative 0 or NaN) where the result is ``|x|`` or ``1/|x|``.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

from ... import _compat
from ..._primitives import CALLS, GLUE
from ..engine._match import Graph, Match
from ..engine._pattern import any_of, const, fixed, op, square_of, var
from ..engine._rule import Rule
from ..forms import _core as _forms
from ..forms import _gradients as _fg
from ._stability_written import _named

__all__ = ["HYPOT_CONSTANT", "JVP_RULE", "LOGISTIC_DERIVATIVE", "NORM_QUOTIENT", "SOFTPLUS_KINK",
           "SOFT_SIGN_DERIVATIVE", "TANH_DERIVATIVE", "rewrite_rules_with"]

x, y = var("x"), var("y")
ONE, ZERO = const(1.0), const(0.0)
_JIT = ("jit", "pjit")


def _example(f: Any, shapes: Any = ((8,),), domain: Any = None) -> dict[str, Any]:
    return {"example": f, "example_shapes": shapes, "example_domain": domain}


# ---------------------------------------------------------------------------------- softplus_kink
def _where(cond: Any, on_true: Any, on_false: Any) -> Any:
    """``jnp.where(cond, on_true, on_false)``: a call named ``_where``, or its ``select_n``."""
    return any_of(op(_JIT, cond, on_true, on_false, params={"name": "_where"}),
                  op("select_n", cond, on_false, on_true))


_POSITIVE = op(("gt", "ge"), x, ZERO)
_NEGATIVE = op(("lt", "le"), x, ZERO)
# max(x, 0) in its spellings: jax.nn.relu (a custom_jvp call around jit(relu)), maximum,
# where(x > 0, x, 0) and where(x < 0, 0, x) (>= and <= too: the same function)
_RELU = any_of(op("custom_jvp_call", x, call_jaxpr=_named("relu")),
               op("max", x, ZERO),
               _where(_POSITIVE, x, ZERO),
               _where(_NEGATIVE, ZERO, x))
_ABS = any_of(op("abs", x), op("max", x, op("neg", x)))
_EXP_NEG_ABS = op("exp", any_of(op("neg", _ABS), op("min", x, op("neg", x))))
_TAIL = any_of(op("log1p", _EXP_NEG_ABS), op("log", op("add", ONE, _EXP_NEG_ABS)))


def _softplus_kink(x: Any) -> Any:
    """max(x, 0) + log1p(exp(-|x|)) = softplus(x): the same value, derivative sigmoid(x) (1/2 at 0,
    where the kinks' one-sided derivatives meet)."""
    return _forms.softplus(x)


def _kink_examples() -> tuple[Any, ...]:
    import jax

    def tail(x: Any) -> Any:
        return jnp.log1p(jnp.exp(-jnp.abs(x)))

    def tail_log(x: Any) -> Any:
        return jnp.log(1 + jnp.exp(jnp.minimum(x, -x)))

    return tuple((f, ((8,),), (-1e30, 1e30)) for f in (
        lambda x: jax.nn.relu(x) + tail(x),
        lambda x: jax.nn.relu(x) + jnp.log1p(jnp.exp(-jnp.maximum(x, -x))),
        lambda x: jnp.where(x > 0, x, 0.0) + jnp.log(1 + jnp.exp(-jnp.abs(x))),
        lambda x: jnp.where(x <= 0, 0.0, x) + tail_log(x),
        lambda x: jnp.where(x > 0, x, 0.0) + jnp.log1p(jnp.exp(jnp.minimum(x, -x))),
        lambda x: jnp.where(x < 0, 0.0, x) + jnp.log(1 + jnp.exp(-jnp.maximum(x, -x))),
        lambda x: jax.lax.select(x >= 0, x, jnp.zeros_like(x)) + tail(x),
        lambda x: jax.lax.select(x < 0, jnp.zeros_like(x), x) + tail_log(x),
    ))


SOFTPLUS_KINK = Rule("softplus_kink", op("add", _RELU, _TAIL), _softplus_kink,
                     examples=_kink_examples(),
                     **_example(lambda x: jnp.maximum(x, 0) + jnp.log1p(jnp.exp(-jnp.abs(x))),
                                domain=(-1e30, 1e30)))


# -------------------------------------------------------------------------------- hypot_constant
_SQ_PLUS_C = op("add", square_of(x), const(lambda v: 0 < v < math.inf, name="c"))


def _hypot_constant(x: Any, c: float, inverse: bool) -> Any:
    """sqrt(x² + c) = hypot(x, √c);  rsqrt(x² + c) = 1/sqrt(x² + c) = 1/hypot(x, √c)."""
    return _fg.hypot_constant(x, c, inverse)


HYPOT_CONSTANT = Rule(
    "hypot_constant",
    any_of(fixed(op("rsqrt", _SQ_PLUS_C), inverse=True),
           fixed(op("div", ONE, op("sqrt", _SQ_PLUS_C)), inverse=True),
           fixed(op("sqrt", _SQ_PLUS_C), inverse=False)),
    _hypot_constant,
    **_example(lambda x: 1 / jnp.sqrt(x * x + 1), domain=(-1e30, 1e30)),
)


# --------------------------------------------------------------------------------- norm_quotient
_SEEN_THROUGH = frozenset({*GLUE, "convert_element_type"})
_PRODUCERS: list[Any] = [None, None]  # (graph, its producer map): the last graph asked


def _producers_of(g: Graph) -> dict[Any, Any]:
    if _PRODUCERS[0] is not g:
        _PRODUCERS[:] = [g, {v: e for e in g.eqns for v in e.outvars}]
    return _PRODUCERS[1]


def _reaches_root(atom: Any, prods: dict[Any, Any], parent: Any, depth: int) -> bool:
    """Whether ``atom`` is a square root, seen through glue, ``where`` / ``select_n`` branches,
    products and maxima with anything, and single-result calls (``jnp.linalg.norm``'s ``jit``): the
    denominators whose ``d^-2`` overflows before the derivative does. ``parent``: how this jaxpr's
    inputs map to the enclosing one's atoms (``(invars -> atom, producers, parent)``), or None."""
    while True:
        if _compat.is_literal(atom):
            return False
        eqn = prods.get(atom)
        if eqn is None:
            if parent is None or atom not in parent[0]:
                return False
            atom, prods, parent = parent[0][atom], parent[1], parent[2]
            continue
        name = _compat.primitive_name(eqn)
        if name in _SEEN_THROUGH and eqn.invars:
            atom = eqn.invars[0]
            continue
        break
    if name == "sqrt":
        return True
    if depth <= 0:
        return False
    if name == "select_n":
        return any(_reaches_root(a, prods, parent, depth - 1) for a in eqn.invars[1:])
    if name in ("mul", "max"):  # max: a norm with a floor (optax's clip, x / max(|x|, eps))
        return any(_reaches_root(a, prods, parent, depth - 1) for a in eqn.invars)
    if name in CALLS and len(eqn.outvars) == 1 and "jaxpr" in eqn.params:
        body = _compat.as_closed(eqn.params["jaxpr"])
        inner = _compat.invars(body)
        (out,) = _compat.outvars(body)
        mapping = dict(zip(inner, eqn.invars))
        return _reaches_root(out, {v: e for e in _compat.eqns(body) for v in e.outvars},
                             (mapping, prods, parent), depth - 1)
    return False


def _broadcasts_to(shape: tuple[int, ...], out: tuple[int, ...]) -> bool:
    return not shape or (len(shape) == len(out) and all(d in (1, o) for d, o in zip(shape, out)))


def _match_quotient(g: Graph, i: int) -> Match | None:
    eqn = g.eqns[i]
    if len(eqn.invars) != 2 or _compat.is_literal(eqn.invars[1]):
        return None
    aval = _compat.aval(eqn.outvars[0])
    if not jnp.issubdtype(aval.dtype, jnp.floating):
        return None
    num, den = eqn.invars
    # an operand of rank 0 (x / sqrt(sum(x²))) or with unit axes stands for its broadcast
    if any(not _compat.is_literal(a) and not _broadcasts_to(_compat.aval(a).shape, aval.shape)
           for a in (num, den)):
        return None
    if not _reaches_root(den, _producers_of(g), None, 8):
        return None
    captures: dict[str, Any] = {"y": den}
    atoms: dict[str, Any] = {"y": den}
    if _compat.is_literal(num):
        captures["x"] = _compat.literal_value(num)
    else:
        captures["x"] = atoms["x"] = num
    return Match(i, captures, atoms, {i})


def _norm_quotient(x: Any, y: Any) -> Any:
    """x / d = quotient(x, d): the same value; derivative (dx - (x/d)·dd)/d, never d^-2."""
    return _fg.quotient(x, y)


NORM_QUOTIENT = Rule(
    # no pattern: the denominators are a walk, not a term (jst.verify_rule takes the examples)
    "norm_quotient", None, _norm_quotient, matcher=_match_quotient, roots=frozenset({"div"}),
    examples=(lambda x: x / jnp.linalg.norm(x),
              lambda x: x / jnp.sqrt(x * x + 1.0),
              lambda x: x / jnp.where(jnp.sum(x * x) > 0, jnp.sqrt(jnp.sum(x * x)), 1.0)),
    **_example(lambda x: x / jnp.sqrt(jnp.sum(x * x)), domain=(-1e30, 1e30)),
)


# ------------------------------------------------------------------------------------- jvp_rule
_IN_RULE = [0]  # > 0 while a rule's body is rewritten: its own custom_jvp calls are left alone
_PROBED: dict[int, tuple[Any, bool]] = {}  # id(rule) -> (rule, whether the catalogue changes it)


# --------------------------------------------------------------- logistic and tanh, derivative only
def _match_primitive(g: Graph, i: int) -> Match | None:
    """The root ``logistic`` / ``tanh`` of a real floating array that is not a constant (a
    constant's derivative is never taken)."""
    (a,) = g.eqns[i].invars
    if _compat.is_literal(a) or not jnp.issubdtype(_compat.aval(a).dtype, jnp.floating):
        return None
    return Match(i, {"x": a}, {"x": a}, {i})


def _logistic_derivative(x: Any) -> Any:
    """logistic(x), the same primitive (bit for bit), with the derivative ``s(x)·s(-x)`` where
    JAX's ``s·(1 - s)`` is 0 past x = 17 (float32) or 37 (float64)."""
    return _forms.sigmoid(x)


def _tanh_derivative(x: Any) -> Any:
    """tanh(x), the same primitive (bit for bit), with the derivative ``4e/(1 + e)²``,
    ``e = exp(-2|x|)``, where JAX's ``1 - t²`` is 0 past |x| = 9 (float32) or 19 (float64)."""
    return _forms.tanh(x)


LOGISTIC_DERIVATIVE = Rule(
    # structural (after the pattern rules): a logistic that a value rule reads (log(sigmoid(x)),
    # 1 - sigmoid(x)) is that rule's, whose form carries its own exact derivative
    "logistic_derivative", None, _logistic_derivative, matcher=_match_primitive,
    roots=frozenset({"logistic"}), derivative_only=True,
    examples=(lambda x: jax.nn.sigmoid(x), lambda x: jax.nn.silu(x)),
    **_example(lambda x: lax.logistic(x), domain=(-1e30, 1e30)),
)
TANH_DERIVATIVE = Rule(
    "tanh_derivative", None, _tanh_derivative, matcher=_match_primitive,
    roots=frozenset({"tanh"}), derivative_only=True,
    examples=(lambda x: jax.nn.tanh(x),),
    **_example(lambda x: jnp.tanh(x), domain=(-1e30, 1e30)),
)


def _soft_sign_derivative(x: Any) -> Any:
    """x / (|x| + 1), the same operations (bit for bit), with the derivative ``1/(|x| + 1)²``."""
    return _fg.soft_sign(x)


_ABS_PLUS_ONE = any_of(op("add", op("abs", x), ONE), op("add", ONE, op("abs", x)))
SOFT_SIGN_DERIVATIVE = Rule(
    "soft_sign_derivative", op("div", x, _ABS_PLUS_ONE), _soft_sign_derivative, derivative_only=True,
    examples=(lambda x: jax.nn.soft_sign(x),),
    **_example(lambda x: x / (jnp.abs(x) + 1), domain=(-1e30, 1e30)),
)


_CATALOGUE: list[tuple[Rule, ...]] = [()]  # set by ``_stability`` once STABILITY (which lists this) exists


def rewrite_rules_with(rules: tuple[Rule, ...]) -> None:
    """The rules ``jvp_rule`` rewrites a derivative rule's body with (``_stability`` passes
    ``STABILITY``: it imports this module, so this module cannot import it)."""
    _CATALOGUE[0] = tuple(rules)


def _rewrite_rule(closed: Any) -> tuple[Any, bool]:
    """A derivative rule's jaxpr through the catalogue, and whether a rule fired in the rule's own
    equations: a rewrite inside a custom-derivative call in it (the primal's own call, whose body
    the pass stabilises wherever it is) does not make the rule worth re-binding. The rules of the
    calls inside it are never rewritten (no recursion)."""
    from ..engine._engine import rewrite_jaxpr

    _IN_RULE[0] += 1
    try:
        # a rule's body is differentiated only for a second derivative: derivative-only rules
        # would re-bind every rule that reads a sigmoid for nothing
        new, applied = rewrite_jaxpr(closed, [r for r in _CATALOGUE[0] if not r.derivative_only])
    finally:
        _IN_RULE[0] -= 1
    own = any(not (a.path and a.path[0].startswith(("custom_jvp_call", "custom_vjp_call")))
              for a in applied)
    return new, own


def _match_jvp_rule(g: Graph, i: int) -> Match | None:
    eqn = g.eqns[i]
    if (_IN_RULE[0] or _compat.primitive_name(eqn) != "custom_jvp_call" or len(eqn.outvars) != 1
            or _compat.jvp_rule_rewritten(eqn)):
        return None
    fun = eqn.params.get("jvp_jaxpr_fun")
    hit = _PROBED.get(id(fun))
    if hit is None or hit[0] is not fun:
        probe = _compat.jvp_rule_jaxpr(eqn)
        hit = (fun, probe is not None and _rewrite_rule(probe)[1])
        if len(_PROBED) >= 256:
            _PROBED.pop(next(iter(_PROBED)))
        _PROBED[id(fun)] = hit
    if not hit[1]:
        return None
    captures: dict[str, Any] = {"eqn": eqn, "n": len(eqn.invars)}
    atoms: dict[str, Any] = {}
    for k, a in enumerate(eqn.invars):
        captures[f"x{k}"] = _compat.literal_value(a) if _compat.is_literal(a) else a
        if not _compat.is_literal(a):
            atoms[f"x{k}"] = a
    return Match(i, captures, atoms, {i})


def _jvp_rule(eqn: Any, n: int, **operands: Any) -> Any:
    """custom_jvp(f, rule) = custom_jvp(f, stabilised rule): the same primal, the rule's own body
    with the catalogue's stable spellings (a rule's meaning, right or deliberately not the
    primal's derivative, is kept: only its rounding changes)."""
    params = _compat.with_jvp_rule(eqn, lambda closed: _rewrite_rule(closed)[0])
    (out,) = _compat.bind(eqn, [operands[f"x{k}"] for k in range(n)], params)
    return out


def _asinh_with_old_rule() -> Any:
    import jax
    from jax import lax

    @jax.custom_jvp
    def asinh(x: Any) -> Any:
        return jnp.arcsinh(x)

    @asinh.defjvp
    def _asinh_jvp(primals: Any, tangents: Any) -> Any:
        (x,), (t,) = primals, tangents
        return asinh(x), t * lax.rsqrt(x * x + 1)

    return asinh


JVP_RULE = Rule(
    # structural: the pattern is the call a matcher looks at; what decides is the rule's body
    "jvp_rule", None, _jvp_rule, matcher=_match_jvp_rule,
    roots=frozenset({"custom_jvp_call"}), composable=True,
    **_example(lambda x: _asinh_with_old_rule()(x), domain=(-1e30, 1e30)),
)
