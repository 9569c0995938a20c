"""Stability rules for the normal distribution written through erf/erfc/erfinv, and for the inverse
hyperbolic functions written as logs.

Statistics code writes the standard normal CDF as ``0.5 * (1 + erf(x / sqrt(2)))``: for x << 0 the
``1 + erf`` cancels to 0 (x < -5.4 in float32, -8.3 in float64) where Φ(x) is still 1e-8 .. 1e-300,
and its log is -inf. The quantile ``sqrt(2) * erfinv(2p - 1)`` rounds ``2p - 1`` to -1 for small p
(the exact quantile of p = 1e-30 is -11.46; as written it is -inf). ``log(x + sqrt(x² + 1))``
cancels for x << 0 and overflows for |x| > 1.8e19 (float32). Each rule's docstring states the
identity; the forms are ``_forms_special``'s (accurate where JAX's ``ndtr`` and ``log_ndtr`` are
not) or JAX's own ``ndtri``, ``asinh``, ``acosh``, ``atanh``.

The √2 of the CDF is matched however it was written (``x / jnp.sqrt(2.0)``, ``x * 0.7071067811865476``,
``x / 1.4142135``, ``(x - mu) / (sigma * sqrt(2))``): a constant within 2^-20 of 1/√2 or √2 (seven
significant digits) is accepted, so ``x * 0.7071`` or ``erf(x / 3)`` are not Φ. The rewrite keeps
the program's value over the reals: a constant that is √2 rounded (to float32, to 7 digits) means
Φ(x·(1 + rel)) with ``rel`` its exact relative distance (computed from the constant, below 2^-20),
and the forms evaluate exactly that (in the far tail Φ's relative condition number is x², so even a
rounded float32 1/√2 moves the result by tens of ulps). JAX's own ``ndtr`` means Φ itself (the
oracle judges it so): inlined into the program (jax 0.10 to 0.12.0) it is matched by its formula and
recognised by its source location, its rounded 1/√2 dropped (``_mark_library``); from jax 0.12.1 it is
a call of its own, recognised by the function it wraps (name and file: ``_compat.library_function``),
never by the equations of one release's body.

JAX 0.12.1's ``ndtr`` and ``log_ndtr`` are accurate (``_compat.ACCURATE``: within 3.3 ulps, value and
derivative; our forms within 3.7, no better on average): a bare call, and their bodies, are left alone.
What is written *around* them still loses (``1 - ndtr(x)``, ``log(ndtr(x))``, ``log(ndtr(b) -
ndtr(a))``): that is rewritten whichever ``ndtr`` is installed.
"""

from __future__ import annotations

import decimal
import math
import weakref
from typing import Any

import jax
import jax.numpy as jnp
from jax.scipy.special import ndtri

from ... import _compat
from ..._primitives import CALLS
from ..engine._match import Graph, Match
from ..engine._pattern import any_of, const, fixed, op, square_of, var
from ..engine._rule import Rule
from ..forms import _special as _forms_special
from ._stability_written import _named

ONE, HALF, TWO = const(1.0), const(0.5), const(2.0)
_SQRT2 = math.sqrt(2.0)
_TOL = 2.0**-20  # seven significant digits: 1.4142135 and float32's √2 pass, 1.4142 does not


def _example(f: Any, shapes: Any = ((8,),), domain: Any = None) -> dict[str, Any]:
    return {"example": f, "example_shapes": shapes, "example_domain": domain}


