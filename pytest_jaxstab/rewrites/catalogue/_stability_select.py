"""Stability rules that see through a selection of a softmax: the cross-entropies with integer labels.

A *selection* (``p[..., i]``, ``p[rows, labels]``, ``jnp.take_along_axis``, ``jnp.take``,
``lax.dynamic_slice``: any ``slice``, ``gather``, ``dynamic_slice`` or call whose body only selects
elements of ``p``) commutes with every elementwise function: ``log(sel(p)) = sel(log(p))``. So the
cross-entropy that picks the label's probability before its log, ``-log(softmax(x)[label])``,
becomes ``-log_softmax(x)[label]`` (the log of an underflowed probability was ``-inf``).

Each rule's docstring states the identity; each holds over the reals on the whole domain.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

from ... import _compat
from ..engine._match import Graph, Match
from ..engine._pattern import any_of, const, fixed, op, param, var
from ..engine._rule import Rule
from ..forms import _core as _forms
from ..forms import _labels
from ._library_calls import log_softmax_call, logsumexp_call, softmax_call

x = var("x")
AXES = param("axes")

# Primitives that only move or pick elements: an elementwise function commutes with them.
_SELECTING = frozenset({"gather", "slice", "dynamic_slice", "squeeze", "reshape", "broadcast_in_dim",
                        "expand_dims", "transpose", "rev", "copy", "copy_p"})
_CALLS = ("jit", "pjit")


def _example(f: Any, shapes: Any = ((8,),), domain: Any = None) -> dict[str, Any]:
    return {"example": f, "example_shapes": shapes, "example_domain": domain}


# ----------------------------------------------------------------------------------- selections
_GATHER_PARAMS = ("dimension_numbers", "slice_sizes", "indices_are_sorted", "unique_indices", "mode",
                  "fill_value")


def _selections(p: Any, nested: bool = False) -> list[Any]:
    """The forms a selection of ``p`` takes in a jaxpr, each capturing what re-applies it; with
    ``nested``, also a selecting call of a selecting call (optax's ``take_along_axis(x, labels[..., None],
    axis).take(0, axis)``: two library calls, the second picking the only entry of the first's axis)."""
    gather = op("gather", p, var("idx"), params={k: param(f"g_{k}") for k in _GATHER_PARAMS})
    dynamic = [op("dynamic_slice", p, *(var(f"i{k}") for k in range(r)), slice_sizes=param("ds_sizes"))
               for r in range(1, 5)]
    sliced = op("slice", p, start_indices=param("sl_start"), limit_indices=param("sl_limit"),
                strides=param("sl_strides"))
    call = op(_CALLS, p, var("idx"), params={"jaxpr": param("body")})
    plain = [sliced, gather, *dynamic, call]
    # x[..., i] drops the picked axis after the slice: a squeeze the glue check would refuse
    forms = [*(op("squeeze", s, dimensions=param("sq_dims")) for s in plain), *plain]
    if nested:
        forms.append(op(_CALLS, call, var("idx2"), params={"jaxpr": param("body2")}))
    return forms


def _fill_commutes(fill: Any) -> bool:
    # an out-of-bounds gather fills with fill_value (NaN for floats when None): f(NaN) is NaN, so
    # only a NaN fill commutes with every elementwise function
    return fill is None or (isinstance(fill, float) and math.isnan(fill))


def _selects_only(body: Any) -> bool:
    """Whether a call's body computes its result from its first operand by selections only."""
    closed = _compat.as_closed(body)
    reach = {_compat.invars(closed)[0]}
    for eqn in _compat.eqns(closed):
        if not any(not _compat.is_literal(a) and a in reach for a in eqn.invars):
            continue
        name = _compat.primitive_name(eqn)
        if name not in _SELECTING or eqn.invars[0] not in reach or len(eqn.outvars) != 1:
            return False
        if any(not _compat.is_literal(a) and a in reach for a in eqn.invars[1:]):
            return False  # the selected array also used as an index
        if name == "gather" and not _fill_commutes(eqn.params.get("fill_value")):
            return False
        reach.add(eqn.outvars[0])
    outs = _compat.outvars(closed)
    return len(outs) == 1 and not _compat.is_literal(outs[0]) and outs[0] in reach


def _selection_where(m: Match) -> bool:
    c = m.captures
    if "body2" in c and not _selects_only(c["body2"]):
        return False
    if "body" in c:
        return _selects_only(c["body"])
    if "g_fill_value" in c:
        return _fill_commutes(c["g_fill_value"])
    return True


