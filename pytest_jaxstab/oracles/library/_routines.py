"""Library routines judged by their mathematics, not by the approximation that implements them.

``jax.scipy.special.log_ndtr`` (up to jax 0.12.0) is an asymptotic series truncated after three terms
below -20; ``ndtri`` is a set of rational approximations; ``i0`` is Cephes' Chebyshev expansions.
Evaluating such a body exactly gives the exact value of the *approximation*, so its truncation error
would be invisible: jax 0.12.0's ``log_ndtr(-20.0)`` in float64 returns -203.91715537511897 where the
function is -203.917155371097264, and the body evaluated exactly agrees with the former. Where the
jaxpr holds a call to a routine listed here (recognised by the Python function the ``custom_jvp``/``jit``
call wraps: its name *and* its file, so a user's own ``log_ndtr`` is not mistaken for JAX's; where a
release moved a routine, ``_compat.library_places`` gives its places), the oracle evaluates the
mathematical function the routine stands for, with Arb balls, and never enters the body.

Routines whose bodies are exact formulas (``softplus = logaddexp(x, 0)``, ``log_sigmoid``, ``silu``) are
listed too: their exact value is the same either way, but the routine then counts as one operation for
``jst.local_error`` and the NaN walk, which blame the routine and the user's line that called it.

Users declare their own routines with ``define`` (``_define``; a decorator or a call): the
oracle then judges the function by the ``exact`` ball function given, wherever a program calls it.

Every entry is elementwise: each output element is a function of the input elements at the same index
(scalars broadcast). Each scalar function takes balls (``flint.arb``) or ``None`` (NaN) and returns a
ball enclosing the exact value, ``None`` where the value provably does not exist, or an indeterminate
ball where this precision cannot say (the escalation then tries a higher one).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import numpy as np
from flint import acb, arb

from ... import _compat
from ..core._arb import FUNCTIONS as F
from ..core._common import INDET, NEG_INF, POS_INF, ZERO, ints_to_arb, is_complex, is_float, out_aval
from ._functions import (
    _sqrt2,
    _strict,
    bessel,
    betaln,
    d_bessel,
    d_gammaincinv_y,
    gamma,
    gammaincinv,
    ndtri_exp,
)
from ._functions import fresnel as _fresnel
from ._functions import owens_t as _owens_t
from ._functions import sici as _sici

__all__ = ["BUILTIN", "EXACT_BODIES", "EXACT_PRIMITIVE", "NORMAL", "NOT_COVERED", "PIECEWISE", "RULES",
           "STATIC", "USER", "Routine", "lookup", "routine_name"]

#: The oracle-only primitive that stands for a routine call in a gradient's reference program
#: (``_reference``): its ``routine`` parameter is the :class:`Routine` evaluated.
EXACT_PRIMITIVE = "jaxstab_exact"

Ball = Any


@dataclasses.dataclass(frozen=True)
class Routine:
    """A library routine the oracle evaluates by its mathematics.

    Attributes:
      name: the routine's name as users know it (``log_ndtr``, ``ndtri``, ``softplus``).
      exact: the scalar function on balls (see the module docstring).
      nargs: how many inputs it takes.
      origin: where it comes from (``jax.scipy.special``, ``jax.nn``, or ``user``).
      nout: how many results (``exact`` then returns a tuple of balls: ``sici``, ``fresnel``).
      partials: a user routine's exact partial derivatives, one scalar ball function per argument
        (``define(..., derivative=...)``; None for an argument without one), or those of a routine made
        per static argument (``STATIC``: ``jn``'s order), or None; the other built-in ones are in
        ``_derivatives``.
      leading: the routine's arguments are the call's first ``nargs`` operands and the call's other
        operands are computed from them (``spence`` is a ``jnp.piecewise`` call on ``x`` and conditions
        on ``x``).
      complex: its arguments and results are complex: ``exact`` takes and returns ``flint.acb`` balls
        (None: no value), as ``_complex`` holds them (``wofz``).
    """

    name: str
    exact: Callable[..., Ball]
    nargs: int
    origin: str
    nout: int = 1
    partials: tuple[Callable[..., Ball] | None, ...] | None = None
    leading: bool = False
    complex: bool = False


# ------------------------------------------------------------------------------------ ball helpers
def _fin(x: Ball) -> bool:
    return x is not None and x.is_finite()


def _is_inf(x: Ball, sign: int) -> bool:
    return x is not None and x.is_exact() and not x.is_finite() and not x.is_nan() and (x > 0) == (sign > 0)


def _log_erfc_bounds(t: arb) -> arb:
    """An enclosure of ``log(erfc(t))`` for ``t >= 0`` that stays tight where ``erfc`` underflows.

    Abramowitz & Stegun 7.1.13: for ``t >= 0``,
    ``2/sqrt(pi) exp(-t^2) / (t + sqrt(t^2 + 2)) < erfc(t) <= 2/sqrt(pi) exp(-t^2) / (t + sqrt(t^2 + 4/pi))``.
    Both bounds are evaluated in ball arithmetic and joined: the result is rigorous at every ``t >= 0``;
    its width, about ``0.18/t^2``, is what makes it useful only for large ``t``.
    """
    pi = arb.pi()
    base = -(t * t) + (arb(2) / pi.sqrt()).log()
    lo = base - (t + (t * t + 2).sqrt()).log()
    hi = base - (t + (t * t + 4 / pi).sqrt()).log()
    return lo.union(hi)


def _log_erfc_nonneg(t: arb) -> arb:
    """``log(erfc(t))`` for a ball ``t >= 0``: Arb's ``erfc`` intersected with the asymptotic bounds."""
    direct = t.erfc()
    out = direct.log() if direct > 0 else INDET
    if t > 1:
        bound = _log_erfc_bounds(t)
        if not out.is_finite():
            return bound
        if out.overlaps(bound):
            return out.intersection(bound)
    return out


@_strict
def _log_ndtr(x: arb) -> Ball:
    """``log(Phi(x))``, ``Phi`` the standard normal CDF: ``log(erfc(-x/sqrt 2) / 2)``."""
    if _is_inf(x, 1):
        return ZERO
    if _is_inf(x, -1):
        return NEG_INF
    t = -x / _sqrt2()
    if t >= 0:
        return _log_erfc_nonneg(t) - arb(2).log()
    if t < 0:  # x > 0: log(1 - erfc(x/sqrt 2)/2), the tail is tiny: log1p keeps its relative accuracy
        return (-(-t).erfc() / 2).log1p()
    return INDET  # straddles 0: a higher precision narrows it


@_strict
def _spence(x: arb) -> Ball:
    """Spence's function as JAX (and SciPy) define it for real ``x``: ``int_1^x log(t)/(1 - t) dt =
    Li2(1 - x)`` for ``x >= 0``, NaN below 0 (JAX's convention); ``pi^2/6`` at 0, -inf at +inf."""
    if x < 0:
        return None
    if _is_inf(x, 1):
        return NEG_INF
    if x.is_exact() and x.is_zero():
        return arb.pi() ** 2 / 6
    if not x > 0:
        return INDET
    return (1 - x).polylog(2)


@_strict
def _ndtr(x: arb) -> Ball:
    if _is_inf(x, 1):
        return arb(1)
    if _is_inf(x, -1):
        return ZERO
    return (-x / _sqrt2()).erfc() / 2


def _erfcinv_ball(y: arb) -> Ball:
    """``erfcinv`` on ``[0, 2]``: +inf at 0, -inf at 2, NaN outside."""
    if y < 0 or y > 2:
        return None
    if y.is_exact() and y.is_zero():
        return POS_INF
    if y.is_exact() and y == 2:
        return NEG_INF
    if y > 0 and y < 2:
        return y.erfcinv()
    return INDET


@_strict
def _erfcinv(y: arb) -> Ball:
    if not y.is_finite():
        return None
    return _erfcinv_ball(y)


@_strict
def _ndtri(p: arb) -> Ball:
    """The standard normal quantile: ``-sqrt(2) * erfcinv(2 p)``; NaN outside ``[0, 1]``."""
    if not p.is_finite():
        return None
    r = _erfcinv_ball(2 * p)
    if r is None or not r.is_finite():
        return r if r is None or r.is_nan() else -r
    return -_sqrt2() * r


@_strict
def _erfcx(x: arb) -> Ball:
    """``exp(x^2) erfc(x)``; its tail uses the same A&S 7.1.13 bounds, exact to ``1/(x sqrt pi)``."""
    if _is_inf(x, 1):
        return ZERO
    if _is_inf(x, -1):
        return POS_INF
    direct = (x * x).exp() * x.erfc()
    if x > 1:
        two_rpi = 2 / arb.pi().sqrt()
        lo = two_rpi / (x + (x * x + 2).sqrt())
        hi = two_rpi / (x + (x * x + 4 / arb.pi()).sqrt())
        bound = lo.union(hi)
        if not direct.is_finite():
            return bound
        if direct.overlaps(bound):
            return direct.intersection(bound)
    return direct


@_strict
def _expi(x: arb) -> Ball:
    if _is_inf(x, 1):
        return POS_INF
    if _is_inf(x, -1):
        return ZERO
    if x.is_exact() and x.is_zero():
        return NEG_INF
    if x.contains(0):
        return INDET
    return x.ei()


def _bessel_i(n: int) -> Callable[[Ball], Ball]:
    @_strict
    def f(x: arb) -> Ball:
        if not x.is_finite():  # I0(+-inf) = +inf, I1(+-inf) = +-inf
            return POS_INF if n == 0 or x > 0 else NEG_INF
        return x.bessel_i(n)

    return f


@_strict
def _dawsn(x: arb) -> Ball:
    """Dawson's integral ``sqrt(pi)/2 exp(-x^2) erfi(x)``; odd, ``1/(2x)`` at infinity (0 there)."""
    if not x.is_finite():
        return ZERO
    return arb.pi().sqrt() / 2 * (-(x * x)).exp() * x.erfi()


def _nonneg_int(n: arb) -> int | None:
    v = n.unique_fmpz() if n.is_exact() and n.is_finite() and n >= 0 else None
    return None if v is None else int(v)


@_strict
def _expn(n: arb, x: arb) -> Ball:
    """``E_n(x) = int_1^inf exp(-x t) / t^n dt`` for integer ``n >= 0``, ``x >= 0``; NaN elsewhere."""
    k = _nonneg_int(n)
    if k is None or x < 0:
        return None
    if _is_inf(x, 1):
        return ZERO
    if x.is_exact() and x.is_zero():
        return POS_INF if k <= 1 else arb(1) / (k - 1)
    if not x > 0:
        return INDET
    return x.expint(arb(k))


@_strict
def _hyp1f1(a: arb, b: arb, x: arb) -> Ball:
    """Kummer's ``1F1(a; b; x)``, finite arguments (a pole at a non-positive integer ``b`` is left
    undecided)."""
    if not (a.is_finite() and b.is_finite() and x.is_finite()):
        return INDET
    return x.hypgeom_1f1(a, b)


@_strict
def _poch(z: arb, m: arb) -> Ball:
    """The rising factorial ``Gamma(z + m) / Gamma(z)``, finite arguments."""
    if not (z.is_finite() and m.is_finite()):
        return INDET
    return arb.rising(z, m)


def _log1mexp(x: Ball) -> Ball:
    return F["log"](F["neg"](F["expm1"](F["neg"](x))))


def _softplus(x: Ball) -> Ball:
    return F["log1p"](F["exp"](x))


def _log_sigmoid(x: Ball) -> Ball:
    return F["neg"](_softplus(F["neg"](x)))


def _silu(x: Ball) -> Ball:
    return F["mul"](x, F["logistic"](x))


def _mish(x: Ball) -> Ball:
    return F["mul"](x, F["tanh"](_softplus(x)))


def _exp_neg_sq(x: Ball) -> Ball:
    """``exp(-x^2)``: the factor of erf's derivative, which JAX (0.11+) writes with ``|x|`` clamped to 11
    and a split square: its body is exp(-121) for |x| > 11 where the function is far smaller."""
    if x is None:
        return None
    if _is_inf(x, 1) or _is_inf(x, -1):
        return ZERO
    return (-(x * x)).exp()


def _wofz(z: Ball) -> Ball:
    """The Faddeeva function ``w(z) = exp(-z^2) erfc(-i z)`` on complex balls (entire: no cut)."""
    if z is None:
        return None
    return (-(z * z)).exp() * (-acb(0, 1) * z).erfc()


_SPECIAL = "jax/_src/scipy/special.py"
_THIRD_PARTY = "jax/_src/third_party/scipy/special.py"
_PIECEWISE = ("_piecewise", "jax/_src/numpy/lax_numpy.py")
_NN = "jax/_src/nn/functions.py"
_NUMPY = "jax/_src/numpy/lax_numpy.py"  # jnp.i0 and the i1 behind jax.scipy.special.i1

#: The built-in routines: ``(file suffix, function name) -> Routine``.
#: The normal CDF and its log by the name of the function JAX computes, wherever a release defines it:
#: a custom_jvp of ``log_ndtr`` in scipy/special.py up to 0.12.0, jit and custom_jvp calls in lax/erf.py
#: from 0.12.1 (``_compat.library_places``); ``ndtr`` inlined up to 0.12.0 (``_inline``).
NORMAL: dict[str, Routine] = {
    "log_ndtr": Routine("log_ndtr", _log_ndtr, 1, "jax.scipy.special"),
    "ndtr": Routine("ndtr", _ndtr, 1, "jax.scipy.special"),
}

BUILTIN: dict[tuple[str, str], Routine] = {
    **{("jax/" + file, name): routine for function, routine in NORMAL.items()
       for file, name in _compat.library_places(function)},
    (_SPECIAL, "_ndtri"): Routine("ndtri", _ndtri, 1, "jax.scipy.special"),
    (_SPECIAL, "_erfcinv"): Routine("erfcinv", _erfcinv, 1, "jax.scipy.special"),
    (_SPECIAL, "_erfcx"): Routine("erfcx", _erfcx, 1, "jax.scipy.special"),
    (_SPECIAL, "expi"): Routine("expi", _expi, 1, "jax.scipy.special"),
    (_SPECIAL, "_dawsn"): Routine("dawsn", _dawsn, 1, "jax.scipy.special"),
    (_SPECIAL, "_owens_t_impl"): Routine("owens_t", _owens_t, 2, "jax.scipy.special"),
    (_SPECIAL, "sici"): Routine("sici", _sici, 1, "jax.scipy.special", nout=2),
    (_THIRD_PARTY, "fresnel"): Routine("fresnel", _fresnel, 1, "jax.scipy.special", nout=2),
    # jax 0.12.1: fresnel is a plain function around the custom_jvp `_fresnel`
    (_THIRD_PARTY, "_fresnel"): Routine("fresnel", _fresnel, 1, "jax.scipy.special", nout=2),
    (_SPECIAL, "_expn"): Routine("expn", _expn, 2, "jax.scipy.special"),
    # jax 0.10: a custom_jvp call of one operand (n is static) around a jit of `expn` itself on (n, x)
    (_SPECIAL, "expn"): Routine("expn", _expn, 2, "jax.scipy.special"),
    (_SPECIAL, "hyp1f1"): Routine("hyp1f1", _hyp1f1, 3, "jax.scipy.special"),
    # jax 0.12.1: hyp1f1 promotes its arguments and calls the custom_jvp `_hyp1f1`
    (_SPECIAL, "_hyp1f1"): Routine("hyp1f1", _hyp1f1, 3, "jax.scipy.special"),
    # jax 0.12.1's own implementations (Stirling's series in double-word arithmetic, a rational guess
    # refined by Newton steps); before, betaln was lgamma sums and gamma gammasgn * exp(lgamma), inline
    ("jax/_src/scipy/betaln.py", "_betaln"): Routine("betaln", betaln, 2, "jax.scipy.special"),
    ("jax/_src/scipy/gamma.py", "gamma_real"): Routine("gamma", gamma, 1, "jax.scipy.special"),
    (_SPECIAL, "_ndtri_exp"): Routine("ndtri_exp", ndtri_exp, 1, "jax.scipy.special"),
    ("jax/_src/lax/erf.py", "exp_neg_sq"): Routine("exp_neg_sq", _exp_neg_sq, 1, "jax.lax"),
    (_SPECIAL, "_wofz"): Routine("wofz", _wofz, 1, "jax.scipy.special", complex=True),
    (_SPECIAL, "poch"): Routine("poch", _poch, 2, "jax.scipy.special"),
    (_NUMPY, "i0_impl"): Routine("i0", _bessel_i(0), 1, "jax.scipy.special"),
    (_NUMPY, "_i1"): Routine("i1", _bessel_i(1), 1, "jax.scipy.special"),
    (_NN, "softplus"): Routine("softplus", _softplus, 1, "jax.nn"),
    (_NN, "log_sigmoid"): Routine("log_sigmoid", _log_sigmoid, 1, "jax.nn"),
    (_NN, "silu"): Routine("silu", _silu, 1, "jax.nn"),
    (_NN, "mish"): Routine("mish", _mish, 1, "jax.nn"),
    (_NN, "log1mexp"): Routine("log1mexp", _log1mexp, 1, "jax.nn"),
}

_BESSEL = "jax/_src/scipy/bessel.py"


@functools.cache
def _bessel_routine(kind: str, n: int) -> Routine:
    return Routine(f"{kind}n" if kind != "i" else "iv", bessel(kind, n), 1, "jax.scipy.special",
                   partials=(d_bessel(kind, n),))


@functools.cache
def _gammaincinv_routine(complement: bool) -> Routine:
    return Routine("gammainccinv" if complement else "gammaincinv", gammaincinv(complement), 2,
                   "jax.scipy.special", partials=(None, d_gammaincinv_y(complement)))


def _complement(static: tuple[Any, ...]) -> Routine | None:
    return _gammaincinv_routine(static[0]) if len(static) == 1 and isinstance(static[0], bool) else None


def _integer_order(kind: str) -> Callable[[tuple[Any, ...]], Routine | None]:
    def make(static: tuple[Any, ...]) -> Routine | None:
        n = static[0] if len(static) == 1 else None
        return _bessel_routine(kind, int(n)) if isinstance(n, int | np.integer) else None

    return make


#: Routines whose call carries a static argument (``nondiff_argnums``) that is not among its operands,
#: read from the call (``_compat.custom_jvp_static_args``): ``(file suffix, function name) -> the routine
#: for those static arguments`` (None: not one the oracle evaluates). JAX 0.12.1's integer-order Bessel
#: functions (series, Miller's recurrence and Hankel's expansion in double-word arithmetic, whose
#: exactly-zero error terms balls cannot prove zero: their bodies end uncertain) and the inverses of the
#: regularized incomplete gamma function (static: which of P and Q; a guess refined by Halley steps).
STATIC: dict[tuple[str, str], Callable[[tuple[Any, ...]], Routine | None]] = {
    (_BESSEL, "_jn"): _integer_order("j"),
    (_BESSEL, "_yn"): _integer_order("y"),
    (_BESSEL, "_iv"): _integer_order("i"),
    (_BESSEL, "_kn"): _integer_order("k"),
    (_SPECIAL, "_gammaincinv"): _complement,
}

#: Routines that are a ``jnp.piecewise`` call made directly by a function of JAX's (the call is named
#: only ``_piecewise``; the frame that called ``piecewise`` names the routine):
#: ``(file suffix, calling function) -> Routine``.
PIECEWISE: dict[tuple[str, str], Routine] = {
    (_SPECIAL, "_spence"): Routine("spence", _spence, 1, "jax.scipy.special", leading=True),
}

#: Calls of JAX's own code that the oracle evaluates through their bodies because the body *is* the
#: mathematics (a formula, a convention such as ``xlogy(0, y) = 0``, a generic ``jnp`` helper): the
#: exact evaluation of the body is the function. ``name -> why``.
EXACT_BODIES: dict[str, str] = {
    **dict.fromkeys(("_where", "clip", "cumsum", "fmod", "isinf", "remainder", "signbit", "polyval",
                     "gammasgn"), "a jnp helper: exact operations, the same function in exact arithmetic"),
    **dict.fromkeys(("logaddexp", "logit", "xlogy", "xlog1py", "_xlogx", "_rel_entr"),
                    "a closed formula, with the documented convention at 0 (0 log 0 = 0)"),
    **dict.fromkeys(("relu", "relu6", "celu", "elu", "selu", "leaky_relu", "hard_sigmoid", "hard_silu",
                     "hard_tanh", "identity", "soft_sign", "sparse_plus", "sparse_sigmoid", "squareplus"),
                    "a jax.nn activation defined by its formula (piecewise: the ties are the definition)"),
    **dict.fromkeys(("log_softmax", "logmeanexp", "standardize"),
                    "a reduction along an axis written as its formula (not elementwise)"),
    "zeta": "wraps the zeta primitive, which the oracle evaluates by its mathematics",
    "_erfcinv_impl": "inside erfcinv, which is evaluated by its mathematics and never entered",
    # jax 0.12.1
    "_sincospisquaredhalf": ("sin and cos of pi x^2/2 as sinpi and cospi of x^2/2 reduced modulo 2 by fmod: "
                             "the same function in exact arithmetic (fresnel's derivative)"),
    "_logit": "log(p) - log1p(-p), folded by logit(1 - x) = -logit(x): a closed formula",
    "hypot": "sqrt(x^2 + y^2) with both legs scaled by a power of two: a closed formula",
    "_logsumexp_impl": ("logsumexp's body in a custom_jvp: log(sum(exp(x - m))) + m with m the (finite) "
                        "maximum, exact for any m in exact arithmetic"),
    "_softmax": "softmax's body in a custom_jvp: exp(x - m) / sum(exp(x - m)), exact for any shift m",
    "_soft_sign_and_scale": ("soft_sign's body in a custom_jvp: x / (1 + |x|) and the derivative's scale "
                             "1 / (1 + |x|)^2, closed formulas"),
    **dict.fromkeys(("two_prod", "f2_add", "f2_add_ordered", "scale_f2_pow2"),
                    "double-word arithmetic without loss (Dekker's product, Knuth's sum, a power-of-two "
                    "scale): the pair sums to the exact result in exact arithmetic"),
}

#: JAX routines whose bodies are approximations the oracle still evaluates exactly (so their own error
#: is not seen), with the reason. ``name -> why``.
NOT_COVERED: dict[str, str] = {
    "_piecewise": "jnp.piecewise: a generic helper (spence's own call is recognised by its caller, "
                  "PIECEWISE)",
    "sincospisquaredhalf": "inside fresnel, which is evaluated by its mathematics and never entered",
    # jax 0.12.1
    "_gamma_real_impl": "gamma_real's body, entered only through gamma_real, evaluated by its mathematics",
    **dict.fromkeys(("f2_mul", "f2_square", "f2_recip", "f2_div", "log_f2", "exp_f2_mant_exp"),
                    "double-word arithmetic that drops the low product or stops a Newton step or a "
                    "polynomial early; called only inside routines evaluated by their mathematics "
                    "(gamma_real, the integer-order Bessel functions of STATIC)"),
    "_gammaincinv_impl": "_gammaincinv's body (Halley steps from an asymptotic guess), entered only through "
                         "_gammaincinv, evaluated by its mathematics",
}

#: Routines declared with ``define``: ``(function name, file, first line) -> Routine``.
USER: dict[tuple[str, str, int], Routine] = {}


# -------------------------------------------------------------------------------------- recognition
def lookup(eqn: Any) -> Routine | None:
    """The routine a ``jit``/``custom_jvp``/``custom_vjp`` call (or a ``jaxstab_exact`` equation)
    stands for, or None."""
    if _compat.primitive_name(eqn) == EXACT_PRIMITIVE:
        return eqn.params["routine"]
    info = _compat.callee(eqn)
    if info is None:
        return None
    name, file, line = info
    routine = USER.get((name, file, line))
    path = file.replace("\\", "/")
    if routine is None:
        routine = next((r for (suffix, fname), r in BUILTIN.items()
                        if name == fname and path.endswith(suffix)), None)
    if routine is None:
        make = next((m for (suffix, fname), m in STATIC.items() if name == fname and path.endswith(suffix)),
                    None)
        static = None if make is None else _compat.custom_jvp_static_args(eqn)
        routine = None if static is None or make is None else make(static)
    if routine is None and name == _PIECEWISE[0] and path.endswith(_PIECEWISE[1]):
        caller = _compat.caller_of(eqn, "piecewise", _PIECEWISE[1])
        routine = None if caller is None else next(
            (r for (suffix, fname), r in PIECEWISE.items()
             if caller[0] == fname and caller[1].endswith(suffix)), None)
    if routine is None or not _called_as_itself(routine, eqn):
        return None
    return routine


def _called_as_itself(routine: Routine, eqn: Any) -> bool:
    """Whether the call has the routine's own signature: ``nargs`` operands, one real result. JAX's
    transformations keep the name on calls of other signatures (a linearized ``softplus`` returning
    residuals too): those are evaluated through their bodies."""
    n = len(eqn.invars) - _compat.leading_consts(eqn)
    arity = n == routine.nargs or (routine.leading and n > routine.nargs)
    kind = is_complex if routine.complex else is_float
    return (arity and len(eqn.outvars) == routine.nout
            and all(kind(out_aval(eqn, i).dtype) for i in range(routine.nout)))


def routine_name(eqn: Any) -> str | None:
    """The name of the library routine ``eqn`` calls (``log_ndtr``), or None when it calls none."""
    r = lookup(eqn)
    return None if r is None else r.name


@functools.cache
def _vectorised(routine: Routine) -> np.ufunc:
    return np.frompyfunc(routine.exact, routine.nargs, routine.nout)


def evaluate_call(routine: Routine, eqn: Any, args: tuple[np.ndarray, ...]) -> list[np.ndarray]:
    """The routine's exact values on the call's operands (balls), broadcast as the call's result."""
    lead = _compat.leading_consts(eqn)  # calls may pass their function's consts first
    operands = list(args)[lead:lead + routine.nargs]
    balls = [x if x.dtype == object else ints_to_arb(x) for x in operands]
    with np.errstate(all="ignore"):  # Arb's internals may raise the FPU's flags; numpy reports them
        out = _vectorised(routine)(*balls)
    outs = list(out) if routine.nout > 1 else [out]
    return [np.asarray(o, dtype=object) if isinstance(o, np.ndarray) else _scalar(o) for o in outs]


def _exact_call(_ctx: Any, eqn: Any, *args: np.ndarray) -> list[np.ndarray]:
    return evaluate_call(eqn.params["routine"], eqn, args)


#: The interpreter's rule for ``jaxstab_exact`` equations.
RULES: dict[str, Callable[..., list[np.ndarray]]] = {EXACT_PRIMITIVE: _exact_call}


def _scalar(v: Any) -> np.ndarray:
    a = np.empty((), dtype=object)
    a[()] = v
    return a
