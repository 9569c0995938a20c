"""The gradient a low-precision training step computes, its exact value, and the error between them.

A loss is a program ``closed`` whose inputs are the *fixed* ones (a model's parameters, cast to the
compute dtype as ``jmp.Policy.cast_to_compute`` does: given, not drawn) followed by the *drawn* ones (the
batch). Its gradient program (:func:`gradient_program`) is JAX's reverse mode of it, traced: inputs
``(*inputs, scale)``, outputs the gradients of the differentiated inputs, the cotangent of every judged
output seeded with ``scale`` (a loss scale applied as ``jmp`` applies it: the backward pass computes
``scale * gradient``) in the output's dtype. Its equations keep the user's lines (the backward ones
under JAX's ``transpose``), so ``_upcast`` raises them by plan key.

The exact gradient is the oracle's evaluation of the *reference* gradient program: the same reverse
mode of the loss with library routines replaced by their exact definitions
(``oracles/library/_reference``), as ``jst.check(grad=True)`` judges a gradient
(``_check/_gradient``): automatic differentiation over the reals is the real derivative. It is rounded
to float32 (one rounding, 2^-24 relative, far below any target judged here).

The error of a sample (:func:`grad_figures`) is norm-wise: ``||g - g*||_2 / ||g*||_2`` over every judged
entry of every differentiated input, infinite where an entry is not finite while its exact value is. A
sample is drawn only where the exact gradient is finite and not zero somewhere (a relative error needs a
norm).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .. import _compat as C
from .._check._upcast import run_upcast
from .._results._plans import GradErrorFigures as GradFigures
from ..oracles import evaluate
from ._search import domain_bounds, drawn_inputs, jit_rounds

__all__ = ["KINDS", "GradFigures", "GradSamples", "draw_gradients", "grad_figures", "gradient_program",
           "low_gradients", "near_fit",
           "measure", "sample_errors"]

#: Fresh draws tried per sample wanted before giving up.
_TRIES_PER_SAMPLE = 4


def gradient_program(closed: Any, diff: Sequence[int], judged: Sequence[int]) -> Any:
    """The traced reverse mode of ``closed``: inputs ``(*closed's inputs, scale)`` (``scale`` float32),
    outputs the gradients of inputs ``diff`` of the sum of outputs ``judged``, each output's cotangent
    ``scale`` in its own dtype (``scale * gradient``: a loss scale applied in the backward pass)."""
    fun = C.as_fun(closed)
    avals = [C.aval(v) for v in C.invars(closed)]
    diff = list(diff)

    def gradient(*args: Any) -> list[Any]:
        *xs, scale = args

        def loss(*d: Any) -> list[Any]:
            full = list(xs)
            for k, i in enumerate(diff):
                full[i] = d[k]
            outs = fun(*full)
            return [outs[j] for j in judged]

        outs, vjp = jax.vjp(loss, *[xs[i] for i in diff])
        seeds = [jnp.broadcast_to(scale.astype(o.dtype), jnp.shape(o)) for o in outs]
        return list(vjp(seeds))

    specs = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in avals]
    closed_grad, _, _ = C.trace(gradient, *specs, jax.ShapeDtypeStruct((), np.float32))
    return closed_grad


@dataclasses.dataclass(frozen=True)
class GradSamples:
    """The fixed inputs, the drawn ones stacked (one leading axis per sample), and per sample the exact
    gradient (float32, one array per differentiated input), which of its entries are judged (settled
    by the oracle, finite) and how it was drawn (:data:`KINDS`)."""

    fixed: list[np.ndarray]
    drawn: list[np.ndarray]
    exact: list[list[np.ndarray]]
    judged: list[list[np.ndarray]]
    kinds: list[str] = dataclasses.field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.exact)


#: How a batch was drawn: ``"value"`` as a model's data looks (uniform over a bounded domain);
#: ``"fit"`` such a batch moved to the loss's minimum over the batch (:func:`near_fit`); ``"check"``
#: the check's draws (bit patterns and classes, where formulas break).
KINDS = ("value", "fit", "check")
#: Steps of the descent towards the fit (each halves or doubles its step; 200 reach a least-squares fit
#: of the held-out regressions to the float32 rounding of its targets).
_FIT_STEPS = 200


def near_fit(closed: Any, fixed: Sequence[np.ndarray], start: Sequence[np.ndarray], judged: Sequence[int],
             bounds: Sequence[tuple[float, float]], dtype: np.dtype[Any]) -> tuple[np.ndarray, ...]:
    """``start`` moved to where the loss is smallest over the batch, for these parameters, then rounded
    to ``dtype``: a batch the model fits, as late training meets it (a regression's targets next to its
    predictions, a classifier's labels next to its probabilities), where the gradient is a small
    difference of large terms: the regime a low-precision gradient loses first.

    Projected gradient descent in float32 (every operation of the loss raised, ``_upcast``) on the
    drawn leaves, each step doubled after a decrease and halved otherwise, kept inside the domain's
    bounds; integer leaves stay as drawn."""
    f32 = np.dtype(np.float32)
    floats = [k for k, a in enumerate(start) if jnp.issubdtype(a.dtype, jnp.floating)]
    nf = len(fixed)

    def value(moving: Sequence[Any]) -> Any:
        args = [*fixed, *start]
        for k, a in zip(floats, moving):
            args[nf + k] = a
        outs = run_upcast(closed, None, f32, args, declared=False)
        return sum(jnp.sum(jnp.asarray(outs[j], np.float32)) for j in judged)

    step = jax.jit(jax.value_and_grad(value))
    lo = [np.float32(max(bounds[k][0], -3e38)) for k in floats]
    hi = [np.float32(min(bounds[k][1], 3e38)) for k in floats]
    x = [np.asarray(start[k], np.float32) for k in floats]
    f, g = step(x)
    t = 1.0
    for _ in range(_FIT_STEPS):
        if not np.isfinite(float(f)) or t < 1e-30:
            break
        trial = [np.clip(np.asarray(a) - t * np.asarray(d), a_lo, a_hi)
                 for a, d, a_lo, a_hi in zip(x, g, lo, hi)]
        f_new, g_new = step(trial)
        if np.isfinite(float(f_new)) and float(f_new) < float(f):
            x, f, g, t = trial, f_new, g_new, t * 2.0
        else:
            t *= 0.5
    out = list(start)
    for k, a in zip(floats, x):
        out[k] = np.asarray(a, dtype)
    return tuple(out)


def draw_gradients(reference: Any, fixed: Sequence[np.ndarray], dtype: np.dtype[Any],
                   shapes: Sequence[tuple[int, ...]], domain: Any, n: int, seed: int,
                   fit: Any | None = None) -> GradSamples:
    """``n`` draws of the drawn inputs with the exact gradient of each (the oracle on the ``reference``
    gradient program, scale 1): half by value and half the check's (``_search.drawn_inputs``); with
    ``fit`` (the loss program and its judged outputs), half of the by-value ones moved to the fit
    (:func:`near_fit`)."""
    drawn: list[tuple[np.ndarray, ...]] = []
    exact: list[list[np.ndarray]] = []
    judged: list[list[np.ndarray]] = []
    kinds: list[str] = []
    one = np.float32(1.0)
    bounds, accepts = domain_bounds(dtype, shapes, domain)
    for slot, sample in drawn_inputs(dtype, shapes, domain, n * _TRIES_PER_SAMPLE, seed,
                                     by_value=frozenset({0, 1})):
        if len(drawn) >= n:
            break
        kind = "check" if slot < 0 else "value"
        if fit is not None and slot == 1:
            sample = near_fit(fit[0], fixed, sample, fit[1], bounds, dtype)
            if not accepts(sample):
                continue
            kind = "fit"
        out = evaluate(reference, *fixed, *sample, one, dtype=np.float32)
        values = [np.asarray(v, np.float32) for v in out.values]
        certain = [np.broadcast_to(np.asarray(c, bool), v.shape) for c, v in zip(out.certain, values)]
        if any((c & ~np.isfinite(v)).any() for c, v in zip(certain, values)):
            continue  # an exact gradient entry beyond float32: no finite target to judge against
        ok = [c & np.isfinite(v) for c, v in zip(certain, values)]
        if not any((np.abs(v)[m] > 0).any() for v, m in zip(values, ok)):
            continue  # a zero gradient: no norm to be relative to
        drawn.append(sample)
        exact.append(values)
        judged.append(ok)
        kinds.append(kind)
    stacked = [np.stack(col) for col in zip(*drawn)] if drawn else []
    return GradSamples([np.asarray(f) for f in fixed], stacked, exact, judged, kinds)


def low_gradients(grad_closed: Any, keys: frozenset[str], high: np.dtype[Any], smp: GradSamples,
                  scale: float, dtype: np.dtype[Any]) -> list[list[np.ndarray]]:
    """Per sample, the gradients the program computes in ``dtype`` with the plan ``keys`` in ``high``
    and the loss scale ``scale`` removed (in float32), as ``grad_fn`` returns them."""
    nf, nd = len(smp.fixed), len(smp.drawn)

    def one(*args: Any) -> list[Any]:
        outs = run_upcast(grad_closed, keys, high, args, declared=False)
        return [jnp.asarray(o).astype(np.float32) / args[-1] for o in outs]

    run = jax.vmap(one, in_axes=(None,) * nf + (0,) * nd + (None,))
    if jit_rounds(np.dtype(dtype)):
        run = jax.jit(run)
    outs = [np.asarray(o) for o in run(*smp.fixed, *smp.drawn, np.float32(scale))]
    return [[o[s] for o in outs] for s in range(smp.count)]


def sample_errors(got: Sequence[Sequence[np.ndarray]], smp: GradSamples) -> tuple[np.ndarray, np.ndarray]:
    """Per sample: the norm-wise relative error (inf with a non-finite entry) and the non-finite count."""
    errors = np.zeros(smp.count)
    bad = np.zeros(smp.count, int)
    for s in range(smp.count):
        num = den = 0.0
        for g, e, m in zip(got[s], smp.exact[s], smp.judged[s]):
            g64 = np.asarray(g, np.float64)[m]
            e64 = np.asarray(e, np.float64)[m]
            finite = np.isfinite(g64)
            bad[s] += int((~finite).sum())
            num += float(np.sum(np.square(np.where(finite, g64 - e64, 0.0))))
            den += float(np.sum(np.square(e64)))
        errors[s] = math.inf if bad[s] else math.sqrt(num / den) if den > 0 else 0.0
    return errors, bad


def grad_figures(got: Sequence[Sequence[np.ndarray]], smp: GradSamples) -> tuple[GradFigures, np.ndarray]:
    """The :class:`GradFigures` of gradients ``got`` (per sample, per input) and each sample's error."""
    errors, bad = sample_errors(got, smp)
    finite = errors[np.isfinite(errors)]
    fig = GradFigures(float(errors.max(initial=0.0)), float(finite.mean()) if finite.size else math.inf,
                      int(bad.sum()), smp.count)
    return fig, errors


def measure(grad_closed: Any, keys: frozenset[str], high: np.dtype[Any], smp: GradSamples, scale: float,
            dtype: np.dtype[Any]) -> tuple[GradFigures, np.ndarray]:
    """:func:`grad_figures` of the plan ``keys`` at loss scale ``scale``."""
    return grad_figures(low_gradients(grad_closed, keys, high, smp, scale, dtype), smp)