# Mixed-precision spellings (x64 code: a float64 value over a float32 scale times √2): the scale's
# product is float32, widened against the float64 numerator. `jst.verify_rule` cannot build them
# from the pattern (it types every variable alike), so they are the rules' own examples.
_F64, _F32 = jax.ShapeDtypeStruct((8,), jnp.float64), jax.ShapeDtypeStruct((8,), jnp.float32)
_R2 = lambda s: s * jnp.sqrt(2.0)
_ERF, _ERFC = jax.scipy.special.erf, jax.scipy.special.erfc
_MIXED_PHI = ((lambda x, s: 0.5 * (1 + _ERF(-x / _R2(s))), (_F64, _F32), (-1e4, 1e4)),)
_MIXED_LOG_PHI = ((lambda x, s: jnp.log(0.5 * (1 + _ERF(-x / _R2(s)))), (_F64, _F32), (-1e4, 1e4)),)
_MIXED_SCALED_PHI = tuple((f, (_F64, _F64, _F32), (-1e4, 1e4)) for f in (
    lambda y, x, s: 0.5 * y * (1 + _ERF(x / _R2(s))),
    lambda y, x, s: 0.5 * y * (1 + _ERF(-(x / _R2(s)))),
    lambda y, x, s: 0.5 * y * (1 + _ERF(-x / _R2(s))),
    lambda y, x, s: 0.5 * y * _ERFC(x / _R2(s)),
    lambda y, x, s: 0.5 * y * _ERFC(-(x / _R2(s))),
))


def _near(target: float) -> Any:
    return lambda v: math.isfinite(v) and abs(v / target - 1) <= _TOL


def _constant(target: float, tag: str = "") -> Any:
    """``target`` (√2 or 1/√2) as a folded constant, or as ``jnp.sqrt(2.0)`` / ``jnp.sqrt(0.5)`` traced
    (a float64 ``sqrt`` converted to the operand's dtype). With a ``tag``, the constant is captured
    as ``{tag}k`` (a literal) or ``{tag}r`` (the radicand of a traced square root)."""
    square = target * target
    root = op("sqrt", const(_near(square), name=f"{tag}r" if tag else None))
    return any_of(const(_near(target), name=f"{tag}k" if tag else None), root,
                  op("convert_element_type", root))


_C_SQRT2, _C_INV = _constant(_SQRT2), _constant(1 / _SQRT2)


def _scale_error(caps: dict[str, Any], tag: str) -> float:
    """``rel`` with the program's multiplier of x equal to (1 + rel)/√2 exactly: 0 for JAX's own
    ``ndtr`` (it means Φ) and for ``x /
    jnp.sqrt(2.0)`` (the square root of 2 is exact in the program's meaning: conversions between
    floats are the identity), -1.7e-8 for float32's rounded 1/√2, 4.4e-8 for ``x / 1.4142135``."""
    if caps.get(f"{tag}lib"):
        return 0.0
    with decimal.localcontext() as ctx:
        ctx.prec = 40
        two = decimal.Decimal(2)
        for kind, power in (("m", 1), ("d", -1)):
            k, r = caps.get(f"{tag}{kind}k"), caps.get(f"{tag}{kind}r")
            if k is not None:
                mult = decimal.Decimal(k) ** power
            elif r is not None:
                mult = decimal.Decimal(r).sqrt() ** power
            else:
                continue
            return float(mult * two.sqrt() - 1)
    return 0.0


# ------------------------------------------------------------------------------------- the gate
_SPECIAL = frozenset({"erf", "erfc", "erf_inv"})
_ARITH = frozenset({"add", "sub", "mul", "div", "neg", "select_n"})
_LAST: list[Any] = [None, False]  # (weak reference to the last program looked at, its answer)
_SUB_HAS: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()  # per sub-jaxpr
_NORMAL_CALLS = frozenset({"ndtr", "log_ndtr"})
_CALL_HEADS = CALLS | {"custom_jvp_call"}


def _normal_call(eqn: Any) -> bool:
    """Whether ``eqn`` calls JAX's ``ndtr`` or ``log_ndtr`` (by the function it wraps: jax 0.12.1's
    ``jit`` and ``custom_jvp`` calls, 0.10 to 0.12.0's ``custom_jvp`` of ``log_ndtr``)."""
    return _compat.primitive_name(eqn) in _CALL_HEADS and _compat.library_function(eqn) in _NORMAL_CALLS


