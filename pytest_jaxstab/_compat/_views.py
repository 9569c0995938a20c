"""Views of JAX's internals beyond a jaxpr's parts: source locations, control flow, 64-bit mode, the primitive
registry and oracle-only primitives."""


from __future__ import annotations

import contextlib
import dataclasses
import importlib
import linecache
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import jax
import jax.extend.core as jex
from jax._src import core as _core
from jax._src import source_info_util as _siu

from ._jaxpr import ClosedJaxpr, Eqn, as_closed, aval


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


def user_frames(eqn: Eqn) -> tuple[tuple[str, int, str], ...]:
    """The user's frames of an equation's traceback as ``(file, line, function)``, innermost first (JAX's
    and this package's frames skipped; the caller decides where the user's model starts)."""
    return tuple((f.file_name, int(f.start_line), f.function_name)
                 for f in _siu.user_frames(eqn.source_info.traceback))


def user_scopes(eqn: Eqn) -> tuple[str, ...]:
    """The ``jax.named_scope`` names on the equation's name stack, outermost first, without the
    transforms (``vmap``, ``jvp``) that the stack also records: what the user named, not how it ran."""
    stack = eqn.source_info.name_stack.stack
    return tuple(e.name for e in stack if isinstance(e, _siu.Scope)) if stack else ()


def in_transpose(eqn: Eqn) -> bool:
    """Whether the equation was made by JAX's transposition (the backward pass of ``jax.vjp``/``grad``):
    its name stack records the ``transpose`` transform (``transpose(jvp(...))``). An equation inside a
    loop or call body carries a stack relative to that body: the caller inherits the enclosing answer."""
    stack = eqn.source_info.name_stack.stack
    return any(isinstance(e, _siu.Transform) and e.name == "transpose" for e in stack) if stack else False


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


#: Where each JAX release keeps the one-key implementations of its sampler primitives, newest first:
#: ``primitive -> ((module, function), ...)``. JAX 0.12.1 renamed ``_gamma_impl`` to ``_gamma_impl_local``
#: (its lowering shards around it) and gave ``poisson`` a primitive of its own, ``random_poisson``.
_SAMPLER_IMPLS: dict[str, tuple[tuple[str, str], ...]] = {
    "random_gamma": (("jax._src.random.core", "_gamma_impl_local"), ("jax._src.random.core", "_gamma_impl"),
                     ("jax._src.random", "_gamma_impl")),
    "random_poisson": (("jax._src.random.core", "_poisson_impl_local"),),
}


def _sampler_impl(primitive: str) -> Callable[..., Any] | None:
    for modname, fname in _SAMPLER_IMPLS[primitive]:
        try:
            module = importlib.import_module(modname)
        except ImportError:  # pragma: no cover - layout of another release
            continue
        impl = getattr(module, fname, None)
        if impl is not None:
            return impl
    return None


def random_gamma_program(key_aval: Any, a_aval: Any, log_space: bool) -> ClosedJaxpr | None:
    """The jaxpr of JAX's own implementation of the ``random_gamma`` primitive (Marsaglia and Tsang's
    rejection sampler, one sample at a time) for operands of these avals; None where this JAX
    release keeps it elsewhere."""
    impl = _sampler_impl("random_gamma")
    if impl is None:  # pragma: no cover
        return None
    specs = [jax.ShapeDtypeStruct(tuple(a.shape), a.dtype) for a in (key_aval, a_aval)]
    # use_vmap=False: lax.map of the one-sample sampler, whose while loops have scalar predicates.
    return jax.make_jaxpr(lambda k, a: impl(k, a, log_space=log_space, use_vmap=False))(*specs)


def random_poisson_program(key_aval: Any, lam_aval: Any, dtype: Any) -> ClosedJaxpr | None:
    """The jaxpr of JAX's own implementation of the ``random_poisson`` primitive (JAX 0.12.1+: Knuth's
    algorithm below a mean of 10, Hormann's transformed rejection above, both loops to acceptance) for
    operands of these avals and integer result ``dtype``; None where this JAX release has no such
    primitive (``jax.random.poisson`` is then traced into ordinary primitives)."""
    impl = _sampler_impl("random_poisson")
    if impl is None:  # pragma: no cover
        return None
    specs = [jax.ShapeDtypeStruct(tuple(a.shape), a.dtype) for a in (key_aval, lam_aval)]
    return jax.make_jaxpr(lambda k, lam: impl(k, lam, dtype=dtype))(*specs)


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
