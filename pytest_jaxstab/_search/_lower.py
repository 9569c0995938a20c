"""From a traced function to a search term: the elementwise float program as one expression tree.

The search works on scalar real-number expressions. A program qualifies when every equation is an
elementwise operation the term language has (``_expr.OPS``), a broadcast or same-dtype conversion
(identities elementwise), or a call (``jit``, ``custom_jvp``/``custom_vjp`` primal bodies) whose body
qualifies; the one float output must depend on the inputs only through these. Anything else is named
in :class:`Unsupported`, which ``improve`` turns into a result that says so.

:func:`lower_program` also takes whole-array reductions (``jnp.sum``/``prod``/``max``/``min`` over every
axis, so ``jnp.mean`` too) as the operators of ``_expr.REDUCTIONS``: the program around the elementwise
regions the search improves, and records where (user line, primitive) each operator was written, so
that the local error's worst line can be found in the term.

Library code reaches the search too (issue 47): a closed-over array whose elements differ is a constant
leaf (``_expr.Table``, its exact values; the program is then judged on whole arrays); an equation of
constants that is index arithmetic (``iota``, a mask compared from it, integer conversions) is computed
here and becomes such a constant; ``clamp`` is ``min``/``max``, ``lax.polynomial`` its Horner form, and
the piecewise, boolean and special primitives (``floor``, ``sign``, ``is_finite``, ``and``,
``bessel_i0e``, ``igamma``, ``regularized_incomplete_beta``, ...) are operators of ``_expr.OPS``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import _compat
from ._expr import (
    BOOLEAN_OPS,
    Table,
    Term,
    const,
    evaluate_mp,
    is_reduction,
    reduction_axes,
    reduction_name,
    selection_name,
    variables,
)
from ._shapes import REDUCE, SELECT, Shapes, Unsupported, located, nonunit
from ._stacked import ELEMENTWISE, Stacked, through_stack

#: Where each operator node was written: (user ``file:line`` or None, primitive name) -> its terms.
Sites = dict[tuple[str | None, str], list[Term]]

__all__ = ["Shapes", "Sites", "Unsupported", "lower", "lower_program", "reduction_counts"]

_DIRECT = {
    "add": "add", "add_any": "add", "sub": "sub", "mul": "mul", "div": "div", "neg": "neg", "abs": "abs",
    "sqrt": "sqrt", "cbrt": "cbrt", "exp": "exp", "log": "log", "expm1": "expm1", "log1p": "log1p",
    "sin": "sin", "cos": "cos", "tan": "tan", "sinh": "sinh", "cosh": "cosh", "tanh": "tanh",
    "asin": "asin", "acos": "acos", "atan": "atan", "asinh": "asinh", "acosh": "acosh", "atanh": "atanh",
    "atan2": "atan2", "pow": "pow", "max": "max", "min": "min",
    "lt": "lt", "le": "le", "eq": "eq", "ne": "ne",
    "lgamma": "lgamma", "digamma": "digamma", "erf": "erf", "erfc": "erfc", "erf_inv": "erf_inv",
    "logistic": "logistic", "floor": "floor", "ceil": "ceil", "sign": "sign", "is_finite": "isfinite",
    "bessel_i0e": "i0e", "bessel_i1e": "i1e", "igamma": "gammainc", "igammac": "gammaincc",
    "regularized_incomplete_beta": "betainc", "nextafter": "nextafter",
}
#: Logic on booleans (on integers these are bitwise, which the search has no operator for).
_LOGIC = {"and": "and", "or": "or", "not": "not"}
#: Library functions recognised by the name of their call (``jit`` / ``custom_jvp_call``), so that the
#: search sees ``softplus(z)`` rather than the library's body: the identities are written over these.
_NAMED = {"softplus": "softplus", "xlogy": "xlogy", "xlog1py": "xlog1py", "log_ndtr": "log_ndtr",
          "logaddexp": "logaddexp", "ndtri": "ndtri", "ndtr": "ndtr", "i0_impl": "i0", "_i1": "i1"}
_IDENTITY = {"broadcast_in_dim", "reshape", "squeeze", "expand_dims", "copy", "copy_p",
             "optimization_barrier", "stop_gradient"}
_CALLS = {"jit", "closed_call", "core_call", "remat", "remat2", "checkpoint", "custom_jvp_call",
          "custom_vjp_call", "custom_vjp_call_jaxpr"}


#: Primitives that only move elements: of an array constant, computed here (``_folded``).
_STRUCTURAL = {"slice", "dynamic_slice", "gather", "reshape", "transpose", "squeeze",
               "expand_dims", "concatenate", "rev", "pad", "select_n", "copy", "copy_p"}
#: Equations a stacked value goes through slice by slice (``_stacked``).
_STACK_ELEMENTWISE = frozenset(_DIRECT) | frozenset(_LOGIC) | ELEMENTWISE
#: The largest closed-over array the search takes as a constant leaf (``_expr.Table``): every term that
#: holds it hashes and prints its values.
_TABLE_LIMIT = 4096


def lower(closed: Any) -> Term:
    """The single float output of ``closed`` as a term over its inputs ``("var", i)``.

    Raises:
        Unsupported: naming the first primitive (or output structure) the search cannot take.
    """
    return _lower(closed, None)


def lower_program(closed: Any) -> tuple[Term, Sites]:
    """Like :func:`lower`, also taking whole-array reductions; with where each node was written.

    Raises:
        Unsupported: naming the first primitive (or output structure) the search cannot take.
    """
    sites: Sites = {}
    return _lower(closed, sites), sites


def _lower(closed: Any, sites: Sites | None) -> Term:
    outs = _compat.outvars(closed)
    if len(outs) != 1:
        raise Unsupported(f"the function has {len(outs)} outputs; the search improves one float output")
    _, consts = _compat.parts(closed)
    shapes = Shapes([tuple(_compat.aval(v).shape) for v in _compat.invars(closed)])
    (term,) = _run(closed, [("var", i) for i in range(len(_compat.invars(closed)))], consts, sites, None,
                   shapes)
    if isinstance(term, Stacked):
        raise Unsupported("the function returns a stacked array (jnp.stack) whole; the search takes a stack "
                          "reduced over its axis")
    if sites is None and any(t[0] == "const" and isinstance(t[1], Table) for t in _all_subterms(term)):
        raise Unsupported("the function closes over a non-uniform array constant; the search takes scalar "
                          "elementwise expressions here (jst.improve takes it as an array program)")
    if term[0] in BOOLEAN_OPS:
        raise Unsupported("the function returns a comparison, not a float")
    if sites is not None:  # a program that returns a spread value (broadcast_to(c, n)) returns it whole
        term = shapes.widened(term, tuple(_compat.aval(outs[0]).shape))
    if any(_is_nan(t) for t in _all_subterms(term)):
        # NaN is no number the identities can reason with (and a term with NaN in it never equals itself).
        raise Unsupported("the function returns NaN on a branch its inputs select (a NaN constant); the "
                          "search takes expressions of numbers")
    return term


def _constant(value: Any) -> Term:
    try:
        arr = np.asarray(value)
    except TypeError:  # a PRNG key (and anything else numpy cannot hold) is no scalar expression
        raise Unsupported(f"the function closes over a {getattr(value, 'dtype', type(value).__name__)} "
                          "constant; the search takes scalar elementwise expressions") from None
    flat = arr.reshape(-1)
    if flat.size and np.issubdtype(flat.dtype, np.floating) and np.isnan(flat).all():
        return ("const", float("nan"))  # a guard's fallback, kept only if a constant condition drops it
    if not (np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer)
            or arr.dtype == np.bool_):
        raise Unsupported(f"the function closes over a {arr.dtype} array constant of shape {arr.shape}; the "
                          "search takes real numbers")
    if flat.size == 0 or not np.all(flat == flat[0]):
        if flat.size > _TABLE_LIMIT:
            raise Unsupported(f"the function closes over a non-uniform array constant of {flat.size} "
                              f"elements; the search takes array constants of up to {_TABLE_LIMIT} (a leaf "
                              "it prints whole)")
        # A leaf of its own, the exact values the program reads (a distribution's parameters, a mask,
        # weights): the program is then judged on whole arrays, each element against its constant.
        return ("const", Table.of(arr))
    return const(float(flat[0]))


def _is_nan(term: Term) -> bool:
    return term[0] == "const" and isinstance(term[1], float) and math.isnan(term[1])


def _read(env: dict[Any, Term], atom: Any) -> Term:
    if _compat.is_literal(atom):
        return _constant(_compat.literal_value(atom))
    return env[atom]


def _run(closed: Any, inputs: Sequence[Term], consts: Sequence[Any], sites: Sites | None,
         outer: str | None, shapes: Shapes) -> list[Term]:
    env: dict[Any, Term] = {}
    for v, t in zip(_compat.invars(closed), inputs):
        env[v] = t
    for v, c in zip(_compat.constvars(closed), consts):
        env[v] = _constant(c)
    for eqn in _compat.eqns(closed):
        name = _compat.primitive_name(eqn)
        args = [_read(env, a) for a in eqn.invars]
        where = _compat.location(eqn) or outer
        if name == "stack" or (any(isinstance(a, Stacked) for a in args) and not _is_body_call(eqn, name)):
            outs = _stacked_equation(eqn, name, args, sites, where, shapes)
            for var, term in zip(eqn.outvars, outs):
                if not _compat.is_dropvar(var):
                    env[var] = term
            continue
        _integers_exact(eqn, name, args)
        if sites is not None and (name in _DIRECT or name in _LOGIC or name == "select_n"):
            args = shapes.aligned(args, [tuple(getattr(_compat.aval(a), "shape", ())) for a in eqn.invars],
                                  tuple(getattr(_compat.aval(eqn.outvars[0]), "shape", ())))
        outs = _folded(eqn, args, force=False) if name not in _CALLS else None
        if outs is None:
            try:
                outs = _equation(eqn, name, args, sites, where, shapes)
            except Unsupported:
                outs = _folded(eqn, args, force=True) if name not in _CALLS else None
                if outs is None:
                    raise
        if name not in _CALLS:
            operands = [tuple(getattr(_compat.aval(a), "shape", ())) for a in eqn.invars]
            outs = [shapes.fit(term, tuple(getattr(_compat.aval(var), "shape", ())), name, eqn, operands,
                               widen=sites is not None)
                    for var, term in zip(eqn.outvars, outs)]
        if sites is not None and name not in _CALLS:
            for term in outs:
                if term[0] not in ("var", "const"):
                    sites.setdefault((where, name), []).append(term)
        for var, term in zip(eqn.outvars, outs):
            if not _compat.is_dropvar(var):
                env[var] = term
    return [_read(env, v) for v in _compat.outvars(closed)]


#: What integers computed from the inputs (counts of booleans) may go through: operations whose float
#: result is the integer result while the values stay below 2**24 (float32's exact integers).
_INTEGER_EXACT = frozenset({"add", "add_any", "sub", "mul", "neg", "abs", "sign", "max", "min", "clamp",
                            "reduce_sum", "reduce_max", "reduce_min", "lt", "le", "eq", "ne", "gt", "ge",
                            "select_n", "convert_element_type"}) | _IDENTITY | SELECT


def _integers_exact(eqn: Any, name: str, args: list[Any]) -> None:
    """Refuses an equation that reads an integer computed from the inputs (a count, lowered as a sum of
    ``where(b, 1, 0)``) unless the float term computes the same integer (no division, no bit logic)."""
    if name in _INTEGER_EXACT or name in _CALLS:
        return
    for atom, term in zip(eqn.invars, args):
        dtype = np.dtype(getattr(_compat.aval(atom), "dtype", np.float32))
        if (np.issubdtype(dtype, np.integer) and not isinstance(term, Stacked) and variables(term)):
            raise Unsupported(f"the {dtype} operation {name!r} ({located(eqn)}) of a value computed from the "
                              "inputs; the search takes counts (sums of booleans) through sums, differences, "
                              "products, comparisons and selections only")


def _is_body_call(eqn: Any, name: str) -> bool:
    """A call whose body ``_run`` reads (a stacked operand goes in whole), not a named library function."""
    return name in _CALLS and _NAMED.get(str(eqn.params.get("name", "")) or _library_callee(eqn)) is None


def _stacked_equation(eqn: Any, name: str, args: list[Any], sites: Sites | None, where: str | None,
                      shapes: Shapes) -> list[Any]:
    """``eqn`` where it is a ``stack`` or reads one (``_stacked``): each slice's terms checked against the
    traced shape less the stacked axis, a joined reduction's against the traced result."""
    place = located(eqn)
    # a call that reaches here is a named library function (softplus, xlogy, ...): elementwise
    elementwise = _STACK_ELEMENTWISE | ({name} if name in _CALLS else frozenset())
    outs = through_stack(eqn, name, args, elementwise,
                         lambda at: _equation(eqn, name, at, sites, where, shapes), shapes.widened, place,
                         Unsupported)
    for k, out in enumerate(outs):
        if isinstance(out, Stacked):  # a slice may be smaller and broadcast (a value spread, a scalar)
            part_shape = out.shape[:out.axis] + out.shape[out.axis + 1:]
            terms = list(out.parts)
        else:  # a joined reduction's result: widened where an array program reads it whole, as fit() does
            part_shape = tuple(getattr(_compat.aval(eqn.outvars[0]), "shape", ()))
            out = outs[k] = shapes.widened(out, part_shape) if sites is not None else out
            terms = [out]
        for term in terms:
            try:  # as everywhere here, shapes line up by their dimensions other than 1
                spread = tuple(np.broadcast_shapes(nonunit(shapes.of(term)), nonunit(part_shape)))
            except ValueError:
                spread = ()
            if spread != nonunit(part_shape):
                raise Unsupported(f"{name} ({place}) of a stacked array: its slices' shapes do not line up")
            if sites is not None and term[0] not in ("var", "const"):
                sites.setdefault((where, name), []).append(term)
    return outs


