"""Where precision is lost: the local error of every equation, per user source line (Herbie's localize).

The *local error* of an equation is what that one operation loses on its own, as Herbie defines it:
its float primitive applied to its **exact inputs rounded** to the dtype, against the **exact** result
of the primitive on the exact (unrounded) inputs, rounded; in bits (``oracles.error_bits``). The exact
result of the primitive on the exact inputs is the exact value of that intermediate, so one oracle
evaluation of a program returning every intermediate (``_local_trace.instrument``) gives both the
rounded inputs and the reference of every equation. So ``a - b`` with ``a ~= b`` is blamed for the
cancellation even though the float subtraction of the rounded ``a`` and ``b`` is exact, and
``log(1 + x)`` for tiny ``x`` is blamed on the ``log`` (its input was rounded to 1), not on the ``+``.

Elements the oracle marks uncertain, those whose exact result is not real, and those that cannot reach
the program's result on the sample (the branch a ``jnp.where`` discards) are left out. A zero or
subnormal float result where the exact one is subnormal scores 0 bits (XLA flushes subnormals).
Sub-programs: ``jit``/``custom_jvp``/``custom_vjp`` are inlined, ``scan`` bodies are scored at every
iteration on exact carries (``_local_trace``); outside scans, the ``cond`` branch the exact index picks
and ``while`` bodies (per iteration, up to :data:`MAX_WHILE_STEPS`) are scored as programs of their own
on the exact operands and carries rounded to their dtype; elsewhere a ``cond``/``while`` is scored as
one operation.

Figures are aggregated per user source line (``file:line``; equations inside library code land on the
user's line that called it) and primitive, over samples: ``max_bits``, ``mean_bits`` (mean over samples
of that line's worst element) and ``share_over_tolerance`` (the share of samples whose worst element
there loses more than ``tolerance_bits``). Each line is classified by its worst element (:data:`KINDS`).
Lines are ranked by where the loss is born, the earliest cause first (:func:`_rank_key`): a later line
that only shows the damage (a division whose operands underflowed) comes after the line that made it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .. import _compat as C
from .._dtypes import component_dtype, dtype_info
from .._errors import ArgumentError, require_callable, trace_error
from .._primitives import ELEMENTWISE
from .._results import LocalErrorRecord
from ..oracles import error_bits, evaluate
from ._local_trace import Instrumented, Site, Slot, instrument

__all__ = ["KINDS", "MAX_WHILE_STEPS", "LineError", "LocalError", "analyse", "analyse_until", "local_error"]

#: The kinds of loss, by the worst element of a line.
KINDS = {
    "cancellation": "add/sub of nearly equal exact values: the rounding of the operands is magnified",
    "absorption": "add/sub where the smaller operand is lost entirely against the larger",
    "overflow": "the result or an operand rounds to +-inf where the exact value is finite",
    "underflow": "the result or an operand rounds to 0 (or loses bits as a subnormal)",
    "near pole/zero": "a function evaluated where it is ill-conditioned: its rounded input moves the "
                      "result by many ulps (log near 1, 1 - cos near 0, a division by a tiny value)",
    "rounding": "ordinary accumulation of rounding (reductions, products)",
    "approximation": "a library routine (or one declared with jst.oracles.define) misses its mathematical "
                     "value on exact inputs: its implementation (a truncated series, a fit) loses the bits",
}

_ADDITIVE = frozenset({"add", "sub", "add_any"})

#: One site's figures on one sample: the site, its worst born bits and their kind, its worst inherited
#: bits and their kind (NaN where no element of that sort could be judged); see :func:`_rank_key`.
_Scored = tuple[Any, float, str, float, str]
_SUMS = frozenset({"reduce_sum", "cumsum", "dot_general"})


#: One (source line, primitive) pair's local error: the record a ``CaseResult`` carries too (one
#: class for one fact, ``_results.LocalErrorRecord``).
LineError = LocalErrorRecord


@dataclasses.dataclass(frozen=True)
class LocalError:
    """What :func:`local_error` returns: the lines where bits are lost, ranked by where the loss is born.

    ``lines`` holds every (line, primitive) pair that lost at least one bit; ``samples`` the samples
    analysed; ``str()`` one line per entry.
    """

    lines: tuple[LineError, ...]
    samples: int
    tolerance_bits: float

    @property
    def worst(self) -> LineError | None:
        """The first-ranked line, where the loss is born (usually the most bits: a later line listing
        more has inherited them or ties past every significant bit), or None when nothing is lost."""
        return self.lines[0] if self.lines else None

    def __str__(self) -> str:
        if not self.lines:
            return f"no operation loses a bit on the {self.samples} sample(s) analysed"
        return "\n".join(str(line) for line in self.lines)


# ------------------------------------------------------------------------------------------ public
def local_error(fn: Callable[..., Any], *args: Any, tolerance_bits: float = 8.0) -> LocalError:
    """How many bits each operation of ``fn`` loses on its own at ``args``, per source line.

    For each equation of the program as written: its float primitive applied to its exact inputs
    rounded to the dtype, against the exact result (the exact oracle), in bits. See the module
    docstring of ``pytest_jaxstab._diagnostics._local_error`` for the definitions.

    Args:
        fn: a JAX-traceable function of arrays.
        *args: concrete inputs (arrays, scalars or pytrees of them).
        tolerance_bits: the bits above which a sample counts in ``share_over_tolerance``.

    Returns:
        A :class:`LocalError`: ``lines`` ranked by where the loss is born (the most bits first, except
        that a loss inherited from an underflowed or overflowed operand comes after the line that made
        it, and a total loss ties with another, the earlier in program order first); ``worst`` the first.

    Raises:
        ArgumentError: ``fn`` is not callable or an argument is a tracer.
        TraceError: JAX cannot trace ``fn``.
        UnsupportedPrimitive: the exact oracle cannot evaluate one of its operations.

    Example:
        >>> import jax.numpy as jnp
        >>> def f(x):
        ...     a = jnp.sqrt(x + 1.0)
        ...     return a - jnp.sqrt(x)  # cancels for large x
        >>> worst = local_error(f, np.float32(1e6)).worst
        >>> worst.primitive, worst.kind, worst.max_bits > 10
        ('sub', 'cancellation', True)
    """
    require_callable("jst.local_error", fn)
    leaves = jax.tree_util.tree_leaves(args)
    if any(C.is_tracer(x) for x in leaves):
        raise ArgumentError("local_error evaluates concrete inputs: call it outside jax.jit/grad/vmap.")
    try:
        closed, _, _ = C.trace(fn, *args)
    except Exception as exc:  # reported as a TraceError naming the user's line
        raise trace_error(fn, exc) from exc
    sample = tuple(np.asarray(x) for x in leaves)
    return analyse(closed, [sample], tolerance_bits=tolerance_bits)


def analyse(closed: Any, samples: Sequence[Sequence[Any]], *, tolerance_bits: float = 8.0,
            max_lines: int | None = None) -> LocalError:
    """The local error of a closed jaxpr over ``samples`` (each a tuple of its flat inputs).

    Lines are ranked by the cause of the loss (:func:`_rank_key`), not by the string of their location.
    """
    return analyse_until(closed, samples, tolerance_bits=tolerance_bits, max_lines=max_lines)


def analyse_until(closed: Any, samples: Sequence[Sequence[Any]], *, tolerance_bits: float = 8.0,
                  max_lines: int | None = None,
                  enough: Callable[[LocalError], bool] | None = None) -> LocalError:
    """:func:`analyse` over ``samples`` in order, stopping after the first sample whose running result
    is ``enough`` (each sample is one exact evaluation of the whole program with every intermediate an
    output: seconds at a (32, 1000) batch). The result counts the samples analysed."""
    programs = _Programs()
    per_key: dict[tuple[str | None, str], _Group] = {}
    result = LocalError((), 0, float(tolerance_bits))
    for count, sample in enumerate(samples, start=1):
        scored: list[_Scored] = []
        programs.run(closed, list(sample), scored, None, (), _MAX_NESTING)
        seen: set[tuple[str | None, str]] = set()
        for order, entry in enumerate(scored):  # ``scored`` is in program order (sub-programs in place)
            site = entry[0]
            key = (None if site.source is None else str(site.source), site.primitive)
            group = per_key.setdefault(key, _Group(site, order))
            group.order = min(group.order, order)
            group.add(entry, merge=key in seen)
            seen.add(key)
        if enough is None and count < len(samples):
            continue
        ranked = sorted((g for g in per_key.values() if g.line(tolerance_bits).max_bits > 0),
                        key=_rank_key)
        lines = [g.line(tolerance_bits) for g in ranked]
        if max_lines is not None:
            lines = lines[:max_lines]
        result = LocalError(tuple(lines), count, float(tolerance_bits))
        if enough is not None and enough(result):
            break
    return result


def _rank_key(group: _Group) -> tuple[Any, ...]:
    """Which line is named first: the one where the loss is born, the earliest in program order.

    * A loss is *born* on a line when that operation's operands are representable: an element whose
      operand is a subnormal (XLA flushes it to 0) or an infinity (an exact value that overflowed) only
      shows a loss made where that operand was computed, so it is *inherited*. Lines ranked by their
      born loss come before lines whose loss is only inherited (``num / den`` of two underflowed values
      is not the cause of its NaN).
    * Bits beyond the significand's (24 in float32) all mean the same, nothing is left: a subtraction
      cancelled to 0 (29.7 bits) and the NaN of a later division (32) tie, and the tie goes to the line
      that comes first in program order, the cause. Below that, more bits first, then the higher mean.
    """
    born, mean = group.born_figures()
    if born > 0:
        saturated = born >= group.cap
        return (0, -min(born, group.cap), 0.0 if saturated else -mean, group.order)
    worst = max(group.per_sample, default=0.0)
    return (1, -min(worst, group.cap), -float(np.mean(group.per_sample)) if group.per_sample else 0.0,
            group.order)


#: ``while`` bodies are entered for at most this many iterations per sample (then scored whole).
MAX_WHILE_STEPS = 64
_MAX_NESTING = 4  # cond/while entered inside entered cond/while bodies, at most this deep


class _Programs:
    """Instrumented programs (cached per sub-program) and their evaluation on one sample."""

    def __init__(self) -> None:
        self._cache: dict[int, tuple[Any, Instrumented, _Floats]] = {}

    def _get(self, closed: Any, source: Any, path: tuple[str, ...]) -> tuple[Instrumented, _Floats]:
        hit = self._cache.get(id(closed))
        if hit is None or hit[0] is not closed:
            inst = instrument(closed, source, path)
            hit = self._cache[id(closed)] = (closed, inst, _Floats(inst))
        return hit[1], hit[2]

    def run(self, closed: Any, args: list[Any], scored: list[_Scored], source: Any,
            path: tuple[str, ...], nesting: int) -> list[np.ndarray | None]:
        """Score every site of ``closed`` on ``args`` (exact values); returns its outputs, exact rounded."""
        inst, floats = self._get(closed, source, path)
        oracle = evaluate(inst.closed, *args)
        values = [np.asarray(v) for v in oracle.values]
        certain = [np.broadcast_to(np.asarray(c, bool), np.shape(v)) for c, v in zip(oracle.certain, values)]
        got = floats(values)
        live = _live(inst, values)
        for site, outs in zip(inst.sites, got):
            if nesting > 0 and site.depth == 0 and site.primitive in ("cond", "while"):
                try:
                    if self._enter(site, values, certain, scored, nesting - 1):
                        continue
                except Exception:  # the sub-program cannot be entered: scored whole, below
                    pass
            result = _score(site, outs, values, certain, live)
            if result is not None:
                scored.append((site, *result))
        # None for a result the oracle cannot give (a PRNG key): entering a loop carrying it fails
        return [values[o.index] if isinstance(o, Slot) else None if o is None else np.asarray(o[1])
                for o in inst.outputs]

    def _enter(self, site: Site, values: list[np.ndarray], certain: list[np.ndarray],
               scored: list[_Scored], nesting: int) -> bool:
        """Score a cond's chosen branch, or a while's body per iteration, on exact operands rounded."""
        ins = [values[o.index] if isinstance(o, Slot) else np.asarray(o[1]) for o in site.ins]
        if not all(certain[o.index].all() for o in site.ins if isinstance(o, Slot)):
            return False  # an operand (an index, a carry) is not known exactly
        here = site.path
        if site.primitive == "cond":
            _, _, branches = C.cond_parts(site.eqn)
            i = min(max(int(ins[0]), 0), len(branches) - 1)  # lax.switch clamps too
            self.run(branches[i], ins[1:], scored, site.source, here, nesting)
            return True
        wp = C.while_parts(site.eqn)
        nc, nb = len(wp.cond_consts), len(wp.body_consts)
        cc, bc, carry = ins[:nc], ins[nc:nc + nb], ins[nc + nb:]
        body_scored: list[_Scored] = []
        for _ in range(MAX_WHILE_STEPS):
            if any(c is None for c in carry):
                return False
            decision = evaluate(wp.cond, *cc, *carry)
            if not bool(np.asarray(decision.certain[0]).all()):
                return False
            if not bool(np.asarray(decision.values[0])):
                scored.extend(body_scored)
                return True
            carry = self.run(wp.body, [*bc, *carry], body_scored, site.source, here, nesting)
        return False  # longer than the limit: the whole loop is scored instead


# ---------------------------------------------------------------------------------------- scoring
class _Group:
    """Per-sample worst bits of one (line, primitive), born and inherited, and the worst element's kind."""

    def __init__(self, site: Site, order: int) -> None:
        self.site = site
        self.order = order  # the first position of this line among the scored sites: program order
        self.per_sample: list[float] = []  # worst element, born or inherited
        self.born: list[float] = []  # worst born element, NaN when a sample has none
        self.best = -1.0
        self.kind = "rounding"
        self.best_born = -1.0
        self.kind_born = "rounding"
        outs = [s for s in site.outs if s is not None and _is_float(_dtype(s))]
        dtype = component_dtype(_dtype(outs[0])) if outs else np.dtype(np.float32)
        self.cap = float(dtype_info(dtype).significand_bits)

    def add(self, entry: _Scored, merge: bool) -> None:
        _, born, kind_born, inherited, kind_inh = entry
        worst = np.nanmax([born, inherited]) if not (np.isnan(born) and np.isnan(inherited)) else np.nan
        if np.isnan(worst):
            return
        if merge and self.per_sample:
            self.per_sample[-1] = max(self.per_sample[-1], worst)
            self.born[-1] = np.fmax(self.born[-1], born)
        else:
            self.per_sample.append(float(worst))
            self.born.append(born)
        if not np.isnan(born) and born > self.best_born:
            self.best_born, self.kind_born = born, kind_born
        if worst > self.best:
            self.best, self.kind = float(worst), kind_born if worst == born else kind_inh

    def born_figures(self) -> tuple[float, float]:
        """The most bits and the mean of the per-sample worst over born elements (0 when none)."""
        b = np.asarray([x for x in self.born if not np.isnan(x)], dtype=np.float64)
        return (float(b.max()), float(b.mean())) if b.size else (0.0, 0.0)

    def line(self, tolerance: float) -> LineError:
        s = np.asarray(self.per_sample, dtype=np.float64)
        src = self.site.source
        if not s.size:
            return LineError(None if src is None else str(src), self.site.primitive, self.kind, 0.0, 0.0,
                             0.0, code=None, path=self.site.path, samples=0)
        # the kind of the loss the line is ranked by: its born worst when it has one (a division that
        # also sees underflowed operands elsewhere is named for what it loses itself)
        kind = self.kind_born if self.best_born > 2 else self.kind
        return LineError(None if src is None else str(src), self.site.primitive, kind,
                         float(s.max()), float(s.mean()), float((s > tolerance).mean()),
                         code=None if src is None else src.text, path=self.site.path, samples=int(s.size))


