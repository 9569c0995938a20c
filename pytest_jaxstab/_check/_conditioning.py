"""The problem's conditioning at one input (the ``stability`` lens).

Componentwise relative condition in output ulps (docs/architecture.md, "Two lenses: stability and
accuracy"): for each output element ``y_j = f_j(x)``,

    cond_j = sum_i |x_i df_j/dx_i| * u / ulp(y_j)

where ``u = 2^-p`` is the unit roundoff of the inputs' dtype: how many output ulps the exact result
moves when every input element moves by one unit roundoff, each in its worst direction. Zero inputs
do not move (a relative perturbation). Each ``j`` is one row of the Jacobian weighted by the inputs, so
it costs one reverse pass (``_derivatives``: float64 passes, ``CHUNK`` rows at a time, each row checked
against the exact forward value), never one exact evaluation per input element; and only the elements
the verdict needs are computed (the caller's ``wanted``: the check asks for the elements whose forward
error could change a figure, ``_evaluate``). A row the float64 pass cannot vouch for is computed, where
the program is small (:data:`FD_LIMIT`), by the exact finite differences this figure was first defined
by: ``|f_j(x with x_i -> x_i (1 + d_i)) - f_j(x)| * (u / d_i)`` summed over ``i``, ``x_i`` moved one
float of its dtype away from zero (``u <= d_i <= 2u``), the moved results from the oracle rounded to
float64: the same figure to first order (``tests/test_conditioning.py`` holds the two together).

First order misses a problem that is flat to every small move but not to a finite one: a softmax whose
logits differ by less than their own rounding (``softmax(q @ k.T)`` on clustered rows) is exactly
one-hot, every derivative is ``exp(-gap)`` = 0, yet moving all inputs at once by the ``n`` ulps a
reduction of ``n`` terms may already have put in them (Higham's ``gamma_n`` backward error) flips which
logit wins. So up to :data:`JOINT` more evaluations (only for an input with an error first order leaves
unexplained, :func:`joint_conditioning`) move every element at once by ``n`` floats, each up or
down (signs from a generator seeded by the input's own bytes: the same figure on every run). Where
such a move changes an element by more than 4 times what linearity allows (``2n`` times the
first-order figure: a step of ``u`` to ``2u``), the element's figure is that change divided by ``n``;
elsewhere the first-order figure stands, unchanged.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from .. import _compat
from .._dtypes import component_dtype, dtype_info, from_ordinal, to_ordinal
from ._derivatives import Derivatives, Unserved, far_off, trusted
from ._equal_rows import representatives
from ._exact_many import exact64 as _exact64
from ._exact_many import exact64_many

__all__ = ["EXACT_ROWS", "FD_LIMIT", "JOINT", "SMALL", "conditioning_lower", "conditioning_ulps",
           "derivatives_for",
           "joint_conditioning", "reduction_terms", "ulp"]

#: Most simultaneous moves of every input element (module docstring; they stop once every element
#: first order leaves unexplained has moved): with 24 sign patterns, one of 4 logits tied below their
#: rounding never wins with probability (3/4)^24 < 0.1%.
JOINT = 24
#: A joint move's change counts only beyond this multiple of what linearity allows (2 bits).
NONLINEAR = 4.0
#: The most floats one joint move takes per element (a reduction of more terms still moves by this).
MAX_JOINT_STEP = 16
#: Joint moves evaluated by one oracle call where the oracle computes them (``_exact_many``).
_JOINT_BATCH = 8

_REDUCTIONS = {"reduce_sum", "reduce_prod", "cumsum", "cumprod", "cumlogsumexp", "dot_general"}


def reduction_terms(closed: Any) -> int:
    """The most terms one reduction of the program combines (1 when it has none): the ``n`` of the
    ``n·u`` allowance of a sum's error bound. ``dot_general`` counts its contracted elements."""
    most = 1
    for _, eqn in _compat.walk(closed):
        name = _compat.primitive_name(eqn)
        if name not in _REDUCTIONS:
            continue
        shape = tuple(getattr(_compat.aval(eqn.invars[0]), "shape", ()) or ())
        if name in ("reduce_sum", "reduce_prod"):
            axes = eqn.params.get("axes", ())
            n = int(np.prod([shape[a] for a in axes])) if axes else 1
        elif name == "dot_general":
            (contract, _), _ = eqn.params["dimension_numbers"]
            n = int(np.prod([shape[a] for a in contract])) if contract else 1
        else:
            axis = eqn.params.get("axis", 0)
            n = shape[axis] if shape else 1
        most = max(most, n)
    return most


