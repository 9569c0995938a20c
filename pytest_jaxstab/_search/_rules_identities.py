"""Identities of complex arithmetic and of powers, tried by the e-graph and directly at every sub-term.

FPBench writes a complex operation as the real programs of its two parts: a division's
``(a c + b d) / (c c + d d)``, a square root's ``0.5 sqrt(2 (sqrt(re re + im im) + re))``. Their stable
forms branch on the inputs (Smith's division on ``|d| <= |c|``, the square root on the sign of ``re``), and
an e-graph reaches a two-branch form only through a rule that writes it whole: those rules are here, in
the family ``complex-forms`` (``_rules`` registers it). The e-graph saturates the sub-term local error
points at, which for a division is its numerator alone; so ``_subterm_rewrites`` also applies the
same rules directly at every sub-term of the written program (matching modulo the order of the operands
of ``+`` and ``*``), and normalises one-input rational sub-terms exactly (``_rational``): every candidate
is then judged by the oracle and re-checked like the e-graph's own, never offered where it loses.

The forms:

- Smith's division with Baudin and Smith's repair (2012): where ``d / c`` underflows to 0, ``b (d / c)``
  is computed as ``d (b / c)``; where an input reaches ``2**1000``, every input is halved first (exact for
  normal floats) so that ``a + b r`` and ``c + d r`` cannot overflow. The ratio of the larger part keeps
  ``c c + d d`` from overflowing or underflowing.
- The complex square root's parts by ``hypot``, with the cancelling branch ``|im| / sqrt(2 (h - re))``
  (``(h + re)(h - re) = im**2``) where ``re < 0`` (the imaginary part: where ``re > 0``).
- ``(1 + a)**b - 1 = expm1(b log1p(a))`` (compound interest), and ``a**c - b**c = b**c expm1(c log1p((a -
  b) / b))`` (``(x + 1)**(1/n) - x**(1/n)``, a cube root written as a power), each guarded to the inputs
  where the identity holds (the written form elsewhere).
"""

from __future__ import annotations

__all__ = ["IDENTITY_SOURCE"]



def _smith(real: bool, half: bool) -> str:
    """Smith's division with Baudin-Smith's repair: the real part of (a + ib)/(c + id), or the imaginary;
    ``half``: each sum of the quotient is of halved terms (no overflow). The ratios are of the inputs as
    given: a halved input may be subnormal, which XLA's CPU backend flushes to zero."""
    r, s = "(div d c)", "(div c d)"

    def plus(x: str, y: tuple[str, str], op: str = "add", swap: bool = False) -> str:
        """x + y[0] y[1] (``swap``: y[0] y[1] + x); halved: x/2 + (y[0]/2) y[1]. Not x/2 + (y[0] y[1])/2:
        XLA's simplifier factors a common multiplier out of a sum, which brings back the overflow."""
        prod = f"(mul (mul {y[0]} 0.5) {y[1]})" if half else f"(mul {y[0]} {y[1]})"
        lone = f"(mul {x} 0.5)" if half else x
        return f"({op} {prod} {lone})" if swap else f"({op} {lone} {prod})"

    if real:  # (a c + b d) / (c c + d d)
        small = f"(where (lt 0 (abs {r})) {plus('a', ('b', r))} {plus('a', ('d', '(div b c)'))})"
        large = f"(where (lt 0 (abs {s})) {plus('b', ('a', s))} {plus('b', ('c', '(div a d)'))})"
    else:  # (b c - a d) / (c c + d d)
        small = (f"(where (lt 0 (abs {r})) {plus('b', ('a', r), 'sub')} "
                 f"{plus('b', ('d', '(div a c)'), 'sub')})")
        large = (f"(where (lt 0 (abs {s})) {plus('a', ('b', s), 'sub', True)} "
                 f"{plus('a', ('c', '(div b d)'), 'sub', True)})")
    return (f"(where (le (abs d) (abs c)) (div {small} {plus('c', ('d', r))}) "
            f"(div {large} {plus('d', ('c', s))}))")


def _smith_scaled(real: bool) -> str:
    """The plain quotient where it and its denominator are finite (a finite numerator over an overflowed
    denominator is a finite 0); else the halved sums'. Decided by finiteness, not by a magnitude: no
    constant of one float type (2**1000 overflows float32)."""
    plain, halved = _smith(real, False), _smith(real, True)
    den = "(where (le (abs d) (abs c)) (add c (mul d (div d c))) (add (mul c (div c d)) d))"
    return f"(where (lt (abs {plain}) inf) (where (lt (abs {den}) inf) {plain} {halved}) {halved})"


