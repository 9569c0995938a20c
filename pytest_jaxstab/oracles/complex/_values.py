"""Complex values in the oracle: Arb complex balls (``flint.acb``), their primitives, their rounding.

A complex variable of the program holds an object array of ``acb`` (a pair of Arb balls, real and
imaginary part, containing the exact complex value), or ``None`` where the exact value provably does
not exist (``z / 0``: complex infinity has no sign; a non-finite input part). A ball with a NaN part is
*indeterminate*: this precision cannot say, and the element escalates (docs/architecture.md,
"The oracle").

Branch cuts. ``log``, ``sqrt``, ``pow``, ``log1p`` and the inverse trigonometric and hyperbolic
functions have a cut along an axis; on the cut, IEEE 754 (and C99, and XLA) choose the side from the
*sign of a zero* imaginary or real part (``sqrt(-4 - 0j) = -2j``, ``sqrt(-4 + 0j) = 2j``). Real numbers
have one zero, so the exact function does not decide there: an operand whose ball touches the cut
gives an indeterminate ball (if the exact operand lies off the cut, a higher precision separates it;
if it lies on the cut, the element is uncertain: excluded from verdicts and counted, never guessed).

Rounding (``round_complex``): each part is rounded to the component dtype as a real ball is
(``_balls.round_balls``); an element is decided when both parts are. A result whose exact value is
``None`` rounds to NaN + NaN j (not judged: discarded).

Primitives with a complex operand or result are dispatched here by the interpreter
(``rule_for``); those not listed raise ``UnsupportedPrimitive`` with the reason, before any
evaluation (``unsupported_reason``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import mpmath
import numpy as np
from flint import acb, arb

from ... import _compat
from ..._primitives import CALLS, CUSTOM_DERIVATIVES
from ..core._balls import ball_to_mpf, round_balls, to_acb_array
from ..core._common import INDET, Rule, Undecided, is_complex, is_float, obj, out_aval
from ._order import complex_cumulative, complex_scatter, complex_sort, fold_pick, minmax, prefix_scan

__all__ = [
    "PASS_THROUGH",
    "RULES",
    "acb_to_mpc",
    "involves_complex",
    "round_complex",
    "rule_for",
    "to_acb_array",
    "unsupported_reason",
]

CBall = Any  # acb | None
_MPC: Any = mpmath.mpc  # its stubs take ints only
#: An indeterminate complex ball: this precision says nothing.
INDET_C = acb(INDET, INDET)
_ZERO_C = acb(0)


# ------------------------------------------------------------------------------------ conversions
def _part(v: CBall, imag: bool) -> Any:
    if v is None:
        return None
    if isinstance(v, arb):  # a real ball where a complex one is expected (never from a typed program)
        return arb(0) if imag else v
    return v.imag if imag else v.real


def round_complex(values: np.ndarray, dtype: Any) -> tuple[np.ndarray, np.ndarray]:
    """Rounds complex balls to a complex dtype: ``(rounded, decided)``, each part rounded on its own.

    An element is decided when both parts are (every complex number in the ball then rounds, part by
    part, to that one complex float). None (no value) is decided: NaN + NaN j.
    """
    dt = np.dtype(dtype)
    part = np.dtype(np.float32 if dt == np.complex64 else np.float64)
    arr = np.asarray(values, dtype=object)
    re_balls = np.frompyfunc(lambda v: _part(v, False), 1, 1)(arr) if arr.size else arr
    im_balls = np.frompyfunc(lambda v: _part(v, True), 1, 1)(arr) if arr.size else arr
    re, re_ok = round_balls(obj(re_balls), part)
    im, im_ok = round_balls(obj(im_balls), part)
    out = np.empty(arr.shape, dtype=dt)
    out.real, out.imag = re, im
    return out, re_ok & im_ok


def acb_to_mpc(values: np.ndarray) -> np.ndarray:
    """The midpoints of complex balls as exact ``mpmath.mpc`` (NaN parts for None and indeterminate)."""
    arr = np.asarray(values, dtype=object)
    out = np.empty(arr.shape, dtype=object)
    if not arr.size:
        return out
    re = ball_to_mpf(obj(np.frompyfunc(lambda v: _part(v, False), 1, 1)(arr)))
    im = ball_to_mpf(obj(np.frompyfunc(lambda v: _part(v, True), 1, 1)(arr)))
    for idx in np.ndindex(arr.shape):
        out[idx] = _MPC(re[idx], im[idx])
    return out


def round_mpc_to_dtype(values: np.ndarray, dtype: Any) -> np.ndarray:
    """Exact ``mpc`` values rounded, part by part, to a complex dtype (correctly, once per part)."""
    from ..core._rounding import round_to_dtype

    dt = np.dtype(dtype)
    part = np.float32 if dt == np.complex64 else np.float64
    arr = np.asarray(values, dtype=object)
    re = round_to_dtype(np.frompyfunc(lambda v: v.real, 1, 1)(arr) if arr.size else arr, part)
    im = round_to_dtype(np.frompyfunc(lambda v: v.imag, 1, 1)(arr) if arr.size else arr, part)
    out = np.empty(arr.shape, dtype=dt)
    out.real, out.imag = re, im
    return out


# ------------------------------------------------------------------------------- scalar functions
def _may_be_below(x: arb, t: int) -> bool:
    return not bool(x >= t)


def _may_be_above(x: arb, t: int) -> bool:
    return not bool(x <= t)


# Where each function's branch cut lies (principal branches, as C99 and XLA): a ball touching it is
# indeterminate, since on the cut the float result is chosen by the sign of a zero part.
_CUTS: dict[str, Callable[[acb], bool]] = {
    "log": lambda z: z.imag.contains(0) and _may_be_below(z.real, 0),
    "sqrt": lambda z: z.imag.contains(0) and _may_be_below(z.real, 0),
    "rsqrt": lambda z: z.imag.contains(0) and _may_be_below(z.real, 0),
    "log1p": lambda z: z.imag.contains(0) and _may_be_below(z.real, -1),
    "asin": lambda z: z.imag.contains(0) and (_may_be_below(z.real, -1) or _may_be_above(z.real, 1)),
    "acos": lambda z: z.imag.contains(0) and (_may_be_below(z.real, -1) or _may_be_above(z.real, 1)),
    "atanh": lambda z: z.imag.contains(0) and (_may_be_below(z.real, -1) or _may_be_above(z.real, 1)),
    "atan": lambda z: z.real.contains(0) and (_may_be_below(z.imag, -1) or _may_be_above(z.imag, 1)),
    "asinh": lambda z: z.real.contains(0) and (_may_be_below(z.imag, -1) or _may_be_above(z.imag, 1)),
    "acosh": lambda z: z.imag.contains(0) and _may_be_below(z.real, 1),
}


def _unary(name: str) -> Callable[[CBall], CBall]:
    method = getattr(acb, name)
    cut = _CUTS.get(name)

    def f(z: CBall) -> CBall:
        if z is None:
            return None
        if name in ("log", "rsqrt") and z.is_exact() and z.is_zero():
            return None  # log 0, 1/sqrt(0): complex infinity, no value
        if cut is not None and cut(z):
            # z == 0 is on sqrt's cut ball-wise but sqrt is continuous there: 0.
            if name == "sqrt" and z.is_exact() and z.is_zero():
                return _ZERO_C
            return INDET_C
        return method(z)

    return f


def _div(a: CBall, b: CBall) -> CBall:
    if a is None or b is None:
        return None
    if b.is_exact() and b.is_zero():
        return None  # complex infinity (or 0/0): no value
    return a / b


def _pow(a: CBall, b: CBall) -> CBall:
    if a is None or b is None:
        return None
    if a.is_exact() and a.is_zero():
        if bool(b.real > 0):
            return _ZERO_C
        return None if bool(b.real <= 0) else INDET_C
    if _CUTS["log"](a):
        if b.is_exact() and b.imag.is_zero() and b.real.is_exact() and b.real.unique_fmpz() is not None:
            return a ** int(b.real.unique_fmpz())  # an integer power has no cut
        return INDET_C
    return (b * a.log()).exp()


def _sign(z: CBall) -> CBall:
    if z is None:
        return None
    if z.is_exact() and z.is_zero():
        return _ZERO_C
    m = abs(z)
    if m.contains(0):
        return INDET_C
    return z / m


def _lift(fn: Callable[..., Any], nargs: int) -> Callable[..., np.ndarray]:
    def apply(*xs: Any) -> Any:
        if any(x is None for x in xs):
            return None
        return fn(*xs)

    return np.frompyfunc(apply, nargs, 1)


def _elementwise(fn: Callable[..., Any], nargs: int) -> Rule:
    uf = _lift(fn, nargs)

    def rule(ctx: Any, eqn: Any, *args: np.ndarray) -> np.ndarray:
        return obj(uf(*args))

    return rule


def _unary_rule(name: str) -> Rule:
    uf = np.frompyfunc(_unary(name), 1, 1)

    def rule(ctx: Any, eqn: Any, x: np.ndarray) -> np.ndarray:
        return obj(uf(x))

    return rule


def _to_complex(x: Any) -> CBall:
    if x is None:
        return None
    if isinstance(x, acb):
        return x
    if isinstance(x, arb):
        return acb(x) if x.is_finite() else INDET_C  # an infinite real part: no finite complex ball
    return acb(int(x))


def _convert(ctx: Any, eqn: Any, x: np.ndarray) -> np.ndarray:
    new = np.dtype(eqn.params["new_dtype"])
    if is_complex(new):
        return obj(np.frompyfunc(_to_complex, 1, 1)(np.asarray(x).astype(object)))
    if is_float(new):  # complex -> real: the real part, as lax does
        return obj(np.frompyfunc(lambda v: _part(v, False), 1, 1)(x))
    raise ctx.unsupported(eqn, f"complex to {new} conversion (a decision on both parts)")


def _eq(ctx: Any, eqn: Any, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    ne = _compat.primitive_name(eqn) == "ne"

    def one(x: CBall, y: CBall) -> bool:
        if x is None or y is None:
            return ne  # NaN compares unequal
        if x.is_exact() and y.is_exact():
            return (x == y) != ne
        if not x.overlaps(y):
            return ne
        raise Undecided

    return np.asarray(np.frompyfunc(one, 2, 1)(a, b), dtype=bool)


def _select_n(ctx: Any, eqn: Any, which: np.ndarray, *cases: np.ndarray) -> np.ndarray:
    w = np.asarray(which).astype(np.int64)
    shape = np.broadcast_shapes(w.shape, *(c.shape for c in cases))
    w = np.broadcast_to(w, shape)
    stacked = [np.broadcast_to(c, shape) for c in cases]
    out = np.empty(shape, dtype=object)
    for idx in np.ndindex(shape):
        out[idx] = stacked[int(w[idx])][idx]
    return out


def _fold_sum(values: Sequence[CBall]) -> CBall:
    acc: CBall = _ZERO_C
    for v in values:
        if v is None:
            return None
        acc = acc + v
    return acc


def _fold_prod(values: Sequence[CBall]) -> CBall:
    acc: CBall = acb(1)
    for v in values:
        if v is None:
            return None
        acc = acc * v
    return acc


def _reduction(fold: Callable[[Sequence[CBall]], CBall]) -> Rule:
    def rule(ctx: Any, eqn: Any, x: np.ndarray) -> np.ndarray:
        axes = tuple(int(a) for a in eqn.params["axes"])
        keep = [d for d in range(x.ndim) if d not in axes]
        moved = np.transpose(x, keep + list(axes))
        lead = moved.shape[: len(keep)]
        rows = moved.reshape((*lead, -1))
        out = np.empty(lead, dtype=object)
        for idx in np.ndindex(lead):
            out[idx] = fold(list(rows[idx]))
        return out

    return rule


def _cumulative(product: bool) -> Rule:
    def totals(values: Sequence[CBall]) -> list[CBall]:
        out: list[CBall] = []
        acc: CBall = acb(1) if product else _ZERO_C
        for v in values:
            acc = None if acc is None or v is None else (acc * v if product else acc + v)
            out.append(acc)
        return out

    def rule(ctx: Any, eqn: Any, x: np.ndarray) -> np.ndarray:
        return prefix_scan(eqn, x, totals)

    return rule


def _dot_general(ctx: Any, eqn: Any, lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    lc, rc, lb, rb = (tuple(int(d) for d in t) for t in (lc, rc, lb, rb))
    lhs = lhs if lhs.dtype == object and _all_complex(lhs) else obj(np.frompyfunc(_to_complex, 1, 1)(
        np.asarray(lhs).astype(object)))
    rhs = rhs if rhs.dtype == object and _all_complex(rhs) else obj(np.frompyfunc(_to_complex, 1, 1)(
        np.asarray(rhs).astype(object)))
    lf = [d for d in range(lhs.ndim) if d not in lc and d not in lb]
    rf = [d for d in range(rhs.ndim) if d not in rc and d not in rb]
    L = np.transpose(lhs, list(lb) + lf + list(lc))
    R = np.transpose(rhs, list(rb) + rf + list(rc))
    bshape = L.shape[: len(lb)]
    lfs, rfs = L.shape[len(lb): len(lb) + len(lf)], R.shape[len(rb): len(rb) + len(rf)]
    L = L.reshape((*bshape, *lfs, -1))
    R = R.reshape((*bshape, *rfs, -1))
    out = np.empty((*bshape, *lfs, *rfs), dtype=object)
    for b in np.ndindex(bshape):
        for i in np.ndindex(lfs):
            for j in np.ndindex(rfs):
                row, col = L[(*b, *i)], R[(*b, *j)]
                out[(*b, *i, *j)] = _fold_sum([None if u is None or v is None else u * v
                                               for u, v in zip(row, col)])
    return out


def _all_complex(x: np.ndarray) -> bool:
    return all(v is None or isinstance(v, acb) for v in x.flat)


# ------------------------------------------------------------------------------------------- fft
def _dft_1d(vec: Sequence[CBall], inverse: bool) -> list[CBall]:
    """The exact DFT of one vector of balls (``inverse``: with the 1/n factor), as Arb computes it.

    ``acb.dft`` evaluates the transform in ball arithmetic: every output ball contains the exact
    ``sum_j x_j exp(-+2 pi i jk/n)`` (divided by n for the inverse), the roots of unity enclosed."""
    if any(v is None for v in vec):
        return [None] * len(vec)
    if not vec:
        return []
    return list(acb.dft(list(vec), inverse=inverse))


def _along(x: np.ndarray, axis: int, fn: Callable[[list[CBall]], list[CBall]], n_out: int) -> np.ndarray:
    moved = np.moveaxis(x, axis, -1)
    lead = moved.shape[:-1]
    out = np.empty((*lead, n_out), dtype=object)
    for idx in np.ndindex(lead):
        res = np.empty(n_out, dtype=object)
        res[:] = fn(list(moved[idx]))
        out[idx] = res
    return np.moveaxis(out, -1, axis)


def _fft(ctx: Any, eqn: Any, x: np.ndarray) -> np.ndarray:
    kind = getattr(eqn.params["fft_type"], "name", str(eqn.params["fft_type"])).upper()
    kind = kind.rsplit(".", 1)[-1]
    lengths = tuple(int(n) for n in eqn.params["fft_lengths"])
    k = len(lengths)
    axes = list(range(x.ndim - k, x.ndim))
    if kind in ("FFT", "IFFT"):
        out = x
        for ax in axes:
            out = _along(out, ax, lambda v: _dft_1d(v, kind == "IFFT"), out.shape[ax])
        return obj(out)
    if kind == "RFFT":
        n = lengths[-1]
        out = obj(np.frompyfunc(_to_complex, 1, 1)(x))
        out = _along(out, axes[-1], lambda v: _dft_1d(v, False)[: n // 2 + 1], n // 2 + 1)
        for ax in axes[:-1]:
            out = _along(out, ax, lambda v: _dft_1d(v, False), out.shape[ax])
        return obj(out)
    if kind == "IRFFT":
        n = lengths[-1]
        out = x
        for ax in axes[:-1]:
            out = _along(out, ax, lambda v: _dft_1d(v, True), out.shape[ax])

        def half_inverse(v: list[CBall]) -> list[CBall]:
            # The Hermitian extension of the n//2 + 1 given terms; the imaginary parts of the terms
            # that must be real (0, and n/2 for even n) are dropped, as pocketfft and XLA drop them.
            if any(t is None for t in v):
                return [None] * n
            full: list[CBall] = [None] * n
            for j in range(n):
                if j <= n // 2:
                    t = v[j]
                    full[j] = acb(t.real) if j == 0 or 2 * j == n else t
                else:
                    full[j] = v[n - j].conjugate()
            return [t.real for t in _dft_1d(full, True)]

        return obj(_along(out, axes[-1], half_inverse, n))
    raise ctx.unsupported(eqn, f"fft_type {kind}")


# ------------------------------------------------------------------------------------------ table
def _real_part(ctx: Any, eqn: Any, x: np.ndarray) -> np.ndarray:
    return obj(np.frompyfunc(lambda v: _part(v, False), 1, 1)(x))


def _imag_part(ctx: Any, eqn: Any, x: np.ndarray) -> np.ndarray:
    return obj(np.frompyfunc(lambda v: _part(v, True), 1, 1)(x))


def _make_complex(ctx: Any, eqn: Any, re: np.ndarray, im: np.ndarray) -> np.ndarray:
    def one(a: Any, b: Any) -> CBall:
        if a is None or b is None:
            return None
        if not (a.is_finite() and b.is_finite()):
            return INDET_C
        return acb(a, b)

    return obj(np.frompyfunc(one, 2, 1)(re, im))


def _abs(z: acb) -> arb:
    return abs(z)


def _integer_pow(ctx: Any, eqn: Any, x: np.ndarray) -> np.ndarray:
    y = int(eqn.params["y"])

    def one(z: CBall) -> CBall:
        if z is None:
            return None
        if y < 0 and z.is_exact() and z.is_zero():
            return None
        return z ** y

    return obj(np.frompyfunc(one, 1, 1)(x))


RULES: dict[str, Rule] = {
    "add": _elementwise(lambda a, b: a + b, 2),
    "add_any": _elementwise(lambda a, b: a + b, 2),
    "sub": _elementwise(lambda a, b: a - b, 2),
    "mul": _elementwise(lambda a, b: a * b, 2),
    "div": lambda ctx, eqn, a, b: obj(np.frompyfunc(_div, 2, 1)(a, b)),
    "pow": lambda ctx, eqn, a, b: obj(np.frompyfunc(_pow, 2, 1)(a, b)),
    "neg": _elementwise(lambda a: -a, 1),
    "conj": _elementwise(lambda a: a.conjugate(), 1),
    "square": _elementwise(lambda a: a * a, 1),
    "integer_pow": _integer_pow,
    "abs": _elementwise(_abs, 1),
    "sign": lambda ctx, eqn, x: obj(np.frompyfunc(_sign, 1, 1)(x)),
    "real": _real_part,
    "imag": _imag_part,
    "complex": _make_complex,
    "convert_element_type": _convert,
    "eq": _eq,
    "ne": _eq,
    "select_n": _select_n,
    "reduce_sum": _reduction(_fold_sum),
    "reduce_prod": _reduction(_fold_prod),
    "cumsum": _cumulative(False),
    "cumprod": _cumulative(True),
    "dot_general": _dot_general,
    "fft": _fft,
    "max": minmax(True),
    "min": minmax(False),
    "reduce_max": _reduction(fold_pick(True)),
    "reduce_min": _reduction(fold_pick(False)),
    "sort": complex_sort,
    "cummax": complex_cumulative(True),
    "cummin": complex_cumulative(False),
    **{f"scatter{sep}{kind}": complex_scatter(kind) for kind in ("mul", "max", "min") for sep in ("-", "_")},
}
RULES.update({name: _unary_rule(name) for name in (
    "exp", "expm1", "log", "log1p", "sqrt", "rsqrt", "sin", "cos", "tan", "sinh", "cosh", "tanh",
    "asin", "acos", "atan", "asinh", "acosh", "atanh",
)})

#: Primitives that only move, copy or route values (or call sub-programs): their real rules treat the
#: balls as opaque objects, so they serve complex values unchanged.
PASS_THROUGH: frozenset[str] = frozenset({
    "broadcast_in_dim", "reshape", "squeeze", "expand_dims", "transpose", "concatenate", "slice",
    "dynamic_slice", "dynamic_update_slice", "rev", "copy", "copy_p", "scan", "while", "cond", "pad",
    "gather", "scatter", "tile", "stop_gradient",
    *CALLS, *CUSTOM_DERIVATIVES,
    "jaxstab_exact",  # a library routine in a gradient's reference: its Routine says what it takes
})


#: Linear primitives evaluated part by part with their real rules (exact: each part is the real
#: primitive on that part, ``Re(sum z_i) = sum Re z_i``).
_BY_PARTS: frozenset[str] = frozenset({"scatter-add", "scatter_add"})


#: Bilinear primitives evaluated from four real products of parts, ``(a + ib) * (c + id) = ac - bd +
#: i(ad + bc)`` (exact: each real product is exact, and so are the sums of their balls).
_BILINEAR: frozenset[str] = frozenset({"conv_general_dilated"})


def _bilinear(real_rule: Rule) -> Rule:
    from ..core._arb import ufunc

    def rule(ctx: Any, eqn: Any, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        def parts(x: np.ndarray, imag: bool) -> np.ndarray:
            if x.dtype != object:
                x = obj(np.frompyfunc(_to_complex, 1, 1)(np.asarray(x).astype(object)))
            return obj(np.frompyfunc(lambda v: _part(v, imag), 1, 1)(x)) if x.size else x

        (ar, ai), (br, bi) = ((parts(x, False), parts(x, True)) for x in (a, b))
        re = ufunc("sub")(obj(real_rule(ctx, eqn, ar, br)), obj(real_rule(ctx, eqn, ai, bi)))
        im = ufunc("add")(obj(real_rule(ctx, eqn, ar, bi)), obj(real_rule(ctx, eqn, ai, br)))
        return _make_complex(ctx, eqn, obj(re), obj(im))

    return rule


def _by_parts(real_rule: Rule) -> Rule:
    def rule(ctx: Any, eqn: Any, *args: np.ndarray) -> np.ndarray:
        def parts(x: np.ndarray, imag: bool) -> np.ndarray:
            if x.dtype != object:  # indices
                return x
            return obj(np.frompyfunc(lambda v: _part(v, imag), 1, 1)(x)) if x.size else x

        re = real_rule(ctx, eqn, *(parts(a, False) for a in args))
        im = real_rule(ctx, eqn, *(parts(a, True) for a in args))
        return _make_complex(ctx, eqn, obj(re), obj(im))

    return rule


def involves_complex(eqn: Any) -> bool:
    """Whether an equation has a complex operand or result (then ``rule_for`` decides its rule)."""
    atoms = [*eqn.invars, *eqn.outvars]
    return any(is_complex(_compat.aval(v).dtype) for v in atoms)


def rule_for(eqn: Any, real_rules: dict[str, Rule]) -> Rule | None:
    """The rule for an equation with complex values: this module's, a pass-through real one, or None."""
    name = _compat.primitive_name(eqn)
    if name in RULES:
        return RULES[name]
    if name in PASS_THROUGH:
        return real_rules.get(name)
    if name in _BY_PARTS and name in real_rules:
        return _by_parts(real_rules[name])
    if name in _BILINEAR and name in real_rules:
        return _bilinear(real_rules[name])
    return None


def unsupported_reason(eqn: Any) -> str:
    """Why an equation with complex values cannot be evaluated exactly (for ``UnsupportedPrimitive``)."""
    name = _compat.primitive_name(eqn)
    return (f"{name} on complex values has no exact rule yet; docs/architecture.md, 'The oracle', lists "
            "the complex primitives")


def out_is_complex(eqn: Any, i: int = 0) -> bool:
    return is_complex(out_aval(eqn, i).dtype)
