"""The exact oracle: a jaxpr interpreter over mpmath numbers, with Herbie's precision escalation.

The interpreter gives a program its real-number meaning: every float operation is the exact real
operation (computed at a working precision), so the float roundings and overflows of the program's dtype
do not exist in it. ``convert_element_type`` between floats is therefore the identity; float -> int
truncates toward zero as the program would; ``reduce_precision`` is applied, being a rounding the program
asks for explicitly. Control flow is decided on exact values: a ``while`` whose exit depends on rounding
(``while x + eps != x``) can run a different number of times than the float program, or not end (capped
at :data:`MAX_WHILE_ITERATIONS`).

The working precision starts near twice the dtype's significand (plus a margin) and doubles until every
output rounds to the same float at two successive precisions (NaN equals NaN), up to ``max_precision``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import jax
import mpmath
import numpy as np

from .. import _compat
from .._dtypes import dtype_info, resolve_dtype
from .._primitives import CALLS, CUSTOM_DERIVATIVES
from . import _elementwise, _linalg, _reductions, _structural
from ._common import (
    OracleError,
    Rule,
    UnsupportedPrimitive,
    beyond_reach_count,
    ints_to_mpf,
    is_complex,
    is_float,
    obj,
)
from ._rounding import round_to_dtype, to_mpf_array

__all__ = ["MAX_WHILE_ITERATIONS", "SUPPORTED_PRIMITIVES", "OracleResult", "evaluate"]

#: A ``while`` loop still running after this many iterations of the exact evaluation is an error.
MAX_WHILE_ITERATIONS = 1_000_000

_MARGIN_BITS = 20


@dataclasses.dataclass(frozen=True)
class OracleResult:
    """The exact results of a program, rounded to a float dtype.

    Attributes:
      values: numpy arrays (in the pytree of the function's output; a flat list for a jaxpr): float
        outputs are the exact results correctly rounded to the target dtype (NaN where the real result
        does not exist, +-Inf where it overflows the dtype); integer and boolean outputs as computed.
      certain: boolean arrays alike: False where the rounded value changed between the last two
        precisions (the element did not settle within ``max_precision``), or where a non-finite value
        came from an argument beyond the oracle's reach (``_common.MAG_LIMIT``).
      precision: the bits of working precision of the last evaluation.
      exact: the unrounded values of the last evaluation (object arrays of ``mpmath.mpf``; integer and
        boolean outputs as numpy arrays), same structure.
    """

    values: Any
    certain: Any
    precision: int
    exact: Any


# ------------------------------------------------------------------------------------ interpreter
def _call(ctx: _Interpreter, eqn: Any, *args: np.ndarray) -> list[np.ndarray]:
    (_, sub), *_ = _compat.subjaxprs(eqn)
    return ctx.call(sub, args)


def _custom_call(ctx: _Interpreter, eqn: Any, *args: np.ndarray) -> list[np.ndarray]:
    body, _ = _compat.custom_call_parts(eqn)  # the primal body; derivative rules play no part
    return ctx.call(body, args)


def _at(x: np.ndarray, i: int) -> np.ndarray:
    """``x[i]`` along the leading axis, always an ndarray."""
    r = x[i]
    if isinstance(r, np.ndarray):
        return r
    return obj(r) if x.dtype == object else np.asarray(r, dtype=x.dtype)


def _empty(aval: Any) -> np.ndarray:
    return np.empty(tuple(aval.shape), dtype=object if is_float(aval.dtype) else aval.dtype)


def _scan(ctx: _Interpreter, eqn: Any, *args: np.ndarray) -> list[np.ndarray]:
    sp = _compat.scan_parts(eqn)
    nc, nk = len(sp.consts), len(sp.carry)
    consts, carry, xs = list(args[:nc]), list(args[nc : nc + nk]), list(args[nc + nk :])
    length = int(sp.length)
    ys: list[list[Any]] = [[None] * length for _ in sp.ys]
    for t in range(length):
        i = length - 1 - t if sp.reverse else t
        outs = ctx.call(sp.body, consts + carry + [_at(x, i) for x in xs])
        carry = outs[:nk]
        for j, y in enumerate(outs[nk:]):
            ys[j][i] = y
    stacked = [np.stack(y) if length else _empty(_compat.aval(v)) for y, v in zip(ys, sp.ys)]
    return carry + stacked


def _while(ctx: _Interpreter, eqn: Any, *args: np.ndarray) -> list[np.ndarray]:
    wp = _compat.while_parts(eqn)
    nc, nb = len(wp.cond_consts), len(wp.body_consts)
    cond_consts, body_consts, carry = list(args[:nc]), list(args[nc : nc + nb]), list(args[nc + nb :])
    for _ in range(MAX_WHILE_ITERATIONS):
        (pred,) = ctx.call(wp.cond, cond_consts + carry)
        if not bool(np.asarray(pred)):
            return carry
        carry = ctx.call(wp.body, body_consts + carry)
    raise OracleError(
        f"a while loop at {ctx.location(eqn) or 'an unknown location'} was still running after "
        f"{MAX_WHILE_ITERATIONS:,} iterations in the exact evaluation. Its exit condition may depend on "
        f"float rounding (e.g. `while x + eps != x`), which does not happen with exact values: bound the "
        f"loop by a count (lax.fori_loop), or leave this function out of oracle-checked cases."
    )


def _cond(ctx: _Interpreter, eqn: Any, index: np.ndarray, *ops: np.ndarray) -> list[np.ndarray]:
    _, _, branches = _compat.cond_parts(eqn)
    i = min(max(int(np.asarray(index)), 0), len(branches) - 1)  # clamped, as lax.switch
    return ctx.call(branches[i], ops)


_CONTROL: dict[str, Rule] = {name: _call for name in CALLS}
_CONTROL.update({name: _custom_call for name in CUSTOM_DERIVATIVES})
_CONTROL.update({"scan": _scan, "while": _while, "cond": _cond})

_RULES: dict[str, Rule] = {
    **_elementwise.RULES, **_structural.RULES, **_reductions.RULES, **_linalg.RULES, **_CONTROL,
}

#: Names of the primitives the oracle evaluates exactly (anything else raises UnsupportedPrimitive).
SUPPORTED_PRIMITIVES: frozenset[str] = frozenset(_RULES)


def _to_value(x: Any, aval: Any) -> np.ndarray:
    """An input, const or literal as an interpreter value (exact mpf for floats)."""
    if is_complex(aval.dtype) or np.iscomplexobj(x):
        raise OracleError(f"complex value of dtype {aval.dtype}: the exact oracle evaluates real functions")
    arr = np.asarray(x)
    if is_float(aval.dtype):
        if not is_float(arr.dtype):
            return ints_to_mpf(arr)
        # The program sees its input cast to its own dtype (a float64 array passed without x64 enabled
        # is float32 to it): take that value, correctly rounded by numpy's cast.
        return to_mpf_array(arr.astype(aval.dtype, copy=False))
    return arr.astype(aval.dtype, copy=False)


class _Interpreter:
    """Walks closed jaxprs at one working precision; caches converted consts and literals across runs."""

    def __init__(self) -> None:
        self.prec = 0
        self._stack: list[Any] = []
        self._converted: dict[int, tuple[Any, np.ndarray]] = {}

    # Context protocol -----------------------------------------------------------------------------
    def call(self, closed: Any, args: Sequence[np.ndarray]) -> list[np.ndarray]:
        consts = [self._convert(c, _compat.aval(v)) for v, c in zip(_compat.constvars(closed),
                                                                     _compat.parts(closed)[1])]
        env: dict[Any, np.ndarray] = dict(zip(_compat.constvars(closed), consts))
        env.update(zip(_compat.invars(closed), args))
        for eqn in _compat.eqns(closed):
            invals = [self._read(env, a) for a in eqn.invars]
            rule = _RULES.get(_compat.primitive_name(eqn))
            if rule is None:  # the pre-scan makes this unreachable, kept for direct callers
                raise self.unsupported(eqn)
            self._stack.append(eqn)
            try:
                out = rule(self, eqn, *invals)
            finally:
                self._stack.pop()
            outs = out if eqn.primitive.multiple_results else [out]
            for var, val in zip(eqn.outvars, outs):
                if not _compat.is_dropvar(var):
                    env[var] = _conform(val, _compat.aval(var))
        return [self._read(env, a) for a in _compat.outvars(closed)]

    def unsupported(self, eqn: Any, reason: str | None = None) -> UnsupportedPrimitive:
        return UnsupportedPrimitive(_compat.primitive_name(eqn), self.location(eqn), reason)

    def location(self, eqn: Any) -> str | None:
        return _location(eqn, self._stack)

    # internals ------------------------------------------------------------------------------------
    def _read(self, env: dict[Any, np.ndarray], atom: Any) -> np.ndarray:
        if _compat.is_literal(atom):
            return self._convert(atom, _compat.aval(atom), _compat.literal_value(atom))
        return env[atom]

    def _convert(self, key: Any, aval: Any, value: Any = None) -> np.ndarray:
        hit = self._converted.get(id(key))
        if hit is not None and hit[0] is key:
            return hit[1]
        val = _to_value(key if value is None else value, aval)
        self._converted[id(key)] = (key, val)  # holds `key` so that its id stays unique
        return val


def _conform(val: Any, aval: Any) -> np.ndarray:
    """A rule's result as a value of ``aval``'s kind and shape."""
    shape = tuple(aval.shape)
    if is_float(aval.dtype):
        if isinstance(val, np.ndarray) and val.dtype != object:  # a rule returned plain numbers
            val = to_mpf_array(val) if is_float(val.dtype) else ints_to_mpf(val)
        val = obj(val)
    else:
        val = np.asarray(val)
        if val.dtype != aval.dtype:
            val = val.astype(aval.dtype)
    if val.shape != shape:
        val = np.broadcast_to(val, shape)
    return val


def _location(eqn: Any, stack: Sequence[Any]) -> str | None:
    """The user's ``file:line`` of ``eqn``, else of the nearest enclosing equation that has one."""
    for e in (eqn, *reversed(stack)):
        loc = _compat.location(e)
        if loc is not None:
            return loc
    return None


def _runnable_subjaxprs(eqn: Any) -> list[Any]:
    """The sub-jaxprs the interpreter will run for ``eqn`` (not derivative rules)."""
    name = _compat.primitive_name(eqn)
    if name == "custom_linear_solve":
        return [_compat.as_closed(eqn.params["jaxprs"].solve)]
    if name in CUSTOM_DERIVATIVES:
        return [_compat.custom_call_parts(eqn)[0]]
    return [sub for _, sub in _compat.subjaxprs(eqn)]


def _check_supported(closed: Any, stack: tuple[Any, ...] = ()) -> None:
    """Raises UnsupportedPrimitive for the first equation the oracle cannot evaluate, before running."""
    for eqn in _compat.eqns(closed):
        name = _compat.primitive_name(eqn)
        if name not in _RULES:
            raise UnsupportedPrimitive(name, _location(eqn, stack))
        for var in eqn.outvars:
            if is_complex(_compat.aval(var).dtype):
                raise UnsupportedPrimitive(name, _location(eqn, stack), "complex values")
        for sub in _runnable_subjaxprs(eqn):
            _check_supported(sub, (*stack, eqn))


# ------------------------------------------------------------------------------------- evaluation
def _is_jaxpr(x: Any) -> bool:
    return hasattr(x, "eqns") or hasattr(getattr(x, "jaxpr", None), "eqns")


def _prepare(fn_or_jaxpr: Any, args: tuple[Any, ...]) -> tuple[Any, list[Any], Any]:
    if _is_jaxpr(fn_or_jaxpr):
        closed = _compat.as_closed(fn_or_jaxpr)
        n = len(_compat.invars(closed))
        if len(args) != n:
            raise TypeError(f"evaluate: this jaxpr takes {n} flat arguments, got {len(args)}")
        return closed, list(args), None
    if not callable(fn_or_jaxpr):
        raise TypeError(f"evaluate: expected a function or a closed jaxpr, got {type(fn_or_jaxpr).__name__}")
    closed, _, out_tree = _compat.trace(fn_or_jaxpr, *args)
    return closed, jax.tree_util.tree_leaves((args, {})), out_tree


def _schedule(start: int, max_precision: int) -> list[int]:
    """Working precisions: ``start``, doubling, the last one capped at ``max_precision``."""
    start = min(start, max_precision // 2)
    precs = [start]
    while precs[-1] < max_precision:
        precs.append(min(2 * precs[-1], max_precision))
    return precs


def _same(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind in "biu":
        return np.asarray(a == b)
    return np.asarray((a == b) | (np.isnan(a) & np.isnan(b)))


def evaluate(fn_or_jaxpr: Any, *args: Any, dtype: Any = None, max_precision: int = 4096) -> OracleResult:
    """The exact results of a JAX function, correctly rounded to a float dtype.

    Interprets the function's jaxpr (sub-jaxprs included: jit, custom_jvp/vjp, scan, while, cond) over
    mpmath numbers, so the result is the real-number function the program writes down, free of the
    roundings and overflows of its dtype; then rounds it, raising the working precision until every
    element has settled (DESIGN.md section 4).

    Args:
      fn_or_jaxpr: a Python function of arrays (traced with ``jax.make_jaxpr``; pytrees of arrays in
        and out are fine), or a closed jaxpr, whose arguments are then its flat inputs.
      *args: the inputs: float16/bfloat16/float32/float64 arrays or scalars (numpy or JAX), integer or
        boolean arrays where the function takes them. Their float values are taken exactly.
      dtype: the dtype to round float outputs to; None rounds each to its own dtype.
      max_precision: the most bits of working precision to use (at least 16).

    Returns:
      An :class:`OracleResult` (``values``, ``certain``, ``precision``, ``exact``), outputs in the
      function's output pytree (a flat list for a jaxpr).

    Raises:
      UnsupportedPrimitive: the program uses a primitive the oracle cannot evaluate exactly (raised
        before any evaluation, naming the primitive and the user's ``file:line``).
      OracleError: a complex input, or a while loop that does not end in the exact evaluation.

    Example:
      >>> x = np.float32(1e8)
      >>> evaluate(lambda x: (x + 1) - x, x).values  # float32 arithmetic gives 0
      array(1., dtype=float32)
    """
    if int(max_precision) < 16:
        raise ValueError(f"max_precision must be at least 16 bits, got {max_precision}")
    closed, flat_args, out_tree = _prepare(fn_or_jaxpr, args)
    _check_supported(closed)
    in_avals = [_compat.aval(v) for v in _compat.invars(closed)]
    out_avals = [_compat.aval(v) for v in _compat.outvars(closed)]
    target = None if dtype is None else resolve_dtype(dtype)
    targets = [(target or np.dtype(a.dtype)) if is_float(a.dtype) else None for a in out_avals]
    widths = [_significand_bits(a.dtype) for a in in_avals if is_float(a.dtype)]
    widths += [_significand_bits(t) for t in targets if t is not None]
    start = 2 * max(widths, default=24) + _MARGIN_BITS

    interp = _Interpreter()
    inputs = [_to_value(a, av) for a, av in zip(flat_args, in_avals)]
    previous: list[np.ndarray] | None = None
    for prec in _schedule(start, int(max_precision)):
        before = beyond_reach_count()
        interp.prec = prec
        with mpmath.workprec(prec):
            exact = interp.call(closed, inputs)
        beyond = beyond_reach_count() > before
        rounded = [round_to_dtype(e, t) if t is not None else np.asarray(e) for e, t in zip(exact, targets)]
        if previous is not None:
            certain = [_same(a, b) for a, b in zip(previous, rounded)]
            if all(c.all() for c in certain):
                break
        previous = rounded
    if beyond:
        certain = [c & np.isfinite(r) if t is not None else c for c, r, t in zip(certain, rounded, targets)]

    def tree(leaves: list[Any]) -> Any:
        return leaves if out_tree is None else jax.tree_util.tree_unflatten(out_tree, leaves)

    return OracleResult(tree(rounded), tree(certain), prec, tree(exact))


def _significand_bits(dtype: Any) -> int:
    try:
        return dtype_info(dtype).significand_bits
    except ValueError:  # a float dtype the fuzzer does not draw (float8, ...): judge it as float64
        return 53
