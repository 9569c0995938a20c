"""The smallest programs a pattern matches: one per alternative, built from the pattern itself.

A rule's soundness is checked on programs made of its pattern, as Herbie checks its rule database on
the rules' own terms: :func:`alternatives` spells a pattern out into concrete trees (every alternative of
every ``any_of`` used at least once; no ``any_of`` left), and :func:`build` turns a tree into a JAX
function of float arrays: each ``var`` an argument, each ``const`` a value its predicate accepts, each
``op`` the primitive it names, with parameters its constraints accept (captured parameters take a
default: a reduction over the last axis, a vector dot product). A named sub-term is computed once and
shared, as the pattern requires. Calls (``jit``/``pjit``, ``custom_jvp_call``) are made by the library
functions whose traces they are (``jnp.var``, ``jax.nn.softplus``, ``jax.scipy.special.log_ndtr``...),
the first whose equation satisfies the pattern's constraints.

A tree that cannot be built (a primitive or a parameter constraint this module cannot produce) gives
``None``; the caller then looks for the alternative in the rule's own examples. Which alternative a
program exercises is never assumed: the caller matches the alternative's tree against the program
(:func:`alternative_rule`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import itertools
import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

from ... import _compat
from ..._errors import ArgumentError
from ._pattern import AnyOf, Const, Op, Param, Pattern, Var
from ._rule import Rule

__all__ = ["Instance", "alternative_rule", "alternatives", "build", "describe_program"]

#: Shapes tried for the arguments, in order: vectors, scalars, matrices (reductions over the last axis).
SHAPES: tuple[tuple[int, ...], ...] = ((8,), (), (4, 8), (2, 4, 8), (2, 2, 4, 8))
#: Values tried for a constant given by a predicate (``const(lambda v: v > 0)``), in order.
CONSTANTS: tuple[float, ...] = (
    2.0, 0.5, 8.0, 3.0, 1.0, -1.0, 10.0, 0.25, -2.0, 4.0, 1e-3, 100.0, -0.5, 0.0, 32.0, 0.125,
    # the constants of the forms the catalogue reads (the normal CDF's √2, log-densities' log 2π)
    math.sqrt(2.0), 1 / math.sqrt(2.0), math.pi, math.sqrt(math.pi), 2 / math.sqrt(math.pi),
    math.log(2.0), 0.5 * math.log(2 * math.pi), math.sqrt(2 * math.pi), 1 / math.sqrt(2 * math.pi),
)
#: Attempts :func:`build` can vary over: every shape with every first constant.
ATTEMPTS = 3 * len(CONSTANTS)
#: Exponents tried for ``integer_pow``'s ``y`` when the pattern captures it.
POWERS: tuple[int, ...] = (2, 3, -1, -2, 4)

_UNARY: dict[str, Callable[[Any], Any]] = {
    name: getattr(lax, name) for name in (
        "exp", "log", "log1p", "expm1", "sqrt", "rsqrt", "cbrt", "logistic", "tanh", "sinh", "cosh", "sin",
        "cos", "tan", "atan", "asinh", "acosh", "atanh", "neg", "abs", "sign", "erf", "erfc", "erf_inv",
        "lgamma", "digamma", "square", "floor", "ceil", "stop_gradient", "exp2", "is_finite")
    if hasattr(lax, name)
}
_BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "add": jnp.add, "sub": jnp.subtract, "mul": jnp.multiply, "div": jnp.divide, "max": jnp.maximum,
    "min": jnp.minimum, "atan2": jnp.arctan2, "rem": jnp.remainder, "nextafter": jnp.nextafter,
    "gt": jnp.greater, "lt": jnp.less, "ge": jnp.greater_equal, "le": jnp.less_equal, "eq": jnp.equal,
    "ne": jnp.not_equal,
}


def _log_ndtr(x: Any) -> Any:
    return jax.scipy.special.log_ndtr(x)


def _ndtri(x: Any) -> Any:
    return jax.scipy.special.ndtri(x)


def _ndtr(x: Any) -> Any:
    return jax.scipy.special.ndtr(x)  # a call of its own from jax 0.12.1 (inlined before)


def _forms_sigmoid(x: Any) -> Any:
    from ..forms import _core as _forms

    return _forms.sigmoid(x)


#: Library functions whose traces are calls a pattern may name, by number of operands.
_CALLS: dict[int, tuple[Callable[..., Any], ...]] = {
    1: (jax.nn.softplus, jnp.linalg.norm, jnp.var, jnp.std, jnp.diagonal, jnp.linalg.inv, _log_ndtr, _ndtri,
        _ndtr, _forms_sigmoid, jax.nn.sigmoid, jax.nn.logsumexp, jax.nn.log_softmax, jax.nn.softmax,
        jax.nn.log_sigmoid, jnp.mean),
    2: (lambda x, i: jnp.take(x, i, axis=-1), lambda x, i: x[..., i], jnp.logaddexp,
        lambda x, d: jnp.var(x, ddof=d), lambda x, d: jnp.std(x, ddof=d),
        lambda x, y: jnp.where(x > 0, x, y), jnp.take_along_axis),
    3: (jnp.where, lambda c, a, b: jnp.where(c > 0, a, b)),
}
_CALL_PRIMS = frozenset({"jit", "pjit", "closed_call", "custom_jvp_call", "custom_vjp_call",
                         "custom_vjp_call_jaxpr"})


@dataclasses.dataclass(frozen=True)
class Instance:
    """A program built from one concrete alternative: ``fn(*args)`` with ``names[i]`` the pattern
    variable of argument ``i`` and ``shapes[i]`` its shape; ``inner`` computes, from the same
    arguments, the value of the root's first operand that is an op (None when there is none): a use
    of a matched intermediate outside the match, for the "shared" context."""

    fn: Callable[..., Any]
    names: tuple[str, ...]
    shapes: tuple[tuple[int, ...], ...]
    inner: Callable[..., Any] | None
    tree: Pattern
    #: the program computes a constant in float64 and converts it (``convert_element_type`` in the
    #: pattern): trace and run it under ``_compat.enable_x64()``
    x64: bool = False
    #: per argument, float32, int32 (an index a selection reads: drawn in ``[0, 8)``) or bool (a
    #: select's predicate)
    dtypes: tuple[Any, ...] = ()

    def avals(self) -> list[Any]:
        """The arguments' abstract values."""
        return [jax.ShapeDtypeStruct(s, d) for s, d in zip(self.shapes, self.dtypes)]


