"""Jaxprs through JAX's internals: tracing, their parts, atoms, sub-jaxprs, binding, evaluation, scopes.

See the package's docstring for the differences between JAX versions hidden here.
"""


from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

import jax
import jax.extend.core as jex
from jax._src import core as _core
from jax._src import linear_util as _lu
from jax._src import source_info_util as _siu
from jax._src.interpreters import partial_eval as _pe

from .._primitives import CUSTOM_DERIVATIVES

JAX_VERSION: tuple[int, ...] = tuple(int(p) for p in jax.__version__.split(".")[:3] if p.isdigit())

#: A closed jaxpr: ``jax.extend.core.ClosedJaxpr`` on 0.10, ``Jaxpr`` with consts on 0.12.
ClosedJaxpr = Any
#: A jaxpr equation (``jax.extend.core.JaxprEqn``).
Eqn = Any

Var = jex.Var
Literal = jex.Literal
Tracer = _core.Tracer

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # pytest_jaxstab/
# Our own frames are never "the user's line": exclude them like JAX excludes its own files, so an
# equation a rewrite creates inside this package reports the user's line that it replaced.
_siu.register_exclusion(_PACKAGE_DIR + os.sep)


# --------------------------------------------------------------------------------------- tracing
def trace(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[ClosedJaxpr, Any, Any]:
    """Trace ``fn(*args, **kwargs)`` to a closed jaxpr over the flattened array leaves.

    Returns ``(closed_jaxpr, in_tree, out_tree)``; the jaxpr takes the leaves of ``(args, kwargs)``
    in ``jax.tree_util`` order and returns the leaves of the output.
    """
    leaves, in_tree = jax.tree_util.tree_flatten((args, kwargs))
    out_tree_box: list[Any] = []

    def flat_fn(*flat: Any) -> list[Any]:
        a, k = jax.tree_util.tree_unflatten(in_tree, flat)
        out = fn(*a, **k)
        out_leaves, out_tree = jax.tree_util.tree_flatten(out)
        out_tree_box.append(out_tree)
        return out_leaves

    closed = jax.make_jaxpr(flat_fn)(*leaves)
    return closed, in_tree, out_tree_box[-1]


def parts(closed: ClosedJaxpr) -> tuple[Any, list[Any]]:
    """``(open_jaxpr, consts)`` of a closed jaxpr, on every supported JAX."""
    return closed.jaxpr, list(closed.consts)


def eqns(closed: ClosedJaxpr) -> list[Eqn]:
    """The equations of a closed (or open) jaxpr, in program order."""
    return list(closed.jaxpr.eqns) if hasattr(closed, "jaxpr") else list(closed.eqns)


def invars(closed: ClosedJaxpr) -> list[Any]:
    """The non-constant input variables."""
    return list(closed.jaxpr.invars)


def outvars(closed: ClosedJaxpr) -> list[Any]:
    """The output atoms (variables or literals)."""
    return list(closed.jaxpr.outvars)


def constvars(closed: ClosedJaxpr) -> list[Any]:
    """The variables bound to ``closed.consts``."""
    return list(closed.jaxpr.constvars)


def close(jaxpr: Any, consts: Sequence[Any] = ()) -> ClosedJaxpr:
    """Attach ``consts`` to an open jaxpr (``ClosedJaxpr(jaxpr, consts)`` on every version)."""
    if hasattr(jaxpr, "consts") and not hasattr(jex, "ClosedJaxpr"):  # pragma: no cover - defensive
        return jaxpr
    if hasattr(jaxpr, "consts") and jex.ClosedJaxpr is jex.Jaxpr and not consts:
        return jaxpr
    return jex.ClosedJaxpr(jaxpr, list(consts))


def as_closed(j: Any) -> ClosedJaxpr:
    """A sub-jaxpr parameter as a closed jaxpr (some are open ``Jaxpr`` with no consts on 0.10)."""
    if JAX_VERSION >= (0, 11) or isinstance(j, jex.ClosedJaxpr):
        return j
    return jex.ClosedJaxpr(j, [])


def is_literal(atom: Any) -> bool:
    """Whether an equation operand is a literal constant rather than a variable."""
    return isinstance(atom, jex.Literal)


def literal_value(atom: Any) -> Any:
    """The value of a literal operand."""
    return atom.val


def is_dropvar(atom: Any) -> bool:
    """Whether an output variable is unused and dropped (``_``)."""
    return isinstance(atom, jex.DropVar)


def aval(atom: Any) -> Any:
    """The abstract value (``ShapedArray``: ``.shape``, ``.dtype``) of an atom."""
    return atom.aval


def typeof(value: Any) -> Any:
    """The abstract value (shape, dtype, weak type) of a concrete value or tracer."""
    return jax.typeof(value)  # public since jax 0.4.x; here so one place adapts if it moves


def new_var(aval_: Any) -> Any:
    """A fresh variable of the given abstract value."""
    if JAX_VERSION >= (0, 11):
        return jex.Var(aval_)
    return _core.gensym()(aval_)  # pragma: no cover - jax 0.10 path, run by make test-compat


def is_tracer(x: Any) -> bool:
    """Whether ``x`` is a JAX tracer (a value being traced, not a concrete array)."""
    return isinstance(x, _core.Tracer)


def primitive_name(eqn: Eqn) -> str:
    """The primitive's name, normalised across versions (``pjit`` is reported as ``jit``)."""
    name = eqn.primitive.name
    return "jit" if name == "pjit" else name


def eqn_name(eqn: Eqn) -> str:
    """A short human label for an equation: ``jit(softplus)``, ``custom_jvp_call(logaddexp)``, ``log``."""
    name = primitive_name(eqn)
    label = eqn.params.get("name")
    if label is None and name in CUSTOM_DERIVATIVES:
        call = eqn.params.get("call_jaxpr")
        label = getattr(getattr(call, "jaxpr", call), "debug_info", None)
        label = getattr(label, "func_name", None) if label is not None else None
        if label is not None:
            label = label.split(" ")[0]
    return f"{name}({label})" if label else name


def callee(eqn: Eqn) -> tuple[str, str, int] | None:
    """``(function name, file, first line)`` of the Python function a call equation wraps.

    For ``jit`` (``pjit``) and the primal body of ``custom_jvp``/``custom_vjp`` calls: JAX records the
    traced function's source in the body's debug info (``"log_ndtr at .../special.py:1864"``). None for
    any other equation, when JAX recorded no source, or for a transformed copy of the call.
    """
    name = primitive_name(eqn)
    if name in CUSTOM_DERIVATIVES:
        body = custom_call_parts(eqn)[0]
    elif name == "jit" and "jaxpr" in eqn.params:
        body = as_closed(eqn.params["jaxpr"])
    else:
        return None
    info = getattr(body.jaxpr, "debug_info", None)
    src = getattr(info, "func_src_info", None)
    if not isinstance(src, str) or " at " not in src:
        return None
    if getattr(info, "arg_names", None) is None:
        # A transformed copy (a linearized or transposed ``jit``) keeps the function's source but
        # not its argument names: it computes something else (residuals, cotangents).
        return None
    fname, _, where = src.rpartition(" at ")
    file, _, line = where.rpartition(":")
    if not file or not line.isdigit():
        return None
    return fname, file, int(line)


def leading_consts(eqn: Eqn) -> int:
    """How many leading operands of a call are constants of its function rather than its arguments:
    ``num_consts`` of a custom_jvp/vjp call, or, where a transformation folded them into ordinary
    operands (``num_consts=0`` in a derivative program), the leading operands JAX left unnamed."""
    name = primitive_name(eqn)
    n = custom_call_parts(eqn)[1] if name in CUSTOM_DERIVATIVES else 0
    if n or not (name in CUSTOM_DERIVATIVES or name == "jit"):
        return n
    body = custom_call_parts(eqn)[0] if name in CUSTOM_DERIVATIVES else as_closed(eqn.params["jaxpr"])
    names = getattr(getattr(body.jaxpr, "debug_info", None), "arg_names", None) or ()
    for k, arg in enumerate(names):
        if arg:
            return k
    return 0


# ------------------------------------------------------------------------------------ sub-jaxprs
class Site(NamedTuple):
    """Where a sub-jaxpr sits in an equation's params: ``params[key]`` or ``params[key][index]``."""

    key: str
    index: int | None  # pyright: ignore[reportIncompatibleMethodOverride]  (shadows tuple.index on purpose)


def subjaxprs(eqn: Eqn) -> list[tuple[Site, ClosedJaxpr]]:
    """Every sub-jaxpr of an equation (jit, custom_jvp/vjp primal body, scan, while, cond), closed.

    Derivative rules of custom_jvp/vjp (thunks, not jaxprs) are not listed: they are left alone.
    """
    if not eqn.params:  # most equations (exp, add, ...): the pass asks about every one, every pass
        return []
    out: list[tuple[Site, ClosedJaxpr]] = []
    for key, val in eqn.params.items():
        if _is_jaxpr(val):
            out.append((Site(key, None), as_closed(val)))
        elif isinstance(val, tuple) and any(_is_jaxpr(v) for v in val):
            out.extend((Site(key, i), as_closed(v)) for i, v in enumerate(val) if _is_jaxpr(v))
    return out


def _is_jaxpr(v: Any) -> bool:
    return isinstance(v, (jex.Jaxpr, jex.ClosedJaxpr))


def replace_subjaxprs(eqn: Eqn, new: dict[Site, ClosedJaxpr]) -> dict[str, Any]:
    """The equation's params with the sub-jaxprs at the given sites replaced.

    The replacements must have the same input and output types as the originals. A site that held
    an open jaxpr (0.10's ``core_call``) receives the open jaxpr of the replacement, which must then
    have no consts.
    """
    params = dict(eqn.params)
    for site, closed in new.items():
        old = params[site.key] if site.index is None else params[site.key][site.index]
        val = closed
        if JAX_VERSION < (0, 11) and not isinstance(old, jex.ClosedJaxpr):  # pragma: no cover - 0.10
            if closed.consts:
                raise ValueError(f"{eqn.primitive.name}: an open sub-jaxpr cannot take consts")
            val = closed.jaxpr
        if site.index is None:
            params[site.key] = val
        else:
            old_seq = params[site.key]
            seq = list(old_seq)
            seq[site.index] = val
            # custom_linear_solve keeps its jaxprs in a namedtuple: rebuild the same type
            params[site.key] = type(old_seq)(*seq) if hasattr(old_seq, "_fields") else tuple(seq)
    return params


def walk(closed: ClosedJaxpr, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Eqn]]:
    """Every equation of a jaxpr and of its sub-jaxprs, depth first, with the path of enclosing calls."""
    for eqn in eqns(closed):
        yield path, eqn
        for _, sub in subjaxprs(eqn):
            yield from walk(sub, (*path, eqn_name(eqn)))