def ulp(exact: np.ndarray, dtype: np.dtype[Any]) -> np.ndarray:
    """The spacing of ``dtype`` at each exact value, never below the spacing of normal numbers (XLA
    flushes subnormals: one 'ulp' there is the normal spacing at the smallest normal), as float64."""
    info = dtype_info(component_dtype(dtype))
    tiny = float(info.tiny)
    floor = tiny * float(info.eps)
    ex = np.asarray(exact)
    mag = np.abs(ex)
    if np.iscomplexobj(ex):  # a complex result's ulp is its larger part's ("The error metric")
        mag = np.maximum(np.abs(np.real(ex)), np.abs(np.imag(ex)))
    mag = mag.astype(np.float64)
    with np.errstate(all="ignore"):
        e = np.floor(np.log2(np.maximum(mag, tiny)))
        spacing = np.exp2(e) * float(info.eps)
    return np.where(np.isfinite(spacing), np.maximum(spacing, floor), np.inf)


#: Float input elements up to which rows the float64 passes cannot vouch for are computed by finite
#: differences through the oracle (one exact evaluation per input element): exact, and affordable there.
FD_LIMIT = 256
#: Rows per call computed from the program's derivative evaluated by the oracle, where the float64 passes
#: cannot vouch for an element of a program too large for finite differences (one batched evaluation).
EXACT_ROWS = 64
#: Float input elements up to which every figure is computed by those finite differences outright: a
#: few dozen fast oracle passes cost less than compiling the float64 passes (~0.3 s a program).
SMALL = 64

_DERIVATIVES: dict[tuple[int, tuple[int, ...]], tuple[Any, Derivatives]] = {}


def derivatives_for(closed: Any, judged_outputs: Sequence[int]) -> Derivatives:
    """The (cached) float64 reverse passes of ``closed``: one compilation per program and output."""
    key = (id(closed), tuple(judged_outputs))
    hit = _DERIVATIVES.get(key)
    if hit is not None and hit[0] is closed:
        return hit[1]
    if len(_DERIVATIVES) >= 32:
        _DERIVATIVES.pop(next(iter(_DERIVATIVES)))
    made = Derivatives(closed, judged_outputs)
    _DERIVATIVES[key] = (closed, made)
    return made


def _float_elements(args: Sequence[np.ndarray]) -> int:
    return sum(int(np.size(a)) for a in args if np.issubdtype(np.asarray(a).dtype, np.floating))


def _unit(args: Sequence[np.ndarray]) -> float:
    floats = [a for a in args if np.issubdtype(np.asarray(a).dtype, np.floating)]
    return min(float(dtype_info(np.asarray(a).dtype).eps) / 2 for a in floats) if floats else 0.0