class _Floats:
    """Each site's float primitive on the rounded exact values of its operands.

    Dispatched primitive by primitive (as ``jax_debug_nans`` does), not as one jitted program: JAX
    caches each primitive's executable across programs, so a check pays no compilation of its own
    (a jitted program of every site cost ~0.1 s of XLA compilation per check for ~5 ms of work).
    """

    def __init__(self, inst: Instrumented) -> None:
        self.inst = inst

    def __call__(self, values: list[np.ndarray]) -> list[list[np.ndarray] | None]:
        return [self._one(site, values) if _scorable(site) else None for site in self.inst.sites]

    def _one(self, site: Site, values: list[Any]) -> list[np.ndarray] | None:
        try:
            return [np.asarray(x) for x in _apply(site, values)]
        except Exception:  # a site we cannot re-run is left out, never guessed
            return None


def _scorable(site: Site) -> bool:
    return any(s is not None and _is_float(_dtype(s)) for s in site.outs)


def _is_float(dtype: Any) -> bool:
    """A real or complex floating dtype, bfloat16 included (numpy's ``kind`` calls it "V"); a complex
    site is scored by the complex metric (``oracles.error_bits``)."""
    try:
        return bool(jnp.issubdtype(dtype, jnp.inexact))
    except TypeError:
        return False