def _graph_has_special(g: Graph) -> bool:
    """Whether the program has an erf/erfc/erfinv or a call of JAX's ndtr/log_ndtr at all; the pass
    asks once per equation, about one program at a time, so the last answer is kept."""
    last = _LAST[0]() if _LAST[0] is not None else None
    if last is not g:
        _LAST[0] = weakref.ref(g)
        _LAST[1] = _has_special(g.eqns, 0)
    return bool(_LAST[1])


def _has_special(eqns: Any, depth: int) -> bool:
    """erf/erfc/erf_inv among ``eqns`` or in their sub-jaxprs: jax 0.10 keeps ``jax.scipy``'s erf
    in a jit call of its own, which a ``cond`` or ``scan`` body holds as an equation with a jaxpr.
    A sub-jaxpr's answer is kept while it lives: each pass builds a new program, but the bodies of
    its calls (replacements' ``jit`` and ``custom_jvp`` bodies among them) are the same objects."""
    for e in eqns:
        if _compat.primitive_name(e) in _SPECIAL or _normal_call(e):
            return True
        if depth < 4 and any(_sub_has_special(sub.jaxpr, depth + 1) for _, sub in _compat.subjaxprs(e)):
            return True
    return False


def _sub_has_special(jaxpr: Any, depth: int) -> bool:
    known = _SUB_HAS.get(jaxpr)
    if known is None:
        known = _SUB_HAS[jaxpr] = _has_special(jaxpr.eqns, depth)
    return known


def _producer(g: Graph, atom: Any) -> Any:
    """The equation producing ``atom`` once glue is seen through (``Graph.producer_past_glue``)."""
    return g.producer_past_glue(atom)


def _reads_special(g: Graph, eqn: Any, depth: int) -> bool:
    for a in eqn.invars:
        head = g.head(a)[0]
        if head in _SPECIAL:
            return True
        if head in _CALL_HEADS:
            call = _producer(g, a)
            if call is not None and _normal_call(call):
                return True
        if depth > 1 and head in _ARITH:
            inner = _producer(g, a)
            if inner is not None and _reads_special(g, inner, depth - 1):
                return True
    return False


def _jax_own(eqn: Any) -> bool:
    """Whether ``eqn`` is JAX's own accurate formula: a bare call of an accurate ``ndtr``/``log_ndtr``
    (jax 0.12.1's: our forms are no better, see the module docstring) or an equation of such a
    routine's body (``log(_ndtr(-|x|))`` inside 0.12.1's ``_log_ndtr`` is its own stable branch)."""
    if _compat.primitive_name(eqn) in _CALL_HEADS and _compat.accurate_library_call(eqn):
        return True
    return _compat.traced_in_accurate_call(eqn)


def _special_gate(g: Graph, i: int, depth: int = 5) -> bool:
    """A cheap refusal: the program has an erf/erfc/erfinv or a call of JAX's ndtr at all (one look per
    program and pass), this equation is one or reads one within five arithmetic steps
    (``log(1 - ndtr(x))`` on jax 0.12.0: log, sub, mul, select_n, select_n, erfc), and it is not JAX's
    own accurate formula (:func:`_jax_own`)."""
    if not _graph_has_special(g):
        return False
    eqn = g.eqns[i]
    name = _compat.primitive_name(eqn)
    if not (name in _SPECIAL or _normal_call(eqn) or _reads_special(g, eqn, depth)):
        return False
    return not _jax_own(eqn)


# --------------------------------------------------------------------- the argument x / √2
def _scaled(v: Any, tag: str) -> Any:
    """``v / √2`` as written: ``v * (1/√2)``, ``v / √2``, ``v / (s * √2)`` (``{tag}s`` captured, and the
    constants as ``{tag}m*`` (multipliers) or ``{tag}d*`` (divisors))."""
    scale = op("mul", var(f"{tag}s"), _constant(_SQRT2, f"{tag}d"))  # float64 when √2 is traced
    return any_of(op("mul", v, _constant(1 / _SQRT2, f"{tag}m")),
                  op("div", v, _constant(_SQRT2, f"{tag}d")),
                  op("div", v, any_of(scale, op("convert_element_type", scale))))


