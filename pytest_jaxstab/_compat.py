"""The one module that touches JAX internals.

Everything else in pytest-jaxstab goes through the functions here, so a JAX release that moves an
internal breaks this file and nothing else. Supported: jax 0.10.2 (``make test-compat``) to 0.12.x
(``make test``). The differences hidden here:

* ``ClosedJaxpr`` (0.10) is merged into ``Jaxpr`` (0.12): a jaxpr with ``consts`` attached. Both expose
  ``.jaxpr`` (itself in 0.12) and ``.consts``, which is what :func:`parts` relies on.
* ``scan`` splits its operands with ``num_consts``/``num_carry`` (0.10) or with the flat trees
  ``ft_in``/``ft_out`` (0.12): :func:`scan_parts`.
* ``Var(aval)`` (0.12) replaced ``gensym()(aval)``: :func:`new_var`.
* ``Primitive.get_bind_params`` returns a dict (0.12) or ``(subfuns, params)`` (older): :func:`bind`.
* ``pjit_p`` was renamed ``jit_p``; the primitive is named ``jit`` (or ``pjit``):
  :data:`pytest_jaxstab._primitives.CALLS`.
* ``jax.enable_x64`` (a thread-local context) replaced toggling the global ``jax_enable_x64`` flag:
  :func:`enable_x64`.

Nothing here knows about rewrites, oracles or pytest.
"""

from __future__ import annotations

import contextlib
import dataclasses
import linecache
import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

import jax
import jax.extend.core as jex
from jax._src import core as _core
from jax._src import source_info_util as _siu
from jax._src.interpreters import partial_eval as _pe

from ._primitives import CUSTOM_DERIVATIVES

__all__ = [
    "JAX_VERSION",
    "ClosedJaxpr",
    "Eqn",
    "ScanParts",
    "Site",
]

JAX_VERSION: tuple[int, ...] = tuple(int(p) for p in jax.__version__.split(".")[:3] if p.isdigit())

#: A closed jaxpr: ``jax.extend.core.ClosedJaxpr`` on 0.10, ``Jaxpr`` with consts on 0.12.
ClosedJaxpr = Any
#: A jaxpr equation (``jax.extend.core.JaxprEqn``).
Eqn = Any

Var = jex.Var
Literal = jex.Literal
Tracer = _core.Tracer

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
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


# ------------------------------------------------------------------------------ source locations
@dataclasses.dataclass(frozen=True)
class SourceLine:
    """A user source position: file, line, function and the text of that line."""

    file: str
    line: int
    function: str
    text: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


def source_line(eqn: Eqn) -> SourceLine | None:
    """The user's source position of an equation (JAX's and this package's frames skipped)."""
    frame = _siu.user_frame(eqn.source_info.traceback)
    if frame is None:
        return None
    text = linecache.getline(frame.file_name, frame.start_line).strip()
    return SourceLine(frame.file_name, frame.start_line, frame.function_name, text)


def refine_source(outer: SourceLine | None, eqn: Eqn) -> SourceLine | None:
    """The user position of ``eqn``, an equation inside a call whose own position is ``outer``.

    JAX caches the jaxprs of jitted functions, so an equation inside a library function (``jnp.where``,
    ``jax.nn.softplus``) keeps the user frame of the call that traced it FIRST, possibly another line.
    When the equation's innermost user frame is in the same function as the enclosing call's, the
    callee has no user code of its own and the enclosing call's (current) position is the right one;
    a user's own helper has frames in its own function and keeps them.
    """
    src = source_line(eqn)
    if src is None:
        return outer
    if outer is not None and src.file == outer.file and src.function == outer.function:
        return outer
    return src


def source_line_in(chain: Sequence[Eqn]) -> SourceLine | None:
    """The user position of the last equation of ``chain`` (outermost call first), see refine_source."""
    src: SourceLine | None = None
    for k, eqn in enumerate(chain):
        src = source_line(eqn) if k == 0 else refine_source(src, eqn)
    return src


def location(eqn: Eqn) -> str | None:
    """The user's ``file:line`` of an equation, or None when it was not created from user code."""
    src = source_line(eqn)
    return None if src is None else str(src)