def _dtype(slot: Slot) -> Any:
    v = slot.value
    return C.aval(v).dtype if hasattr(v, "aval") else v.dtype


def _apply(site: Site, values: list[Any]) -> list[Any]:
    """Bind the site's primitive on the operands' values, mapping over ``site.depth`` loop axes."""
    operands: list[Any] = []
    depths: list[int] = []
    for op in site.ins:
        if isinstance(op, Slot):
            operands.append(values[op.index])
            depths.append(op.depth)
        else:
            operands.append(op[1])
            depths.append(0)
    fn: Callable[..., Any] = lambda *xs: C.bind(site.eqn, list(xs))
    for level in range(site.depth, 0, -1):  # innermost mapping first: outermost vmap applied last
        axes = [0 if d >= level else None for d in depths]
        fn = jax.vmap(fn, in_axes=axes)
    return list(fn(*operands))


def _live(inst: Instrumented, values: list[np.ndarray]) -> list[np.ndarray]:
    """Per slot, the elements that can reach the program's result on this sample.

    Backwards over the sites: an element is live when a live element of a consumer reads it. Elementwise
    sites read the same index (``select_n`` only the selected case's), any other site reads every element
    of its operands; slots read by anything but a site (results, scan operands) are live throughout. So
    a ``log`` overflowing in the branch a ``jnp.where`` discards is not blamed.
    """
    live = [np.full(np.shape(v), s.escapes, bool) for s, v in zip(inst.slots, values)]
    for site in reversed(inst.sites):
        outs = [live[s.index] for s in site.outs if s is not None]
        if len(outs) != len(site.outs) or not outs:
            out_live: np.ndarray = np.ones((), bool)
        elif all(o.shape == outs[0].shape for o in outs):
            out_live = np.asarray(np.logical_or.reduce(outs)) if len(outs) > 1 else outs[0]
        else:
            out_live = np.asarray(any(o.any() for o in outs))
        elementwise = site.primitive in ELEMENTWISE or site.routine is not None
        which = None
        if site.primitive == "select_n" and isinstance(site.ins[0], Slot):
            which = values[site.ins[0].index]
        elif site.primitive == "select_n":
            which = np.asarray(site.ins[0][1])
        for k, op in enumerate(site.ins):
            if not isinstance(op, Slot):
                continue
            target = live[op.index]
            if elementwise and target.shape == out_live.shape:
                reach = out_live
                if which is not None and k > 0:
                    reach = out_live & (np.broadcast_to(which, out_live.shape).astype(np.int64) == k - 1)
                live[op.index] = target | reach
            elif out_live.any():
                live[op.index] = np.ones_like(target)
    return live