def alternatives(pat: Pattern, limit: int = 64) -> list[Pattern]:
    """Concrete trees (no ``any_of``) covering every branch of every ``any_of`` in ``pat`` at least once,
    not every combination: each tree takes, at each ``any_of``, a branch still uncovered below it where
    one is, else the branch taken least often (the first on ties), so the first tree takes every first
    branch. ``any_of`` nodes that read alike (the same alternatives, captures of the same names: Φ's
    ``x/√2`` spellings under each of its forms) are one set of branches to cover, wherever each is
    taken: they match alike. Operands of one equation choose independently (side by side). At most
    ``limit`` trees; a pattern that needs more is an error."""
    taken: dict[tuple[str, int], int] = {}
    out: list[Pattern] = []
    while True:
        out.append(_cover_one(pat, taken, {}))
        if not _uncovered(pat, taken, {}):
            return out
        if len(out) == limit:
            raise ArgumentError(f"the pattern {pat.describe()[:120]}... needs more than {limit} concrete "
                                f"trees to take every branch of its any_of once; split it into rules")


@functools.lru_cache(maxsize=4096)
def _text(pat: AnyOf) -> str:
    return pat.describe()


def _uncovered(pat: Pattern, taken: dict[tuple[str, int], int], memo: dict[int, bool]) -> bool:
    """Whether some branch of an ``any_of`` reachable in ``pat`` has not been taken yet."""
    key = id(pat)
    if key not in memo:
        memo[key] = False  # patterns are trees of shared nodes, never cycles; this only memoises
        if isinstance(pat, AnyOf):
            memo[key] = any((_text(pat), i) not in taken or _uncovered(a, taken, memo)
                            for i, a in enumerate(pat.alternatives))
        elif isinstance(pat, Op):
            memo[key] = any(_uncovered(a, taken, memo) for a in pat.args)
    return memo[key]