def _reselect(v: Any, c: dict[str, Any]) -> Any:
    """The captured selection applied to ``v`` (an array of the selected array's shape)."""
    if "body2" in c:
        inner = _reselect(v, {k: a for k, a in c.items() if k not in ("body2", "idx2")})
        return _compat.eval_jaxpr(_compat.as_closed(c["body2"]), inner, c["idx2"])[0]
    if "sq_dims" in c:
        return lax.squeeze(_reselect(v, {k: a for k, a in c.items() if k != "sq_dims"}),
                           c["sq_dims"])
    if "sl_start" in c:
        return lax.slice(v, c["sl_start"], c["sl_limit"], c["sl_strides"])
    if "g_dimension_numbers" in c:
        return lax.gather(v, c["idx"], c["g_dimension_numbers"], c["g_slice_sizes"],
                          indices_are_sorted=c["g_indices_are_sorted"],
                          unique_indices=c["g_unique_indices"], mode=c["g_mode"],
                          fill_value=c["g_fill_value"])
    if "ds_sizes" in c:
        starts = [c[f"i{k}"] for k in range(4) if f"i{k}" in c]
        return lax.dynamic_slice(v, starts, c["ds_sizes"])
    return _compat.eval_jaxpr(_compat.as_closed(c["body"]), v, c["idx"])[0]


_SELECTION_HEADS = frozenset({"slice", "gather", "dynamic_slice", *_CALLS})


def _selected(g: Graph, atom: Any) -> bool:
    return g.head(atom)[0] in _SELECTION_HEADS  # through glue: a squeeze after a slice


def _log_of_selection(g: Graph, i: int) -> bool:
    """The gate: the log's operand is a selection (most logs are refused before a full match)."""
    return _selected(g, g.eqns[i].invars[0])


def _lse_minus_selection(g: Graph, i: int) -> bool:
    invars = g.eqns[i].invars
    return (len(invars) == 2 and g.head(invars[0])[0] in ("add", "custom_jvp_call")
            and _selected(g, invars[1]))


# ------------------------------------------------------------------------- log of a selected softmax
_EX = op("exp", x, name="ex", recompute=True)
# softmax(x): written (and jax.nn.softmax's inlined equations, jax 0.10 to 0.12.0, with x the shifted
# logits) or jax.nn.softmax's call (jax 0.12.1)
_WRITTEN_SOFTMAX = op("div", _EX, op("reduce_sum", _EX, axes=AXES, recompute=True), recompute=True)
_SOFTMAX = any_of(_WRITTEN_SOFTMAX, softmax_call(x, recompute=True))


def _log_select_softmax(x: Any, axes: tuple[int, ...], **sel: Any) -> Any:
    """log(sel(softmax(x))) = sel(log_softmax(x)) for any selection sel (a selection commutes with
    an elementwise function): the cross-entropy picking the label's probability before its log.
    Where sel picks one element of each row the softmax normalises (a label per row), it is
    -(logsumexp(x) - sel(x)) in the form whose derivative in the label's logit does not cancel."""
    ax = tuple(int(i) for i in axes)
    fallback = _reselect(_forms.log_softmax(x, ax), sel)
    return _where_one_per_row(x, ax, sel, lambda nll: -nll, fallback)


def _where_one_per_row(x: Any, ax: tuple[int, ...], sel: dict[str, Any], outer: Any,
                       fallback: Any) -> Any:
    """``outer(logsumexp(x) - sel(x))`` through ``forms._labels.label_nll`` where the selection
    picks one element from each row that ``ax`` reduces (its result has the rows' shape, up to axes
    of size 1), checked per row as the program runs; ``fallback`` elsewhere and where the shapes
    do not fit (never worse: the fallback is the form the rule gave before)."""
    kept = [d for d in range(x.ndim) if d not in ax]
    rows = tuple(jnp.shape(x)[d] for d in kept)
    picked = _reselect(x, sel)
    shape = tuple(jnp.shape(picked))
    if ([d for d in shape if d != 1] != [d for d in rows if d != 1] or max(rows, default=1) > 2**20
            or jnp.shape(fallback) != shape):
        return fallback
    # row numbers as float32 (exact below 2^24, in every float dtype's selection; x's own dtype
    # would round them in bfloat16 past 256 rows and let a pick from a neighbouring row pass)
    ids_dtype = jnp.float64 if x.dtype == jnp.float64 else jnp.float32
    aligned = jnp.ones(rows, bool)
    for j, d in enumerate(kept):
        ids = lax.broadcasted_iota(ids_dtype, jnp.shape(x), d)
        got = jnp.reshape(_reselect(ids, sel), rows)
        aligned = aligned & (got == lax.broadcasted_iota(ids_dtype, rows, j))
    # where each row gives one pick, the selection's transpose marks the picked entries
    marks = jax.linear_transpose(lambda v: _reselect(v, sel), jnp.zeros(jnp.shape(x), ids_dtype))
    (count,) = marks(jnp.ones(shape, ids_dtype))
    mask = lax.stop_gradient(count) > 0
    nll = _labels.label_nll(x, jnp.reshape(picked, rows), mask, ax)
    return jnp.where(jnp.reshape(aligned, shape), jnp.reshape(outer(nll), shape), fallback)