def _arg(tag: str) -> Any:
    """``u / √2`` or ``-u / √2``: captures ``{tag}x`` (u), or ``{tag}n`` (-u), and ``{tag}s``."""
    x, n = f"{tag}x", f"{tag}n"
    return any_of(_scaled(var(x), tag), op("neg", _scaled(var(n), tag)), _scaled(op("neg", var(n)), tag))


def _value(caps: dict[str, Any], tag: str) -> Any:
    """The u with erf's argument = u/√2, from the captures of :func:`_arg` (None: tag not matched)."""
    if f"{tag}x" in caps:
        u = caps[f"{tag}x"]
    elif f"{tag}n" in caps:
        u = -caps[f"{tag}n"]
    else:
        return None
    s = caps.get(f"{tag}s")
    return u if s is None else _forms_special.quotient(u, s)


def _library_ndtr(tag: str) -> Any:
    """``jax.scipy.special.ndtr(x)`` / ``norm.cdf`` as JAX inlines it: 0.5 * select(|w| < 1/√2,
    1 + erf(w), select(w > 0, 2 - erfc(|w|), erfc(|w|))), w = x/√2."""
    w = op("mul", var(f"{tag}x"), _constant(1 / _SQRT2, f"{tag}m"), name=f"{tag}w")
    z = op("abs", w, name=f"{tag}z")
    tail = op("select_n", op("gt", w, const(0.0)), op("erfc", z), op("sub", TWO, op("erfc", z)))
    return op("mul", HALF, op("select_n", op("lt", z, _C_INV), tail, op("add", ONE, op("erf", w))))


def _library_ndtr_call(tag: str) -> Any:
    """``jax.scipy.special.ndtr(x)`` / ``norm.cdf`` as jax 0.12.1 writes it: a ``jit`` of erf.py's
    ``ndtr`` (recognised by the function it wraps, name and file), which means Φ(x) itself (``{tag}lib``)."""
    is_ndtr = lambda body: _compat.library_function(body) == "ndtr"
    return fixed(op(("jit", "pjit"), var(f"{tag}x"), params={"jaxpr": is_ndtr}), **{f"{tag}lib": True})


def _phi_forms(pos: str, neg: str) -> Any:
    """The spellings of Φ(u) (captures tagged ``pos``) and of Φ(-u) = erfc(u/√2)/2 (tagged ``neg``)."""
    ep, en = op("erf", _arg(pos)), op("erf", _arg(neg))
    cn = op("erfc", _arg(neg))
    return any_of(
        op("mul", HALF, op("add", ONE, ep)), op("div", op("add", ONE, ep), TWO),
        op("add", HALF, op("mul", HALF, ep)), op("add", HALF, op("div", ep, TWO)),
        _library_ndtr(pos), _library_ndtr_call(pos),
        op("mul", HALF, cn), op("div", cn, TWO),
        op("mul", HALF, op("sub", ONE, en)), op("div", op("sub", ONE, en), TWO),
        op("sub", HALF, op("mul", HALF, en)), op("sub", HALF, op("div", en, TWO)),
    )


_TAGS = ("p", "q", "ap", "aq", "bp", "bq")


def _mark_library(m: Match) -> bool:
    """A ``where`` that accepts every match and marks each Φ spelled by JAX's own inlined ``ndtr``
    (jax 0.10 to 0.12.0: its equations traced under ``jax.scipy.special.ndtr``,
    ``_compat.inlined_library_function``, as the oracle recognises it: see
    ``oracles/library/_inline.py``) with ``{tag}lib``: that Φ means Φ(x) itself, not the formula with
    1/√2 rounded that JAX inlined, so its ``rel`` is 0. A Φ written by hand with a rounded constant
    keeps its ``rel``. The graph is the one the gate looked at last (``Rule.find`` runs the gate,
    then the match, then ``where``); an atom not found there leaves the match unmarked. (A call of
    0.12.1's ``ndtr`` is marked by its pattern, :func:`_library_ndtr_call`.)"""
    g = _LAST[0]() if _LAST[0] is not None else None
    if g is None:
        return True
    for tag in _TAGS:
        atom = m.atoms.get(f"{tag}w")
        if atom is None or _compat.is_literal(atom):
            continue
        for j in (*m.swallowed, m.root):
            eqn = g.eqns[j]
            if any(o is atom for o in eqn.outvars):
                hit = _compat.inlined_library_function(eqn)
                if hit is not None and hit[0] == "ndtr":
                    m.captures[f"{tag}lib"] = True
                break
    return True