def conditioning_ulps(closed: Any, args: Sequence[np.ndarray], exact: Sequence[np.ndarray],
                      judged_outputs: Sequence[int], out_dtypes: Sequence[np.dtype[Any]], *,
                      wanted: Sequence[np.ndarray] | None = None, alternate: Any = None) -> list[np.ndarray]:
    """Per judged output leaf, the conditioning of each element in output ulps (module docstring):
    ``inf`` where a moved input makes the exact result non-finite, NaN where it is not known (or not
    in ``wanted``: per leaf, the flat indices to compute; None computes every element).

    First order comes from float64 reverse passes (``_derivatives``: one per element, the cost linear
    in the elements); a row they cannot vouch for (the float64 program lost at that element) is computed
    by finite differences through the oracle when the program has at most :data:`FD_LIMIT` float input
    elements, else from the program's derivative evaluated by the oracle (at most :data:`EXACT_ROWS` of
    them per call, the first ones of ``wanted``; the rest left unknown: NaN, for the caller to ask again
    or to leave with no allowance, a conservative verdict).

    ``alternate``, when given, is another program of the same mathematical function (the check's
    stabilized variant): a row the float64 pass of ``closed`` cannot vouch for is taken from
    ``alternate``'s float64 pass where that one's value agrees with the exact one (the same test,
    ``trusted``): ``exp(q @ k.T)`` overflows float64 at logits of 1e6 where the max-shifted softmax
    computes the same function, and so the same derivative, in float64.

    Where rows of the batched inputs are equal and the program is proven batch-equivariant
    (``_equal_rows``), one element per class is computed and its figure given to the others.
    """
    derivs = derivatives_for(closed, judged_outputs)
    if not derivs.usable or _float_elements(args) <= SMALL:
        return _finite_differences(closed, args, exact, judged_outputs, out_dtypes)
    try:
        return _by_passes(derivs, closed, args, exact, judged_outputs, out_dtypes, wanted, alternate)
    except Unserved:  # JAX could not lower the float64 passes: the exact figure, as for complex programs
        return _finite_differences(closed, args, exact, judged_outputs, out_dtypes)


def _by_passes(derivs: Derivatives, closed: Any, args: Sequence[np.ndarray], exact: Sequence[np.ndarray],
               judged_outputs: Sequence[int], out_dtypes: Sequence[np.dtype[Any]],
               wanted: Sequence[np.ndarray] | None, alternate: Any) -> list[np.ndarray]:
    """:func:`conditioning_ulps` from the float64 passes (:class:`Unserved` where JAX cannot run them)."""
    leaders = representatives(closed, args, judged_outputs)
    if any(r is not None for r in leaders):  # equal rows: one figure per class (``_equal_rows``)
        asked = [np.arange(np.size(e)) if wanted is None else np.asarray(w, np.int64)
                 for e, w in zip(exact, wanted if wanted is not None else exact)]
        chosen = [a if r is None else _first_seen(r[a]) for a, r in zip(asked, leaders)]
        out = _rows_of(derivs, closed, args, exact, judged_outputs, out_dtypes, chosen, alternate)
        for cond, r in zip(out, leaders):
            if r is not None:
                flat = cond.reshape(-1)
                flat[:] = np.where(np.isnan(flat[r]), flat, flat[r])
        return out
    return _rows_of(derivs, closed, args, exact, judged_outputs, out_dtypes, wanted, alternate)


def _first_seen(flat: np.ndarray) -> np.ndarray:
    """``flat`` without its repeats, in the order of their first occurrence (the lens's priority)."""
    _, first = np.unique(flat, return_index=True)
    return flat[np.sort(first)]