def _score(site: Site, outs: list[np.ndarray] | None, values: list[np.ndarray],
           certain: list[np.ndarray], live: list[np.ndarray]) -> tuple[float, str, float, str] | None:
    """The worst bits of a site on one sample and their kind, over its born elements and over its
    inherited ones (an operand there is a subnormal or an infinity: :func:`_rank_key`); NaN when no
    element of that sort can be judged."""
    if outs is None:
        return None
    worst = [float("nan"), float("nan")]  # born, inherited
    kinds = ["rounding", "rounding"]
    for slot, got in zip(site.outs, outs):
        if slot is None or not _is_float(_dtype(slot)):
            continue
        exact = values[slot.index]
        got = np.asarray(got).astype(exact.dtype)
        if got.shape != exact.shape:
            continue
        bits = np.asarray(error_bits(got, exact), dtype=np.float64)
        info = dtype_info(component_dtype(exact.dtype))
        tiny = float(info.tiny)
        # A result XLA flushes (exact and float both below the normal range) loses nothing of its own,
        # unless it is a sum of normal operands that cancelled to 0: that loss is the cancellation's.
        flushed = (np.abs(exact) < tiny) & (np.abs(got) < tiny)
        if site.primitive in _ADDITIVE:
            flushed &= ~_cancelled_to_zero(site, values, got, info)
        bits = np.where(flushed, 0.0, bits)
        keep = certain[slot.index] & live[slot.index] & _inputs_certain(site, certain, exact.shape)
        bits = np.where(keep, bits, np.nan)
        if not bits.size or np.isnan(bits).all():
            continue
        inherited = _lost_operands(site, values, exact.shape)
        for k, part in enumerate((np.where(inherited, np.nan, bits), np.where(inherited, bits, np.nan))):
            if np.isnan(part).all():
                continue
            flat = int(np.nanargmax(part))
            b = float(part.reshape(-1)[flat])
            if np.isnan(worst[k]) or b > worst[k]:
                idx = np.unravel_index(flat, part.shape)
                worst[k] = b
                kinds[k] = _classify(site, idx, got[idx], exact[idx], values) if b > 2 else "rounding"
    return worst[0], kinds[0], worst[1], kinds[1]


