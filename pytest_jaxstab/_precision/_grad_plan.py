"""The precision plan of a low-precision *gradient* (issue 49): ``precision_policy(..., grad=True)``.

A training step runs ``jax.grad`` of the loss in the compute dtype too. :func:`plan_gradient` judges
that gradient against the exact one (``_grad_program``), measures the loss scale float16 needs
(``_loss_scale``), finds the fewest lines to keep in ``high`` (``_grad_search``) and packages a
:class:`GradientPlan` whose ``grad_fn`` computes the gradient so: the kept lines in ``high`` in both
passes, the backward-only lines' backward operations in ``high``, the loss scale applied to the
cotangent and removed in float32, the gradient returned in float32.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .. import _compat as C
from .._check._upcast import BACKWARD, WidenedCarry, float_sites, run_upcast, widened_carries
from .._errors import ArgumentError, trace_error, tracing
from .._results import gradient_status, loss_scale_text
from ..rewrites.engine._engine import rewrite_jaxpr
from ._grad_program import GradFigures, draw_gradients, gradient_program, measure
from ._grad_search import search_gradient
from ._loss_scale import HEADROOM, ScaleRange, backward_magnitudes, scale_range
from ._plan import check_samples_and_seed, merge_options

__all__ = ["GRAD_OPTIONS", "GradientPlan", "grad_options", "make_grad_fn", "plan_gradient", "tune_gradient"]

#: The options of a gradient plan, with their defaults.
GRAD_OPTIONS: dict[str, Any] = {
    # 1e-2 norm-wise: the step's direction is then off by at most asin(0.01) = 0.6 degrees, far inside
    # the noise of a minibatch gradient; and it is 2.56 unit roundoffs of bfloat16 (2^-8): what a
    # bfloat16 gradient can be promised after its own rounding (up to 2^-9 per entry) and a few more.
    "grad_tolerance": 1e-2,
    # 32 batches: a norm-wise error aggregates every entry of a batch, so a sample says more than one
    # output element does; a kind of batch that spoils 10% of them is missed with probability
    # 0.9**32 < 4%. Each costs one exact evaluation of the backward pass.
    "samples": 32,
    "seed": 0,
    "rules": None,
    # None: measured (``_loss_scale``); else a power of two used as given.
    "loss_scale": None,
    # A quarter of the batches moved to the loss's minimum over the batch (``_grad_program.near_fit``):
    # late training, where gradients are small differences. False for a function that is not a loss.
    "near_fit": True,
}


def grad_options(options: dict[str, Any], settings: Any) -> dict[str, Any]:
    """The validated options of a gradient plan (each bad one an ArgumentError naming it)."""
    if "tolerance_ulps" in options:
        raise ArgumentError("tolerance_ulps judges the forward output in ulps; with grad=True the gradient "
                            "is judged norm-wise: use grad_tolerance= (default 1e-2)")
    out = merge_options(options, GRAD_OPTIONS, settings, caller="", where=" with grad=True")
    tol = out["grad_tolerance"]
    if isinstance(tol, bool) or not isinstance(tol, (int, float)) or not 0 < tol < 1:
        raise ArgumentError(f"grad_tolerance={tol!r}: expected a norm-wise relative error in (0, 1) "
                            "(default 1e-2)")
    check_samples_and_seed(out, "32 with grad=True")
    if not isinstance(out["near_fit"], bool):
        raise ArgumentError(f"near_fit={out['near_fit']!r}: expected True or False")
    scale = out["loss_scale"]
    if scale is not None and (isinstance(scale, bool) or not isinstance(scale, (int, float)) or not scale > 0
                              or not math.isfinite(scale) or 2.0 ** round(math.log2(scale)) != scale):
        raise ArgumentError(f"loss_scale={scale!r}: expected None (measured) or a power of two > 0")
    return out


@dataclasses.dataclass(frozen=True)
class GradientPlan:
    """Which lines of a low-precision loss to keep in ``high`` for its gradient to be accurate.

    Attributes:
        lines: the lines computed in ``high`` in both passes (``"file.py:LINE"``), in program order.
        backward_lines: the lines whose backward operations only are computed in ``high`` (their
            forward ones stay in ``dtype``).
        rewrites: ``(rule, "file.py:LINE")`` of the stability rewrites of the loss applied.
        grad_fn: the gradient under the plan, ``grad_fn(*inputs)`` -> one float32 array per
            differentiated input (``inputs`` names them); the loss scale applied and removed inside.
        loss_scale: the static power-of-two loss scale (1: none needed); ``scale_range``: the powers of
            two that keep the scaled backward pass in range on the samples (``(low, high)``, low > high
            when none does); ``upper_bound``, ``lower_bound``: what set them (the backward operation with
            the largest value; the input with the smallest gradient entry the target sees).
        original: the gradient as written in ``dtype`` at scale 1 (``GradFigures``: norm-wise relative
            error against the exact gradient); ``scaled``: as written at ``loss_scale``; ``tuned``: the plan.
        high_share: the kept operations' share of the gradient program's float work.
        dtype, high: the precisions; ``tolerance``: the norm-wise target; ``reached``: ``tuned`` within it.
        candidates_tried: programs measured; ``note``: why not reached, or about the scale.
        excused: samples on which even every line in ``high`` misses the target, excused from
            ``reached`` (the plan no worse there, within the target on every other sample).
        carries: the loop carries widened (a running gradient sum of a scan's backward pass among them).
        inputs: the names of the differentiated inputs; ``rules``: the rewrite rules ``grad_fn`` applies.
        backward_ops: per backward-only line, ``(line, (its backward operations, each once, their work))``.
        bounds: the measured range (``_loss_scale.ScaleRange``: what set each bound, as data).
    """

    lines: tuple[str, ...]
    backward_lines: tuple[str, ...]
    rewrites: tuple[tuple[str, str | None], ...]
    grad_fn: Callable[..., Any]
    loss_scale: float
    scale_range: tuple[float, float]
    upper_bound: str
    lower_bound: str
    original: GradFigures
    scaled: GradFigures
    tuned: GradFigures
    high_share: float
    dtype: str
    high: str
    tolerance: float
    reached: bool
    candidates_tried: int
    note: str = ""
    carries: tuple[WidenedCarry, ...] = ()
    inputs: tuple[str, ...] = ()
    rules: tuple[Any, ...] = ()
    backward_ops: tuple[tuple[str, tuple[tuple[str, ...], int]], ...] = ()
    excused: int = 0
    bounds: ScaleRange | None = None

    def status(self) -> str:
        """``within 0.01 on 32 samples`` (or NOT), with the samples excused (``_grad_search``) named."""
        return gradient_status(self.reached, self.tolerance, self.tuned.samples, self.excused)

    @property
    def keys(self) -> tuple[str, ...]:
        """The plan as ``_upcast`` keys (a backward-only line with its ``" (backward)"`` suffix)."""
        return (*self.lines, *(line + BACKWARD for line in self.backward_lines))

    def scale_text(self) -> str:
        """The loss scale, its range and what set it, in one line."""
        return loss_scale_text(self.loss_scale, self.scale_range, self.upper_bound, self.lower_bound)

    def __str__(self) -> str:
        rows = [f"gradient plan: {self.dtype} backward pass, {len(self.lines)} line(s) in {self.high} in "
                f"both passes, {len(self.backward_lines)} backward only ({self.high_share:.1%} of the "
                f"gradient's float work), {len(self.rewrites)} rewrite(s)"]
        return "\n".join(rows + self.detail_rows())

    def detail_rows(self) -> list[str]:
        """The plan's rows under a headline: the kept lines, carries and rewrites, then
        :meth:`figure_rows` (the plugin's failure text and notes reuse them)."""
        rows = [f"  keep in {self.high}: {line}" for line in self.lines]
        rows += [f"  keep in {self.high}, backward only: {line}" for line in self.backward_lines]
        rows += [f"  carry kept in {self.high}: {carry}" for carry in self.carries]
        rows += [f"  rewrite {rule} at {where or '<no user frame>'}" for rule, where in self.rewrites]
        return rows + self.figure_rows()

    def figure_rows(self) -> list[str]:
        """The loss scale and the figures as written, scaled and tuned, and the note (a policy's text
        lists its layers instead of the lines and takes these)."""
        rows = [f"  {self.scale_text()}", f"  original: {self.original} (as written, scale 1)"]
        if self.loss_scale != 1.0:
            rows.append(f"  scaled:   {self.scaled} (as written, scale {self.loss_scale:g})")
        rows.append(f"  tuned:    {self.tuned} ({self.status()})")
        if self.note:
            rows.append(f"  note: {self.note}")
        return rows


def _floating(aval: Any) -> bool:
    return bool(jnp.issubdtype(aval.dtype, jnp.floating))


def plan_gradient(loss: Callable[..., Any], fixed: Sequence[Any], drawn_shapes: Sequence[tuple[int, ...]], *,
                  dtype: np.dtype[Any], high: np.dtype[Any], domain: Any, names: Sequence[str],
                  options: dict[str, Any], diff: Sequence[int] | None = None) -> GradientPlan:
    """The :class:`GradientPlan` of ``loss(*fixed, *drawn)`` in ``dtype`` (``options``: validated by
    :func:`grad_options`), differentiated with respect to inputs ``diff`` (None: every floating input;
    ``names`` names them, in order), the drawn inputs of ``drawn_shapes`` drawn over ``domain``."""
    from .._check._spec import resolve_rules
    from ..oracles.library._reference import reference_primal

    fixed = [np.asarray(f) for f in fixed]
    specs = [jax.ShapeDtypeStruct(np.shape(f), np.asarray(f).dtype) for f in fixed]
    specs += [jax.ShapeDtypeStruct(s, dtype) for s in drawn_shapes]
    try:
        with tracing(loss):
            closed, _, _ = C.trace(loss, *specs)
    except Exception as exc:
        raise trace_error(loss, exc) from exc
    floating = [i for i, v in enumerate(C.invars(closed)) if _floating(C.aval(v))]
    diff = floating if diff is None else [i for i in diff if i in floating]
    judged = [j for j, v in enumerate(C.outvars(closed)) if _floating(C.aval(v))]
    if not judged:
        raise ArgumentError("grad=True: the loss has no floating output to differentiate")
    if len(names) != len(diff):
        raise ArgumentError(f"grad=True: {len(diff)} floating input(s) to differentiate, {len(names)} named")
    rules = resolve_rules(options["rules"]) if options["rules"] != () else ()
    rewritten, applied = _rewrite(closed, rules)
    grad_closed = gradient_program(closed, diff, judged)
    primal, _ = reference_primal(closed)
    reference = grad_closed if primal is closed else gradient_program(primal, diff, judged)
    fit = (closed, judged) if options["near_fit"] else None
    smp = draw_gradients(reference, fixed, dtype, drawn_shapes, domain, options["samples"], options["seed"],
                         fit)
    if smp.count == 0:
        raise ArgumentError(f"domain={domain!r}: no batch drawn there has a finite, nonzero exact gradient")
    tol = float(options["grad_tolerance"])
    mags = backward_magnitudes(grad_closed, smp)
    rng = scale_range(mags, smp, dtype, tol, options["loss_scale"])
    if options["loss_scale"] is None and rng.low > rng.high:
        # Empty: a backward value of the program as written overflows at every scale that keeps the
        # gradient normal (the 1/p of log(softmax) written out). A kept line or a rewrite may remove it,
        # and at the upper bound the cotangent itself may underflow (every gradient 0): search at the
        # lower side; the range is measured again on the plan found (below).
        info = jnp.finfo(dtype)
        low_side = min(max(1.0, rng.low * HEADROOM), 2.0 ** math.floor(math.log2(float(info.max) / 2)))
        if rng.upper_line is None:  # the cotangent itself bounds the scale: nothing a plan can keep
            why = ("no loss scale keeps every gradient entry the target sees normal with the loss's own "
                   "cotangent in range: the largest scale in range is used (the smallest entries stay "
                   "subnormal)")
        else:
            why = ("no loss scale keeps the program as written in range (its largest backward value and "
                   "its smallest gradient entry are further apart than the dtype's range): the scale is "
                   "chosen for the gradient entries, and the plan keeps what would overflow")
        rng = dataclasses.replace(rng, chosen=low_side, note=why)
    sites = float_sites(closed)
    candidates = list(dict.fromkeys(s.location for s in reversed(sites) if s.location is not None))
    with_backward = {s.location for s in float_sites(grad_closed) if s.backward and s.location is not None}
    grad_rewritten = gradient_program(rewritten, diff, judged) if applied else None
    out = search_gradient(grad_closed, grad_rewritten, candidates, with_backward, smp, dtype, high,
                          rng.chosen, tol)
    keys = out.keys
    if (keys or out.rewritten) and options["loss_scale"] is None:
        # kept operations cannot overflow, a rewritten program has its own backward values: the range again
        if out.grad_closed is not grad_closed:
            mags = backward_magnitudes(out.grad_closed, smp)
        again = scale_range(mags, smp, dtype, tol, None, keys)
        if again.chosen != rng.chosen:
            tuned, errs = measure(out.grad_closed, keys, high, smp, again.chosen, dtype)
            out.tried += 1
            # a plan reached with samples excused keeps them so: no sample worse than the target or
            # than it was at the first scale
            kept_excused = (out.excused and out.errors is not None and tuned.nonfinite == 0
                            and bool(np.all(errs <= np.maximum(tol, out.errors))))
            no_worse = out.reached is False and ((tuned.nonfinite, tuned.max_error)
                                                 <= (out.tuned.nonfinite, out.tuned.max_error))
            if tuned.within(tol) or kept_excused or no_worse:
                rng, out.tuned = again, tuned
                if tuned.within(tol):
                    out.reached, out.note, out.excused = True, "", 0
                out.scaled = measure(out.grad_closed, frozenset(), high, smp, again.chosen, dtype)[0]
                out.tried += 1
    gsites = float_sites(out.grad_closed)
    total = sum(s.work for s in gsites)
    share = sum(s.work for s in gsites if set(s.keys) & keys) / total if total else 0.0
    order = [s.location for s in sites if s.location is not None]
    bwd_ops = {line: (tuple(dict.fromkeys(s.primitive for s in gsites if s.backward and s.location == line)),
                      sum(s.work for s in gsites if s.backward and s.location == line))
               for line in out.backward}
    # every rule grad_fn applies, a derivative rule (a stable tanh') included: here it is the point
    records = [(a.rule, a.location) for a in applied] if out.rewritten else []
    upper = (f"{rng.upper_line} ({rng.upper_primitive}, up to {rng.upper_magnitude:.3g} at scale 1)"
             if rng.upper_line is not None else "the loss's own cotangent (1 at scale 1)")
    lower = (f"{names[rng.lower_input]} (smallest entry the target sees: {rng.lower_magnitude:.3g})"
             if rng.lower_input is not None else "no entry")
    note = "; ".join(x for x in (out.note, rng.note) if x)
    return GradientPlan(
        lines=tuple(x for x in dict.fromkeys(order) if x in out.lines),
        backward_lines=tuple(x for x in dict.fromkeys(order) if x in out.backward),
        rewrites=tuple(records),
        grad_fn=make_grad_fn(loss, diff, keys, high, rng.chosen, dtype, rules if out.rewritten else ()),
        rules=tuple(rules) if out.rewritten else (),
        loss_scale=float(rng.chosen), scale_range=(float(rng.low), float(rng.high)), upper_bound=upper,
        lower_bound=lower, original=out.original, scaled=out.scaled, tuned=out.tuned,
        high_share=float(share), dtype=np.dtype(dtype).name, high=np.dtype(high).name, tolerance=tol,
        reached=out.reached, candidates_tried=out.tried, note=note, excused=out.excused,
        carries=widened_carries(out.grad_closed, keys, high) if keys else (), inputs=tuple(names),
        backward_ops=tuple(bwd_ops.items()), bounds=rng)


def tune_gradient(fn: Callable[..., Any], *, shapes: Any, dtype: Any, domain: Any = None,
                  high: Any = "float32", settings: Any = None, **options: Any) -> GradientPlan:
    """The :class:`GradientPlan` of ``fn(*arrays)`` in ``dtype`` with respect to every argument, as
    ``jst.check(grad=True)`` differentiates a case: the vector-Jacobian product with a cotangent of ones
    (the gradient of the sum of its floating outputs). What the plugin's ``grad=True`` with
    ``tune_precision=True`` plans (``plugin/_precision``).

    Args:
      fn, shapes, dtype, domain: as ``jst.tune_precision``'s.
      high: the precision kept operations run in (``"float32"``).
      settings: a ``jst.settings``; its ``seed`` and ``rules`` are used.
      **options: :data:`GRAD_OPTIONS` (``near_fit`` is False unless given: ``fn`` need not be a loss).

    Returns:
      A :class:`GradientPlan`; ``grad_fn(*arrays)`` the gradients, one float32 array per argument.

    Example::

        plan = tune_gradient(lambda x: jnp.sum(jnp.exp(x)) / 2048, shapes=(2048,), dtype="float16",
                             domain=(0, 4))
        print(plan)     # the lines to keep in float32 for the gradient, the loss scale
    """
    from .._check._spec import make_case
    from ._plan import _dtypes

    low, hi = _dtypes(dtype, high)
    opts = grad_options({"near_fit": False, **options}, settings)
    case = make_case(fn, shapes, low, domain, None)
    return plan_gradient(case.call, [], list(case.shapes), dtype=low, high=hi, domain=domain,
                         names=list(case.names), options=opts)


def _rewrite(closed: Any, rules: Any) -> tuple[Any, list[Any]]:
    if not rules:
        return closed, []
    try:
        return rewrite_jaxpr(closed, rules, describe=True)
    except Exception:  # a rule's matcher that fails on the low program: the upcast plan stays sound
        return closed, []


def make_grad_fn(loss: Callable[..., Any], diff: Sequence[int] | None, keys: frozenset[str] | Sequence[str],
                 high: np.dtype[Any], scale: float, dtype: np.dtype[Any], rules: Any = ()
                 ) -> Callable[..., Any]:
    """``grad_fn(*inputs)``: the gradients of ``loss`` with respect to inputs ``diff`` (None: every
    floating input) under the plan ``keys``, the loss scale ``scale`` applied to the cotangent and
    removed in float32, one float32 array each. Floating inputs are cast to ``dtype`` (``jmp``'s
    ``cast_to_compute``); traced per call (any shape; composes with ``jit`` and ``vmap``)."""
    keys = frozenset(keys)

    def grad_fn(*inputs: Any) -> list[Any]:
        args = [jnp.asarray(x, dtype) if jnp.issubdtype(jnp.result_type(x), jnp.floating) else x
                for x in inputs]
        with tracing(loss):
            closed, _, _ = C.trace(loss, *args)
        if rules:
            closed, _ = rewrite_jaxpr(closed, rules)
        wrt = ([i for i, v in enumerate(C.invars(closed)) if _floating(C.aval(v))] if diff is None
               else list(diff))
        judged = [j for j, v in enumerate(C.outvars(closed)) if _floating(C.aval(v))]
        grad_closed = gradient_program(closed, wrt, judged)
        s = np.float32(scale)
        outs = run_upcast(grad_closed, keys, high, [*args, s], declared=False)
        return [jnp.asarray(o).astype(np.float32) / s for o in outs]

    grad_fn.__name__ = f"grad_{getattr(loss, '__name__', 'loss')}"
    return grad_fn