# --------------------------------------------------------------------------------- binding / eval
@contextlib.contextmanager
def user_context(eqn: Eqn) -> Iterator[None]:
    """Make equations bound inside this block carry ``eqn``'s user source info and context."""
    name_stack = _siu.current_name_stack() + eqn.source_info.name_stack
    with _siu.user_context(eqn.source_info.traceback, name_stack=name_stack), eqn.ctx.manager:
        yield


def bind(eqn: Eqn, invals: Sequence[Any], params: dict[str, Any] | None = None) -> list[Any]:
    """Bind ``eqn``'s primitive on ``invals`` (with ``params`` if given), keeping its source info.

    Returns the list of outputs (one element for single-result primitives).
    """
    bind_params = eqn.primitive.get_bind_params(eqn.params if params is None else params)
    subfuns: Sequence[Any] = ()
    if isinstance(bind_params, tuple):  # pragma: no cover - (subfuns, params) of older releases
        subfuns, bind_params = bind_params
    with user_context(eqn):
        ans = eqn.primitive.bind(*subfuns, *invals, **bind_params)
    return list(ans) if eqn.primitive.multiple_results else [ans]


def with_operands(eqn: Eqn, invars: Sequence[Any], outvars: Sequence[Any] | None = None,
                  traceback_of: Eqn | None = None) -> Eqn:
    """A copy of ``eqn`` reading ``invars`` (and writing ``outvars``); params and source info kept,
    except that ``traceback_of`` gives it that equation's user traceback (one copy, not two:
    :func:`with_traceback_of` of the result, as the rewrite pass needs it per spliced equation)."""
    info = None if traceback_of is None else eqn.source_info.replace(
        traceback=traceback_of.source_info.traceback)
    return eqn.replace(invars=list(invars), outvars=None if outvars is None else list(outvars),
                       source_info=info)