def _cancelled_to_zero(site: Site, values: list[np.ndarray], got: np.ndarray, info: Any) -> np.ndarray:
    """Where an add/sub of operands at least ``tiny * 2**p`` in magnitude gives exactly 0.

    Two such floats that differ are at least an ulp of the smaller apart, itself a normal number; so a
    0 there means the rounded operands were equal: cancellation, not XLA's flush of a subnormal.
    """
    big = float(info.tiny) * 2.0 ** info.significand_bits
    out = np.asarray(got) == 0
    for op in site.ins:
        v = np.abs(np.asarray(values[op.index] if isinstance(op, Slot) else op[1]))
        if v.shape != out.shape and v.ndim:
            return np.zeros(out.shape, bool)
        out = out & (v >= big)
    return out


def _lost_operands(site: Site, values: list[np.ndarray], shape: tuple[int, ...]) -> np.ndarray:
    """Per output element, whether a float operand there is a subnormal (flushed to 0 by XLA) or not
    finite: its exact value was not representable, the loss at this site is inherited from the site
    that computed it. An operand of another shape (a reduction's) counts only when it holds an
    infinity, and then for every element."""
    lost = np.zeros(shape, bool)
    for op in site.ins:
        if not isinstance(op, Slot):
            continue  # a literal is exact
        v = np.asarray(values[op.index])
        if not _is_float(v.dtype):
            continue
        a = np.abs(v)
        bad = ~np.isfinite(a) | ((a > 0) & (a < float(dtype_info(component_dtype(v.dtype)).tiny)))
        if v.shape == shape:
            lost |= bad
        elif v.ndim == 0 or v.size == 1:
            lost |= bool(bad.any())
        else:
            try:  # an operand outside loops broadcasts over the iteration axes
                lost |= np.broadcast_to(bad.reshape(bad.shape + (1,) * (len(shape) - bad.ndim)), shape)
            except ValueError:
                lost |= bool((~np.isfinite(a)).any())
    return lost


