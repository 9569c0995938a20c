"""Where is this NaN coming from? Locate the primitive where a non-finite value is born.

``jax_debug_nans`` re-runs a program op by op and stops at the first primitive whose output holds a
NaN (Infs only with ``jax_debug_infs``), masked or not; ``checkify`` reports the first NaN a primitive
generates. :func:`find_nan_origin` needs no flag and reports more: it traces the function, evaluates
the jaxpr equation by equation on the given (concrete) inputs, recursing into ``jit``, ``custom_jvp`` /
``custom_vjp`` primal bodies, ``cond`` (the branch the index picks), ``scan`` and ``while`` (one body
run per iteration, so a value born at step ``k`` of a loop is located in the body, at step ``k``), and
records every equation that turns finite operands into NaN or ±Inf.

Definitions (the contract of this module):

* **Origin.** An equation output element that is NaN/±Inf while every operand element it depends on is
  finite. For elementwise primitives that is decided per element (``jnp.where`` masks, broadcasting
  scalars); for the others (reductions, ``dot_general``, gathers...) the whole output counts as born
  there only when every operand is entirely finite, so a fresh overflow next to an inherited Inf in
  the same reduction is missed (conservative: never a false origin).
* **Not origins.** Values computed from non-finite operands (``inf - inf`` after an overflow: the
  overflow is the origin) and non-finite *input arguments*: the caller passed them. A function whose
  only non-finite values come from its arguments has no origin (``None``).
* **Constants.** A NaN/Inf literal or captured constant in the program (``jnp.nan``,
  ``jnp.where(x > 0, x, jnp.nan)``) is an origin of kind ``"constant"``, placed at the first equation
  that consumes it, since that equation is where the user's code put it into the computation.
* **Kinds** follow IEEE 754's exception classes: ``"invalid"`` (a NaN from finite operands:
  ``log(-1)``, ``0/0``, ``sqrt(-1)``), ``"division by zero"`` (an exact infinite result from finite
  operands at a pole: ``x/0`` with ``x != 0``, ``log(0)``, ``log1p(-1)``, ``rsqrt(0)``,
  ``pow(0, y<0)``, ``atanh(±1)``, ``lgamma``/``digamma`` at non-positive integers, ``erf_inv(±1)``),
  ``"overflow"`` (a finite result too large for the dtype: ``exp(1000)``, ``x*x``; a reduction or
  ``dot_general`` whose NaN comes from finite operands overflowed internally, then took
  ``inf - inf``, and is reported as overflow too) and ``"constant"`` (above).
* **Which one.** Which origins' non-finite values reach the function's result is tracked (taint
  propagation, per element through elementwise primitives and ``select_n``, per array elsewhere).
  :func:`find_nan_origin` returns the first origin, in evaluation order, that reaches the result, and
  None when none does: a value masked on the way (the ``log`` in ``jnp.where(x > 0, jnp.log(x), 0.)``,
  the ``-inf`` constants JAX's own ``softmax`` and ``max`` use) is not why a result is NaN. Unlike
  ``jax_debug_nans`` it therefore does not stop at such values; ``every=True`` lists them too, with
  ``reaches_output=False``. ``every=True`` returns every distinct origin, distinct by ``(primitive,
  location, path)`` (the first occurrence of each: a loop reports its first bad step).
* **Cost.** Evaluation is op by op (each primitive dispatched eagerly, a loop body once per
  iteration), as ``jax_debug_nans`` does. Without ``every=True``, a sub-program (jit, loop, cond) whose
  outputs are all finite in one compiled call is not entered, and a function whose results are all
  finite returns None after one compiled call.
* **Gradients.** ``find_nan_origin(jax.grad(f), x)`` traces the backward pass too; JAX gives backward
  equations the source line of the forward operation they differentiate, so the origin names the
  forward line (e.g. ``div`` of ``0.5 / sqrt(0)`` on the line of ``jnp.sqrt``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, Literal, overload

import jax
import jax.numpy as jnp
import numpy as np

from .. import _compat as C
from .._primitives import ACCUMULATING, CALLS, CUSTOM_DERIVATIVES, ELEMENTWISE
from ._timing import tracing

__all__ = ["NanOrigin", "OperandSummary", "find_nan_origin"]

Key = tuple[str, "str | None", tuple[str, ...]]



# ------------------------------------------------------------------------------------------ records
@dataclasses.dataclass(frozen=True)
class OperandSummary:
    """One operand (or the output) of the equation where a non-finite value was born.

    ``min``/``max`` ignore NaNs (None when every element is NaN, for complex and for empty arrays);
    ``value`` is the element at the offending index where shapes allow (elementwise primitives,
    scalars), else None; ``constant`` marks literals and captured constants.
    """

    name: str
    shape: tuple[int, ...]
    dtype: str
    min: float | None
    max: float | None
    n_nan: int
    n_inf: int
    value: float | complex | None = None
    constant: bool = False

    def __str__(self) -> str:
        desc = f"{self.name}: {_short_dtype(self.dtype)}[{','.join(map(str, self.shape))}]"
        if not self.shape and self.value is not None:
            desc += f" = {_fmt(self.value, self.dtype)}"
        elif self.min is not None and self.max is not None:
            desc += f" min {_fmt(self.min, self.dtype)} max {_fmt(self.max, self.dtype)}"
        if self.shape and (self.n_nan or self.n_inf):
            desc += f" ({self.n_nan} nan, {self.n_inf} inf)"
        return desc + (" (constant)" if self.constant else "")


@dataclasses.dataclass(frozen=True)
class NanOrigin:
    """Where a non-finite value is born: see the module docstring for the exact definitions.

    Attributes:
        primitive: the primitive's name (``exp``, ``div``; for a constant, the consuming primitive).
        location: the user's ``file:line``; for equations inside library code with no user frame
            (``jax.nn.softplus``), that of the nearest enclosing equation that has one. None if none.
        path: the nested calls down to the equation, e.g. ``("jit(softplus)",
            "custom_jvp_call(logaddexp)", "log1p")``.
        operands: summaries of the equation's operands, named ``a``, ``b``, ... in order.
        kind: ``"overflow"``, ``"invalid"``, ``"division by zero"`` or ``"constant"``.
        code: the text of the line at ``location``.
        index: the first offending element of the output (of the constant for ``"constant"``).
        output: summary of the output holding it (None for ``"constant"``).
        count: how many output elements were born non-finite there (first occurrence).
        steps: for origins inside ``scan``/``while`` bodies, the iteration of each enclosing loop,
            outermost first (``()`` outside loops).
        reaches_output: whether non-finite values born here reach the function's result.
    """

    primitive: str
    location: str | None
    path: tuple[str, ...]
    operands: tuple[OperandSummary, ...]
    kind: str
    code: str | None = None
    index: tuple[int, ...] | None = None
    output: OperandSummary | None = None
    count: int = 1
    steps: tuple[int, ...] = ()
    reaches_output: bool = True

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict: the fields (operands as dicts) plus ``"message"``, the ``str()``."""
        d = dataclasses.asdict(self)
        d["path"], d["steps"] = list(self.path), list(self.steps)
        d["index"] = None if self.index is None else list(self.index)
        d["message"] = str(self)
        return _jsonable(d)

    @property
    def path_str(self) -> str:
        """The path as ``jit(f) > scan > exp``."""
        return " > ".join(self.path)

    def __str__(self) -> str:
        name = self.path[-1] if self.path else self.primitive
        where = self.location or "<no source location>"
        head = f"{self.kind}: "
        if self.kind == "constant":
            bad = next((o for o in self.operands if o.constant and o.value is not None
                        and not _finite_scalar(o.value)), None)
            what = _fmt(bad.value, bad.dtype) if bad else "non-finite"
            article = "an" if what == "inf" else "a"
            head += f"{article} {what} constant " + (
                "is returned" if self.primitive == "output" else f"enters {name}")
        else:
            head += name
        text = f"{head} at {where}" + (f" (`{self.code}`)" if self.code else "")
        text += f" via {self.path_str}"
        if self.steps:
            text += f" at loop step {', '.join(map(str, self.steps))}"
        if self.operands:
            text += "; operand" + ("s " if len(self.operands) > 1 else " ")
            text += ", ".join(str(o) for o in self.operands)
        if self.output is not None and self.index is not None:
            idx = _fmt_index(self.index)
            text += f"; output{idx} = {_fmt(self.output.value, self.output.dtype)}"
            froms = [f"{o.name}{_fmt_index(self.index) if o.shape else ''} = {_fmt(o.value, o.dtype)}"
                     for o in self.operands if o.value is not None]
            if froms:
                text += " from " + ", ".join(froms)
            if self.count > 1:
                text += f" ({self.count} elements)"
        if not self.reaches_output:
            text += " (masked: does not reach the result)"
        return text