LOG_SELECT_SOFTMAX = Rule(
    "log_select_softmax",
    op("log", any_of(*_selections(_SOFTMAX))),  # one root: the log is looked at once
    _log_select_softmax, where=_selection_where, gate=_log_of_selection,
    **_example(lambda x: -jnp.log(jax.nn.softmax(x)[..., 3]), shapes=((4, 8),)),
)


# ------------------------------------------------------------------- logsumexp minus the label's logit
_SG = op("stop_gradient", var("m0"), name="sg")
# jax.nn.logsumexp: its own formula as jax 0.10 to 0.12.0 inline it, log(|sum(exp(x - m))|) + m,
# m = stop_gradient(max(x)) (its sign, unused, also reads the sum); the call of it (jax 0.12.1)
_LSE_NN = any_of(
    op("add", op("log", op("abs", op("reduce_sum", op("exp", op("sub", x, op("broadcast_in_dim", _SG))),
                                     axes=AXES, recompute=True))), _SG),
    logsumexp_call(x))


def _lse_minus_selected(x: Any, axes: tuple[int, ...], m0: Any = None, **sel: Any) -> Any:
    """logsumexp(x) - sel(x) = -sel(log_softmax(x)) where the selection picks, for each row the
    logsumexp reduces, an element of that same row (optax's cross-entropy with integer labels: the
    difference cancels where the label's logit dominates its row, and the loss is then the small
    log1p of the others; ``forms._labels.label_nll`` keeps its derivative too). Which row each
    selected element comes from is checked as the program runs (the selection applied to the row
    numbers); elsewhere the accurate logsumexp minus sel(x)."""
    ax = tuple(int(i) for i in axes)
    fallback = _forms.logsumexp(x, ax) - _reselect(x, sel)
    return _where_one_per_row(x, ax, sel, lambda nll: nll, fallback)


def _at_max(x: Any) -> tuple[Any, ...]:
    """The indices of the largest entry of ``x``: an index the program computes, as a label is."""
    return jnp.unravel_index(jnp.argmax(x), x.shape)


def _lse_inlined(x: Any, axis: Any = None) -> Any:
    """jax.nn.logsumexp's equations as jax 0.10 to 0.12.0 inline them (0.12.1 calls them): with it
    the examples below hold both lowerings on every release."""
    ax = tuple(range(x.ndim)) if axis is None else (axis,)
    m = lax.stop_gradient(jnp.max(x, axis=ax))
    return jnp.log(jnp.abs(jnp.sum(jnp.exp(x - jnp.expand_dims(m, ax)), axis=ax))) + m


def _lse_selections(lse: Any) -> tuple[Any, ...]:
    """The spellings of a selection from the row ``lse`` reduces, one per alternative of the
    pattern that `jst.verify_rule` cannot build alone (the index must come from that row)."""
    return (
        (lambda x: lse(x, -1) - x[:, 3], ((4, 8),), None),
        (lambda x: lse(x) - x[3:4], ((8,),), None),
        *((f, (shape,), None) for shape in ((8,), (4, 8), (2, 4, 8), (2, 2, 4, 8)) for f in (
            lambda x: lse(x) - x[_at_max(x)],
            lambda x: lse(x) - lax.dynamic_slice(x, _at_max(x), (1,) * x.ndim))),
        (lambda x: lse(x, -1) - x[jnp.arange(4), jnp.argmax(x, -1)], ((4, 8),), None),
        (lambda x: lse(x) - x[jnp.argmax(x)[None]][0], ((8,),), None),
        (lambda x: lse(x, -1) - jnp.take_along_axis(x, jnp.argmax(x, -1)[:, None], -1)[:, 0], ((4, 8),),
         None),
        (lambda x: lse(x) - jnp.take(x, jnp.argmax(x)), ((8,),), None),
        (lambda x: lse(x, -1) - jnp.take_along_axis(x, jnp.argmax(x, -1)[:, None], -1).take(0, axis=-1),
         ((4, 8),), None),
    )