def _signed(caps: dict[str, Any], p: str = "p", q: str = "q") -> tuple[Any, float]:
    """``(x, rel)`` with the matched expression = Φ(x·(1 + rel)): tag ``p`` reads Φ(u), tag ``q``
    Φ(-u). JAX's own ``ndtr`` (marked by :func:`_mark_library`) means Φ: rel = 0."""
    u = _value(caps, p)
    if u is not None:
        return u, _scale_error(caps, p)
    return -_value(caps, q), _scale_error(caps, q)


# Φ(u) and its complement 1 - Φ(u) = Φ(-u) (the complement's forms have their tags swapped)
_PHI = any_of(_phi_forms("p", "q"), op("sub", ONE, _phi_forms("q", "p")))


# ------------------------------------------------------------------------------------- normal_cdf
def _normal_cdf(**caps: Any) -> Any:
    """(1 + erf(x/√2))/2 = erfc(-x/√2)/2 = Φ(x);  1 - Φ(x) = (1 - erf(x/√2))/2 = Φ(-x) (the ``1 ± erf``
    cancels to 0 in the tail where Φ is 1e-8 .. 1e-300). Also JAX's own ``ndtr`` (norm.cdf), whose
    lower tail rounds the scaled argument: up to 7.7 / 10.8 bits (float32 / float64)."""
    return _forms_special.ndtr(*_signed(caps))


NORMAL_CDF = Rule(
    "normal_cdf", _PHI, _normal_cdf, gate=_special_gate, where=_mark_library, examples=_MIXED_PHI,
    **_example(lambda x: 0.5 * (1 + jax.scipy.special.erf(x / jnp.sqrt(2.0))), domain=(-1e4, 1e4)),
)


# ------------------------------------------------------------------------------- scaled_normal_cdf
def _scaled_normal_cdf(y: Any, **caps: Any) -> Any:
    """y·(1 + erf(x/√2))/2 = y·Φ(x) and y·erfc(x/√2)/2 = y·Φ(-x), the factor 1/2 written with y: the
    exact GELU ``0.5 * x * (1 + erf(x / sqrt(2)))`` and ``jax.nn.gelu(approximate=False)`` (y = x;
    Φ's tail as above: the written forms lose the x²-conditioned rounding of x/√2, 9 bits at
    x = -37 in float64, or cancel to 0)."""
    return _forms_special.scaled_ndtr(y, *_signed(caps))


_Y = var("y")
_ONE_PLUS_ERF = op("add", ONE, op("erf", _arg("p")))
_ERFC_Q = op("erfc", _arg("q"))
SCALED_NORMAL_CDF = Rule(
    "scaled_normal_cdf",
    any_of(op("mul", op("mul", HALF, _Y), _ONE_PLUS_ERF), op("mul", op("mul", HALF, _Y), _ERFC_Q),
           op("mul", HALF, op("mul", _Y, _ONE_PLUS_ERF)), op("mul", HALF, op("mul", _Y, _ERFC_Q)),
           op("div", op("mul", _Y, _ONE_PLUS_ERF), TWO), op("div", op("mul", _Y, _ERFC_Q), TWO)),
    _scaled_normal_cdf, gate=_special_gate, examples=_MIXED_SCALED_PHI,
    **_example(lambda x: 0.5 * x * (1 + jax.scipy.special.erf(x / jnp.sqrt(2.0))), domain=(-1e4, 1e4)),
)