# ------------------------------------------------------------------------------------------- public
@overload
def find_nan_origin(fn: Callable[..., Any], *args: Any,
                    every: Literal[False] = False) -> NanOrigin | None: ...
@overload
def find_nan_origin(fn: Callable[..., Any], *args: Any, every: Literal[True]) -> list[NanOrigin]: ...
def find_nan_origin(fn: Callable[..., Any], *args: Any,
                    every: bool = False) -> NanOrigin | list[NanOrigin] | None:
    """Find where ``fn(*args)`` first turns finite values into NaN or ±Inf.

    Args:
        fn: a JAX-traceable function of arrays (``jax.grad(f)`` works: the backward pass is searched).
        *args: concrete inputs (arrays, scalars or pytrees of them), not tracers.
        every: return every distinct origin (a list, possibly empty) instead of the first.

    Returns:
        The first :class:`NanOrigin` whose non-finite values reach the result, or None when there is
        none (results all finite, or non-finite only because the inputs were); with ``every=True`` a
        list of every distinct origin in evaluation order, masked ones included.

    Example:
        >>> def f(x):
        ...     return jnp.exp(x) - jnp.exp(x)
        >>> o = find_nan_origin(f, jnp.array([1.0, 100.0]))
        >>> (o.kind, o.primitive, o.index)
        ('overflow', 'exp', (1,))
    """
    if not callable(fn):
        raise TypeError(f"find_nan_origin: fn must be a callable, got {type(fn).__name__}")
    leaves = jax.tree_util.tree_leaves(args)
    if any(C.is_tracer(x) for x in leaves):
        raise TypeError("find_nan_origin evaluates concrete inputs: call it outside jax.jit/grad/vmap "
                        "(pass the transformed function, e.g. find_nan_origin(jax.grad(f), x)).")
    with tracing(fn):  # a tracing mistake reads as in jst.check: the user's line, JAX's reason, a hint
        closed, _, _ = C.trace(fn, *args)
    invals = [jnp.asarray(x) for x in leaves]
    if not every and _every_finite(jax.jit(C.as_fun(closed))(*invals)):
        return None  # fast path: no origin can reach a finite result
    walker = _Walker(exhaustive=every)
    _, out_taints = walker.run(closed, invals, [frozenset()] * len(invals), _Ctx((), ()))
    reached = frozenset().union(*out_taints) if out_taints else frozenset()
    origins = [dataclasses.replace(o, reaches_output=k in reached) for k, o in walker.origins.items()]
    if every:
        return origins
    return next((o for o in origins if o.reaches_output), None)