def _inputs_certain(site: Site, certain: list[np.ndarray], shape: tuple[int, ...]) -> np.ndarray:
    keep = np.ones(shape, bool)
    for op in site.ins:
        if not isinstance(op, Slot):
            continue
        c = certain[op.index]
        if c.shape == shape:
            keep &= c
        elif not c.all():
            try:  # an operand outside loops broadcasts over the iteration axes
                keep &= np.broadcast_to(c.reshape(c.shape + (1,) * (len(shape) - c.ndim)), shape)
            except ValueError:
                keep &= False
    return keep


def _operand_at(site: Site, values: list[np.ndarray], idx: tuple[int, ...], shape: tuple[int, ...]
                ) -> list[float | None]:
    """The rounded exact operands at an output element (elementwise sites), else each's max |x|."""
    out: list[float | None] = []
    for op in site.ins:
        v = np.asarray(values[op.index]) if isinstance(op, Slot) else np.asarray(op[1])
        if not (_is_float(v.dtype) or v.dtype.kind in "iu"):
            out.append(None)
        elif v.shape == shape:
            out.append(float(np.abs(v[idx])) if np.iscomplexobj(v) else float(v[idx]))
        elif v.ndim == 0:
            out.append(float(np.abs(v)) if np.iscomplexobj(v) else float(v))
        else:
            out.append(None)
    return out