# ----------------------------------------------------------------------------------- log_normal_cdf
def _log_normal_cdf(**caps: Any) -> Any:
    """log Φ(x) = log_ndtr(x) for every spelling of Φ above (``log(ndtr(x))`` included, whichever
    ``ndtr`` is installed: -inf where Φ underflows); log(1 - Φ(x)) = log1p(-Φ(x)) = log_ndtr(-x). A call
    of JAX's own ``log_ndtr`` (norm.logcdf) is replaced only where that routine is inaccurate: jax 0.10
    to 0.12.0's, the log of ``1 - Q(x)`` rounded for 0 < x < 5 / 8 (up to 20 / 49 bits off) and a
    truncated series below -20 (17 bits at -20, float64). jax 0.12.1's is as accurate as the form
    (3.2 ulps, derivative 2.9; the form 3.2 and 3.5): the gate refuses it (``_jax_own``)."""
    if "lx" in caps:
        return _forms_special.log_ndtr(caps["lx"])
    return _forms_special.log_ndtr(*_signed(caps))


# JAX's log_ndtr by the function the call wraps (name and file, not a user's `log_ndtr`): the custom_jvp
# of jax 0.10 to 0.12.0 (0.12.1's `_log_ndtr` inside its jit is accurate and refused by the gate)
_LOG_NDTR_CALL = op("custom_jvp_call", var("lx"),
                    call_jaxpr=lambda body: _compat.library_function(body) == "log_ndtr")
LOG_NORMAL_CDF = Rule(
    "log_normal_cdf",
    any_of(op("log", _PHI),
           op("log1p", op("neg", _phi_forms("q", "p"))),
           _LOG_NDTR_CALL),
    _log_normal_cdf, where=_mark_library, gate=_special_gate,
    examples=_MIXED_LOG_PHI,
    **_example(lambda x: jnp.log(0.5 * jax.scipy.special.erfc(-x / jnp.sqrt(2.0))),
               domain=(-1e4, 1e4)),
)


# ---------------------------------------------------------------------------------------- log_erfc
def _log_erfc(z: Any = None, nz: Any = None) -> Any:
    """log(erfc(z)) = log(1 - erf(z)) = log1p(-erf(z));  log(1 + erf(z)) = log(erfc(-z)) (erfc underflows
    for z > 9.2 / 26.5, and 1 - erf(z) cancels for z > 3 / 6, where the log is still finite)."""
    return _forms_special.log_erfc(z if z is not None else -nz)


_Z, _NZ = var("z"), var("nz")
LOG_ERFC = Rule(
    "log_erfc",
    any_of(op("log", op("erfc", _Z)), op("log", op("sub", ONE, op("erf", _Z))),
           op("log1p", op("neg", op("erf", _Z))),
           op("log", op("add", ONE, op("erf", _NZ))), op("log1p", op("erf", _NZ)),
           op("log", op("erfc", op("neg", _NZ)))),
    _log_erfc, gate=_special_gate,
    **_example(lambda z: jnp.log(jax.lax.erfc(z)), domain=(-1e4, 1e4)),
)


# ------------------------------------------------------------------------------- erfc identities
def _erfc_of(z: Any = None, nz: Any = None, mz: Any = None, e: Any = None) -> Any:
    """1 - erf(z) = erfc(z);  1 + erf(z) = erfc(-z);  erf(z) - 1 = -erfc(z);  1 - erfc(z) = erf(z)
    (each difference cancels where the other function is accurate). Composable: the Φ and log rules
    continue from these."""
    if z is not None:
        return jax.lax.erfc(z)
    if nz is not None:
        return jax.lax.erfc(-nz)
    if mz is not None:
        return -jax.lax.erfc(mz)
    return jax.lax.erf(e)