def with_traceback_of(eqn: Eqn, origin: Eqn) -> Eqn:
    """A copy of ``eqn`` whose user traceback is ``origin``'s (its name stack is kept)."""
    info = eqn.source_info.replace(traceback=origin.source_info.traceback)
    return eqn.replace(source_info=info)


def build_closed(template: ClosedJaxpr, eqns: Sequence[Eqn], outvars: Sequence[Any],
                 extra_constvars: Sequence[Any] = (), extra_consts: Sequence[Any] = ()) -> ClosedJaxpr:
    """A closed jaxpr with ``template``'s inputs, effects and debug info, and new equations/outputs.

    ``extra_constvars`` (bound to ``extra_consts``) are appended to the template's constants.
    """
    jaxpr, consts = parts(template)
    constvars = [*jaxpr.constvars, *extra_constvars]
    values = [*consts, *extra_consts]
    if JAX_VERSION >= (0, 11):
        return jex.Jaxpr(constvars, list(jaxpr.invars), list(outvars), list(eqns), jaxpr.effects,
                         jaxpr.debug_info, consts=values)
    new = jex.Jaxpr(constvars, list(jaxpr.invars), list(outvars), list(eqns),  # pragma: no cover
                    jaxpr.effects, jaxpr.debug_info)
    return jex.ClosedJaxpr(new, values)  # pragma: no cover - jax 0.10 path (make test-compat)