# ------------------------------------------------------------------------------------- interpreter
@dataclasses.dataclass(frozen=True)
class _Ctx:
    """The enclosing equations (outermost first) and the iteration of each enclosing loop."""

    stack: tuple[Any, ...]
    steps: tuple[int, ...]

    def push(self, eqn: Any, step: int | None = None) -> _Ctx:
        return _Ctx((*self.stack, eqn), self.steps if step is None else (*self.steps, step))


Taint = frozenset  # of origin keys whose non-finite values may flow into a value


class _Walker:
    """Evaluates a jaxpr concretely, recording origins and propagating taints."""

    def __init__(self, exhaustive: bool) -> None:
        # exhaustive: walk every sub-program; otherwise skip those whose outputs are all finite.
        self.exhaustive = exhaustive
        self.origins: dict[Key, NanOrigin] = {}

    # -- jaxpr ----------------------------------------------------------------------------------
    def run(self, closed: Any, invals: Sequence[Any], intaints: Sequence[Taint],
            ctx: _Ctx) -> tuple[list[Any], list[Taint]]:
        env: dict[Any, Any] = {}
        taint: dict[Any, Taint] = {}
        pending: set[Any] = set()  # non-finite captured constants not yet consumed
        _, consts = C.parts(closed)
        for v, c in zip(C.constvars(closed), consts):
            env[v], taint[v] = c, frozenset()
            if not _all_finite(c):
                pending.add(v)
        for v, x, t in zip(C.invars(closed), invals, intaints):
            env[v], taint[v] = x, t
        for eqn in C.eqns(closed):
            lits = [C.is_literal(a) for a in eqn.invars]
            vals = [C.literal_value(a) if lit else env[a] for a, lit in zip(eqn.invars, lits)]
            tnts = [frozenset() if lit else taint[a] for a, lit in zip(eqn.invars, lits)]
            for pos, (atom, lit) in enumerate(zip(eqn.invars, lits)):
                if (lit or atom in pending) and not _all_finite(vals[pos]):
                    tnts[pos] = tnts[pos] | {self._constant(eqn, ctx, eqn.invars, vals, pos)}
                    if not lit:
                        taint[atom] = tnts[pos]
                        pending.discard(atom)
            outs, out_t = self._eval(eqn, vals, tnts, ctx)
            for v, o, t in zip(eqn.outvars, outs, out_t):
                if not C.is_dropvar(v):
                    env[v], taint[v] = o, t
        outs, out_t = [], []
        for atom in C.outvars(closed):
            val = C.literal_value(atom) if C.is_literal(atom) else env[atom]
            t = frozenset() if C.is_literal(atom) else taint[atom]
            if (C.is_literal(atom) or atom in pending) and not _all_finite(val):
                # A constant returned as is: its consumer is the enclosing equation (if any).
                outer = ctx.stack[-1] if ctx.stack else None
                t = t | {self._constant(outer, _Ctx(ctx.stack[:-1], ctx.steps), [atom], [val], 0)}
            outs.append(val)
            out_t.append(t)
        return outs, out_t

    # -- one equation ---------------------------------------------------------------------------
    def _eval(self, eqn: Any, vals: list[Any], tnts: list[Taint],
              ctx: _Ctx) -> tuple[list[Any], list[Taint]]:
        name = C.primitive_name(eqn)
        if not self.exhaustive and (name in CALLS or name in CUSTOM_DERIVATIVES
                                    or name in ("scan", "while", "cond")):
            # Fast path: non-finite values leave a sub-program only through its outputs, so when
            # they are all finite (one compiled call) nothing born inside can reach the result.
            outs = C.bind(eqn, vals)
            if _every_finite(outs):
                return outs, [frozenset() for _ in outs]
        if name in CALLS:
            subs = C.subjaxprs(eqn)
            if len(subs) == 1 and len(C.invars(subs[0][1])) == len(vals):
                return self.run(subs[0][1], vals, tnts, ctx.push(eqn))
        elif name in CUSTOM_DERIVATIVES:
            body, _ = C.custom_call_parts(eqn)
            if len(C.invars(body)) == len(vals):
                return self.run(body, vals, tnts, ctx.push(eqn))
        elif name == "scan" and eqn.params["length"] > 0:
            return self._scan(eqn, vals, tnts, ctx)
        elif name == "while":
            return self._while(eqn, vals, tnts, ctx)
        elif name == "cond":
            _, _, branches = C.cond_parts(eqn)
            i = min(max(int(np.asarray(vals[0])), 0), len(branches) - 1)  # lax.switch clamps too
            return self.run(branches[i], vals[1:], tnts[1:], ctx.push(eqn))
        return self._leaf(eqn, vals, tnts, ctx)

    def _scan(self, eqn: Any, vals: list[Any], tnts: list[Taint],
              ctx: _Ctx) -> tuple[list[Any], list[Taint]]:
        sp = C.scan_parts(eqn)
        nc, nk = len(sp.consts), len(sp.carry)
        consts, carry, xs = vals[:nc], vals[nc:nc + nk], vals[nc + nk:]
        ct, kt, xt = tnts[:nc], tnts[nc:nc + nk], tnts[nc + nk:]
        ys: list[list[Any]] = [[None] * sp.length for _ in sp.ys]
        yt: list[Taint] = [frozenset() for _ in sp.ys]
        order = range(sp.length - 1, -1, -1) if sp.reverse else range(sp.length)
        xs = [_host_or_device(x) for x in xs]  # slicing numpy arrays costs no dispatch
        for i in order:
            outs, ot = self.run(sp.body, [*consts, *carry, *(x[i] for x in xs)], [*ct, *kt, *xt],
                                ctx.push(eqn, i))
            carry, kt = outs[:nk], ot[:nk]
            for j, (y, t) in enumerate(zip(outs[nk:], ot[nk:])):
                ys[j][i] = y
                yt[j] = yt[j] | t
        return [*carry, *(_stack(y) for y in ys)], [*kt, *yt]

    def _while(self, eqn: Any, vals: list[Any], tnts: list[Taint],
               ctx: _Ctx) -> tuple[list[Any], list[Taint]]:
        wp = C.while_parts(eqn)
        nc, nb = len(wp.cond_consts), len(wp.body_consts)
        cc, bc, carry = vals[:nc], vals[nc:nc + nb], vals[nc + nb:]
        cct, bct, kt = tnts[:nc], tnts[nc:nc + nb], tnts[nc + nb:]
        step = 0
        while True:
            (pred,), _ = self.run(wp.cond, [*cc, *carry], [*cct, *kt], ctx.push(eqn, step))
            if not bool(np.asarray(pred)):
                return carry, kt
            carry, kt = self.run(wp.body, [*bc, *carry], [*bct, *kt], ctx.push(eqn, step))
            step += 1

    def _leaf(self, eqn: Any, vals: list[Any], tnts: list[Taint],
              ctx: _Ctx) -> tuple[list[Any], list[Taint]]:
        outs = C.bind(eqn, vals)
        name = C.primitive_name(eqn)
        bad_in: list[np.ndarray | None] | None = None  # per operand: where it is non-finite
        out_t: list[Taint] = []
        for out in outs:
            if not _inexact(out):
                out_t.append(frozenset())
                continue
            a = np.asarray(out)
            bad = ~np.isfinite(a)
            if not bad.any():
                out_t.append(frozenset())
                continue
            if bad_in is None:
                bad_in = [~np.isfinite(np.asarray(v)) if _inexact(v) else None for v in vals]
            inherited: set[Any] = set()
            elementwise = name in ELEMENTWISE and all(np.shape(v) in ((), a.shape) for v in vals)
            if elementwise:
                fresh = bad.copy()
                chosen = _select_masks(vals, a.shape) if name == "select_n" else None
                for k, (m, t) in enumerate(zip(bad_in, tnts)):
                    if m is None:
                        continue
                    mb = np.broadcast_to(m, a.shape)
                    fresh &= ~mb
                    reach = mb & bad if chosen is None or k == 0 else mb & bad & chosen[k - 1]
                    if reach.any():
                        inherited |= t
            else:
                finite_in = all(m is None or not m.any() for m in bad_in)
                fresh = bad if finite_in else np.zeros_like(bad)
                for m, t in zip(bad_in, tnts):
                    if m is not None and m.any():
                        inherited |= t
            if fresh.any():
                inherited.add(self._record(eqn, ctx, vals, a, fresh, elementwise))
            out_t.append(frozenset(inherited))
        return outs, out_t

    # -- records --------------------------------------------------------------------------------
    def _where(self, eqn: Any, ctx: _Ctx) -> tuple[Key, str | None, tuple[str, ...]]:
        # eqn is None for a constant returned by the top-level function: no equation consumes it.
        chain = (*ctx.stack, eqn) if eqn is not None else ctx.stack
        path = tuple(C.eqn_name(e) for e in chain) or ("output",)
        src = C.source_line_in(chain)
        loc = None if src is None else str(src)
        prim = "output" if eqn is None else C.primitive_name(eqn)
        return (prim, loc, path), (src.text if src else None), path

    def _record(self, eqn: Any, ctx: _Ctx, vals: list[Any], out: np.ndarray, fresh: np.ndarray,
                elementwise: bool) -> Key:
        key, code, path = self._where(eqn, ctx)
        if key in self.origins:
            return key
        flat = int(np.flatnonzero(fresh)[0])
        index = tuple(int(i) for i in np.unravel_index(flat, out.shape))
        name = C.primitive_name(eqn)
        at = [_value_at(v, index) if elementwise else None for v in vals]
        value = out[index]
        if np.isnan(value):
            kind = "overflow" if name in ACCUMULATING else "invalid"
        else:
            kind = "division by zero" if _at_pole(name, eqn.params, at) else "overflow"
        operands = tuple(_summary(_letter(i), atom, v, x, C.is_literal(atom))
                         for i, (atom, v, x) in enumerate(zip(eqn.invars, vals, at)))
        output = _summary("output", None, out, value.item(), False)
        self.origins[key] = NanOrigin(name, key[1], path, operands, kind, code, index, output,
                                      int(fresh.sum()), ctx.steps)
        return key

    def _constant(self, eqn: Any | None, ctx: _Ctx, atoms: Sequence[Any], vals: list[Any], pos: int) -> Key:
        key, code, path = self._where(eqn, ctx)
        if key not in self.origins:
            h = np.asarray(vals[pos])
            flat = int(np.flatnonzero(~np.isfinite(h))[0])
            index = tuple(int(i) for i in np.unravel_index(flat, h.shape))
            operands = tuple(
                _summary(_letter(i), atom, v, np.asarray(v)[index] if i == pos else _value_at(v, ()),
                         C.is_literal(atom) or i == pos)
                for i, (atom, v) in enumerate(zip(atoms, vals)))
            self.origins[key] = NanOrigin(key[0], key[1], path, operands, "constant", code, index,
                                          None, int((~np.isfinite(h)).sum()), ctx.steps)
        return key