_LSE_SELECTIONS = (*_lse_selections(jax.nn.logsumexp), *_lse_selections(_lse_inlined))


LSE_MINUS_SELECTED = Rule(
    "lse_minus_selected",
    op("sub", _LSE_NN, any_of(*_selections(x, nested=True))),
    _lse_minus_selected, where=_selection_where, gate=_lse_minus_selection,
    examples=_LSE_SELECTIONS,
    **_example(lambda x: jax.nn.logsumexp(x, -1) - x[:, 3], shapes=((4, 8),)),
)


# ------------------------------------------------------- logsumexp minus a one-hot weighted sum
def _one_hot_rows(t: Any, x: Any, ax: tuple[int, ...]) -> tuple[Any, Any]:
    """``(one_hot, nll)``: the rows where ``t`` is one-hot (0 and a single 1, checked as the program
    runs) and ``logsumexp(x) - x_label`` there, through ``forms._labels.label_nll`` (its derivative
    flows to the label's logit, none to ``t``)."""
    label = t == 1
    one_hot = jnp.all((t == 0) | label, axis=ax) & (jnp.sum(label, axis=ax, dtype=jnp.int32) == 1)
    picked = jnp.sum(jnp.where(label, x, jnp.zeros_like(x)), axis=ax)
    return one_hot, _labels.label_nll(x, picked, lax.stop_gradient(label), ax)


def _weight_derivative(t: Any, v: Any, ax: tuple[int, ...]) -> Any:
    """0 in value, ``v`` as its derivative in ``t`` (``sum(t·v)``'s), 0 where ``v`` is not finite (a
    -inf logit or log-probability, where the written product ``0·-inf`` was NaN)."""
    finite = lax.stop_gradient(jnp.where(jnp.isfinite(v), v, jnp.zeros_like(v)))
    return jnp.sum((t - lax.stop_gradient(t)) * finite, axis=ax)


def _axes_and_weights_fit(m: Match, axes_name: str) -> bool:
    """The sum's axes (``axes_name``) are the normaliser's, and ``t`` is shaped and typed as ``x``."""
    c = m.captures
    other = c.get(axes_name)
    t, xs = m.aval("t"), m.aval("x")
    return (other is not None and tuple(other) == tuple(c["axes"]) and t.shape == xs.shape
            and t.dtype == xs.dtype)


def _lse_minus_weighted(x: Any, t: Any, axes: tuple[int, ...], **_: Any) -> Any:
    """logsumexp(x) - sum(x·t) = logsumexp(x) - x_label in each row where ``t`` is one-hot (0 and a
    single 1, ``jax.nn.one_hot(labels)``; jaxopt's ``multiclass_logistic_loss`` before its fix,
    the textbook cross-entropy): the difference cancels where the label's logit dominates its row or
    where the logits share a large offset (``[1e9, 1e9]`` gives 0 for log 2), and
    ``forms._labels.label_nll`` keeps value and derivative. Checked per row as the program runs;
    elsewhere (soft targets, weights that do not sum to 1) the accurate logsumexp minus the sum as
    written. ``d/dt`` stays ``-x``. A -inf logit weighted 0 in a one-hot row adds nothing (written:
    ``0·-inf``, NaN)."""
    ax = tuple(int(i) for i in axes)
    fallback = _forms.logsumexp(x, ax) - jnp.sum(x * t, axis=ax)
    one_hot, nll = _one_hot_rows(t, x, ax)
    return jnp.where(one_hot, nll - _weight_derivative(t, x, ax), fallback)


def _lse_minus_weighted_where(m: Match) -> bool:
    return _axes_and_weights_fit(m, "ws_axes") and jnp.issubdtype(m.aval("x").dtype, jnp.floating)


_T = var("t")
_OH_LOGITS = ((lambda x: jax.nn.logsumexp(x, -1) - jnp.sum(x * _OH(jnp.argmax(x, -1), 8, dtype=x.dtype), -1),
               ((4, 8),), None),
              (lambda x: _lse_inlined(x, -1) - jnp.sum(_OH(jnp.argmin(x, -1), 8, dtype=x.dtype) * x, -1),
               ((4, 8),), None))