# ----------------------------------------------------------------------------- control flow views
@dataclasses.dataclass(frozen=True)
class ScanParts:
    """A ``scan`` equation, split the same way on every JAX version.

    ``consts``, ``carry`` and ``xs`` are the equation's operands; ``carry_out`` and ``ys`` its results.
    The body takes ``(*consts, *carry, *x)`` and returns ``(*carry, *y)``.
    """

    consts: list[Any]
    carry: list[Any]
    xs: list[Any]
    carry_out: list[Any]
    ys: list[Any]
    body: ClosedJaxpr
    length: int
    reverse: bool
    unroll: int | bool


def scan_parts(eqn: Eqn) -> ScanParts:
    """Split a scan equation into consts, carry and xs (and its results into carry and ys)."""
    p = eqn.params
    body = as_closed(p["jaxpr"])
    if "ft_in" in p:
        consts, carry, xs = (list(x) for x in p["ft_in"].update(list(eqn.invars)).unpack())
        carry_out, ys = (list(x) for x in p["ft_out"].update(list(eqn.outvars)).unpack())
    else:  # pragma: no cover - jax 0.10 path, run by make test-compat
        nc, nk = p["num_consts"], p["num_carry"]
        consts, carry, xs = eqn.invars[:nc], eqn.invars[nc : nc + nk], eqn.invars[nc + nk :]
        carry_out, ys = eqn.outvars[:nk], eqn.outvars[nk:]
        consts, carry, xs, carry_out, ys = map(list, (consts, carry, xs, carry_out, ys))
    return ScanParts(consts, carry, xs, carry_out, ys, body, p["length"], p["reverse"], p["unroll"])


@dataclasses.dataclass(frozen=True)
class WhileParts:
    """A ``while`` equation: ``cond(*cond_consts, *carry)``, ``body(*body_consts, *carry) -> carry``."""

    cond_consts: list[Any]
    body_consts: list[Any]
    carry: list[Any]
    cond: ClosedJaxpr
    body: ClosedJaxpr


def while_parts(eqn: Eqn) -> WhileParts:
    """Split a while equation into its cond consts, body consts and carry."""
    p = eqn.params
    nc, nb = p["cond_nconsts"], p["body_nconsts"]
    ins = list(eqn.invars)
    return WhileParts(ins[:nc], ins[nc : nc + nb], ins[nc + nb :], as_closed(p["cond_jaxpr"]),
                      as_closed(p["body_jaxpr"]))


def cond_parts(eqn: Eqn) -> tuple[Any, list[Any], list[ClosedJaxpr]]:
    """``(index, operands, branches)`` of a cond equation; branch ``i`` runs when index == i."""
    ins = list(eqn.invars)
    return ins[0], ins[1:], [as_closed(b) for b in eqn.params["branches"]]


def custom_call_parts(eqn: Eqn) -> tuple[ClosedJaxpr, int]:
    """``(primal_body, num_consts)`` of a custom_jvp_call / custom_vjp_call equation."""
    p = eqn.params
    key = "call_jaxpr" if "call_jaxpr" in p else "fun_jaxpr"
    return as_closed(p[key]), int(p.get("num_consts", 0))


def scan(body: Callable[..., Any], init: Any, xs: Any, *, length: int, reverse: bool,
         unroll: int | bool) -> Any:
    """``lax.scan`` (public API), re-exported so callers rebuild scans without touching params."""
    return jax.lax.scan(body, init, xs, length=length, reverse=reverse, unroll=unroll)


# ----------------------------------------------------------------------------------- 64-bit mode
@contextlib.contextmanager
def enable_x64() -> Iterator[None]:
    """JAX's 64-bit mode for the block, restored afterwards.

    ``jax.enable_x64`` is a thread-local config context on the JAX releases we support; older ones had
    only the global flag, which is set and restored around the block.
    """
    enable = getattr(jax, "enable_x64", None)
    if enable is not None:
        with enable(True):
            yield
        return
    old = bool(jax.config.read("jax_enable_x64"))  # pragma: no cover - older JAX
    jax.config.update("jax_enable_x64", True)  # pragma: no cover
    try:  # pragma: no cover
        yield
    finally:  # pragma: no cover
        jax.config.update("jax_enable_x64", old)