def _cover_one(pat: Pattern, taken: dict[tuple[str, int], int], chose: dict[str, int]) -> Pattern:
    """One tree; ``chose``: the branch each ``any_of`` took in it (one that reads alike takes the same
    branch wherever it recurs in the tree: a named operand used twice is one equation)."""
    if isinstance(pat, AnyOf):
        text = _text(pat)
        if text not in chose:
            memo: dict[int, bool] = {}
            chose[text] = min(range(len(pat.alternatives)), key=lambda i: (
                (text, i) in taken and not _uncovered(pat.alternatives[i], taken, memo),
                taken.get((text, i), 0), i))
            taken[(text, chose[text])] = taken.get((text, chose[text]), 0) + 1
        return _cover_one(pat.alternatives[chose[text]], taken, chose)
    if isinstance(pat, Op):
        return dataclasses.replace(pat, args=tuple(_cover_one(a, taken, chose) for a in pat.args))
    return pat


def alternative_rule(rule: Rule, tree: Pattern) -> Rule:
    """``rule`` restricted to one concrete alternative: same name (so its scope and reports are the
    rule's), replacement, guards and flags."""
    return Rule(rule.name, tree, rule.replacement, where=rule.where, doc=rule.doc, complex_ok=rule.complex_ok,
                composable=rule.composable, gate=rule.gate,
                first_look=rule.first_look)


def _var_names(tree: Pattern) -> tuple[list[Var], set[str]]:
    """The pattern's variables by name, and those read as indices (a selection's index operands)."""
    seen: dict[str, Var] = {}
    index: set[str] = set()
    stack = [tree]
    while stack:
        p = stack.pop()
        if isinstance(p, Var):
            seen.setdefault(p.name, p)
        elif isinstance(p, Op):
            stack.extend(reversed(p.args))
            if p.prim & _SELECTIONS and dict(p.params).get("name") != "_where":  # jnp.where selects none
                index.update(a.name for a in p.args[1:] if isinstance(a, Var))
    return sorted(seen.values(), key=lambda v: v.name), index


_SELECTIONS = frozenset({"gather", "dynamic_slice", "jit", "pjit"})


