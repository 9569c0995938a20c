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
  finite. Decided per element for elementwise primitives (``jnp.where`` masks, broadcasting scalars)
  and reductions over axes (an overflowing ``sum`` next to an inherited Inf in another row is found);
  for the others (``dot_general``, ``cumsum``, ``sort``...) the output counts as born there only when
  every operand is entirely finite (conservative: never a false origin).
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
* **Which one.** Which origins' non-finite values reach each element of the function's result is
  tracked per element (``_nan_walk``: through elementwise primitives and ``select_n``, slices, gathers,
  scatters, concatenation, padding, broadcasting and reductions; per array through the rest).
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

from collections.abc import Callable
from typing import Any, Literal, overload

import jax
import jax.numpy as jnp

from .. import _compat as C
from .._errors import ArgumentTypeError, require_callable, tracing
from ._nan_records import NanOrigin, OperandSummary
from ._nan_walk import Ctx, Walker, every_finite

__all__ = ["NanOrigin", "OperandSummary", "find_nan_origin"]


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
    require_callable("jst.find_nan_origin", fn)
    leaves = jax.tree_util.tree_leaves(args)
    if any(C.is_tracer(x) for x in leaves):
        raise ArgumentTypeError("find_nan_origin evaluates concrete inputs: call it outside jax.jit/grad/vmap"
                                " (pass the transformed function, e.g. find_nan_origin(jax.grad(f), x)).")
    with tracing(fn):  # a tracing mistake reads as in jst.check: the user's line, JAX's reason, a hint
        closed, _, _ = C.trace(fn, *args)
    invals = [jnp.asarray(x) for x in leaves]
    if not every and every_finite(jax.jit(C.as_fun(closed))(*invals)):
        return None  # fast path: no origin can reach a finite result
    walker = Walker(exhaustive=every)
    _, out_taints = walker.run(closed, invals, [None] * len(invals), Ctx((), ()))
    reached = frozenset().union(*(walker.keys(t) for t in out_taints))
    origins = walker.reaching(reached)
    if every:
        return origins
    return next((o for o in origins if o.reaches_output), None)