def _library_callee(eqn: Any) -> str:
    """A custom derivative's call has no name parameter: the name of the JAX library function its body
    is (``i0_impl``), so that a user's own function of the same name keeps its own body."""
    found = _compat.callee(eqn)
    return found[0] if found is not None and "/jax/" in found[1].replace("\\", "/") else ""


def _folded(eqn: Any, args: list[Term], force: bool) -> list[Term] | None:
    """The equation's results as constants, computed here, where it reads only constants and is index
    arithmetic: an ``iota``, a mask compared from it, a conversion to or from integers or booleans
    (``force``: any primitive of constants the term language lacks), ``nextafter`` (no real value) of
    constants, and a slice, reshape or transpose of an array constant.
    A float operation of constants stays a term, evaluated exactly by the oracle. None: not folded."""
    if any(t[0] != "const" for t in args):
        return None
    avals = [_compat.aval(v) for v in (*eqn.invars, *eqn.outvars)]
    name = _compat.primitive_name(eqn)
    # Moving an array constant's elements rounds nothing: its slices, reshapes, transposes are constants.
    moved = name in _STRUCTURAL and any(isinstance(t[1], Table) for t in args)
    if not (force or moved) and name != "nextafter" and eqn.invars and all(
            np.issubdtype(np.dtype(getattr(a, "dtype", np.float32)), np.floating) for a in avals):
        return None
    from .._check._trace import x64_scope  # integer index arithmetic is exact only at its own width

    try:
        values = []
        for t, v in zip(args, eqn.invars):
            a = _compat.aval(v)
            raw = t[1].nested() if isinstance(t[1], Table) else t[1]
            values.append(np.broadcast_to(np.asarray(raw), tuple(a.shape)).astype(a.dtype))
        with x64_scope(np.dtype(np.float64)):
            out = eqn.primitive.bind(*values, **eqn.params)
        outs = list(out) if eqn.primitive.multiple_results else [out]
        return [_constant(np.asarray(o)) for o in outs]
    except Unsupported:
        raise
    except Exception:  # a primitive that cannot run here on plain arrays: lowered (or refused) as usual
        return None