# ------------------------------------------------------------------------------ primitive registry
def registered_primitives() -> dict[str, Any]:
    """Every primitive that an imported ``jax`` module defines at module level, by name.

    The oracle's coverage test walks this to find primitives it neither evaluates nor refuses on its
    documented list. Only modules already imported are seen: import the public API you care about
    (``jax.lax``, ``jax.random``, ``jax.scipy.special``, ...) first.
    """
    import sys

    found: dict[str, Any] = {}
    for name, module in list(sys.modules.items()):
        if module is None or not (name == "jax" or name.startswith("jax.")):
            continue
        for value in list(vars(module).values()):
            if isinstance(value, jex.Primitive):
                found.setdefault(value.name, value)
    return found


def random_gamma_program(key_aval: Any, a_aval: Any, log_space: bool) -> ClosedJaxpr | None:
    """The jaxpr of JAX's own implementation of the ``random_gamma`` primitive (Marsaglia and Tsang's
    rejection sampler, one sample at a time) for operands of these avals; None where this JAX
    release keeps it elsewhere."""
    impl = None
    for modname in ("jax._src.random.core", "jax._src.random"):
        try:
            module = __import__(modname, fromlist=["_gamma_impl"])
        except ImportError:  # pragma: no cover - layout of another release
            continue
        impl = getattr(module, "_gamma_impl", None)
        if impl is not None:
            break
    if impl is None:  # pragma: no cover
        return None
    specs = [jax.ShapeDtypeStruct(tuple(a.shape), a.dtype) for a in (key_aval, a_aval)]
    # use_vmap=False: lax.map of the one-sample sampler, whose while loops have scalar predicates.
    return jax.make_jaxpr(lambda k, a: impl(k, a, log_space=log_space, use_vmap=False))(*specs)


def hi_primitive_expansion(eqn: Eqn) -> ClosedJaxpr | None:
    """The jaxpr of what a ``call_hi_primitive`` equation stands for (JAX 0.11+'s ``HiPrim``s, behind
    ``jnp.searchsorted``, ``interp``, ``digitize``, ``ldexp``, ``frexp``, ``nonzero``): its own
    expansion into ordinary primitives, traced at the equation's operand avals; None where the
    primitive has none."""
    to_lojax = getattr(eqn.primitive, "to_lojax", None)
    prim = eqn.params.get("_prim")
    if to_lojax is None or prim is None:
        return None
    specs = [jax.ShapeDtypeStruct(tuple(aval(v).shape), aval(v).dtype) for v in eqn.invars]
    try:
        return jax.make_jaxpr(lambda *args: to_lojax(*args, _prim=prim))(*specs)
    except NotImplementedError:  # a HiPrim without an `expand`
        return None


# ------------------------------------------------------------------------- oracle-only primitives
def oracle_only_primitive(name: str, abstract_eval: Callable[..., list[Any]],
                          jvp: Callable[..., list[Any]], why: str) -> Any:
    """A primitive of several results only the oracle evaluates: ``abstract_eval(**params)`` gives
    their ``(shape, dtype)``, ``jvp(primals, tangents, **params)`` their tangents (None: a symbolic
    zero tangent). Running it in floating point raises ``why``."""
    from jax.interpreters import ad

    prim = jex.Primitive(name)
    prim.multiple_results = True

    def impl(*_: Any, **__: Any) -> Any:
        raise RuntimeError(why)

    prim.def_impl(impl)
    prim.def_abstract_eval(lambda *_, **params: [_core.ShapedArray(s, d) for s, d in abstract_eval(**params)])

    def rule(primals: Sequence[Any], tangents: Sequence[Any], **params: Any) -> tuple[Any, Any]:
        ts = [None if type(t) is ad.Zero or getattr(t, "dtype", None) == jax.dtypes.float0 else t
              for t in tangents]
        return prim.bind(*primals, **params), jvp(primals, ts, **params)

    ad.primitive_jvps[prim] = rule
    return prim


def caller_of(eqn: Eqn, function: str, file_suffix: str) -> tuple[str, str, int] | None:
    """``(function name, file, line)`` of the Python frame that called ``function`` (defined in a file
    whose path ends with ``file_suffix``) when ``eqn`` was traced; None when it was not traced under it."""
    tb = eqn.source_info.traceback
    frames = [] if tb is None else tb.frames  # innermost first
    for k in range(len(frames) - 1):
        f = frames[k]
        if f.function_name == function and f.file_name.replace("\\", "/").endswith(file_suffix):
            up = frames[k + 1]
            return up.function_name, up.file_name.replace("\\", "/"), int(up.line_num)
    return None
