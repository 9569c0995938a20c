"""Identities of the special functions and piecewise operators the search reaches through library code.

Library code writes a Bessel function as its scaled form times ``exp(|x|)`` (``jax.scipy.special.i0``),
a survival function as ``1 - cdf``, a clipped value as ``min(max(x, lo), hi)``. Each identity here is
standard mathematics, holds over the reals where both sides are defined, and is checked like every rule
by ``tests/test_search_rules.py`` (the exact oracle at random points) and, values and gradients, by
``tests/test_search_reach.py``:

- the exponentially scaled Bessel functions: ``I0(x) = exp(|x|) i0e(x)``, so ``log I0(x) = |x| + log
  i0e(x)`` (no overflow for ``|x| > 88`` in float32) and ``I1(x) / I0(x) = i1e(x) / i0e(x)``; ``i0e`` is
  even, ``i1e`` odd;
- complements and reflections: ``1 - erfc(x) = erf(x)``, ``erfc(-x) = 2 - erfc(x)``, ``1 - P(a, x) =
  Q(a, x)`` (``gammainc``/``gammaincc``), ``1 - I_x(a, b) = I_{1-x}(b, a)`` (``betainc``), and the log of
  a complement written with ``log1p``;
- the normal CDF ``ndtr``: ``1 - ndtr(x) = ndtr(-x)``, ``log ndtr = log_ndtr``, and the log of a difference
  ``log(ndtr(a) - ndtr(b)) = log_ndtr(a) + log1p(-exp(log_ndtr(b) - log_ndtr(a)))`` (a truncated
  normal's log-mass, finite where both CDFs underflow);
- ``xlogy(a, 1 + b) = xlog1py(a, b)``;
- min/max absorption and negation, ``sign(x) |x| = x``, a ``where`` whose branches agree or whose
  condition is negated.
"""

from __future__ import annotations

__all__ = ["SPECIAL_SOURCE"]

#: The rules, in ``_rules``' source format: family -> (name, lhs, rhs, both ways). ``special`` extends
#: that family of ``_rules``; ``piecewise`` is its own.
SPECIAL_SOURCE: dict[str, list[tuple[str, str, str, bool]]] = {
    "special": [
        ("i0-scaled", "(i0 a)", "(mul (exp (abs a)) (i0e a))", True),
        ("i1-scaled", "(i1 a)", "(mul (exp (abs a)) (i1e a))", True),
        ("log-i0", "(log (i0 a))", "(add (abs a) (log (i0e a)))", False),
        ("log-i1", "(log (i1 a))", "(add (abs a) (log (i1e a)))", False),
        ("i1-over-i0", "(div (i1 a) (i0 a))", "(div (i1e a) (i0e a))", False),
        ("i0e-even", "(i0e (neg a))", "(i0e a)", False),
        ("i0e-abs", "(i0e (abs a))", "(i0e a)", False),
        ("i1e-odd", "(i1e (neg a))", "(neg (i1e a))", False),
        ("one-minus-erfc", "(sub 1 (erfc a))", "(erf a)", False),
        ("erfc-reflect", "(erfc (neg a))", "(sub 2 (erfc a))", True),
        ("gammainc-complement", "(sub 1 (gammainc a b))", "(gammaincc a b)", True),
        ("gammaincc-complement", "(sub 1 (gammaincc a b))", "(gammainc a b)", True),
        ("log1p-neg-gammainc", "(log1p (neg (gammainc a b)))", "(log (gammaincc a b))", False),
        ("log1p-neg-gammaincc", "(log1p (neg (gammaincc a b)))", "(log (gammainc a b))", False),
        ("betainc-complement", "(sub 1 (betainc a b c))", "(betainc b a (sub 1 c))", False),
        ("betainc-reflect", "(betainc a b (sub 1 c))", "(sub 1 (betainc b a c))", False),
        # The normal CDF (jax.scipy.special.ndtr, a named call from JAX 0.12.1; older JAX inlines its
        # erfc form): its complement is its reflection, its log is log_ndtr, and the log of a
        # difference of two (a truncated normal's mass) is taken in log space, where both tails of a
        # far interval underflow to 0 and leave log(0) = -inf for a finite log-mass.
        ("ndtr-erfc", "(ndtr a)", "(mul 0.5 (erfc (neg (div a (sqrt 2)))))", True),
        ("log-ndtr", "(log (ndtr a))", "(log_ndtr a)", False),
        ("ndtr-complement", "(sub 1 (ndtr a))", "(ndtr (neg a))", True),
        ("ndtr-diff-reflect", "(sub (ndtr a) (ndtr b))", "(sub (ndtr (neg b)) (ndtr (neg a)))", False),
        ("log-ndtr-diff", "(log (sub (ndtr a) (ndtr b)))",
         "(add (log_ndtr a) (log1p (neg (exp (sub (log_ndtr b) (log_ndtr a))))))", False),
        ("xlogy-one-plus", "(xlogy a (add 1 b))", "(xlog1py a b)", False),
        ("xlogy-one-minus", "(xlogy a (sub 1 b))", "(xlog1py a (neg b))", False),
    ],
    "piecewise": [
        ("max-min-absorb", "(max a (min a b))", "a", False),
        ("min-max-absorb", "(min a (max a b))", "a", False),
        ("max-self", "(max a a)", "a", False),
        ("min-self", "(min a a)", "a", False),
        ("max-neg", "(max (neg a) (neg b))", "(neg (min a b))", True),
        ("min-neg", "(min (neg a) (neg b))", "(neg (max a b))", True),
        ("sign-times-abs", "(mul (sign a) (abs a))", "a", False),
        ("times-sign", "(mul a (sign a))", "(abs a)", False),
        ("sign-neg", "(sign (neg a))", "(neg (sign a))", True),
        ("abs-neg", "(abs (neg a))", "(abs a)", False),
        ("abs-abs", "(abs (abs a))", "(abs a)", False),
        ("where-same", "(where c a a)", "a", False),
        ("where-not", "(where (not c) a b)", "(where c b a)", False),
    ],
}