def _equation(eqn: Any, name: str, args: list[Term], sites: Sites | None, where: str | None,
              shapes: Shapes) -> list[Term]:
    if name in ("max", "min") and const(float("-inf") if name == "max" else float("inf")) in args:
        return [args[1] if args[0][0] == "const" else args[0]]  # max(-inf, m) (jax.nn.softmax's guard)
    if name in _DIRECT:
        return [(_DIRECT[name], *args)]
    if name in _IDENTITY:
        return [args[0]]
    if name in _LOGIC:
        if any(np.dtype(_compat.aval(v).dtype) != np.bool_ for v in eqn.invars):
            raise Unsupported(f"the bitwise {name!r} of integers ({located(eqn)}); the search takes logic on "
                              "booleans (the conditions of a where)")
        return [(_LOGIC[name], *args)]
    if name == "polynomial" and len(args) >= 2:  # lax.polynomial(x, a_0..a_N): Horner, as JAX computes it
        acc = args[-1]
        for c in reversed(args[1:-1]):
            acc = ("add", ("mul", acc, args[0]), c)
        return [acc]
    if name == "clamp":  # lax.clamp(lo, x, hi)
        return [("min", ("max", args[1], args[0]), args[2])]
    if name == "round":
        away = int(eqn.params.get("rounding_method", 0)) == 0
        return [("round_away" if away else "round_even", args[0])]
    if name == "convert_element_type":
        new = np.dtype(eqn.params["new_dtype"])
        if new == np.bool_ and np.dtype(_compat.aval(eqn.invars[0]).dtype) == np.bool_:
            return [args[0]]
        old = np.dtype(_compat.aval(eqn.invars[0]).dtype)
        if old == np.bool_ and new != np.bool_:  # a count (jnp.sum(~isnan(a), dtype=int)) or an indicator
            return [("where", args[0], const(1.0), const(0.0))]
        if not np.issubdtype(new, np.floating) and not (np.issubdtype(new, np.integer)
                                                        and np.issubdtype(old, np.integer)):
            raise Unsupported(f"a conversion to {new} of a value computed from the inputs ({located(eqn)}); "
                              "the search takes real-valued programs (integers only as counts of booleans "
                              "and on constants)")
        return [args[0]]
    if name == "integer_pow":
        return [("pow", args[0], const(int(eqn.params["y"])))]
    if name == "square":
        return [("mul", args[0], args[0])]
    if name == "one_minus_square":  # JAX's tanh JVP (1 - tanh^2): in every derivative of a tanh
        return [("sub", const(1.0), ("mul", args[0], args[0]))]
    if name == "rsqrt":
        return [("div", const(1.0), ("sqrt", args[0]))]
    if name == "exp2":
        return [("pow", const(2.0), args[0])]
    if name in ("gt", "ge"):
        return [("lt" if name == "gt" else "le", args[1], args[0])]
    if name == "select_n":
        if len(args) != 3:
            raise Unsupported(f"select_n with {len(args) - 1} cases ({located(eqn)})")
        if not variables(args[0]):  # a condition of constants (jnp.var's ddof < n guard): decided here
            try:
                return [args[2] if bool(evaluate_mp(args[0], [])) else args[1]]
            except TypeError:  # a reduction of constants has no scalar value: kept as a where
                pass
        cond, taken, other = args[0], args[2], args[1]  # select_n(p, f, t) picks t where p
        if _is_nan(taken) and not _is_nan(other):  # a library's NaN outside its domain: one opaque guard
            return [("nanif", cond, other)]
        if _is_nan(other) and not _is_nan(taken):
            return [("nanif", ("not", cond), taken)]
        return [("where", cond, taken, other)]
    if name in _CALLS:
        named = _NAMED.get(str(eqn.params.get("name", "")) or _library_callee(eqn))
        if named == "logaddexp" and len(args) == 2 and const(0.0) in args:
            return [("softplus", args[1] if args[0] == const(0.0) else args[0])]
        if named is not None and len(args) == (2 if named in ("xlogy", "xlog1py", "logaddexp") else 1):
            return [(named, *args)]
        if name.startswith("custom"):
            body, _ = _compat.custom_call_parts(eqn)  # the primal body takes every operand
        else:
            body = _compat.subjaxprs(eqn)[0][1]
        _, consts = _compat.parts(body)
        return _run(body, args, consts, sites, where, shapes)
    if sites is not None and (name in REDUCE or name in SELECT or name == "dot_general"):
        # An operand that is a value spread over the array (a broadcast kept small) is read whole here.
        args = [shapes.widened(t, tuple(getattr(_compat.aval(a), "shape", ())))
                for t, a in zip(args, eqn.invars)]
    if name in REDUCE and sites is not None:
        rank = len(getattr(_compat.aval(eqn.invars[0]), "shape", ()))
        axes = tuple(sorted(int(a) for a in eqn.params.get("axes", ())))
        return [(reduction_name(REDUCE[name], None if axes == tuple(range(rank)) else axes), args[0])]
    if name == "dot_general" and sites is not None:
        return [_dot(eqn, args)]
    if name in SELECT and sites is not None:
        return [_selection(eqn, name, args)]
    raise Unsupported(f"the primitive {name!r} ({located(eqn)}) is not an elementwise operation the search "
                      f"knows")