# -------------------------------------------------------------------------------------------- helpers
def _inexact(v: Any) -> bool:
    dtype = getattr(v, "dtype", None)
    if dtype is None:
        dtype = np.asarray(v).dtype
    try:
        return bool(jnp.issubdtype(dtype, jnp.inexact))
    except TypeError:  # extended dtypes (PRNG keys, float0) are never non-finite
        return False


def _all_finite(v: Any) -> bool:
    return not _inexact(v) or bool(np.isfinite(np.asarray(v)).all())


def _every_finite(values: Sequence[Any]) -> bool:
    return all(_all_finite(v) for v in values)


def _finite_scalar(v: Any) -> bool:
    return bool(np.isfinite(v))


def _host_or_device(x: Any) -> Any:
    """``x`` as a numpy array where it has a numpy dtype (PRNG keys and the like stay on device)."""
    try:
        return np.asarray(x) if _inexact(x) or np.asarray(x).dtype.kind in "biu" else x
    except (TypeError, ValueError):
        return x


def _stack(parts: list[Any]) -> Any:
    """Stack per-step scan outputs (on the host: ``jnp.stack`` would compile per length)."""
    try:
        return jnp.asarray(np.stack([np.asarray(p) for p in parts]))
    except (TypeError, ValueError):
        return jnp.stack(parts)