def build(tree: Pattern, attempt: int = 0) -> Instance | None:
    """A program for the concrete ``tree`` (from :func:`alternatives`), or None when it cannot be built.

    ``attempt`` varies the choices (argument shapes, constants, exponents): callers try a few, since a
    rule's guard may refuse the first (a scalar where the rule wants a reduction, a constant it
    excludes)."""
    variables, index = _var_names(tree)
    shape = SHAPES[attempt % len(SHAPES)]
    attempt //= len(SHAPES)  # the rest varies the constants and parameters
    shapes = []
    dtypes = []
    for v in variables:
        # an index: a scalar or a one-element vector (a selection then squeezed)
        options = [((), (1,))[(attempt // 2) % 2], (), (1,)] if v.name in index else [shape, *SHAPES]
        kind = jnp.int32 if v.name in index else jnp.float32
        chosen = next((s for s in options if v.where is None or _accepts(v.where, s, kind)), None)
        if chosen is None and v.name not in index:  # a predicate (a select's condition): boolean
            kind = jnp.bool_
            chosen = next((s for s in options if v.where is not None and _accepts(v.where, s, kind)), None)
        if chosen is None:
            return None
        shapes.append(chosen)
        dtypes.append(kind)
    names = tuple(v.name for v in variables)
    avals = [jax.ShapeDtypeStruct(s, d) for s, d in zip(shapes, dtypes)]
    x64 = _names_prim(tree, "convert_element_type")

    def fn(*args: Any) -> Any:
        return _Builder(attempt).run(tree, dict(zip(names, args)))

    first = next((a for a in tree.args if isinstance(a, Op)), None) if isinstance(tree, Op) else None

    def inner(*args: Any) -> Any:
        assert first is not None
        return _Builder(attempt).run(first, dict(zip(names, args)))

    try:
        with _x64(x64):
            jax.make_jaxpr(fn)(*avals)
            if first is not None:
                jax.make_jaxpr(inner)(*avals)
    except _CannotBuild:
        return None
    except Exception:
        return None
    return Instance(fn, names, tuple(shapes), inner if first is not None else None, tree, x64, tuple(dtypes))


def describe_program(inst: Instance) -> str:
    """The program as its jaxpr, one line per equation (for failure messages)."""
    with _x64(inst.x64):
        return str(jax.make_jaxpr(inst.fn)(*inst.avals()))


@contextlib.contextmanager
def _x64(on: bool) -> Iterator[None]:
    if not on:
        yield
        return
    with _compat.enable_x64():
        yield


def _names_prim(p: Pattern, prim: str) -> bool:
    if isinstance(p, Op):
        return prim in p.prim or any(_names_prim(a, prim) for a in p.args)
    return False


def _accepts(where: Callable[[Any], bool], shape: tuple[int, ...], dtype: Any = jnp.float32) -> bool:
    try:
        return bool(where(jax.ShapeDtypeStruct(shape, dtype)))
    except Exception:
        return False


class _CannotBuild(Exception):
    pass


class _Builder:
    """Evaluates a concrete tree under a trace; named sub-terms once each."""

    def __init__(self, attempt: int) -> None:
        self.attempt = attempt
        self.shared: dict[str, Any] = {}
        self.wide = False  # under a convert_element_type: constants in float64

    def run(self, tree: Pattern, env: dict[str, Any]) -> Any:
        self.env = env
        return self.value(tree)

    def value(self, p: Pattern) -> Any:
        if isinstance(p, Var):
            return self.env[p.name]
        if isinstance(p, Const):
            if self.wide:
                return jnp.asarray(self.constant(p), jnp.float64)
            return self.constant(p)  # a Python float: a literal in the program, as users write it
        if isinstance(p, Op):
            if p.name is not None and p.name in self.shared:
                return self.shared[p.name]
            out = self.op(p)
            if p.name is not None:
                self.shared[p.name] = out
            return out
        raise _CannotBuild(f"not a concrete pattern: {p!r}")

    def constant(self, c: Const) -> float:
        if not callable(c.value):
            return float(c.value)
        order = CONSTANTS[self.attempt % len(CONSTANTS):] + CONSTANTS[:self.attempt % len(CONSTANTS)]
        for v in order:
            try:
                if c.value(v):
                    return v
            except Exception:
                continue
        raise _CannotBuild(f"no constant satisfies {c.describe()}")

    def op(self, p: Op) -> Any:
        params = dict(p.params)
        for prim in sorted(p.prim):
            if prim in _CALL_PRIMS:
                out = self.call(p, prim, params)
                if out is not None:
                    return out
                continue
            if prim == "convert_element_type":  # a float64 value narrowed, as x64 code computes constants
                wide, self.wide = self.wide, True
                try:
                    (arg,) = [self.value(a) for a in p.args]
                finally:
                    self.wide = wide
                if jnp.result_type(arg) == jnp.float64:  # a float64 constant narrowed
                    return lax.convert_element_type(arg, jnp.float32)
                # a float32 value widened, as mixed code promotes it against a float64 operand
                return lax.convert_element_type(arg, jnp.float64)
            args = [self.value(a) for a in p.args]
            return self.primitive(prim, args, params)
        raise _CannotBuild(f"cannot build {p.describe()}")

    def primitive(self, prim: str, args: list[Any], params: dict[str, Any]) -> Any:
        if prim in _UNARY and len(args) == 1:
            return _UNARY[prim](_array(args[0]))
        if prim in _BINARY and len(args) == 2:
            return _BINARY[prim](*args)
        if prim == "pow" and len(args) == 2:
            if isinstance(args[1], float):  # x ** 2.0 as users write it: pow with a scalar literal
                return jnp.power(_array(args[0]), args[1])
            a, b = jnp.broadcast_arrays(_array(args[0]), _array(args[1]))
            return lax.pow(a, b)
        if prim == "integer_pow" and len(args) == 1:
            return lax.integer_pow(_array(args[0]), int(self.param(params.get("y"), POWERS)))
        if prim in ("reduce_sum", "reduce_prod", "reduce_max", "reduce_min") and len(args) == 1:
            x = _array(args[0])
            if x.ndim == 0:
                raise _CannotBuild("a reduction of a scalar")
            axes = self.param(params.get("axes"), ((x.ndim - 1,), tuple(range(x.ndim))))
            f = {"reduce_sum": jnp.sum, "reduce_prod": jnp.prod, "reduce_max": jnp.max, "reduce_min": jnp.min}
            # every other attempt keeps the reduced axes (keepdims: a reshape the matcher sees
            # through), so the result broadcasts against its operand as a softmax's sum does
            return f[prim](x, axis=tuple(axes), keepdims=self.attempt % 2 == 1)
        if prim == "dot_general" and len(args) == 2:
            a, b = _array(args[0]), _array(args[1])
            if a.ndim == 0 or b.ndim == 0:
                raise _CannotBuild("a dot product of a scalar")
            dims = (((a.ndim - 1,), (0,)), ((), ()))
            return lax.dot_general(a, b, self.param(params.get("dimension_numbers"), (dims,)))
        if prim == "select_n" and len(args) >= 2:
            pred = args[0] if getattr(args[0], "dtype", None) == jnp.bool_ else jnp.greater(args[0], 0)
            cases = jnp.broadcast_arrays(*[_array(a) for a in args[1:]])
            pred = jnp.broadcast_to(pred, cases[0].shape)
            return lax.select_n(pred, *cases)
        if prim == "broadcast_in_dim" and len(args) == 1:
            x = _array(args[0])
            return lax.broadcast_in_dim(x, (3, *x.shape), tuple(range(1, x.ndim + 1)))
        if prim == "slice" and len(args) == 1:
            x = _array(args[0])
            if x.ndim == 0:
                raise _CannotBuild("a slice of a scalar")
            return lax.slice(x, (*(0,) * (x.ndim - 1), 2), (*x.shape[:-1], 3))
        if prim == "squeeze" and len(args) == 1:
            x = _array(args[0])
            ones = tuple(i for i, d in enumerate(x.shape) if d == 1)
            if not ones:
                raise _CannotBuild("a squeeze of an operand with no axis of size 1")
            return lax.squeeze(x, ones[-1:])
        if prim == "dynamic_slice" and len(args) >= 1:
            x = _array(args[0])
            if x.ndim == 0 or len(args) not in (1, x.ndim + 1):
                raise _CannotBuild("a dynamic_slice whose index operands do not fit the operand's rank")
            starts = tuple(args[1:]) if len(args) > 1 else (0,) * (x.ndim - 1) + (2,)
            return lax.dynamic_slice(x, starts, (1,) * x.ndim)
        if prim == "gather" and len(args) in (1, 2):
            x = _array(args[0])
            if x.ndim == 0:
                raise _CannotBuild("a gather from a scalar")
            if len(args) == 1:
                return jnp.take(x, jnp.asarray([2, 5]), axis=-1, mode="fill")
            return x[..., args[1]]
        raise _CannotBuild(f"no builder for {prim}/{len(args)}")

    def param(self, want: Any, options: Sequence[Any]) -> Any:
        """A parameter value the constraint ``want`` accepts (None or a capture: the default)."""
        if want is None or isinstance(want, Param):
            return options[self.attempt % len(options)] if len(options) > 1 and isinstance(want, Param) \
                else options[0]
        if callable(want):
            for v in itertools.chain(options, POWERS):
                try:
                    if want(v):
                        return v
                except Exception:
                    continue
            raise _CannotBuild("no parameter value satisfies the constraint")
        return want

    def call(self, p: Op, prim: str, params: dict[str, Any]) -> Any:
        """A library call whose traced equation is ``prim`` and meets ``params``; None if none is."""
        args = [self.value(a) for a in p.args]
        for f in _CALLS.get(len(args), ()):
            try:
                closed = jax.make_jaxpr(f)(*args)
            except Exception:
                continue
            eqns = [e for e in closed.jaxpr.eqns if e.primitive.name in p.prim]
            if any(_params_ok(e.params, params) for e in eqns):
                return f(*args)
        return None


def _params_ok(have: dict[str, Any], want: dict[str, Any]) -> bool:
    for name, w in want.items():
        if name not in have:
            return False
        if isinstance(w, Param):
            if w.read is not None and w.value(have[name]) is None:
                return False
            continue
        try:
            ok = w(have[name]) if callable(w) else have[name] == w
        except Exception:
            ok = False
        if not ok:
            return False
    return True


def _array(x: Any) -> Any:
    return jnp.asarray(x, jnp.float32) if not hasattr(x, "ndim") else x