_H = "(hypot a b)"
#: Where ``hypot`` or ``2 (h + a)`` overflows (decided by finiteness: no constant of one float type), the
#: halved inputs' ``hypot`` (exact halving there) and ``2 sqrt(h/2) sqrt(1 + (a/2) / (h/2))``.
_H2 = "(hypot (mul a 0.5) (mul b 0.5))"


def _root(sign: str) -> str:
    """sqrt(2 (h + a)) (``sign`` "add"; "sub": sqrt(2 (h - a))) with no cancellation and no overflow:
    where the sum cancels, |b| / sqrt((h - a) / 2) (``(h + a)(h - a) = b**2``)."""
    other = "sub" if sign == "add" else "add"
    plain = f"(sqrt (mul 2 ({sign} {_H} a)))"
    direct = (f"(where (lt {plain} inf) {plain} "
              f"(mul 2 (mul (sqrt {_H2}) (sqrt ({sign} 1 (div (mul a 0.5) {_H2}))))))")
    plain_den = f"(sqrt (mul 0.5 ({other} {_H} a)))"
    via_b = (f"(div (abs b) (where (lt {plain_den} inf) {plain_den} "
             f"(mul (sqrt {_H2}) (sqrt ({other} 1 (div (mul a 0.5) {_H2}))))))")
    cancels = "(lt a 0)" if sign == "add" else "(lt 0 a)"
    return f"(where {cancels} {via_b} {direct})"


_SQRT_PLUS, _SQRT_MINUS = _root("add"), _root("sub")
_MOD = "(sqrt (add (mul a a) (mul b b)))"


def _finite(holds: str, new: str, written: str) -> str:
    """``new`` where the identity ``holds`` and ``new`` is a finite float; the ``written`` form elsewhere
    (``b**c expm1(...)`` is ``0 * inf`` where ``b**c`` underflows and the expm1 overflows)."""
    return f"(where {holds} (where (lt (abs {new}) inf) {new} {written}) {written})"

_L = "(log1p (div (sub a b) b))"
#: b**c expm1(c L), L = log1p((a - b) / b). Where |c L| < 2**-60, expm1(c L) = c L to the last bit: the
#: product is (b**c c) L, and where also |(a - b) / b| < 2**-60 (L = (a - b) / b to the last bit), (b**c c
#: (a - b)) / b: c L and (a - b) / b alone may be subnormal, which XLA's CPU backend flushes to zero
#: ((x + 1)**(1/3) - x**(1/3) for x > 1.5e307).
_TINY = "8.673617379884035e-19"
_POW_DIFF = (f"(where (lt (abs (mul c {_L})) {_TINY}) (where (lt (abs (div (sub a b) b)) {_TINY}) "
             f"(div (mul (mul (pow b c) c) (sub a b)) b) (mul (mul (pow b c) c) {_L})) "
             f"(mul (pow b c) (expm1 (mul c {_L}))))")

#: The rules, in ``_rules``' source format: (name, lhs, rhs, both ways).
IDENTITY_SOURCE: dict[str, list[tuple[str, str, str, bool]]] = {
    "complex-forms": [
        ("smith-division-robust", "(div (add (mul a c) (mul b d)) (add (mul c c) (mul d d)))",
         _smith_scaled(True), False),
        ("smith-division-im-robust", "(div (sub (mul b c) (mul a d)) (add (mul c c) (mul d d)))",
         _smith_scaled(False), False),
        ("complex-sqrt-re", f"(sqrt (mul 2 (add {_MOD} a)))", _SQRT_PLUS, False),
        ("complex-sqrt-re-hypot", f"(sqrt (mul 2 (add {_H} a)))", _SQRT_PLUS, False),
        ("complex-sqrt-im", f"(sqrt (mul 2 (sub {_MOD} a)))", _SQRT_MINUS, False),
        ("complex-sqrt-im-hypot", f"(sqrt (mul 2 (sub {_H} a)))", _SQRT_MINUS, False),
        ("pow-expm1", "(sub (pow (add 1 a) b) 1)",
         _finite("(lt -1 a)", "(expm1 (mul b (log1p a)))", "(sub (pow (add 1 a) b) 1)"), False),
        ("pow-diff-expm1", "(sub (pow a c) (pow b c))",
         _finite("(lt 0 b)", _POW_DIFF, "(sub (pow a c) (pow b c))"), False),
    ],
}
