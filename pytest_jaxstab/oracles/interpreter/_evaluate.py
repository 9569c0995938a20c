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
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np
from flint import ctx as flint_ctx

from ... import _compat
from ..._dtypes import complex_dtype, component_dtype, dtype_info, is_complex_dtype, resolve_dtype
from ..._errors import ArgumentError, ArgumentTypeError
from ..._primitives import CALLS, CUSTOM_DERIVATIVES, ELEMENTWISE
from ..complex._values import acb_to_mpc, round_complex, round_mpc_to_dtype
from ..core._balls import ball_to_mpf, round_balls
from ..core._common import OracleError, Undecided, is_complex, is_float
from ..core._rounding import round_to_dtype
from ..library._inline import inline_routines
from ..library._routines import EXACT_PRIMITIVE, lookup
from ..primitives import _random
from ._interpreter import Interpreter, check_supported, to_value

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
        uncertain element, the last one tried).
    """

    values: Any
    certain: Any
    precision: int
    exact: Any
    precisions: Any = None


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
        self.precisions = [np.zeros(tuple(a.shape), dtype=np.int64) for a in avals]

    def all_decided(self) -> bool:
        return all(bool(d.all()) for d in self.decided)

    def pending(self) -> np.ndarray:
        """Flat indices undecided in any output (flat mode: all outputs have one shape)."""
        mask = np.zeros(self.decided[0].size, dtype=bool)
        for d in self.decided:
            mask |= ~d.reshape(-1)
        return np.flatnonzero(mask)

    def update(self, outs: Sequence[np.ndarray], prec: int, where: np.ndarray | None = None) -> None:
        """Takes the results of a pass: over all elements, or over the flat indices ``where``."""
        for i, (out, target) in enumerate(zip(outs, self.targets)):
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
                continue
            rounded, ok = (round_complex if is_complex(target) else round_balls)(out, target)
            todo = ~dec[idx]
            balls[idx[todo]] = out[todo]  # the latest ball, settled or not
            precs[idx[todo]] = prec
            new = todo & ok
            vals[idx[new]] = rounded[new]
            dec[idx[new]] = True


def evaluate(fn_or_jaxpr: Any, *args: Any, dtype: Any = None,
             max_precision: int = DEFAULT_MAX_PRECISION) -> OracleResult:
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

    Returns:
      An :class:`OracleResult` (``values``, ``certain``, ``precision``, ``exact``, ``precisions``),
      outputs in the function's output pytree (a flat list for a jaxpr).

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

    inputs = [to_value(a, av) for a, av in zip(flat_args, in_avals)]
    state = _Outputs(out_avals, targets)
    last = escalate(closed, inputs, state, schedule(start, int(max_precision)))
    return _result(state, last, out_tree)


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
    last = precs[0]
    for prec in precs:
        last = prec
        interp.prec = flint_ctx.prec = prec
        try:
            outs = interp.call(closed, inputs)
        except Undecided:
            continue
        state.update(outs, prec)
        if state.all_decided():
            break
    return last


def _escalate_flat(closed: Any, inputs: list[np.ndarray], shape: tuple[int, ...], state: _Outputs,
                   precs: list[int]) -> int:
    interp = Interpreter(flat=True)
    flat_inputs = [x.reshape(-1) if x.shape == shape else x for x in inputs]
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
        run(idx)
    return last


def _result(state: _Outputs, last: int, out_tree: Any) -> OracleResult:
    values, exact = [], []
    for precs, dec in zip(state.precisions, state.decided):
        precs[~dec] = last  # uncertain: the last precision tried
    for i, target in enumerate(state.targets):
        vals = state.values[i]
        if target is None:
            values.append(vals)
            exact.append(vals)
            continue
        cplx = is_complex(target)
        mids = (acb_to_mpc if cplx else ball_to_mpf)(state.balls[i])
        unsure = ~state.decided[i]
        if unsure.any():  # a best guess for the uncertain ones: their last midpoint, rounded
            vals = vals.copy()
            vals[unsure] = (round_mpc_to_dtype if cplx else round_to_dtype)(mids[unsure], target)
        values.append(vals)
        exact.append(mids)

    def tree(leaves: list[Any]) -> Any:
        return leaves if out_tree is None else jax.tree_util.tree_unflatten(out_tree, leaves)

    return OracleResult(tree(values), tree(state.decided), last, tree(exact), tree(state.precisions))