def _rows_of(derivs: Derivatives, closed: Any, args: Sequence[np.ndarray], exact: Sequence[np.ndarray],
             judged_outputs: Sequence[int], out_dtypes: Sequence[np.dtype[Any]],
             wanted: Sequence[np.ndarray] | None, alternate: Any) -> list[np.ndarray]:
    """:func:`conditioning_ulps` at the flat indices ``wanted`` (None: every element), each computed."""
    u = _unit(args)
    out, pending = [], []
    for t, i in enumerate(judged_outputs):
        e = np.asarray(exact[t])
        cond = np.full(e.shape, np.nan)
        idx = np.arange(e.size) if wanted is None else np.asarray(wanted[t], dtype=np.int64)
        if derivs.rows[t] > 1 and len(idx):  # a column's pass gives every row: all of them, for free
            width = e.size // derivs.rows[t]
            cols = np.unique(idx % width)
            idx = (np.arange(derivs.rows[t])[:, None] * width + cols[None, :]).reshape(-1)
        flat_e = e.reshape(-1)[idx].astype(np.float64)
        spacing = ulp(flat_e, out_dtypes[i])
        finite = np.isfinite(flat_e)
        cond.reshape(-1)[idx[~finite]] = 0.0  # an infinite exact result: no ulp to move by
        todo = idx[finite]
        sums, values = np.full(len(todo), np.nan), np.full(len(todo), np.nan)
        ask = np.arange(len(todo))
        seen = derivs.seen(args, t) if alternate is not None else None
        if seen is not None:  # elements the lower bounds' pass lost go to ``alternate`` at once
            ask = np.flatnonzero(~far_off(seen[todo], flat_e[finite], spacing[finite]))
        sums[ask], values[ask] = derivs.weighted_rows(args, t, todo[ask])
        ok = trusted(values, flat_e[finite], spacing[finite], sums)
        if alternate is not None and not ok.all():
            other = derivatives_for(alternate, judged_outputs)
            if other.usable:
                lost = np.flatnonzero(~ok)
                alt_sums, alt_values = other.weighted_rows(args, t, todo[lost])
                alt_ok = trusted(alt_values, flat_e[finite][lost], spacing[finite][lost], alt_sums)
                sums[lost[alt_ok]] = alt_sums[alt_ok]
                ok[lost[alt_ok]] = True
        with np.errstate(all="ignore"):
            cond.reshape(-1)[todo[ok]] = sums[ok] * u / spacing[finite][ok]
        out.append(cond)
        if wanted is None:
            pending.append(todo[~ok])
        else:  # in the order asked (the lens asks largest error first: the budget goes to those)
            asked = np.asarray(wanted[t], np.int64)
            pending.append(asked[np.isin(asked, todo[~ok])])
    if not any(len(p) for p in pending):
        return out
    if _float_elements(args) <= FD_LIMIT:
        exact_fd = _finite_differences(closed, args, exact, judged_outputs, out_dtypes)
        for cond, fd, p in zip(out, exact_fd, pending):
            cond.reshape(-1)[p] = fd.reshape(-1)[p]
        return out
    budget = EXACT_ROWS
    for t, (cond, p) in enumerate(zip(out, pending)):
        p = p[:budget]
        budget -= len(p)
        if len(p):
            flat = np.asarray(exact[t]).reshape(-1)[p].astype(np.float64)
            spacing = ulp(flat, out_dtypes[judged_outputs[t]])
            with np.errstate(all="ignore"):
                # a row whose figure is bounded below 2^-8 ulps needs no exact value
                cond.reshape(-1)[p] = derivs.exact_rows(args, t, p, spacing / u * 2.0**-8) * u / spacing
    return out


def conditioning_lower(closed: Any, args: Sequence[np.ndarray], exact: Sequence[np.ndarray],
                       judged_outputs: Sequence[int], out_dtypes: Sequence[np.dtype[Any]],
                       ) -> list[np.ndarray]:
    """Per judged output leaf, a lower bound of each element's conditioning in output ulps, from a few
    float64 forward passes for every element at once (``Derivatives.lower_bounds``); 0 where the
    float64 pass cannot vouch for the element (or the program is not one the passes serve): a lower
    bound is what lets the lens skip an element whose error it explains, never one it does not."""
    derivs = derivatives_for(closed, judged_outputs)
    if _float_elements(args) <= SMALL:  # the exact figure costs less than compiling the passes
        return _finite_differences(closed, args, exact, judged_outputs, out_dtypes)
    if not derivs.usable:
        return [np.zeros(np.shape(e)) for e in exact]
    u = _unit(args)
    out = []
    try:
        bounds = derivs.lower_bounds(args)
    except Unserved:  # no lower bound to vouch for: the lens skips nothing
        return [np.zeros(np.shape(e)) for e in exact]
    for (low, values), e, i in zip(bounds, exact, judged_outputs):
        flat_e = np.asarray(e).reshape(-1).astype(np.float64)
        spacing = ulp(flat_e, out_dtypes[i])
        ok = trusted(values, flat_e, spacing, low)
        with np.errstate(all="ignore"):
            out.append(np.where(ok, low * u / spacing, 0.0).reshape(np.shape(e)))
    return out