def reduction_counts(term: Term, inputs: list[tuple[int, ...]]) -> dict[str, int]:
    """Reduction name -> the number of elements it reads, for the names with one count in ``term``."""
    shapes = Shapes(inputs)
    seen: dict[str, set[int]] = {}
    for t in _all_subterms(term):
        parsed = reduction_axes(t[0]) if is_reduction(t[0]) else None
        if parsed is None:
            continue
        inner = shapes.of(t[1])
        axes = range(len(inner)) if parsed[1] is None else parsed[1]
        seen.setdefault(t[0], set()).add(int(np.prod([inner[a] for a in axes if a < len(inner)])))
    return {k: next(iter(v)) for k, v in seen.items() if len(v) == 1}


def _all_subterms(term: Term) -> list[Term]:
    out, stack = [], [term]
    while stack:
        t = stack.pop()
        out.append(t)
        if t[0] not in ("var", "const"):
            stack.extend(t[1:])
    return out


def _dot(eqn: Any, args: list[Term]) -> Term:
    """``dot_general`` as a sum of products, where that is an elementwise product then a reduction:
    no batch dimensions, and the contracted axes the last of the left operand and all of the right."""
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    lr = len(_compat.aval(eqn.invars[0]).shape)
    rr = len(_compat.aval(eqn.invars[1]).shape)
    lc, rc = tuple(int(a) for a in lc), tuple(int(a) for a in rc)
    if lb or rb or rc != tuple(range(rr)) or lc != tuple(range(lr - rr, lr)):
        raise Unsupported(f"dot_general with batch or leading contracted dimensions ({located(eqn)}); the "
                          "search takes vector dots and matrix-vector products (a sum of products)")
    axes = None if lr == rr else tuple(range(lr - rr, lr))
    return (reduction_name("sum", axes), ("mul", args[0], args[1]))