ERFC_IDENTITIES = Rule(
    "erfc_identities",
    any_of(op("sub", ONE, op("erf", _Z)), op("add", ONE, op("erf", _NZ)),
           op("sub", op("erf", var("mz")), ONE), op("add", op("erf", var("mz")), const(-1.0)),
           op("sub", ONE, op("erfc", var("e")))),
    _erfc_of, gate=_special_gate, composable=True,
    **_example(lambda z: 1 + jax.scipy.special.erf(z), domain=(-1e4, 1e4)),
)


# ---------------------------------------------------------------------------------- normal_quantile
def _erfinv_forms(tag: str) -> Any:
    """erfinv(2p - 1) in its spellings: captures ``{tag}y`` for erfinv(y - 1) (= ndtri(y/2)/√2),
    ``{tag}m`` for erfinv(1 - y) (= -ndtri(y/2)/√2), ``{tag}p`` for erfinv(2(p - 1/2)) (= ndtri(p)/√2)."""
    y, m, p = var(f"{tag}y"), var(f"{tag}m"), var(f"{tag}p")
    return any_of(op("erf_inv", op("sub", y, ONE)), op("erf_inv", op("add", y, const(-1.0))),
                  op("erf_inv", op("sub", ONE, m)),
                  op("erf_inv", op("mul", TWO, op("sub", p, HALF))))


def _quantile_of(caps: dict[str, Any], tag: str) -> Any:
    """√2·erfinv(...) for the matched spelling, as ``ndtri`` of p itself (None: tag not matched)."""
    if f"{tag}y" in caps:
        return ndtri(caps[f"{tag}y"] / 2)
    if f"{tag}m" in caps:
        return -ndtri(caps[f"{tag}m"] / 2)
    if f"{tag}p" in caps:
        return ndtri(caps[f"{tag}p"])
    return None


def _normal_quantile(**caps: Any) -> Any:
    """√2·erfinv(2p - 1) = ndtri(p), the normal quantile; erfinv(y - 1) = ndtri(y/2)/√2 and
    erfinv(1 - y) = -ndtri(y/2)/√2 (``2p - 1`` rounds to -1 for p < 3e-8 / 1e-16: p's own bits are
    lost before erfinv sees them; ndtri reads p). The √2 may be written on either side, or as a
    division by 1/√2; ``-√2`` negates."""
    scaled = _quantile_of(caps, "s")
    if scaled is not None:
        return scaled if caps.get("k", 1.0) > 0 else -scaled
    return _quantile_of(caps, "u") * (1 / _SQRT2)


_K = const(lambda v: _near(_SQRT2)(abs(v)), name="k")
_KD = const(lambda v: _near(1 / _SQRT2)(abs(v)), name="k")
NORMAL_QUANTILE = Rule(
    "normal_quantile",
    any_of(op("mul", any_of(_K, _C_SQRT2), _erfinv_forms("s")),
           op("div", _erfinv_forms("s"), any_of(_KD, _C_INV)), _erfinv_forms("u")),
    _normal_quantile, gate=_special_gate,
    **_example(lambda p: jnp.sqrt(2.0) * jax.scipy.special.erfinv(2 * p - 1), domain=(1e-30, 1.0)),
)


# ---------------------------------------------------------------------------- ndtri(1 - p)
def _ndtri_complement(p: Any) -> Any:
    """ndtri(1 - p) = -ndtri(p) (1 - p rounds to 1 for p < 6e-8 / 1.1e-16, and its low bits are
    lost before; the upper quantile of a small tail probability is -ndtri(p))."""
    return -ndtri(p)


def _is_ndtri(call: Any) -> bool:
    # jax.scipy.special.ndtri's custom rule wraps ``_ndtri`` (JAX 0.11+; 0.10 inlines it)
    return _named("_ndtri")(call) or _named("ndtri")(call)


NDTRI_COMPLEMENT = Rule(
    "ndtri_complement",
    op("custom_jvp_call", op("sub", ONE, var("p")), call_jaxpr=_is_ndtri),
    _ndtri_complement,
    **_example(lambda p: jax.scipy.special.ndtri(1 - p), domain=(1e-30, 1.0)),
)