def _finite_differences(closed: Any, args: Sequence[np.ndarray], exact: Sequence[np.ndarray],
                        judged_outputs: Sequence[int], out_dtypes: Sequence[np.dtype[Any]],
                        ) -> list[np.ndarray]:
    """The conditioning by finite differences through the oracle: one exact evaluation per input element
    moved one float of its dtype away from zero (exact, quadratic in the elements)."""
    floats = [i for i, a in enumerate(args) if np.issubdtype(np.asarray(a).dtype, np.floating)]
    u = _unit(args)
    base_args = [np.asarray(a) for a in args]
    trials, steps = [base_args], [0.0]
    for i in floats:
        flat = base_args[i].reshape(-1)
        for k in np.flatnonzero(np.isfinite(flat) & (flat != 0)):
            moved = flat.copy()
            with np.errstate(over="ignore"):  # the largest finite float steps to inf: skipped below
                moved[k] = np.nextafter(flat[k], np.copysign(np.inf, flat[k]).astype(flat.dtype))
            if not np.isfinite(moved[k]):
                continue
            steps.append((float(moved[k]) - float(flat[k])) / float(flat[k]))  # exact in float64
            trial = list(base_args)
            trial[i] = moved.reshape(base_args[i].shape)
            trials.append(trial)
    base, *moved_values = exact64_many(closed, trials, judged_outputs, out_dtypes)
    total = [np.zeros(np.shape(b), dtype=np.float64) for b in base]
    for step, values in zip(steps[1:], moved_values):
        for t, (b, m) in enumerate(zip(base, values)):
            with np.errstate(all="ignore"):
                total[t] = total[t] + np.abs(m - b) * (u / step)
    out = []
    for t, i in enumerate(judged_outputs):
        with np.errstate(all="ignore"):
            out.append(np.asarray(total[t] / ulp(exact[t], out_dtypes[i]), dtype=np.float64))
    return out


def joint_conditioning(closed: Any, args: Sequence[np.ndarray], exact: Sequence[np.ndarray],
                       judged_outputs: Sequence[int], out_dtypes: Sequence[np.dtype[Any]],
                       cond_ulps: Sequence[np.ndarray], unexplained: Sequence[np.ndarray],
                       ) -> list[np.ndarray]:
    """``cond_ulps`` (first order, :func:`conditioning_ulps`) raised where a joint move of every input
    element by ``n`` floats changes the exact result nonlinearly (module docstring). Runs only while
    some ``unexplained`` element (an error first order does not explain) has not moved so; at most
    :data:`JOINT` oracle evaluations."""
    pending = [np.asarray(m, dtype=bool).copy() for m in unexplained]
    if not any(m.any() for m in pending):
        return list(cond_ulps)
    floats = [i for i, a in enumerate(args) if np.issubdtype(np.asarray(a).dtype, np.floating)]
    steps = min(reduction_terms(closed), MAX_JOINT_STEP)
    base_args = [np.asarray(a) for a in args]
    units = [ulp(exact[t], out_dtypes[i]) for t, i in enumerate(judged_outputs)]
    cond = [np.array(c, dtype=np.float64) for c in cond_ulps]
    trials = list(_joint_moves(base_args, floats, steps))
    base, moved = _moved_values(closed, base_args, trials, exact, judged_outputs, out_dtypes, units, pending)
    for n in range(len(trials)):
        for t, (b, m) in enumerate(zip(base, moved(n))):
            with np.errstate(all="ignore"):
                change = np.abs(m - b) / units[t]
                flat = change > NONLINEAR * 2 * steps * np.nan_to_num(cond[t])
                cond[t] = np.where(flat, np.fmax(cond[t], change / steps), cond[t])
            pending[t] &= ~flat
        if not any(m.any() for m in pending):
            break
    return cond