def _select_masks(vals: list[Any], shape: tuple[int, ...]) -> list[np.ndarray]:
    """For ``select_n(which, *cases)``: where each case is the one selected."""
    which = np.broadcast_to(np.asarray(vals[0]).astype(np.int64), shape)
    return [which == k for k in range(len(vals) - 1)]


def _value_at(v: Any, index: tuple[int, ...]) -> Any:
    h = np.asarray(v)
    if h.shape == ():
        return h.item()
    return h[index].item() if len(index) == h.ndim else None


def _at_pole(name: str, params: dict[str, Any], at: list[Any]) -> bool:
    """Whether finite operands ``at`` sit at a pole of the primitive (an exact infinite result)."""
    if any(x is None for x in at) or not at:
        return False
    x = at[0]
    if isinstance(x, complex):
        return False
    if name == "div":
        return at[1] == 0
    if name in ("log", "rsqrt"):
        return x == 0
    if name == "log1p":
        return x == -1
    if name == "pow":
        return x == 0 and at[1] < 0
    if name == "integer_pow":
        return x == 0 and params.get("y", 0) < 0
    if name in ("atanh", "erf_inv"):
        return abs(x) == 1
    if name in ("lgamma", "digamma"):
        return x <= 0 and float(x).is_integer()
    return False