# ----------------------------------------------------------------------- inverse hyperbolics
x = var("x")
_SQ = square_of(x)
_SQRT_SQ_PLUS_1 = op("sqrt", op("add", _SQ, ONE))
_SQRT_SQ_MINUS_1 = any_of(op("sqrt", op("sub", _SQ, ONE)),
                          op("sqrt", op("mul", op("sub", x, ONE), op("add", x, ONE))))


def _asinh(x: Any = None, nx: Any = None) -> Any:
    """log(x + sqrt(x² + 1)) = asinh(x);  log(sqrt(x² + 1) - x) = -asinh(x) (the sum cancels for
    x << 0, x² overflows for |x| > 1.8e19 in float32)."""
    return jnp.arcsinh(x) if x is not None else -jnp.arcsinh(nx)


_NX = var("nx")
ASINH = Rule(
    "asinh",
    any_of(op("log", op("add", x, _SQRT_SQ_PLUS_1)),
           op("log", op("sub", op("sqrt", op("add", square_of(_NX), ONE)), _NX))),
    _asinh, gate=lambda g, i: g.head(g.eqns[i].invars[0])[0] in ("add", "sub"),
    **_example(lambda x: jnp.log(x + jnp.sqrt(x * x + 1)), domain=(-1e30, 1e30)),
)


def _acosh(x: Any) -> Any:
    """log(x + sqrt(x² - 1)) = acosh(x) (x >= 1; x² - 1 overflows for x > 1.8e19 in float32 and
    rounds near 1)."""
    return jnp.arccosh(x)


ACOSH = Rule(
    "acosh", op("log", op("add", x, _SQRT_SQ_MINUS_1)), _acosh,
    gate=lambda g, i: g.head(g.eqns[i].invars[0])[0] == "add",
    **_example(lambda x: jnp.log(x + jnp.sqrt(x**2 - 1)), domain=(1.0, 1e30)),
)


def _atanh(x: Any) -> Any:
    """log((1 + x)/(1 - x))/2 = (log1p(x) - log1p(-x))/2 = atanh(x) (|x| < 1; 1 ± x rounds for small
    x: atanh(1e-10) is 1e-10, the quotient's log 0 in float32)."""
    return jnp.arctanh(x)


_RATIO_LOG = any_of(op("log", op("div", op("add", ONE, x), op("sub", ONE, x))),
                    op("sub", op("log1p", x), op("log1p", op("neg", x))),
                    op("sub", op("log", op("add", ONE, x)), op("log", op("sub", ONE, x))))
_LOGS = frozenset({"log", "log1p"})


def _atanh_look(name: str, heads2: tuple[Any, ...]) -> bool:
    """An operand is the log of a quotient, or a difference of two logs (two levels: a network's
    ``0.3 * (a - b)`` is refused before any match, once per distinct look)."""
    for (head, _), below in heads2:
        if below is None or head not in ("log", "sub"):
            continue
        heads = [h for h, _ in below]
        if (head == "log" and heads == ["div"]) or (head == "sub" and all(h in _LOGS for h in heads)):
            return True
    return False


ATANH = Rule(
    "atanh", any_of(op("mul", HALF, _RATIO_LOG), op("div", _RATIO_LOG, TWO)), _atanh,
    first_look=_atanh_look,
    **_example(lambda x: 0.5 * jnp.log((1 + x) / (1 - x)), domain=(-1.0, 1.0)),
)

#: The rules of this module, in the order the catalogue tries them (see ``_stability.STABILITY``; the
#: masses between two bounds, ``_stability_mass``, come before them): the logs before
#: ``erfc_identities`` (a log of ``1 + erf`` is a log_erfc, not a log of erfc(-z)).
SPECIAL_RULES: tuple[Rule, ...] = (LOG_NORMAL_CDF, LOG_ERFC, NORMAL_CDF, SCALED_NORMAL_CDF, NORMAL_QUANTILE,
                                   NDTRI_COMPLEMENT, ERFC_IDENTITIES, ASINH, ACOSH, ATANH)