def _moved_values(closed: Any, args: list[np.ndarray], trials: list[list[np.ndarray]],
                  exact: Sequence[np.ndarray], judged_outputs: Sequence[int],
                  out_dtypes: Sequence[np.dtype[Any]], units: Sequence[np.ndarray],
                  pending: Sequence[np.ndarray],
                  ) -> tuple[list[np.ndarray], Callable[[int], list[np.ndarray]]]:
    """The judged outputs at ``args`` and at each trial input (``moved(n)``): from one float64 pass over
    them all (``Derivatives.forward``) where every pending element's float64 value at ``args`` is within
    one ulp of the exact one (the float64 program is not lost there: its changes are the exact ones to
    far below an ulp), else from the oracle (``_exact_many``: :data:`_JOINT_BATCH` trials a call)."""
    derivs = derivatives_for(closed, judged_outputs)
    values = None
    if derivs.usable and trials:
        try:
            values = derivs.forward([args, *trials])
        except Unserved:  # JAX could not lower the float64 pass: the oracle below
            values = None
    if values is not None:
        sure = [trusted(v[0].reshape(-1), np.asarray(e, np.float64).reshape(-1), u.reshape(-1),
                        np.zeros(v[0].size)).reshape(np.shape(p))
                for v, e, u, p in zip(values, exact, units, pending)]
        if _float_elements(args) > FD_LIMIT:
            # A large program: the elements its float64 pass cannot follow (it loses them too) are left
            # unexplained rather than moved through the oracle 24 times (minutes at a (32, 256) @ (256,
            # 256) layer): the first order figure stands for them, as for a smooth problem.
            for p, ok in zip(pending, sure):
                p &= ok
        if all(bool(ok[p].all()) for ok, p in zip(sure, pending)):
            return [v[0] for v in values], lambda n: [v[n + 1] for v in values]
    done: dict[int, list[np.ndarray]] = {}
    # A few trials a call for a small program: one oracle call for several instead of one each. A large
    # one (here only where the float64 passes cannot serve it) keeps one a call: ``joint_conditioning``
    # stops once every element has moved, and the trials it would not reach cost real time there.
    batch = _JOINT_BATCH if _float_elements(args) <= FD_LIMIT else 1

    def moved(n: int) -> list[np.ndarray]:
        if n not in done:
            part = list(range(n, min(n + batch, len(trials))))
            values = exact64_many(closed, [trials[m] for m in part], judged_outputs, out_dtypes)
            done.update(zip(part, values))
        return done[n]

    return _exact64(closed, args, judged_outputs, out_dtypes), moved


def _joint_moves(args: Sequence[np.ndarray], floats: Sequence[int], steps: int) -> Iterator[list[np.ndarray]]:
    """Up to ``JOINT`` copies of ``args`` with every finite nonzero float element moved ``steps`` floats
    up or down (signs from a generator seeded by the arguments' bytes); none when nothing can move."""
    movable = [i for i in floats if np.any(np.isfinite(args[i]) & (np.asarray(args[i]) != 0))]
    if not movable:
        return
    rng = np.random.default_rng(zlib.crc32(b"".join(np.ascontiguousarray(args[i]).tobytes()
                                                    for i in movable)))
    for _ in range(JOINT):
        trial = list(args)
        for i in movable:
            a = np.asarray(args[i])
            up = rng.random(a.shape) < 0.5
            moved = _step(a, np.where(up, steps, -steps))
            keep = np.isfinite(a) & (a != 0) & np.isfinite(moved)
            trial[i] = np.where(keep, moved, a).astype(a.dtype)
        yield trial


def _step(a: np.ndarray, floats: np.ndarray) -> np.ndarray:
    """``a`` moved ``floats`` floats of its dtype (up where positive), as that many ``nextafter`` steps
    towards +-inf: the ordinals of consecutive floats differ by one, both zeros share ordinal 0 (one
    step, as ``nextafter`` takes it from +0 to the least negative float), a move that ends on zero
    keeps the start's sign (``nextafter``'s), and one past the largest float is an infinity."""
    if a.dtype.name not in ("float16", "bfloat16", "float32", "float64"):  # no ordinals: step by step
        moved = a.copy()
        target = np.where(floats > 0, np.inf, -np.inf).astype(a.dtype)
        with np.errstate(over="ignore"):
            for _ in range(int(np.max(np.abs(floats), initial=0))):
                moved = np.nextafter(moved, target)
        return moved
    with np.errstate(invalid="ignore"):
        moved = from_ordinal(to_ordinal(a) + floats, a.dtype)
    return np.where(moved == 0, np.copysign(moved, a), moved)