def _classify(site: Site, idx: tuple[Any, ...], got: Any, exact: Any, values: list[np.ndarray]) -> str:
    """The kind of loss at one element (:data:`KINDS`)."""
    if site.routine is not None:  # judged against its mathematics: what it loses is its implementation's
        e_fin = bool(np.all(np.isfinite(exact)))
        return "overflow" if e_fin and not bool(np.all(np.isfinite(got))) else "approximation"
    if np.iscomplexobj(exact):  # a complex site: its kinds are read off the moduli
        g, e = float(np.abs(np.complex128(got))), float(np.abs(np.complex128(exact)))
    else:
        g, e = float(got), float(exact)
    info = dtype_info(component_dtype(np.asarray(exact).dtype))
    tiny = float(info.tiny)
    ops = _operand_at(site, values, idx, np.shape(values[site.outs[0].index]) if site.outs[0] else ())
    known = [x for x in ops if x is not None]
    if any(not np.isfinite(x) for x in known):
        return "overflow"  # an operand's exact value rounds to +-inf
    # before the result's overflow: 0 / 0 of two flushed operands is NaN because they underflowed
    if any(0 < abs(x) < tiny for x in known):
        return "underflow"  # an operand's exact value rounds to a subnormal, which XLA flushes to 0
    if np.isfinite(e) and not np.isfinite(g):
        return "overflow"
    # The exact result sits at (or a few bits above) the subnormal range and the float one lost it.
    near_underflow = 0 < abs(e) < tiny * 2.0 ** info.significand_bits
    name = site.primitive
    if name in _ADDITIVE and len(known) == 2:
        a, b = known
        big = max(abs(a), abs(b))
        if big > 0 and abs(e) < big / 2:
            return "cancellation"
        if near_underflow and abs(g) < abs(e):
            return "underflow"
        if g in (a, b) and min(abs(a), abs(b)) > 0:
            return "absorption"
        return "rounding"
    if name in _SUMS:
        mags = [np.max(np.abs(np.asarray(values[op.index]))) for op in site.ins
                if isinstance(op, Slot) and _is_float(np.asarray(values[op.index]).dtype)]
        if mags and np.isfinite(e) and abs(e) < max(mags) / 2 and name == "reduce_sum":
            return "cancellation"
        return "rounding"
    if near_underflow and abs(g) < abs(e):
        return "underflow"
    return "near pole/zero" if name not in ("mul",) else "rounding"