LSE_MINUS_WEIGHTED = Rule(
    "lse_minus_weighted",
    op("sub", _LSE_NN, op("reduce_sum", any_of(op("mul", x, _T), op("mul", _T, x)), axes=param("ws_axes"))),
    _lse_minus_weighted, where=_lse_minus_weighted_where,
    examples=_OH_LOGITS,
    **_example(lambda x, t: jax.nn.logsumexp(x, -1) - jnp.sum(x * t, -1), shapes=((4, 8), (4, 8))),
)


# ----------------------------------------------------------------- a selection of a log-softmax
def _select_log_softmax(x: Any, axes: tuple[int, ...], **sel: Any) -> Any:
    """sel(log_softmax(x)) = -(logsumexp(x) - sel(x)) where sel picks one element of each row the
    log-softmax normalises (``take_along_axis(jax.nn.log_softmax(x), labels)``, ``x[rows, labels]``):
    the log-softmax form keeps the value, but its derivative in the label's logit is softmax - 1,
    which cancels where the label dominates; ``forms._labels.label_nll`` has both. Elsewhere (a
    pick from another row, shapes that do not fit) the selection of the stable log-softmax."""
    ax = tuple(int(i) for i in axes)
    fallback = _reselect(_forms.log_softmax(x, ax), sel)
    return _where_one_per_row(x, ax, sel, lambda nll: -nll, fallback)


def _selection_of_log_softmax(g: Graph, i: int) -> bool:
    """The gate: a selection (or the squeeze after one) whose operand is a call or a subtraction."""
    eqn = g.eqns[i]
    if _compat.primitive_name(eqn) == "squeeze":
        prod = g.producer_eqn(eqn.invars[0])
        if prod is None:
            return False
        eqn = prod[1]
    return (_compat.primitive_name(eqn) in _SELECTION_HEADS
            and g.head(eqn.invars[0])[0] in {*_CALLS, "sub"})


# jax.nn.log_softmax's call (recognised by the function it wraps: a call of that name with another
# body, a `where=` mask or a user's function, is not taken for it) or the written form
_LOG_SOFTMAXES = any_of(log_softmax_call(x, recompute=True),
                        op("sub", x, op("log", op("reduce_sum", op("exp", x), axes=AXES)), recompute=True))
_LS = jax.nn.log_softmax
SELECT_LOG_SOFTMAX = Rule(
    "select_log_softmax",
    any_of(*_selections(_LOG_SOFTMAXES)),
    _select_log_softmax, where=_selection_where, gate=_selection_of_log_softmax,
    examples=(
        (lambda x: _LS(x)[3:4], ((8,),), None),
        *((f, (shape,), None) for shape in ((8,), (4, 8), (2, 4, 8), (2, 2, 4, 8)) for f in (
            lambda x: _LS(x, axis=tuple(range(x.ndim)))[_at_max(x)],
            lambda x: lax.dynamic_slice(_LS(x, axis=tuple(range(x.ndim))), _at_max(x), (1,) * x.ndim))),
        (lambda x: _LS(x)[jnp.arange(4), jnp.argmax(x, -1)], ((4, 8),), None),
        (lambda x: _LS(x)[jnp.argmax(x)[None]][0], ((8,),), None),
        (lambda x: jnp.take_along_axis(_LS(x), jnp.argmax(x, -1)[:, None], -1)[:, 0], ((4, 8),), None),
        (lambda x: jnp.take(_LS(x), jnp.argmax(x)), ((8,),), None),
        (lambda x: (x - jnp.log(jnp.sum(jnp.exp(x), -1, keepdims=True)))[jnp.arange(4), jnp.argmax(x, -1)],
         ((4, 8),), None),
    ),
    **_example(lambda x: -jnp.take_along_axis(jax.nn.log_softmax(x), jnp.argmax(x, -1)[:, None], -1),
               shapes=((4, 8),)),
)