def check_jaxpr(closed: ClosedJaxpr) -> None:
    """Raise if a closed jaxpr is ill-typed (JAX's own checker); used by tests of built jaxprs."""
    _core.check_jaxpr(closed.jaxpr)


def eval_jaxpr(closed: ClosedJaxpr, *args: Any) -> list[Any]:
    """Evaluate a closed jaxpr on ``args`` (arrays or tracers), keeping source info on re-trace."""
    jaxpr, consts = parts(closed)
    return list(_core.eval_jaxpr(jaxpr, consts, *args))


def as_fun(closed: ClosedJaxpr) -> Callable[..., list[Any]]:
    """A Python function evaluating a closed jaxpr (traceable by jit/grad/vmap)."""
    return lambda *args: eval_jaxpr(closed, *args)


def dce(closed: ClosedJaxpr, used_outputs: Sequence[bool] | None = None) -> ClosedJaxpr:
    """Dead-code elimination: drop equations whose results are not needed.

    All inputs are kept (the signature does not change); outputs not in ``used_outputs`` are dropped.
    Equations with effects are kept by JAX's own rules.
    """
    jaxpr, consts = parts(closed)
    n_out = len(jaxpr.outvars)
    used = [True] * n_out if used_outputs is None else list(used_outputs)
    if JAX_VERSION >= (0, 11):
        res = _pe.dce_jaxpr_consts(closed, used, instantiate=True)
        return res[0] if isinstance(res, tuple) else res
    new_open, used_consts, _ = _pe.dce_jaxpr_consts(jaxpr, used, instantiate=True)  # pragma: no cover
    kept = [c for c, u in zip(consts, used_consts) if u]
    return jex.ClosedJaxpr(new_open, kept)  # pragma: no cover - jax 0.10 path (make test-compat)


def name_stack(eqn: Eqn) -> str:
    """The equation's name stack as text (``jax.named_scope`` scopes, ``/``-separated)."""
    return str(eqn.source_info.name_stack)


def in_scope_named(eqn: Eqn, text: str) -> bool:
    """Whether a scope (or transform) of the equation's name stack has ``text`` in its name: the
    same answer as ``text in name_stack(eqn)`` for a ``text`` without ``/`` or parentheses, without
    rendering the stack (most equations have none; the rewrite pass asks of every equation)."""
    stack = eqn.source_info.name_stack.stack
    return bool(stack) and any(text in elem.name for elem in stack)


def scope_names(eqn: Eqn) -> tuple[str, ...]:
    """The names of the scopes (and transforms) on the equation's name stack, outermost first."""
    stack = eqn.source_info.name_stack.stack
    return tuple(elem.name for elem in stack) if stack else ()

def custom_call_parts(eqn: Eqn) -> tuple[ClosedJaxpr, int]:
    """``(primal_body, num_consts)`` of a custom_jvp_call / custom_vjp_call equation."""
    p = eqn.params
    key = "call_jaxpr" if "call_jaxpr" in p else "fun_jaxpr"
    return as_closed(p[key]), int(p.get("num_consts", 0))


def custom_jvp_static_args(eqn: Eqn) -> tuple[Any, ...] | None:
    """The static (``nondiff_argnums``) arguments a ``custom_jvp_call`` was made with, which are not
    among its operands (``jax.scipy.special.jn(2, z)``'s order 2); None when it has none or they cannot
    be found.

    JAX keeps them only in the call's derivative rule: ``jvp_jaxpr_fun`` wraps the rule with a
    ``_prepend_static_args`` transformation holding the values (in ``Unhashable`` boxes). That
    transformation is reached through closures and ``WrappedFun``s whose layout is JAX's own, so the
    walk is bounded and any surprise gives None (the routine's body is then evaluated instead).
    """
    if primitive_name(eqn) != "custom_jvp_call":
        return None
    seen: set[int] = set()
    todo: list[tuple[Any, int]] = [(eqn.params.get("jvp_jaxpr_fun"), 0)]
    while todo:
        obj, depth = todo.pop()
        if obj is None or id(obj) in seen or depth > 6:
            continue
        seen.add(id(obj))
        for transform in getattr(obj, "transforms", None) or ():
            fn, args = (transform if isinstance(transform, tuple) and len(transform) == 2 else (None, ()))
            if getattr(fn, "__name__", "") == "_prepend_static_args" and args and isinstance(args[0], tuple):
                return tuple(getattr(a, "val", a) for a in args[0])
        for attr in ("f", "f_transformed"):
            if isinstance(obj, _lu.WrappedFun) or (attr == "f" and callable(obj)):
                todo.append((getattr(obj, attr, None), depth + 1))
        for cell in getattr(obj, "__closure__", None) or ():
            try:
                todo.append((cell.cell_contents, depth + 1))
            except ValueError:  # an empty cell
                continue
    return None