def _summary(name: str, atom: Any, v: Any, value: Any, constant: bool) -> OperandSummary:
    h = np.asarray(v)
    aval = None if atom is None else getattr(atom, "aval", None)
    dtype = str(aval.dtype if aval is not None and hasattr(aval, "dtype") else h.dtype)
    shape = tuple(aval.shape) if aval is not None and hasattr(aval, "shape") else tuple(h.shape)
    lo = hi = None
    n_nan = n_inf = 0
    if _inexact(h):
        n_nan = int(np.isnan(h).sum())
        n_inf = int(np.isinf(h).sum())
        if not jnp.issubdtype(h.dtype, jnp.complexfloating):
            rest = h[~np.isnan(h)].astype(np.float64)
            if rest.size:
                lo, hi = float(rest.min()), float(rest.max())
    elif h.size and h.dtype.kind in "iu":
        lo, hi = float(h.min()), float(h.max())
    return OperandSummary(name, shape, dtype, lo, hi, n_nan, n_inf, value, constant)


def _letter(i: int) -> str:
    return chr(ord("a") + i) if i < 26 else f"op{i}"


_SHORT = {"bfloat16": "bf16", "bool": "bool"}


def _short_dtype(dtype: str) -> str:
    if dtype in _SHORT:
        return _SHORT[dtype]
    for long, short in (("float", "f"), ("complex", "c"), ("uint", "u"), ("int", "i")):
        if dtype.startswith(long):
            return short + dtype[len(long):]
    return dtype


def _fmt(v: Any, dtype: str) -> str:
    """Shortest repr of ``v`` in ``dtype`` (``120.5``, ``inf``, ``3.4028235e+38``)."""
    if v is None:
        return "?"
    try:
        return str(jnp.dtype(dtype).type(v))
    except (TypeError, ValueError, OverflowError):
        return str(v)


def _fmt_index(index: tuple[int, ...]) -> str:
    return f"[{','.join(map(str, index))}]" if index else ""


def _jsonable(v: Any) -> Any:
    """Non-finite floats as strings (``"nan"``, ``"inf"``) and complex as ``[re, im]``: strict JSON."""
    if isinstance(v, dict):
        return {k: _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, complex):
        return [_jsonable(v.real), _jsonable(v.imag)]
    if isinstance(v, float) and not np.isfinite(v):
        return str(v)
    return v