# ------------------------------------------------------------- a one-hot product with a log-softmax
def _one_hot_nll(t: Any, x: Any, axes: tuple[int, ...], **_: Any) -> Any:
    """sum(t·log_softmax(x)) = -(logsumexp(x) - x_label) in each row where ``t`` is one-hot (0 and
    a single 1: ``jax.nn.one_hot(labels)``), checked as the program runs; elsewhere (label
    smoothing, soft targets) the sum over the stable log-softmax, as the log-softmax rules give,
    a class with a -inf logit and weight 0 adding 0 (``masked_log_prob``).

    The value was right before (the log-softmax rules); the derivative in the label's logit was
    ``softmax - 1``, which cancels where the label dominates. ``d/dt`` stays ``log_softmax(x)``:
    ``t - stop_gradient(t)`` is 0 with derivative 1 (0 where log_softmax is -inf, a -inf logit,
    where the written product was NaN)."""
    ax = tuple(int(i) for i in axes)
    ls = _forms.log_softmax(x, ax)
    # a masked class (a -inf logit) weighted 0 adds 0, the limit along t = 0 (written: 0·-inf = NaN)
    fallback = jnp.sum(t * _labels.masked_log_prob(t, ls), axis=ax)
    one_hot, nll = _one_hot_rows(t, x, ax)
    return jnp.where(one_hot, _weight_derivative(t, ls, ax) - nll, fallback)


def _one_hot_nll_where(m: Match) -> bool:
    return _axes_and_weights_fit(m, "ls_axes")


_EX2 = op("exp", x, name="ex2", recompute=True)
_LOG_SOFTMAXES_T = any_of(
    log_softmax_call(x, axes="ls_axes", recompute=True),
    op("sub", x, op("log", op("reduce_sum", op("exp", x), axes=param("ls_axes"))), recompute=True),
    op("log", op("div", _EX2, op("reduce_sum", _EX2, axes=param("ls_axes"), recompute=True),
                 recompute=True)),
    op("log", softmax_call(x, axes="ls_axes", recompute=True)))
_OH = jax.nn.one_hot
ONE_HOT_NLL = Rule(
    "one_hot_nll",
    op("reduce_sum", op("mul", var("t"), _LOG_SOFTMAXES_T), axes=AXES),
    _one_hot_nll, where=_one_hot_nll_where,
    examples=(
        (lambda x: jnp.sum(_OH(jnp.argmax(x, -1), 8, dtype=x.dtype) * jax.nn.log_softmax(x), -1),
         ((4, 8),), None),
        (lambda x: jnp.sum(_OH(jnp.argmax(x, -1), 8, dtype=x.dtype)
                           * (x - jnp.log(jnp.sum(jnp.exp(x), -1, keepdims=True))), -1), ((4, 8),), None),
        (lambda x: jnp.sum(_OH(jnp.argmax(x, -1), 8, dtype=x.dtype) * jnp.log(jax.nn.softmax(x)), -1),
         ((4, 8),), None),
    ),
    **_example(lambda x: -jnp.sum(_OH(jnp.argmax(x, -1), 8, dtype=x.dtype) * jax.nn.log_softmax(x), -1),
               shapes=((4, 8),)),
)


#: The rules of this module, in the order the catalogue tries them (see ``_stability.STABILITY``).
# ----------------------------------------------------------------- the complement of a softmax
def _one_minus_softmax(x: Any, axes: tuple[int, ...], written: bool = False, **_: Any) -> Any:
    """1 - softmax(x) = -expm1(log_softmax(x)): the mass of the other classes. Where one logit
    dominates its row, softmax rounds to 1 and the difference to 0 (optax's poly-1 loss
    ``sum(labels * (1 - softmax(x)))``, a focal term ``(1 - p)**gamma``), where it is ``sum_{j != i}
    exp(x_j - x_i)``, a normal float; the stable log-softmax keeps that small log1p, and expm1 of it
    keeps every bit. Its derivative is the program's own (``forms._labels.softmax_complement``)."""
    return _labels.softmax_complement(x, tuple(int(i) for i in axes), bool(written))


ONE_MINUS_SOFTMAX = Rule(
    "one_minus_softmax",
    op("sub", const(1.0), any_of(fixed(_WRITTEN_SOFTMAX, written=True), softmax_call(x, recompute=True))),
    _one_minus_softmax,
    examples=(lambda x: 1.0 - jnp.exp(x) / jnp.sum(jnp.exp(x)),),
    **_example(lambda x: 1.0 - jax.nn.softmax(x, axis=-1), shapes=((4, 8),), domain=(-1e2, 1e2)),
)


SELECT_RULES: tuple[Rule, ...] = (LOG_SELECT_SOFTMAX, LSE_MINUS_SELECTED, LSE_MINUS_WEIGHTED,
                                  SELECT_LOG_SOFTMAX, ONE_MINUS_SOFTMAX)
