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
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import _compat
from ._expr import Term, const

#: Where each operator node was written: (user ``file:line`` or None, primitive name) -> its terms.
Sites = dict[tuple[str | None, str], list[Term]]

__all__ = ["Sites", "Unsupported", "lower", "lower_program"]

_DIRECT = {
    "add": "add", "add_any": "add", "sub": "sub", "mul": "mul", "div": "div", "neg": "neg", "abs": "abs",
    "sqrt": "sqrt", "cbrt": "cbrt", "exp": "exp", "log": "log", "expm1": "expm1", "log1p": "log1p",
    "sin": "sin", "cos": "cos", "tan": "tan", "sinh": "sinh", "cosh": "cosh", "tanh": "tanh",
    "asin": "asin", "acos": "acos", "atan": "atan", "asinh": "asinh", "acosh": "acosh", "atanh": "atanh",
    "atan2": "atan2", "pow": "pow", "max": "max", "min": "min", "lt": "lt", "le": "le",
}
_IDENTITY = {"broadcast_in_dim", "reshape", "squeeze", "expand_dims", "copy", "copy_p",
             "optimization_barrier", "stop_gradient"}
_REDUCE = {"reduce_sum": "sum_all", "reduce_prod": "prod_all", "reduce_max": "max_all",
           "reduce_min": "min_all"}
_CALLS = {"jit", "closed_call", "core_call", "remat", "remat2", "checkpoint", "custom_jvp_call",
          "custom_vjp_call", "custom_vjp_call_jaxpr"}


class Unsupported(Exception):
    """The program is not an elementwise expression the search can take; ``str()`` says what."""


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
    (term,) = _run(closed, [("var", i) for i in range(len(_compat.invars(closed)))], consts, sites, None)
    if term[0] in ("lt", "le"):
        raise Unsupported("the function returns a comparison, not a float")
    return term


def _constant(value: Any) -> Term:
    try:
        arr = np.asarray(value)
    except TypeError:  # a PRNG key (and anything else numpy cannot hold) is no scalar expression
        raise Unsupported(f"the function closes over a {getattr(value, 'dtype', type(value).__name__)} "
                          "constant; the search takes scalar elementwise expressions") from None
    flat = arr.reshape(-1)
    if flat.size == 0 or not np.all(flat == flat[0]):
        raise Unsupported("the function closes over a non-uniform array constant; the search takes "
                          "scalar elementwise expressions")
    return const(float(flat[0]))


def _read(env: dict[Any, Term], atom: Any) -> Term:
    if _compat.is_literal(atom):
        return _constant(_compat.literal_value(atom))
    return env[atom]


def _run(closed: Any, inputs: Sequence[Term], consts: Sequence[Any], sites: Sites | None,
         outer: str | None) -> list[Term]:
    env: dict[Any, Term] = {}
    for v, t in zip(_compat.invars(closed), inputs):
        env[v] = t
    for v, c in zip(_compat.constvars(closed), consts):
        env[v] = _constant(c)
    for eqn in _compat.eqns(closed):
        name = _compat.primitive_name(eqn)
        args = [_read(env, a) for a in eqn.invars]
        where = _compat.location(eqn) or outer
        outs = _equation(eqn, name, args, sites, where)
        if sites is not None and name not in _CALLS:
            for term in outs:
                if term[0] not in ("var", "const"):
                    sites.setdefault((where, name), []).append(term)
        for var, term in zip(eqn.outvars, outs):
            if not _compat.is_dropvar(var):
                env[var] = term
    return [_read(env, v) for v in _compat.outvars(closed)]


def _equation(eqn: Any, name: str, args: list[Term], sites: Sites | None, where: str | None,
              ) -> list[Term]:
    if name in _DIRECT:
        return [(_DIRECT[name], *args)]
    if name in _IDENTITY:
        return [args[0]]
    if name == "convert_element_type":
        new = np.dtype(eqn.params["new_dtype"])
        if not np.issubdtype(new, np.floating):
            raise Unsupported(f"a conversion to {new} ({_where(eqn)})")
        return [args[0]]
    if name == "integer_pow":
        return [("pow", args[0], const(int(eqn.params["y"])))]
    if name == "square":
        return [("mul", args[0], args[0])]
    if name == "rsqrt":
        return [("div", const(1.0), ("sqrt", args[0]))]
    if name == "exp2":
        return [("pow", const(2.0), args[0])]
    if name == "logistic":
        return [("div", const(1.0), ("add", const(1.0), ("exp", ("neg", args[0]))))]
    if name in ("gt", "ge"):
        return [("lt" if name == "gt" else "le", args[1], args[0])]
    if name == "select_n":
        if len(args) != 3:
            raise Unsupported(f"select_n with {len(args) - 1} cases ({_where(eqn)})")
        return [("where", args[0], args[2], args[1])]  # select_n(p, f, t) picks t where p
    if name in _CALLS:
        if name.startswith("custom"):
            body, _ = _compat.custom_call_parts(eqn)  # the primal body takes every operand
        else:
            body = _compat.subjaxprs(eqn)[0][1]
        _, consts = _compat.parts(body)
        return _run(body, args, consts, sites, where)
    if name in _REDUCE and sites is not None:
        rank = len(getattr(_compat.aval(eqn.invars[0]), "shape", ()))
        if sorted(int(a) for a in eqn.params.get("axes", ())) != list(range(rank)):
            raise Unsupported(f"{name} over some axes only ({_where(eqn)}); the search takes reductions "
                              "over every axis (jnp.sum(e), jnp.mean(e))")
        return [(_REDUCE[name], args[0])]
    raise Unsupported(f"the primitive {name!r} ({_where(eqn)}) is not an elementwise operation the search "
                      f"knows")


def _where(eqn: Any) -> str:
    return _compat.location(eqn) or "in the traced program"
