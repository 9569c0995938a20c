"""``evaluate``: the interpreter run at rising precisions until every output element is proven.

Escalation (as Rival does it for Herbie): each pass evaluates at one working precision; an element is
final as soon as its ball rounds to one float of the target dtype (``_balls``). Precisions start a little
above the widest significand involved (``significand + 32`` bits: 56 for float32, 85 for float64) and
double up to ``max_precision``. Only what is still undecided is evaluated again:

* an *elementwise* program (every equation elementwise, every array of one shape, scalars broadcast:
  most tested functions) runs on the undecided elements alone, as a flat vector. An element's ball
  depends only on its own inputs and the precision, so its answer is the same in any batch, alone too.
  A decision that cannot be made (``Undecided``) in a pass splits the pass in halves down to single
  elements, so one hard element does not hold the others back;
* any other program (reductions, scans, loops, linear algebra) is evaluated whole at the next
  precision, and only its undecided elements take the new results.

Elements still undecided at ``max_precision`` are *uncertain*. Integer and boolean outputs are exact
once a pass completes.

Before the first pass, the fast path (``oracles/fast``) evaluates the program once over float64
intervals and decides every element whose interval already rounds to one float (``precisions`` 53);
the Arb passes then run only if something is left, and only the elements left take their results.
``OracleResult.decided_fast`` and ``escalated`` count the two. For a program that is not elementwise,
the escalation starts with the mixed pass (``_mixed``): the same precisions, but only the elements the
fast walk could not enclose tightly are recomputed in Arb, the rest are taken from its intervals as
balls; the whole-program passes run after it only for what it leaves.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np
from flint import ctx as flint_ctx

from ... import _compat
from ..._dtypes import complex_dtype, component_dtype, dtype_info, is_complex_dtype, resolve_dtype
from ..._errors import ArgumentError, ArgumentTypeError
from ..._primitives import CALLS, CUSTOM_DERIVATIVES, ELEMENTWISE
from ..complex._values import acb_to_mpc, round_complex, round_mpc_to_dtype
from ..core._balls import ball_to_mpf, floats_to_mpf, round_balls
from ..core._common import OracleError, Undecided, is_complex, is_float
from ..core._rounding import round_to_dtype
from ..fast import FAST_PRECISION, Tape
from ..fast import Exact as FastExact
from ..fast import decide as fast_decide
from ..fast import run as fast_run
from ..library._inline import inline_routines
from ..library._routines import EXACT_PRIMITIVE, lookup
from ..primitives import _random
from ._demand import TIGHT_MARGIN, operations
from ._interpreter import Interpreter, check_supported, to_value
from ._mixed import escalate_mixed
from ._rows import batched, masked

__all__ = ["DEFAULT_MAX_PRECISION", "OracleResult", "evaluate"]

#: The default cap on the working precision, in bits. It covers every cancellation between two float64
#: values (their exponents span 2,098 bits) with room to spare; deeper ones are reported uncertain.
DEFAULT_MAX_PRECISION = 4096
#: Bits above the widest significand at which escalation starts.
START_MARGIN_BITS = 32


@dataclasses.dataclass(frozen=True)
class OracleResult:
    """The exact results of a program, correctly rounded to a float dtype, with proof status.

    Attributes:
      values: numpy arrays (in the pytree of the function's output; a flat list for a jaxpr): float
        outputs are the exact results correctly rounded to the target dtype (NaN where the real result
        provably does not exist, +-Inf where it overflows the dtype); integer and boolean outputs as
        computed. Where an element is uncertain, its value is the rounding of the last ball's midpoint
        (a best guess, not a proof).
      certain: boolean arrays alike: True where the value is proven (the element's ball rounded to that
        one float, or the integer result came out of a fully decided evaluation); False where it was
        still undecided at ``max_precision``.
      precision: the highest working precision used, in bits.
      exact: the unrounded values as ``mpmath.mpf`` (the midpoint of each element's final ball; NaN
        where there is no real value), integer and boolean outputs as numpy arrays, same structure.
      precisions: int arrays alike: the working precision at which each element was settled (for an
        uncertain element, the last one tried); 53 where the fast path settled it.
      decided_fast: how many output elements the fast path (float64 intervals, ``oracles/fast``)
        decided.
      escalated: how many output elements went to the Arb escalation (all of them where the fast path
        does not cover the program or was turned off).
      decided_mixed: how many of the escalated elements the mixed pass decided (``_mixed``: only the
        elements the fast walk could not enclose tightly recomputed in Arb).
      recomputed: the element operations computed in Arb, over every pass (an elementwise result
        counts 1, a reduced or dot-product result its number of terms; a whole-program pass all of the
        program's, a row-separable one its pending rows' share, a flat one its elements').
      operations: the element operations of one whole walk of the program, counted alike
        (``recomputed_share`` divides by it).
    """

    values: Any
    certain: Any
    precision: int
    # ``exact`` is built on first use (mpmath values cost about 1.5 µs an element, and a check never
    # reads them): this is what builds it.
    exact_of: Callable[[], Any] = dataclasses.field(repr=False, compare=False)
    precisions: Any = None
    decided_fast: int = 0
    escalated: int = 0
    decided_mixed: int = 0
    recomputed: int = 0
    operations: int = 0

    @functools.cached_property
    def exact(self) -> Any:
        """The unrounded values as ``mpmath.mpf`` (see the class docstring)."""
        return self.exact_of()

    @property
    def escalated_share(self) -> float:
        """The share of output elements the fast path left to the Arb escalation (0 for no elements)."""
        total = self.decided_fast + self.escalated
        return self.escalated / total if total else 0.0

    @property
    def recomputed_share(self) -> float:
        """The Arb escalation's element operations as a share of one whole walk's (``recomputed`` over
        ``operations``): 0 where the fast path decided everything, 1 for one whole-program pass, more
        for several; the mixed pass keeps it to the elements that needed it."""
        return self.recomputed / self.operations if self.operations else 0.0


# ----------------------------------------------------------------------------------- preparation
def _is_jaxpr(x: Any) -> bool:
    return hasattr(x, "eqns") or hasattr(getattr(x, "jaxpr", None), "eqns")


def _prepare(fn_or_jaxpr: Any, args: tuple[Any, ...]) -> tuple[Any, list[Any], Any]:
    if _is_jaxpr(fn_or_jaxpr):
        closed = _compat.as_closed(fn_or_jaxpr)
        n = len(_compat.invars(closed))
        if len(args) != n:
            raise ArgumentTypeError(f"evaluate: this jaxpr takes {n} flat arguments, got {len(args)}")
        return closed, list(args), None
    if not callable(fn_or_jaxpr):
        raise ArgumentTypeError(f"evaluate: expected a function or a closed jaxpr, got "
                                f"{type(fn_or_jaxpr).__name__}")
    closed, _, out_tree = _compat.trace(fn_or_jaxpr, *args)
    return closed, jax.tree_util.tree_leaves((args, {})), out_tree


def schedule(start: int, max_precision: int) -> list[int]:
    """Working precisions: ``start``, doubling, the last one capped at ``max_precision``."""
    precs = [min(start, max_precision)]
    while precs[-1] < max_precision:
        precs.append(min(2 * precs[-1], max_precision))
    return precs


def _significand_bits(dtype: Any) -> int:
    if is_complex_dtype(dtype):
        dtype = component_dtype(dtype)
    try:
        return dtype_info(dtype).significand_bits
    except ValueError:  # a float dtype the fuzzer does not draw (float8, ...): judge it as float64
        return 53


def _flat_shape(closed: Any) -> tuple[int, ...] | None:
    """The one array shape of an elementwise program, or None when it is not one (or is all scalars)."""
    shapes: set[tuple[int, ...]] = set()

    def visit(c: Any, top: bool) -> bool:
        if any(tuple(_compat.aval(v).shape) != () for v in _compat.constvars(c)):
            return False
        for v in (*_compat.invars(c), *_compat.outvars(c)):
            if not _compat.is_literal(v):
                shapes.add(tuple(_compat.aval(v).shape))
        for eqn in _compat.eqns(c):
            name = _compat.primitive_name(eqn)
            for v in eqn.outvars:
                shapes.add(tuple(_compat.aval(v).shape))
            if name == "broadcast_in_dim":
                if tuple(_compat.aval(eqn.invars[0]).shape) != () or len(eqn.invars) != 1:
                    return False
            elif (name in CALLS or name in CUSTOM_DERIVATIVES or name == EXACT_PRIMITIVE) \
                    and lookup(eqn) is not None:
                continue  # a library routine: elementwise by contract (``_library``)
            elif name in CALLS or name in CUSTOM_DERIVATIVES:
                subs = ([_compat.custom_call_parts(eqn)[0]] if name in CUSTOM_DERIVATIVES
                        else [sub for _, sub in _compat.subjaxprs(eqn)])
                if not all(visit(s, False) for s in subs):
                    return False
            elif name not in ELEMENTWISE:
                return False
        return True

    if not visit(closed, True):
        return None
    shapes.discard(())
    if len(shapes) != 1:
        return None
    (shape,) = shapes
    if any(tuple(_compat.aval(v).shape) != shape for v in _compat.outvars(closed)):
        return None
    return shape


# -------------------------------------------------------------------------------------- escalation
class _Outputs:
    """The per-element state of every output across passes."""

    def __init__(self, avals: Sequence[Any], targets: Sequence[np.dtype | None]) -> None:
        self.targets = list(targets)
        self.values = [np.zeros(tuple(a.shape), dtype=t if t is not None else a.dtype)
                       for a, t in zip(avals, targets)]
        self.decided = [np.zeros(tuple(a.shape), dtype=bool) for a in avals]
        self.balls = [np.full(tuple(a.shape), None, dtype=object) for a in avals]
        # Exact midpoints of the elements the fast path decided (float64; NaN elsewhere).
        self.mids: list[np.ndarray | None] = [None for _ in avals]
        self.precisions = [np.zeros(tuple(a.shape), dtype=np.int64) for a in avals]
        #: Element operations computed in Arb so far (``OracleResult.recomputed``).
        self.recomputed = 0

    def all_decided(self) -> bool:
        return all(bool(d.all()) for d in self.decided)

    def pending(self) -> np.ndarray:
        """Flat indices undecided in any output (flat mode: all outputs have one shape)."""
        mask = np.zeros(self.decided[0].size, dtype=bool)
        for d in self.decided:
            mask |= ~d.reshape(-1)
        return np.flatnonzero(mask)

    def take(self, i: int, values: np.ndarray, decided: np.ndarray, mids: np.ndarray | None,
             prec: int) -> int:
        """Takes output ``i``'s elements ``decided`` elsewhere (the fast path, with their float64
        midpoints ``mids`` for ``exact``); returns how many."""
        new = np.asarray(decided, dtype=bool) & ~self.decided[i]
        self.values[i][new] = np.asarray(values)[new]
        if mids is not None:
            held = self.mids[i]
            if held is None:
                held = self.mids[i] = np.full(self.decided[i].shape, np.nan)
            held[new] = np.asarray(mids)[new]
        self.precisions[i][new] = prec
        self.decided[i][new] = True
        return int(new.sum())

    def update(self, outs: Sequence[np.ndarray], prec: int, where: np.ndarray | None = None) -> None:
        """Takes the results of a pass: over all elements, or over the flat indices ``where``."""
        for i, out in enumerate(outs):
            self.update_one(i, out, prec, where)

    def update_one(self, i: int, out: np.ndarray, prec: int, where: np.ndarray | None = None) -> None:
        """Takes output ``i``'s results of a pass: over all its elements, or its flat indices ``where``."""
        target = self.targets[i]
        dec, vals, balls, precs = (a.reshape(-1) for a in (self.decided[i], self.values[i], self.balls[i],
                                                           self.precisions[i]))
        idx = np.arange(dec.size) if where is None else where
        out = np.broadcast_to(np.asarray(out), (len(idx),) if where is not None
                              else self.decided[i].shape).reshape(-1)
        if target is None:  # integers and booleans: exact once the pass completed
            new = ~dec[idx]
            vals[idx[new]] = out[new]
            dec[idx[new]] = True
            precs[idx[new]] = prec
            return
        todo = ~dec[idx]
        if not todo.any():
            return
        # only what is still open is rounded (a pass of a whole program recomputes every element)
        rounded, ok = (round_complex if is_complex(target) else round_balls)(out[todo], target)
        at = idx[todo]
        balls[at] = out[todo]  # the latest ball, settled or not
        precs[at] = prec
        vals[at[ok]] = np.asarray(rounded)[ok]
        dec[at[ok]] = True


def evaluate(fn_or_jaxpr: Any, *args: Any, dtype: Any = None,
             max_precision: int = DEFAULT_MAX_PRECISION, fast: bool = True,
             within: tuple[float, Any] | None = None, mixed: bool = True) -> OracleResult:
    """The exact results of a JAX function, correctly rounded to a float dtype, each one proven.

    Interprets the function's jaxpr (sub-jaxprs included: jit, custom_jvp/vjp, scan, while, cond) in
    Arb ball arithmetic, so the result is the real-number function the program writes down, free of
    the roundings and overflows of its dtype; raises the working precision, element by element, until
    each output's ball rounds to a single float (see the package docstring).

    Args:
      fn_or_jaxpr: a Python function of arrays (traced with ``jax.make_jaxpr``; pytrees of arrays in
        and out are fine), or a closed jaxpr, whose arguments are then its flat inputs.
      *args: the inputs: float16/bfloat16/float32/float64 or complex64/complex128 arrays or scalars
        (numpy or JAX), integer or boolean arrays where the function takes them. Their float values are
        taken exactly (complex values as Arb complex balls, ``_complex``).
      dtype: the dtype to round float outputs to (a complex output: the complex dtype of that
        precision); None rounds each to its own dtype.
      max_precision: the most bits of working precision to use (at least 16); elements not settled
        there are uncertain.
      fast: run the float64 interval pass first (``oracles/fast``; only where ``max_precision`` is at
        least 53 and some output is narrower than float64 or an integer). False: every element goes
        through the Arb escalation.
      within: ``(ulps, dtype)``: not a correctly rounded result but one within ``ulps`` units of
        ``dtype``'s spacing at the value (never below its smallest normal's) of the exact value: with
        ``dtype="float64"``, the fast path's float64 midpoint wherever its enclosure's radius is that
        small, the correctly rounded value elsewhere; ``certain`` then says the value is that near. For
        figures that count a judged dtype's ulps and need the exact value to a fraction of one, not its
        rounding (the conditioning's moved results, ``_check/_conditioning``).
      mixed: start the escalation of a program that is not elementwise with the mixed pass
        (``_mixed``: only what the fast walk could not enclose tightly is recomputed in Arb; needs
        ``fast``, and float targets narrower than float64). False: whole-program passes only. Either
        way every certain value is the correctly rounded exact one.

    Returns:
      An :class:`OracleResult` (``values``, ``certain``, ``precision``, ``exact``, ``precisions``,
      ``decided_fast``, ``escalated``), outputs in the function's output pytree (a flat list for a
      jaxpr).

    Raises:
      UnsupportedPrimitive: the program uses a primitive the oracle cannot evaluate (raised before any
        evaluation, naming the primitive and the user's ``file:line``).
      OracleError: a while loop that does not end in the exact evaluation.

    Example:
      >>> x = np.float32(1e8)
      >>> evaluate(lambda x: (x + 1) - x, x).values  # float32 arithmetic gives 0
      array(1., dtype=float32)
    """
    if int(max_precision) < 16:
        raise ArgumentError(f"max_precision={max_precision!r}: expected at least 16 bits")
    closed, flat_args, out_tree = _prepare(fn_or_jaxpr, args)
    closed = inline_routines(closed)  # routines JAX inlines on this version (``library/_inline``)
    check_supported(closed)
    in_avals = [_compat.aval(v) for v in _compat.invars(closed)]
    out_avals = [_compat.aval(v) for v in _compat.outvars(closed)]
    if any(_random.is_key(a.dtype) for a in out_avals):
        raise OracleError("the function returns a PRNG key: the oracle returns values, not keys; return "
                          "only the arrays to evaluate")
    target = None if dtype is None else resolve_dtype(dtype, complex_ok=True)
    targets = [_target(target, a.dtype) for a in out_avals]
    widths = [_significand_bits(a.dtype) for a in in_avals if is_float(a.dtype)]
    widths += [_significand_bits(t) for t in targets if t is not None]
    start = max(widths, default=24) + START_MARGIN_BITS

    state = _Outputs(out_avals, targets)
    fast_count = 0
    tape = Tape() if within is None and mixed else None
    if fast and int(max_precision) >= FAST_PRECISION:
        fast_count, covered = _fast_pass(closed, flat_args, state, within, tape)
        tape = tape if covered else None
    last = highest = FAST_PRECISION
    decided_mixed = 0
    if not state.all_decided():
        precs = schedule(start, int(max_precision))
        tight_bits = _tight_bits(state.targets)
        leftover = True
        if tape is not None and tight_bits is not None and _flat_shape(closed) is None:
            pass_ = escalate_mixed(closed, tape, flat_args, state, precs, tight_bits)
            last = highest = pass_.last
            leftover, decided_mixed = pass_.leftover, pass_.decided
            state.recomputed += pass_.operations
        if leftover and not state.all_decided():
            inputs = _needed_inputs(closed, flat_args, in_avals, state)
            last = escalate(closed, inputs, state, precs)
            highest = max(highest, last)
    total = sum(int(d.size) for d in state.decided)
    return _result(state, last, out_tree, fast_count, total - fast_count, decided_mixed=decided_mixed,
                   highest=highest, operations=operations(closed))


def _tight_bits(targets: Sequence[np.dtype | None]) -> int | None:
    """How tight a fast enclosure must be for the mixed pass to take it (``_demand``), or None where it
    does not run: a float64 (or complex) target needs more than float64 intervals give."""
    if any(t is not None and is_complex(t) for t in targets):
        return None
    widest = max((_significand_bits(t) for t in targets if t is not None), default=24)
    bits = widest + TIGHT_MARGIN
    return bits if bits < FAST_PRECISION else None


def _needed_inputs(closed: Any, flat_args: list[Any], in_avals: list[Any], state: _Outputs) -> list[Any]:
    """The inputs as interpreter values (``to_value``), only the elements the passes will read: the
    pending elements of an elementwise program, the pending rows of a row-separable one (``_rows``);
    the rest ``None``, never read for an elementwise program and left out of a row-separable one's."""
    shape = _flat_shape(closed) if state.targets else None
    rows = None if shape is not None else batched(closed)
    pending: np.ndarray | None = None
    if shape is not None:
        pending = np.zeros(int(np.prod(shape, dtype=np.int64)), dtype=bool)
        pending[state.pending()] = True
        pending = pending.reshape(shape)
    elif rows is not None:
        pending = _row_mask(rows, state)
    out = []
    for j, (a, av) in enumerate(zip(flat_args, in_avals)):
        held = is_float(av.dtype) or is_complex(av.dtype)
        part = (shape is not None and tuple(av.shape) == shape) or (rows is not None and rows[1][j])
        if pending is None or pending.all() or not held or not part:
            out.append(to_value(a, av))
            continue
        value = np.full(tuple(av.shape), None, dtype=object)
        value[pending] = to_value(np.asarray(a)[pending], av)
        out.append(value)
    return out


def _fast_pass(closed: Any, flat_args: list[Any], state: _Outputs, within: tuple[float, Any] | None = None,
               tape: Tape | None = None) -> tuple[int, bool]:
    """The fast path's decided elements into ``state`` (``oracles/fast``): ``(how many, whether the walk
    covered the program)``, its walk kept on ``tape`` if given. Not run where every output is a float64
    (it could settle only exact results there: not worth a walk, and the check's conditioning asks for
    float64 once per input element) or a complex value."""
    if any(t is not None and is_complex(t) for t in state.targets):
        return 0, False
    if within is None and all(t is not None and _significand_bits(t) >= FAST_PRECISION
                              for t in state.targets):
        return 0, False
    try:
        outs = fast_run(closed, flat_args, tape)
    except Exception:  # a gap of the fast path must never cost a result: the Arb path is the reference
        outs = None
    if outs is None:
        return 0, False
    count = 0
    for i, (out, target) in enumerate(zip(outs, state.targets)):
        if isinstance(out, FastExact):
            count += state.take(i, out.value, ~out.mask(), None, FAST_PRECISION)
        elif target is not None:
            rounded, decided = fast_decide(out, target)
            if within is not None:  # near enough (``evaluate``'s ``within``), rounded or not
                info = dtype_info(within[1])
                with np.errstate(all="ignore"):
                    top = np.floor(np.log2(np.maximum(np.abs(out.mid), float(info.tiny))))
                    spacing = np.exp2(top) * float(info.eps)
                    close = np.isfinite(out.mid) & (out.rad <= float(within[0]) * spacing)
                rounded = np.where(close & ~decided, out.mid.astype(target), rounded)
                decided = decided | close
            count += state.take(i, rounded, decided, out.mid, FAST_PRECISION)
    return count, True


def escalate(closed: Any, inputs: list[np.ndarray], state: _Outputs, precs: list[int]) -> int:
    """Evaluates ``closed`` on ``inputs`` at the precisions ``precs`` until ``state`` is decided
    (per element where the program is element-wise, else whole); returns the last precision used.
    Arb's working precision is restored afterwards."""
    shape = _flat_shape(closed) if state.targets else None
    saved = flint_ctx.prec
    try:
        if shape is not None:
            return _escalate_flat(closed, inputs, shape, state, precs)
        return _escalate_whole(closed, inputs, state, precs)
    finally:
        flint_ctx.prec = saved


def _target(target: np.dtype | None, dtype: Any) -> np.dtype | None:
    """What an output of ``dtype`` rounds to: ``target``'s precision, complex for a complex output."""
    if is_complex(dtype):
        return np.dtype(dtype) if target is None else complex_dtype(component_dtype(target))
    if is_float(dtype):
        return np.dtype(dtype) if target is None else component_dtype(target)
    return None


def _escalate_whole(closed: Any, inputs: list[np.ndarray], state: _Outputs, precs: list[int]) -> int:
    interp = Interpreter()
    rows = batched(closed)  # row-separable: a pass leaves out the rows already decided (``_rows``)
    walk = operations(closed)
    last = precs[0]
    for prec in precs:
        last = prec
        interp.prec = flint_ctx.prec = prec
        args = inputs if rows is None else _pending_rows(inputs, rows, state)
        share = 1.0 if rows is None else float(_row_mask(rows, state).mean())
        state.recomputed += round(walk * share)
        try:
            outs = interp.call(closed, args)
        except Undecided:
            continue
        state.update(outs, prec)
        if state.all_decided():
            break
    return last


def _pending_rows(inputs: list[np.ndarray], rows: tuple[int, list[bool], list[bool]],
                  state: _Outputs) -> list[np.ndarray]:
    """The inputs of a row-separable program with the rows whose batched outputs are all decided left
    out (``_rows.masked``)."""
    pending = _row_mask(rows, state)
    return inputs if pending.all() else masked(inputs, rows[0], rows[1], pending)


def _row_mask(rows: tuple[int, list[bool], list[bool]], state: _Outputs) -> np.ndarray:
    """The rows of a row-separable program with an undecided element in a batched output."""
    n, _, which_out = rows
    pending = np.zeros(n, dtype=bool)
    for d, b in zip(state.decided, which_out):
        if b:
            pending |= ~d.reshape(n, -1).all(axis=1)
    return pending


def _escalate_flat(closed: Any, inputs: list[np.ndarray], shape: tuple[int, ...], state: _Outputs,
                   precs: list[int]) -> int:
    interp = Interpreter(flat=True)
    flat_inputs = [x.reshape(-1) if x.shape == shape else x for x in inputs]
    per_element = operations(closed) / max(int(np.prod(shape, dtype=np.int64)), 1)
    last = precs[0]

    def run(idx: np.ndarray) -> None:
        try:
            outs = interp.call(closed, [x[idx] if x.ndim else x for x in flat_inputs])
        except Undecided:
            if len(idx) > 1:
                half = len(idx) // 2
                run(idx[:half])
                run(idx[half:])
            return
        state.update(outs, interp.prec, idx)

    for prec in precs:
        idx = state.pending()
        if not len(idx):
            break
        last = prec
        interp.prec = flint_ctx.prec = prec
        state.recomputed += round(per_element * len(idx))
        run(idx)
    return last


def _midpoints(balls: np.ndarray, fast: np.ndarray) -> np.ndarray:
    """``ball_to_mpf`` of the balls, the fast path's float64 midpoints (exact) where it decided."""
    out = np.empty(balls.shape, dtype=object)
    held = np.not_equal(balls, None)
    out[held] = ball_to_mpf(balls[held])
    out[~held] = floats_to_mpf(fast[~held])
    return out


def _result(state: _Outputs, last: int, out_tree: Any, decided_fast: int = 0,
            escalated: int | None = None, *, decided_mixed: int = 0, highest: int | None = None,
            operations: int = 0) -> OracleResult:
    values = []
    for precs, dec in zip(state.precisions, state.decided):
        precs[~dec] = last  # uncertain: the last precision tried
    for i, target in enumerate(state.targets):
        vals = state.values[i]
        unsure = ~state.decided[i]
        if target is not None and unsure.any():  # a best guess for the uncertain: last midpoint, rounded
            cplx = is_complex(target)
            mids = (acb_to_mpc if cplx else ball_to_mpf)(state.balls[i][unsure])
            vals = vals.copy()
            vals[unsure] = (round_mpc_to_dtype if cplx else round_to_dtype)(mids, target)
        values.append(vals)

    def tree(leaves: list[Any]) -> Any:
        return leaves if out_tree is None else jax.tree_util.tree_unflatten(out_tree, leaves)

    def exact() -> Any:
        out = []
        for i, target in enumerate(state.targets):
            if target is None:
                out.append(state.values[i])
                continue
            fast = state.mids[i]
            out.append((acb_to_mpc if is_complex(target) else ball_to_mpf)(state.balls[i]) if fast is None
                       else _midpoints(state.balls[i], fast))
        return tree(out)

    if escalated is None:
        escalated = sum(int(d.size) for d in state.decided)
    return OracleResult(tree(values), tree(state.decided), last if highest is None else highest, exact,
                        tree(state.precisions), decided_fast, escalated, decided_mixed, state.recomputed,
                        operations)