def _static_index(term: Term, eqn: Any) -> int:
    """The value of an index computed from constants only (``jnp.take``'s wrap of a negative index)."""
    if variables(term):
        raise Unsupported(f"{_compat.primitive_name(eqn)} at an index computed from the inputs "
                          f"({located(eqn)}); the search takes selections at constant indices")
    try:
        value = float(evaluate_mp(term, []))
    except (TypeError, ValueError, KeyError):
        raise Unsupported(f"{_compat.primitive_name(eqn)} at an index the search cannot fold "
                          f"({located(eqn)})") from None
    return int(value)


def _selection(eqn: Any, name: str, args: list[Term]) -> Term:
    """A slice, a dynamic slice at constant starts, or a gather of one block at a constant index, as the
    static selection ``_expr.selection_name`` (starts clamped into the operand as JAX clamps them)."""
    shape = tuple(int(d) for d in _compat.aval(eqn.invars[0]).shape)
    if name == "slice":
        starts = tuple(int(v) for v in eqn.params["start_indices"])
        limits = tuple(int(v) for v in eqn.params["limit_indices"])
        strides = tuple(int(v) for v in (eqn.params.get("strides") or (1,) * len(starts)))
        return (selection_name(starts, limits, strides), args[0])
    if name == "dynamic_slice":
        sizes = tuple(int(v) for v in eqn.params["slice_sizes"])
        raw = [_static_index(t, eqn) for t in args[1:1 + len(shape)]]
        starts = tuple(min(max(v, 0), d - z) for v, d, z in zip(raw, shape, sizes))
        return (selection_name(starts, tuple(a + z for a, z in zip(starts, sizes))), args[0])
    dn = eqn.params["dimension_numbers"]
    sizes = tuple(int(v) for v in eqn.params["slice_sizes"])
    index_shape = tuple(int(d) for d in _compat.aval(eqn.invars[1]).shape)
    mapped = tuple(int(d) for d in dn.start_index_map)
    offsets = tuple(int(d) for d in dn.offset_dims)
    if (getattr(dn, "operand_batching_dims", ()) or len(mapped) != 1
            or int(np.prod(index_shape)) != 1 or offsets != tuple(range(len(offsets)))):
        raise Unsupported(f"gather of several blocks or with batch dimensions ({located(eqn)}); the search "
                          "takes one element or block at a constant index")
    index = _static_index(args[1], eqn)
    axis, size = mapped[0], sizes[mapped[0]]
    mode = str(eqn.params.get("mode", ""))
    if not 0 <= index <= shape[axis] - size:
        if "CLIP" not in mode.upper():
            raise Unsupported(f"gather at index {index} outside the operand's {shape[axis]} elements "
                              f"({located(eqn)}): JAX fills that with NaN")
        index = min(max(index, 0), shape[axis] - size)
    starts = tuple(index if d == axis else 0 for d in range(len(shape)))
    limits = tuple(a + z for a, z in zip(starts, sizes))
    return (selection_name(starts, limits), args[0])