# ------------------------------------------------------------------- custom_jvp derivative rules
def jvp_rule_jaxpr(eqn: Eqn) -> ClosedJaxpr | None:
    """A ``custom_jvp_call``'s derivative rule traced with every tangent nonzero: a closed jaxpr from
    ``(*primals, *tangents)`` (the call's constants left out) to ``(*primal_outs, *tangent_outs)``.

    None for another equation, or where the rule cannot be traced here (JAX traces it again when it
    differentiates, and reports its own error then). JAX memoises the trace, so differentiating the
    program later reuses this one.
    """
    fun = eqn.params.get("jvp_jaxpr_fun") if primitive_name(eqn) == "custom_jvp_call" else None
    if fun is None or _library_rule(fun):
        return None
    n = len(eqn.invars) - int(eqn.params.get("num_consts", 0))
    try:
        jaxpr, consts, out_zeros = fun.call_wrapped(*([False] * n))
    except Exception:  # a rule JAX itself would reject: left alone, as it is
        return None
    if any(out_zeros):  # a symbolic-zero output: the rule's signature is not the plain one
        return None
    return _retraced(jaxpr, consts)


_JAX_DIR = os.path.dirname(os.path.abspath(jax.__file__)) + os.sep


def _library_rule(fun: Any) -> bool:
    """A rule written in JAX (``jax.nn.relu``'s, ``logaddexp``'s): maintained with its primal, and
    often deliberate where it is not the primal's derivative (``relu'(0) = 0``). (The catalogue's
    own forms are final where a rewrite created them: never offered again.)"""
    src = getattr(getattr(fun, "debug_info", None), "func_src_info", None)
    if not isinstance(src, str) or " at " not in src:
        return False
    path = os.path.abspath(src.rpartition(" at ")[2].rpartition(":")[0])
    return path.startswith(_JAX_DIR)


def _retraced(jaxpr: Any, consts: Sequence[Any]) -> ClosedJaxpr:
    """The rule's ``(jaxpr, consts)`` as JAX hands them over (constants as ``constvars`` on 0.10, as
    leading inputs on 0.12) re-traced into a closed jaxpr over the rule's own inputs."""
    lead = len(consts) - len(jaxpr.constvars)
    args = [jax.ShapeDtypeStruct(v.aval.shape, v.aval.dtype, weak_type=getattr(v.aval, "weak_type", False))
            for v in jaxpr.invars[lead:]]
    return jax.make_jaxpr(lambda *a: _core.eval_jaxpr(jaxpr, list(consts), *a))(*args)


def with_jvp_rule(eqn: Eqn, rewrite: Callable[[ClosedJaxpr], ClosedJaxpr]) -> dict[str, Any]:
    """``eqn``'s params with its derivative rule replaced by ``rewrite`` of the rule's traced jaxpr
    (run once per pattern of zero tangents, when JAX first asks for it). The primal is untouched."""
    fun = eqn.params["jvp_jaxpr_fun"]
    cache: dict[tuple[bool, ...], tuple[Any, list[Any], Any]] = {}

    def thunk(*in_zeros: bool) -> tuple[Any, list[Any], Any]:
        key = tuple(in_zeros)
        if key not in cache:
            jaxpr, consts, out_zeros = fun.call_wrapped(*in_zeros)
            new, new_consts = parts(rewrite(_retraced(jaxpr, consts)))
            cache[key] = (new, list(new_consts), out_zeros)
        return cache[key]

    thunk.jaxstab_rewritten = True  # type: ignore[attr-defined]
    return {**eqn.params, "jvp_jaxpr_fun": _lu.wrap_init(thunk, debug_info=fun.debug_info)}


def jvp_rule_rewritten(eqn: Eqn) -> bool:
    """Whether ``eqn``'s derivative rule is one :func:`with_jvp_rule` made."""
    fun = eqn.params.get("jvp_jaxpr_fun")
    return bool(getattr(getattr(fun, "f", None), "jaxstab_rewritten", False))
