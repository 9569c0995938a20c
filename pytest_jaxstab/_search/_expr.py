"""The search's expression language: a scalar real-number program as a tree, and its one operator table.

A term is a tuple: ``("var", i)`` (the i-th input), ``("const", v)`` (a float constant, or a
:class:`Table`: an array constant, whose program is judged on whole arrays) or ``(op, child, ...)``
with ``op`` a key of :data:`OPS`. Every other module (the e-graph language, the evaluators, the printer,
the series) reads the same table, so an operator is added in one place.

The op-cost model (``Op.cost``) is a rough relative latency on a CPU, in units of one addition: what the
Pareto frontier of :class:`~pytest_jaxstab._search.Improvement` calls "cost". It is documented, not
measured: jitted timing of tiny scalar programs is dominated by dispatch.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import mpmath
import numpy as np

from . import _special

__all__ = ["BOOLEAN_OPS", "OPS", "REDUCTIONS", "Op", "Table", "Term", "broadcast_name", "broadcast_shape",
           "const", "const_array", "cost", "evaluate_jax", "evaluate_mp", "is_array_op", "is_array_program",
           "is_broadcast", "is_const", "is_number", "is_reduction", "is_reshape", "is_selection", "op",
           "reduction_axes", "replace", "reshape_name", "reshape_shape", "selection_name", "selection_spec",
           "selection_shape", "signed_terms", "size", "subterms", "variables"]

Term = tuple[Any, ...]


@dataclasses.dataclass(frozen=True)
class Op:
    """One operator: arity, its JAX and mpmath semantics, its cost and how it prints."""

    name: str
    arity: int
    jax: Callable[..., Any]
    mp: Callable[..., Any]
    cost: float
    source: str  # a format string over the operands' source: "jnp.sqrt({0})", "({0} + {1})"
    infix: bool = False


def _mp_cbrt(a: Any) -> Any:
    if isinstance(a, mpmath.mpf) and a < 0:
        return -mpmath.cbrt(-a)
    return mpmath.cbrt(a)


def _mp_logaddexp(a: Any, b: Any) -> Any:
    return mpmath.log(mpmath.exp(a) + mpmath.exp(b))


def _mp_where(c: Any, a: Any, b: Any) -> Any:
    return a if c else b


def _truth(a: Any) -> Any:
    return jnp.asarray(a, bool)


def _jax_nanif(c: Any, a: Any) -> Any:
    return jnp.where(c, jnp.asarray(jnp.nan, jnp.result_type(a)), a)


def _mp_nanif(c: Any, a: Any) -> Any:
    return mpmath.nan if c else a


@dataclasses.dataclass(frozen=True)
class Table:
    """An array constant (hashable, so that it can sit in a term): an array the function closes over whose
    elements differ (``_lower``: weights, a mask, a distribution's parameters), or the one drawn example a
    regime's guard of an array program feeds the branch not taken (``_regimes``). Float values,
    row-major, exact (a float32 or integer array's values are float64 numbers); ``boolean``: a mask
    (``t == 0`` of a closed-over array, folded), 0.0 and 1.0 read as False and True."""

    shape: tuple[int, ...]
    values: tuple[float, ...]
    boolean: bool = False

    @classmethod
    def of(cls, array: Any) -> Table:
        raw = np.asarray(array)
        a = raw.astype(np.float64)
        return cls(tuple(int(d) for d in a.shape), tuple(float(v) for v in a.ravel()), raw.dtype == np.bool_)

    def array(self, dtype: Any) -> Any:
        return jnp.asarray(np.reshape(np.asarray(self.values, np.float64), self.shape),
                           bool if self.boolean else dtype)

    def nested(self) -> Any:
        """The values as nested lists (what ``jnp.asarray`` reads back; booleans for a mask)."""
        values = np.reshape(np.asarray(self.values, np.float64), self.shape)
        return (values != 0).tolist() if self.boolean else values.tolist()


def _no_mp(*_: Any) -> Any:
    raise TypeError("a whole-array reduction has no scalar (mpmath) semantics")


def _op(name: str, arity: int, jax_fn: Callable[..., Any], mp_fn: Callable[..., Any], cost: float,
        source: str, infix: bool = False) -> Op:
    return Op(name, arity, jax_fn, mp_fn, cost, source, infix)


OPS: dict[str, Op] = {o.name: o for o in (
    _op("add", 2, jnp.add, lambda a, b: a + b, 1, "{0} + {1}", True),
    _op("sub", 2, jnp.subtract, lambda a, b: a - b, 1, "{0} - {1}", True),
    _op("mul", 2, jnp.multiply, lambda a, b: a * b, 1, "{0} * {1}", True),
    _op("div", 2, jnp.divide, lambda a, b: a / b, 4, "{0} / {1}", True),
    _op("neg", 1, jnp.negative, lambda a: -a, 1, "-{0}"),
    _op("abs", 1, jnp.abs, abs, 1, "jnp.abs({0})"),
    _op("sqrt", 1, jnp.sqrt, mpmath.sqrt, 4, "jnp.sqrt({0})"),
    _op("cbrt", 1, jnp.cbrt, _mp_cbrt, 8, "jnp.cbrt({0})"),
    _op("exp", 1, jnp.exp, mpmath.exp, 8, "jnp.exp({0})"),
    _op("log", 1, jnp.log, mpmath.log, 8, "jnp.log({0})"),
    _op("expm1", 1, jnp.expm1, mpmath.expm1, 10, "jnp.expm1({0})"),
    _op("log1p", 1, jnp.log1p, mpmath.log1p, 10, "jnp.log1p({0})"),
    _op("sin", 1, jnp.sin, mpmath.sin, 10, "jnp.sin({0})"),
    _op("cos", 1, jnp.cos, mpmath.cos, 10, "jnp.cos({0})"),
    _op("tan", 1, jnp.tan, mpmath.tan, 12, "jnp.tan({0})"),
    _op("sinh", 1, jnp.sinh, mpmath.sinh, 12, "jnp.sinh({0})"),
    _op("cosh", 1, jnp.cosh, mpmath.cosh, 12, "jnp.cosh({0})"),
    _op("tanh", 1, jnp.tanh, mpmath.tanh, 12, "jnp.tanh({0})"),
    _op("asin", 1, jnp.arcsin, mpmath.asin, 12, "jnp.arcsin({0})"),
    _op("acos", 1, jnp.arccos, mpmath.acos, 12, "jnp.arccos({0})"),
    _op("atan", 1, jnp.arctan, mpmath.atan, 12, "jnp.arctan({0})"),
    _op("asinh", 1, jnp.arcsinh, mpmath.asinh, 14, "jnp.arcsinh({0})"),
    _op("acosh", 1, jnp.arccosh, mpmath.acosh, 14, "jnp.arccosh({0})"),
    _op("atanh", 1, jnp.arctanh, mpmath.atanh, 14, "jnp.arctanh({0})"),
    _op("atan2", 2, jnp.arctan2, mpmath.atan2, 14, "jnp.arctan2({0}, {1})"),
    _op("pow", 2, jnp.power, lambda a, b: a ** b, 16, "jnp.power({0}, {1})"),
    _op("hypot", 2, jnp.hypot, lambda a, b: mpmath.sqrt(a * a + b * b), 10, "jnp.hypot({0}, {1})"),
    _op("logaddexp", 2, jnp.logaddexp, _mp_logaddexp, 20, "jnp.logaddexp({0}, {1})"),
    _op("max", 2, jnp.maximum, max, 1, "jnp.maximum({0}, {1})"),
    _op("min", 2, jnp.minimum, min, 1, "jnp.minimum({0}, {1})"),
    # Comparisons and select are carried through the search opaquely (no identity rewrites them).
    _op("lt", 2, jnp.less, lambda a, b: a < b, 1, "{0} < {1}", True),
    _op("le", 2, jnp.less_equal, lambda a, b: a <= b, 1, "{0} <= {1}", True),
    _op("eq", 2, jnp.equal, lambda a, b: a == b, 1, "{0} == {1}", True),  # where(x == 0, ...) guards
    _op("ne", 2, jnp.not_equal, lambda a, b: a != b, 1, "{0} != {1}", True),
    _op("where", 3, jnp.where, _mp_where, 1, "jnp.where({0}, {1}, {2})"),
    # ``where(c, nan, x)``: a library's NaN for inputs outside its domain (``jnp.where(n <= 0, nan, v)``),
    # chosen by the inputs. NaN is no number an identity can reason with, so the guard is one opaque
    # operator: the identities rewrite ``x`` under it, and the judge drops the points it makes NaN.
    _op("nanif", 2, _jax_nanif, _mp_nanif, 1, "jnp.where({0}, jnp.nan, {1})"),
    # One element as a rank-0 value: a regime's split key of an array program (a whole reduction, whose
    # kept axes would otherwise broadcast its comparison into the rank of every input it guards).
    _op("scalar", 1, lambda a: jnp.reshape(a, ()), lambda a: a, 0, "jnp.reshape({0}, ())"),
    # Special functions (``_special``): the library's float implementation, mpmath's exact value.
    _op("lgamma", 1, jax.scipy.special.gammaln, _special.mp_lgamma, 40, "jax.scipy.special.gammaln({0})"),
    _op("digamma", 1, jax.scipy.special.digamma, mpmath.digamma, 40, "jax.scipy.special.digamma({0})"),
    _op("erf", 1, jax.scipy.special.erf, mpmath.erf, 20, "jax.scipy.special.erf({0})"),
    _op("erfc", 1, jax.scipy.special.erfc, mpmath.erfc, 20, "jax.scipy.special.erfc({0})"),
    _op("erf_inv", 1, jax.scipy.special.erfinv, mpmath.erfinv, 30, "jax.scipy.special.erfinv({0})"),
    _op("ndtri", 1, jax.scipy.special.ndtri, _special.mp_ndtri, 30, "jax.scipy.special.ndtri({0})"),
    _op("ndtr", 1, jax.scipy.special.ndtr, mpmath.ncdf, 30, "jax.scipy.special.ndtr({0})"),
    _op("log_ndtr", 1, jax.scipy.special.log_ndtr, _special.mp_log_ndtr, 40,
        "jax.scipy.special.log_ndtr({0})"),
    _op("logistic", 1, jax.nn.sigmoid, _special.mp_logistic, 10, "jax.nn.sigmoid({0})"),
    _op("softplus", 1, jax.nn.softplus, _special.mp_softplus, 20, "jax.nn.softplus({0})"),
    _op("xlogy", 2, jax.scipy.special.xlogy, _special.mp_xlogy, 10, "jax.scipy.special.xlogy({0}, {1})"),
    _op("xlog1py", 2, jax.scipy.special.xlog1py, _special.mp_xlog1py, 12,
        "jax.scipy.special.xlog1py({0}, {1})"),
    _op("lgammadiff", 2, _special.lgamma_difference, _special.mp_lgamma_difference, 60,
        "log_gamma_difference({0}, {1})"),
    _op("i0", 1, jax.scipy.special.i0, _special.mp_i0, 30, "jax.scipy.special.i0({0})"),
    _op("i1", 1, jax.scipy.special.i1, _special.mp_i1, 30, "jax.scipy.special.i1({0})"),
    _op("i0e", 1, jax.scipy.special.i0e, _special.mp_i0e, 25, "jax.scipy.special.i0e({0})"),
    _op("i1e", 1, jax.scipy.special.i1e, _special.mp_i1e, 25, "jax.scipy.special.i1e({0})"),
    _op("gammainc", 2, jax.scipy.special.gammainc, _special.mp_gammainc, 60,
        "jax.scipy.special.gammainc({0}, {1})"),
    _op("gammaincc", 2, jax.scipy.special.gammaincc, _special.mp_gammaincc, 60,
        "jax.scipy.special.gammaincc({0}, {1})"),
    _op("betainc", 3, jax.scipy.special.betainc, _special.mp_betainc, 80,
        "jax.scipy.special.betainc({0}, {1}, {2})"),
    # Piecewise functions: exact at every real point but one (the oracle decides the edges as it does
    # for the written program); no identity moves an input across their jumps.
    _op("floor", 1, jnp.floor, _special.real_only(mpmath.floor), 1, "jnp.floor({0})"),
    _op("ceil", 1, jnp.ceil, _special.real_only(mpmath.ceil), 1, "jnp.ceil({0})"),
    _op("round_even", 1, jnp.round, _special.real_only(mpmath.nint), 1, "jnp.round({0})"),
    _op("round_away", 1, jax.lax.round, _special.mp_round_away, 1, "jax.lax.round({0})"),
    _op("sign", 1, jnp.sign, _special.real_only(mpmath.sign), 1, "jnp.sign({0})"),
    # A float's neighbour (a guard away from 0 or 1): opaque to the identities, judged by the oracle.
    _op("nextafter", 2, jnp.nextafter, _special.mp_nextafter, 1, "jnp.nextafter({0}, {1})"),
    # Booleans: a finiteness test and the logic that combines the conditions of a ``where``.
    _op("isfinite", 1, jnp.isfinite, _special.mp_isfinite, 1, "jnp.isfinite({0})"),
    # (a folded mask is an array constant of 0.0 and 1.0: read as booleans, not promoted with them)
    _op("and", 2, lambda a, b: jnp.logical_and(_truth(a), _truth(b)), _special.mp_and, 1,
        "jnp.logical_and({0}, {1})"),
    _op("or", 2, lambda a, b: jnp.logical_or(_truth(a), _truth(b)), _special.mp_or, 1,
        "jnp.logical_or({0}, {1})"),
    _op("not", 1, lambda a: jnp.logical_not(_truth(a)), _special.mp_not, 1, "jnp.logical_not({0})"),
)}

#: Operators whose value is a boolean (a program cannot return one; ``where`` takes one as its condition).
BOOLEAN_OPS = frozenset({"lt", "le", "eq", "ne", "isfinite", "and", "or", "not"})


#: Reductions, each over every axis (``sum_all``) or over some (``sum_ax1``, ``sum_ax0_2``; the axes of
#: one example, never a batch axis the judge adds with ``vmap``). They keep the reduced axes (size 1)
#: so that broadcasting against the operand stays aligned; the whole program is reshaped at the end.
#: ``lse`` is an accurate log-sum-exp (``_special.logsumexp``). No mpmath semantics (arrays only).
REDUCTIONS: dict[str, Op] = {o.name: o for o in (
    _op("sum", 1, jnp.sum, _no_mp, 1, "jnp.sum({0}{axes})"),
    _op("prod", 1, jnp.prod, _no_mp, 1, "jnp.prod({0}{axes})"),
    _op("max", 1, jnp.max, _no_mp, 1, "jnp.max({0}{axes})"),
    _op("min", 1, jnp.min, _no_mp, 1, "jnp.min({0}{axes})"),
    _op("lse", 1, _special.logsumexp, _no_mp, 30, ""),
)}


def reduction_axes(kind: str) -> tuple[str, tuple[int, ...] | None] | None:
    """``(base, axes)`` of a reduction operator name (axes None: every axis); None for other names."""
    for sep in ("_all", "_ax"):
        base, found, rest = kind.partition(sep)
        if found and base in REDUCTIONS:
            if sep == "_all":
                return (base, None) if not rest else None
            try:
                return base, tuple(int(a) for a in rest.split("_"))
            except ValueError:
                return None
    return None


def is_reduction(kind: str) -> bool:
    """Whether ``kind`` names a reduction (``sum_all``, ``max_ax1``, ...)."""
    return reduction_axes(kind) is not None


def reduction_name(base: str, axes: tuple[int, ...] | None) -> str:
    """The operator name of reduction ``base`` over ``axes`` (None: every axis)."""
    return f"{base}_all" if axes is None else f"{base}_ax" + "_".join(str(a) for a in axes)


@functools.cache
def _reduction_op(kind: str) -> Op:
    parsed = reduction_axes(kind)
    if parsed is None:
        raise KeyError(kind)
    base, axes = parsed
    spec = REDUCTIONS[base]
    fn = spec.jax

    def apply(x: Any) -> Any:
        return fn(x, axis=axes, keepdims=True)

    # Printed: a reduction over every axis as the scalar it is (it broadcasts as the kept shape does);
    # one over some axes keeps them, as evaluated.
    if base == "lse":
        source = ("jst.rewrites.forms.logsumexp({0})" if axes is None else
                  f"jnp.expand_dims(jst.rewrites.forms.logsumexp({{0}}, axes={axes!r}), {axes!r})")
    else:
        source = spec.source.replace("{axes}", "" if axes is None else f", axis={axes!r}, keepdims=True")
    return Op(kind, 1, apply, _no_mp, spec.cost, source)


#: A static selection: the elements ``start:limit:stride`` on every axis of its operand, rank kept (size-1
#: axes where one element is picked, as reductions keep theirs). ``x[0]``, ``x[..., k]``, ``x[1:3]``,
#: ``lax.dynamic_slice`` with constant starts and ``jnp.take`` with a constant index lower to it; named
#: ``sel_`` then ``{start}x{limit}x{stride}`` per axis joined by ``_`` (``sel_0x1x1_0x5x1``: row 0 of a
#: 4x5 array). No mpmath semantics (arrays only).
_SELECTION = "sel_"


def selection_name(starts: Sequence[int], limits: Sequence[int], strides: Sequence[int] | None = None) -> str:
    """The operator name of the static slice ``starts:limits:strides`` (strides default 1)."""
    steps = list(strides) if strides is not None else [1] * len(starts)
    return _SELECTION + "_".join(f"{int(s)}x{int(e)}x{int(t)}" for s, e, t in zip(starts, limits, steps))


def selection_spec(kind: str) -> tuple[tuple[int, int, int], ...] | None:
    """``((start, limit, stride), ...)`` per axis of a selection operator name; None for other names."""
    if not kind.startswith(_SELECTION):
        return None
    try:
        spec = tuple(tuple(int(v) for v in part.split("x")) for part in kind[len(_SELECTION):].split("_"))
    except ValueError:
        return None
    if not spec or any(len(p) != 3 or p[2] < 1 or p[0] < 0 or p[1] < p[0] for p in spec):
        return None
    return spec  # type: ignore[return-value]


def is_selection(kind: str) -> bool:
    """Whether ``kind`` names a static selection (``sel_0x1x1``)."""
    return selection_spec(kind) is not None


def is_array_op(kind: str) -> bool:
    """Whether ``kind`` works on whole arrays (a reduction, a selection, a broadcast or a reshape): a
    program with one is judged on whole arrays."""
    return is_reduction(kind) or is_selection(kind) or is_broadcast(kind) or is_reshape(kind)


def _shaped_name(prefix: str, shape: Sequence[int]) -> str:
    return prefix + "x".join(str(int(d)) for d in shape)


def _shape_of_name(prefix: str, kind: str) -> tuple[int, ...] | None:
    """The shape after ``prefix`` in an operator name (``bcast_2x3``: (2, 3)); None for other names."""
    if not kind.startswith(prefix):
        return None
    try:
        shape = tuple(int(d) for d in kind[len(prefix):].split("x"))
    except ValueError:
        return None
    return shape if shape and all(d >= 1 for d in shape) else None


#: A broadcast that replicates its operand: ``jnp.broadcast_to(x, shape)``, named ``bcast_`` then the
#: shape's dimensions joined by ``x`` (``bcast_2x3``). ``c * jnp.ones(n)`` or ``jnp.full(n, c)`` lowers
#: to it; a broadcast that only adds or drops size-1 axes stays an identity. Arrays only (no mpmath).
_BROADCAST = "bcast_"
#: A reshape that only inserts or drops size-1 axes, so that the operand's axes sit where the traced
#: program put them (``x[:, None]``, ``x[..., None] ** powers``, ``a[:, None, :] - b[None, :, :]``):
#: named ``rs_`` then the shape's dimensions joined by ``x`` (``rs_32x1``). Used only where trailing
#: broadcasting would put them elsewhere. Arrays only (no mpmath).
_RESHAPE = "rs_"


def broadcast_name(shape: Sequence[int]) -> str:
    """The operator name of the broadcast to ``shape``."""
    return _shaped_name(_BROADCAST, shape)


def broadcast_shape(kind: str) -> tuple[int, ...] | None:
    """The shape a broadcast operator name broadcasts to; None for other names."""
    return _shape_of_name(_BROADCAST, kind)


def is_broadcast(kind: str) -> bool:
    """Whether ``kind`` names a replicating broadcast (``bcast_2``)."""
    return broadcast_shape(kind) is not None


def reshape_name(shape: Sequence[int]) -> str:
    """The operator name of the reshape to ``shape`` (same elements, size-1 axes inserted or dropped)."""
    return _shaped_name(_RESHAPE, shape)


def reshape_shape(kind: str) -> tuple[int, ...] | None:
    """The shape a reshape operator name gives; None for other names."""
    return _shape_of_name(_RESHAPE, kind)


def is_reshape(kind: str) -> bool:
    """Whether ``kind`` names a size-1-axes reshape (``rs_32x1``)."""
    return reshape_shape(kind) is not None


@functools.cache
def _shaped_op(kind: str) -> Op:
    """The broadcast or reshape operator named ``kind``."""
    spread, placed = broadcast_shape(kind), reshape_shape(kind)
    if spread is not None:
        return Op(kind, 1, lambda x: jnp.broadcast_to(x, spread), _no_mp, 0,
                  f"jnp.broadcast_to({{0}}, {spread!r})")
    if placed is not None:
        return Op(kind, 1, lambda x: jnp.reshape(x, placed), _no_mp, 0, f"jnp.reshape({{0}}, {placed!r})")
    raise KeyError(kind)


def selection_shape(kind: str) -> tuple[int, ...]:
    """The shape a selection's result has (its operand's rank)."""
    spec = selection_spec(kind)
    assert spec is not None
    return tuple(len(range(s, e, t)) for s, e, t in spec)


@functools.cache
def _selection_op(kind: str) -> Op:
    spec = selection_spec(kind)
    if spec is None:
        raise KeyError(kind)
    starts, limits, strides = (tuple(p[i] for p in spec) for i in range(3))

    def apply(x: Any) -> Any:
        return jax.lax.slice(x, starts, limits, strides)

    tail = ")" if set(strides) == {1} else f", {strides!r})"
    source = f"jax.lax.slice({{0}}, {starts!r}, {limits!r}" + tail
    return Op(kind, 1, apply, _no_mp, 1, source)


def op(kind: str) -> Op:
    """The operator named ``kind``: an elementwise one of :data:`OPS`, a reduction (``sum_ax1``), a
    selection (``sel_0x1x1``), a broadcast (``bcast_2``) or a size-1-axes reshape (``rs_2x1``)."""
    if kind in OPS:
        return OPS[kind]
    if is_broadcast(kind) or is_reshape(kind):
        return _shaped_op(kind)
    return _selection_op(kind) if is_selection(kind) else _reduction_op(kind)


def is_array_program(term: Term) -> bool:
    """Whether ``term`` must be judged on whole arrays: it has an array operator, or an array constant
    (a :class:`Table`: the function closes over an array whose elements differ, read at each element)."""
    return any(is_array_op(t[0]) or (t[0] == "const" and isinstance(t[1], Table)) for t in subterms(term))


def is_number(term: Term) -> bool:
    """Whether ``term`` is a scalar constant (not an array :class:`Table`)."""
    return term[0] == "const" and not isinstance(term[1], Table)


def replace(term: Term, old: Term, new: Term) -> Term:
    """``term`` with every occurrence of the sub-term ``old`` replaced by ``new``."""
    if term == old:
        return new
    if term[0] in ("var", "const"):
        return term
    return (term[0], *(replace(c, old, new) for c in term[1:]))


def is_const(term: Term, value: float | None = None) -> bool:
    """Whether ``term`` is a constant (equal to ``value`` when given)."""
    return term[0] == "const" and (value is None or term[1] == value)


def signed_terms(term: Term, sign: float, out: list[tuple[float, Term]]) -> None:
    """Appends ``term``'s summands to ``out`` as ``(sign, summand)``, seeing through ``add``, ``sub``
    and ``neg`` (the sum's flat form that the gamma pairings and the root finder read)."""
    kind = term[0]
    if kind == "add":
        signed_terms(term[1], sign, out)
        signed_terms(term[2], sign, out)
    elif kind == "sub":
        signed_terms(term[1], sign, out)
        signed_terms(term[2], -sign, out)
    elif kind == "neg":
        signed_terms(term[1], -sign, out)
    else:
        out.append((sign, term))


def subterms(term: Term) -> list[Term]:
    """Every sub-term of ``term``, ``term`` first (pre-order, duplicates kept)."""
    out = [term]
    if term[0] not in ("var", "const"):
        for child in term[1:]:
            out.extend(subterms(child))
    return out


def size(term: Term) -> int:
    """The number of operator nodes in ``term`` (leaves count 0)."""
    return sum(1 for t in subterms(term) if t[0] not in ("var", "const"))


def cost(term: Term) -> float:
    """The op-cost model's cost of ``term``: the sum of its operators' costs (see the module doc)."""
    return float(sum(op(t[0]).cost for t in subterms(term) if t[0] not in ("var", "const")))


def variables(term: Term) -> set[int]:
    """The input indices ``term`` reads."""
    return {t[1] for t in subterms(term) if t[0] == "var"}


def evaluate_jax(term: Term, args: Sequence[Any], dtype: Any) -> Any:
    """``term`` evaluated with ``jax.numpy`` on arrays ``args`` (constants cast to ``dtype``)."""
    memo: dict[Term, Any] = {}

    def go(t: Term) -> Any:
        hit = memo.get(t)
        if hit is not None:
            return hit
        if t[0] == "var":
            out = args[t[1]]
        elif t[0] == "const":
            out = const_array(t, dtype)
        else:
            out = op(t[0]).jax(*(go(c) for c in t[1:]))
        memo[t] = out
        return out

    return go(term)


def const_array(t: Term, dtype: Any) -> Any:
    """A constant leaf's value as a JAX array of ``dtype`` (a :class:`Table`'s whole array)."""
    return t[1].array(dtype) if isinstance(t[1], Table) else jnp.asarray(t[1], dtype)


def evaluate_mp(term: Term, args: Sequence[Any]) -> Any:
    """``term`` evaluated with mpmath (real or complex) at the current ``mpmath.mp`` precision."""
    memo: dict[Term, Any] = {}

    def go(t: Term) -> Any:
        if t in memo:
            return memo[t]
        if t[0] == "var":
            out = args[t[1]]
        elif t[0] == "const":
            if isinstance(t[1], Table):
                raise TypeError("an array constant has no scalar (mpmath) semantics")
            out = mpmath.mpf(t[1])
        else:
            out = op(t[0]).mp(*(go(c) for c in t[1:]))
        memo[t] = out
        return out

    return go(term)


def const(value: float) -> Term:
    """A constant term (``-0.0`` kept apart from ``0.0`` is not needed over the reals)."""
    v = float(value)
    return ("const", 0.0 if v == 0 else v)

