"""The real-number identities the e-graph saturates with, written once as s-expressions.

Each rule is ``(name, lhs, rhs, both_ways)`` over pattern variables ``a b c d`` and the operators of
``_expr.OPS``. They hold over the reals where both sides are defined (``sqrt(a)*sqrt(a) = a`` needs
``a >= 0``, ``log(a*b) = log a + log b`` needs ``a, b > 0``): like Herbie, the search may use an
identity outside its domain, because every candidate it extracts is judged against the exact oracle
on the samples before it is offered. ``tests/test_search_rules.py`` checks every rule with the oracle on
random points where both sides are real.

Families: commutativity, associativity, distributivity, identities and cancellation, fraction algebra,
difference of squares and cubes, sqrt/cbrt conjugates, exp/log laws, the introduction of
expm1/log1p/hypot/logaddexp (log1pexp is ``logaddexp(0, a)``), trigonometric and hyperbolic identities
(half-angle, sum formulas, sum-to-product, tan), pow laws.
"""

from __future__ import annotations

import dataclasses

from ._expr import OPS, REDUCTIONS, Term, const, is_array_op, is_reduction, reduction_axes
from ._rules_identities import IDENTITY_SOURCE
from ._rules_special import SPECIAL_SOURCE

__all__ = ["REDUCTION_RULES", "RULES", "Rule", "apply_at_root", "parse", "rules_for"]


@dataclasses.dataclass(frozen=True)
class Rule:
    """One directed identity ``lhs -> rhs`` (a both-ways source rule gives two)."""

    name: str
    family: str
    lhs: Term
    rhs: Term


_SOURCE: dict[str, list[tuple[str, str, str, bool]]] = {
    "commutativity": [
        ("add-comm", "(add a b)", "(add b a)", False),
        ("mul-comm", "(mul a b)", "(mul b a)", False),
        ("hypot-comm", "(hypot a b)", "(hypot b a)", False),
        ("logaddexp-comm", "(logaddexp a b)", "(logaddexp b a)", False),
    ],
    "associativity": [
        ("add-assoc", "(add a (add b c))", "(add (add a b) c)", True),
        ("mul-assoc", "(mul a (mul b c))", "(mul (mul a b) c)", True),
        ("sub-sub", "(sub a (sub b c))", "(add (sub a b) c)", True),
        ("add-sub", "(add a (sub b c))", "(sub (add a b) c)", True),
        ("sub-add-left", "(sub (add a b) c)", "(add a (sub b c))", False),
        ("sub-add-right", "(sub a (add b c))", "(sub (sub a b) c)", True),
        ("mul-div", "(mul a (div b c))", "(div (mul a b) c)", True),
        ("div-div-left", "(div (div a b) c)", "(div a (mul b c))", True),
        ("div-div-right", "(div a (div b c))", "(div (mul a c) b)", False),
        ("div-mul-split", "(div (mul a b) c)", "(mul a (div b c))", False),
    ],
    "distributivity": [
        ("mul-add", "(mul a (add b c))", "(add (mul a b) (mul a c))", True),
        ("mul-sub", "(mul a (sub b c))", "(sub (mul a b) (mul a c))", True),
        ("div-add", "(div (add a b) c)", "(add (div a c) (div b c))", True),
        ("div-sub", "(div (sub a b) c)", "(sub (div a c) (div b c))", True),
        ("neg-add", "(neg (add a b))", "(sub (neg a) b)", True),
    ],
    "identities": [
        ("add-zero", "(add a 0)", "a", False),
        ("sub-zero", "(sub a 0)", "a", False),
        ("mul-one", "(mul a 1)", "a", False),
        ("div-one", "(div a 1)", "a", False),
        ("sub-self", "(sub a a)", "0", False),
        ("div-self", "(div a a)", "1", False),
        ("zero-sub", "(sub 0 a)", "(neg a)", True),
        ("sub-neg", "(sub a b)", "(add a (neg b))", True),
        ("neg-neg", "(neg (neg a))", "a", False),
        ("neg-mul", "(neg a)", "(mul -1 a)", True),
        ("neg-sub", "(neg (sub a b))", "(sub b a)", True),
        ("mul-neg", "(mul (neg a) b)", "(neg (mul a b))", True),
        ("div-neg", "(div (neg a) b)", "(neg (div a b))", True),
        ("add-self", "(add a a)", "(mul 2 a)", True),
        ("cancel-add-left", "(sub (add a b) a)", "b", False),
        ("cancel-add-right", "(sub (add a b) b)", "a", False),
        ("cancel-sub", "(sub a (sub a b))", "b", False),
        ("sub-swap", "(add (sub a b) b)", "a", False),
    ],
    "fractions": [
        ("frac-sub", "(sub (div a b) (div c d))", "(div (sub (mul a d) (mul b c)) (mul b d))", False),
        ("frac-add", "(add (div a b) (div c d))", "(div (add (mul a d) (mul b c)) (mul b d))", False),
        ("sub-frac", "(sub a (div b c))", "(div (sub (mul a c) b) c)", False),
        ("add-frac", "(add a (div b c))", "(div (add (mul a c) b) c)", False),
        ("frac-sub-left", "(sub (div a b) c)", "(div (sub a (mul b c)) b)", False),
        ("recip-frac", "(div 1 (div a b))", "(div b a)", False),
        ("frac-times", "(mul (div a b) (div c d))", "(div (mul a c) (mul b d))", True),
        ("frac-cancel", "(div (mul a b) (mul a c))", "(div b c)", False),
        ("frac-cancel-num", "(div (mul a b) a)", "b", False),
        ("frac-cancel-den", "(div a (mul a b))", "(div 1 b)", False),
        ("div-mul-cancel", "(mul (div a b) b)", "a", False),
        ("div-as-recip", "(div a b)", "(mul a (div 1 b))", True),
        ("recip-recip", "(div 1 (div 1 a))", "a", False),
    ],
    "squares-cubes": [
        ("sqr-pow", "(mul a a)", "(pow a 2)", True),
        ("cube-pow", "(mul a (mul a a))", "(pow a 3)", True),
        ("diff-squares", "(sub (mul a a) (mul b b))", "(mul (add a b) (sub a b))", True),
        ("diff-squares-pow", "(sub (pow a 2) (pow b 2))", "(mul (add a b) (sub a b))", False),
        ("flip-sub", "(sub a b)", "(div (sub (mul a a) (mul b b)) (add a b))", False),
        ("diff-cubes", "(sub (pow a 3) (pow b 3))",
         "(mul (sub a b) (add (mul a a) (add (mul a b) (mul b b))))", False),
        ("sum-cubes", "(add (pow a 3) (pow b 3))",
         "(mul (add a b) (sub (add (mul a a) (mul b b)) (mul a b)))", False),
        ("flip3-sub", "(sub a b)",
         "(div (sub (pow a 3) (pow b 3)) (add (mul a a) (add (mul a b) (mul b b))))", False),
        ("sqr-sub", "(pow (sub a b) 2)", "(add (sub (mul a a) (mul 2 (mul a b))) (mul b b))", False),
        ("sqr-add", "(pow (add a b) 2)", "(add (add (mul a a) (mul 2 (mul a b))) (mul b b))", False),
    ],
    "sqrt-cbrt": [
        ("sqrt-sqr", "(mul (sqrt a) (sqrt a))", "a", False),
        ("sqrt-pow2", "(pow (sqrt a) 2)", "a", False),
        ("sqrt-of-sqr", "(sqrt (mul a a))", "(abs a)", False),
        ("sqrt-prod", "(sqrt (mul a b))", "(mul (sqrt a) (sqrt b))", True),
        ("sqrt-div", "(sqrt (div a b))", "(div (sqrt a) (sqrt b))", True),
        ("sqrt-conjugate", "(sub (sqrt a) (sqrt b))", "(div (sub a b) (add (sqrt a) (sqrt b)))", False),
        ("sqrt-conjugate-1", "(sub 1 (sqrt a))", "(div (sub 1 a) (add 1 (sqrt a)))", False),
        ("sqrt-conjugate-sum", "(add a (sqrt b))", "(div (sub (mul a a) b) (sub a (sqrt b)))", False),
        ("sqrt-conjugate-diff", "(sub a (sqrt b))", "(div (sub (mul a a) b) (add a (sqrt b)))", False),
        ("recip-sqrt", "(div 1 (sqrt a))", "(sqrt (div 1 a))", True),
        ("cbrt-cube", "(pow (cbrt a) 3)", "a", False),
        ("cbrt-of-cube", "(cbrt (pow a 3))", "a", False),
        ("cbrt-prod", "(cbrt (mul a b))", "(mul (cbrt a) (cbrt b))", True),
        ("cbrt-div", "(cbrt (div a b))", "(div (cbrt a) (cbrt b))", True),
        ("cbrt-conjugate", "(sub (cbrt a) (cbrt b))",
         "(div (sub a b) (add (mul (cbrt a) (cbrt a))"
         " (add (mul (cbrt a) (cbrt b)) (mul (cbrt b) (cbrt b)))))",
         False),
        ("hypot-intro", "(sqrt (add (mul a a) (mul b b)))", "(hypot a b)", True),
        ("hypot-intro-pow", "(sqrt (add (pow a 2) (pow b 2)))", "(hypot a b)", False),
        ("hypot-intro-1", "(sqrt (add 1 (mul a a)))", "(hypot 1 a)", False),
        ("hypot-neg", "(hypot (neg a) b)", "(hypot a b)", False),
    ],
    "exp-log": [
        ("exp-sum", "(exp (add a b))", "(mul (exp a) (exp b))", True),
        ("exp-diff", "(exp (sub a b))", "(div (exp a) (exp b))", True),
        ("exp-neg", "(exp (neg a))", "(div 1 (exp a))", True),
        ("exp-zero", "(exp 0)", "1", False),
        ("exp-log", "(exp (log a))", "a", False),
        ("log-exp", "(log (exp a))", "a", False),
        ("log-prod", "(log (mul a b))", "(add (log a) (log b))", True),
        ("log-div", "(log (div a b))", "(sub (log a) (log b))", True),
        ("log-recip", "(log (div 1 a))", "(neg (log a))", True),
        ("log-pow", "(log (pow a b))", "(mul b (log (abs a)))", False),
        ("log-sqrt", "(log (sqrt a))", "(mul 0.5 (log a))", False),
        ("log-one", "(log 1)", "0", False),
        ("expm1-intro", "(sub (exp a) 1)", "(expm1 a)", True),
        ("expm1-intro-neg", "(sub 1 (exp a))", "(neg (expm1 a))", False),
        ("exp-diff-expm1", "(sub (exp a) (exp b))", "(mul (exp b) (expm1 (sub a b)))", False),
        ("log1p-intro", "(log (add 1 a))", "(log1p a)", True),
        ("log1p-intro-sub", "(log (sub 1 a))", "(log1p (neg a))", False),
        ("log-ratio-log1p", "(log (div a b))", "(log1p (div (sub a b) b))", False),
        ("log1p-expm1", "(log1p (expm1 a))", "a", False),
        ("expm1-log1p", "(expm1 (log1p a))", "a", False),
        ("log1pexp-intro", "(log (add 1 (exp a)))", "(logaddexp 0 a)", False),
        ("log1pexp-intro-log1p", "(log1p (exp a))", "(logaddexp 0 a)", False),
        ("logaddexp-intro", "(log (add (exp a) (exp b)))", "(logaddexp a b)", True),
        ("exp-mul-pow", "(exp (mul a b))", "(pow (exp a) b)", False),
    ],
    "trigonometric": [
        ("half-angle-1mcos", "(sub 1 (cos a))", "(mul 2 (pow (sin (div a 2)) 2))", False),
        ("half-angle-1pcos", "(add 1 (cos a))", "(mul 2 (pow (cos (div a 2)) 2))", False),
        ("half-angle-cosm1", "(sub (cos a) 1)", "(neg (mul 2 (pow (sin (div a 2)) 2)))", False),
        ("pythagoras", "(add (pow (sin a) 2) (pow (cos a) 2))", "1", False),
        ("1m-sin2", "(sub 1 (pow (sin a) 2))", "(pow (cos a) 2)", False),
        ("1m-cos2", "(sub 1 (pow (cos a) 2))", "(pow (sin a) 2)", False),
        ("sin-sum", "(sin (add a b))", "(add (mul (sin a) (cos b)) (mul (cos a) (sin b)))", False),
        ("sin-diff", "(sin (sub a b))", "(sub (mul (sin a) (cos b)) (mul (cos a) (sin b)))", True),
        ("cos-sum", "(cos (add a b))", "(sub (mul (cos a) (cos b)) (mul (sin a) (sin b)))", False),
        ("cos-diff", "(cos (sub a b))", "(add (mul (cos a) (cos b)) (mul (sin a) (sin b)))", False),
        ("sin-minus-sin", "(sub (sin a) (sin b))",
         "(mul 2 (mul (sin (div (sub a b) 2)) (cos (div (add a b) 2))))",
         False),
        ("cos-minus-cos", "(sub (cos a) (cos b))",
         "(mul -2 (mul (sin (div (sub a b) 2)) (sin (div (add a b) 2))))", False),
        ("sin-plus-sin", "(add (sin a) (sin b))",
         "(mul 2 (mul (sin (div (add a b) 2)) (cos (div (sub a b) 2))))",
         False),
        ("tan-quot", "(tan a)", "(div (sin a) (cos a))", True),
        ("tan-minus-tan", "(sub (tan a) (tan b))", "(div (sin (sub a b)) (mul (cos a) (cos b)))", False),
        ("tan-sum", "(tan (add a b))", "(div (add (tan a) (tan b)) (sub 1 (mul (tan a) (tan b))))", False),
        ("tan-half", "(div (sub 1 (cos a)) (sin a))", "(tan (div a 2))", False),
        ("tan-half-2", "(div (sin a) (add 1 (cos a)))", "(tan (div a 2))", False),
        ("sin-neg", "(sin (neg a))", "(neg (sin a))", True),
        ("cos-neg", "(cos (neg a))", "(cos a)", False),
        ("sin-2x", "(sin (mul 2 a))", "(mul 2 (mul (sin a) (cos a)))", False),
        ("cos-2x", "(cos (mul 2 a))", "(sub 1 (mul 2 (pow (sin a) 2)))", False),
        ("sin-zero", "(sin 0)", "0", False),
        ("cos-zero", "(cos 0)", "1", False),
        ("atan-diff", "(sub (atan a) (atan b))", "(atan2 (sub a b) (add 1 (mul a b)))", False),
    ],
    "hyperbolic": [
        ("sinh-def", "(sinh a)", "(div (sub (exp a) (exp (neg a))) 2)", True),
        ("cosh-def", "(cosh a)", "(div (add (exp a) (exp (neg a))) 2)", True),
        ("tanh-quot", "(tanh a)", "(div (sinh a) (cosh a))", True),
        ("sinh-expm1", "(sinh a)", "(div (mul (expm1 a) (add (exp (neg a)) 1)) 2)", False),
        ("tanh-expm1", "(tanh a)", "(div (expm1 (mul 2 a)) (add (exp (mul 2 a)) 1))", False),
        ("cosh-m1", "(sub (cosh a) 1)", "(mul 2 (pow (sinh (div a 2)) 2))", False),
        ("cosh2-sinh2", "(sub (pow (cosh a) 2) (pow (sinh a) 2))", "1", False),
        # tanh's derivative as autodiff writes it (JAX's one_minus_square, a user's custom_jvp): 1 - t^2
        # is 0 once tanh rounds to 1 (|a| > 9 in float32), where sech^2 a is still a normal float
        ("one-minus-tanh-sq", "(sub 1 (mul (tanh a) (tanh a)))", "(div 1 (mul (cosh a) (cosh a)))", False),
        ("cosh-m-sinh", "(sub (cosh a) (sinh a))", "(exp (neg a))", False),
        ("cosh-p-sinh", "(add (cosh a) (sinh a))", "(exp a)", False),
        ("asinh-def", "(log (add a (sqrt (add (mul a a) 1))))", "(asinh a)", False),
        ("acosh-def", "(log (add a (sqrt (sub (mul a a) 1))))", "(acosh a)", False),
        ("atanh-def", "(mul 0.5 (log (div (add 1 a) (sub 1 a))))", "(atanh a)", False),
        ("atanh-log1p", "(atanh a)", "(mul 0.5 (log1p (div (mul 2 a) (sub 1 a))))", False),
        ("sinh-neg", "(sinh (neg a))", "(neg (sinh a))", False),
    ],
    "pow": [
        ("pow-one", "(pow a 1)", "a", False),
        ("pow-zero", "(pow a 0)", "1", False),
        ("pow-half", "(pow a 0.5)", "(sqrt a)", True),
        ("cbrt-pow", "(cbrt (pow a 2))", "(pow (cbrt a) 2)", False),
        ("pow-neg-one", "(pow a -1)", "(div 1 a)", True),
        ("pow-neg-half", "(pow a -0.5)", "(div 1 (sqrt a))", False),
        ("pow-pow", "(pow (pow a b) c)", "(pow a (mul b c))", False),
        ("pow-prod-base", "(pow (mul a b) c)", "(mul (pow a c) (pow b c))", True),
        ("pow-div-base", "(pow (div a b) c)", "(div (pow a c) (pow b c))", True),
        ("pow-sum-exp", "(pow a (add b c))", "(mul (pow a b) (pow a c))", True),
        ("pow-exp-log", "(pow a b)", "(exp (mul b (log a)))", False),
        ("pow-of-exp", "(pow (exp a) b)", "(exp (mul a b))", False),
        ("pow-sqr-sqrt", "(sqrt (pow a 4))", "(pow a 2)", False),
    ],
    "exp-scaling": [
        ("div-exp", "(div a (exp b))", "(mul a (exp (neg b)))", True),
        ("sqr-exp", "(mul (exp a) (exp a))", "(exp (mul 2 a))", False),
        ("exp-diff-sinh", "(sub (exp a) (exp (neg a)))", "(mul 2 (sinh a))", False),
        ("exp-sum-cosh", "(add (exp a) (exp (neg a)))", "(mul 2 (cosh a))", False),
        ("exp-diff-sinh-half", "(sub (exp a) (exp (neg a)))", "(mul (mul 2 (exp (div (neg a) 2))) "
         "(mul (exp (div a 2)) (sinh a)))", False),
        ("exp-diff-expm1-sym", "(sub (exp a) (exp b))", "(mul (exp b) (expm1 (sub a b)))", False),
        ("div-sqr-sqr", "(div (mul a a) (mul b b))", "(mul (div a b) (div a b))", False),
        # Smith's complex division (real part; the imaginary part is the same with b, -a): divide
        # numerator and denominator by the larger of c, d, so that no square overflows.
        ("smith-division", "(div (add (mul a c) (mul b d)) (add (mul c c) (mul d d)))",
         "(where (le (abs d) (abs c)) (div (add a (mul b (div d c))) (add c (mul d (div d c)))) "
         "(div (add (mul a (div c d)) b) (add (mul c (div c d)) d)))", False),
        ("smith-division-im", "(div (sub (mul b c) (mul a d)) (add (mul c c) (mul d d)))",
         "(where (le (abs d) (abs c)) (div (sub b (mul a (div d c))) (add c (mul d (div d c)))) "
         "(div (sub (mul b (div c d)) a) (add (mul c (div c d)) d)))", False),
    ],
    "logistic-softplus": [
        ("logistic-def", "(logistic a)", "(div 1 (add 1 (exp (neg a))))", True),
        ("logistic-exp", "(div (exp a) (add 1 (exp a)))", "(logistic a)", False),
        ("logistic-exp-rev", "(div (exp a) (add (exp a) 1))", "(logistic a)", False),
        ("one-minus-logistic", "(sub 1 (logistic a))", "(logistic (neg a))", True),
        ("log-logistic", "(log (logistic a))", "(neg (softplus (neg a)))", False),
        ("log1p-neg-logistic", "(log1p (neg (logistic a)))", "(neg (softplus a))", False),
        ("logistic-recip", "(div 1 (logistic a))", "(add 1 (exp (neg a)))", False),
        ("softplus-def", "(softplus a)", "(log1p (exp a))", True),
        ("softplus-log", "(log (add 1 (exp a)))", "(softplus a)", False),
        ("softplus-logaddexp", "(logaddexp 0 a)", "(softplus a)", True),
        ("softplus-neg", "(softplus (neg a))", "(sub (softplus a) a)", True),
        ("softplus-diff", "(sub (softplus a) (softplus (neg a)))", "a", False),
        ("logit-logistic", "(log (div (logistic a) (sub 1 (logistic a))))", "a", False),
        ("exp-neg-softplus", "(exp (neg (softplus (neg a))))", "(logistic a)", False),
    ],
    "special": [
        ("xlogy-def", "(xlogy a b)", "(mul a (log b))", True),
        ("xlog1py-def", "(xlog1py a b)", "(mul a (log1p b))", True),
        ("erfc-def", "(erfc a)", "(sub 1 (erf a))", True),
        ("erfc-neg", "(erfc (neg a))", "(add 1 (erf a))", True),
        ("erf-neg", "(erf (neg a))", "(neg (erf a))", True),
        ("log-erfc", "(log (erfc a))", "(add (log_ndtr (neg (mul a (sqrt 2)))) (log 2))", False),
        ("log-ndtr-def", "(log (mul 0.5 (erfc (neg (div a (sqrt 2))))))", "(log_ndtr a)", False),
        # The normal CDF written with erf or erfc, halved by a product or a quotient, or as the complement
        # of the upper tail: its log is log_ndtr (no 1 + erf cancellation, no erfc underflow).
        ("log-half-erfc", "(log (mul 0.5 (erfc a)))", "(log_ndtr (neg (mul a (sqrt 2))))", False),
        ("log-erfc-half", "(log (div (erfc a) 2))", "(log_ndtr (neg (mul a (sqrt 2))))", False),
        ("log-half-one-plus-erf", "(log (mul 0.5 (add 1 (erf a))))", "(log_ndtr (mul a (sqrt 2)))", False),
        ("log-one-plus-erf-half", "(log (div (add 1 (erf a)) 2))", "(log_ndtr (mul a (sqrt 2)))", False),
        ("log-one-minus-half-erfc", "(log (sub 1 (mul 0.5 (erfc a))))", "(log_ndtr (mul a (sqrt 2)))",
         False),
        ("log1p-neg-half-erfc", "(log1p (neg (mul 0.5 (erfc a))))", "(log_ndtr (mul a (sqrt 2)))", False),
        # The normal quantile written with erfinv: 2p - 1 cancels for small p (erfinv(-1 + tiny) loses
        # every bit the subtraction rounded away); ndtri takes p itself.
        ("ndtri-erfinv", "(mul (sqrt 2) (erf_inv (sub (mul 2 a) 1)))", "(ndtri a)", False),
        ("erfinv-ndtri", "(erf_inv (sub (mul 2 a) 1))", "(div (ndtri a) (sqrt 2))", False),
        ("erfinv-one-minus", "(erf_inv (sub 1 a))", "(neg (div (ndtri (div a 2)) (sqrt 2)))", False),
        ("erfinv-minus-one", "(erf_inv (sub a 1))", "(div (ndtri (div a 2)) (sqrt 2))", False),
        ("lgamma-diff", "(sub (lgamma (add a b)) (lgamma a))", "(lgammadiff a b)", False),
        ("lgamma-diff-sub", "(sub (lgamma (sub a b)) (lgamma a))", "(lgammadiff a (neg b))", False),
        ("lgamma-rec", "(lgamma (add a 1))", "(add (lgamma a) (log a))", False),
        ("digamma-rec", "(digamma (add a 1))", "(add (digamma a) (div 1 a))", False),
        ("digamma-diff", "(sub (digamma (add a 1)) (digamma a))", "(div 1 a)", False),
    ],
}

#: Identities over reductions, written once with ``_R`` for the axes; :func:`rules_for` instantiates
#: them for the reductions of a term (``sum_ax1`` ...). They hold over the reals (the oracle checks them
#: on arrays in ``tests/test_search_arrays.py``).
_REDUCTION_SOURCE: list[tuple[str, str, str, bool]] = [
    ("log-prod", "(log (prod_R a))", "(sum_R (log a))", True),
    # Where the product is a normal float, its log is as accurate as a sum of logs can be, and better
    # where the logs cancel: the sum only where the product over- or underflows.
    ("log-prod-guarded", "(log (prod_R a))",
     "(where (lt 2.2250738585072014e-308 (prod_R a)) (where (lt (prod_R a) 1.7976931348623157e308) "
     "(log (prod_R a)) (sum_R (log a))) (sum_R (log a)))", False),
    # A quotient of products: as written where both products and the quotient are normal floats (exact
    # there up to rounding, while the difference of two sums of logs cancels when the quotient is near
    # 1); the sums of logs where any of them over- or underflows.
    ("log-prod-ratio-guarded", "(log (div (prod_R a) (prod_R b)))",
     "(where (lt 2.2250738585072014e-308 (prod_R a)) (where (lt 2.2250738585072014e-308 (prod_R b)) "
     "(where (lt 2.2250738585072014e-308 (div (prod_R a) (prod_R b))) "
     "(where (lt (div (prod_R a) (prod_R b)) 1.7976931348623157e308) (log (div (prod_R a) (prod_R b))) "
     "(sub (sum_R (log a)) (sum_R (log b)))) (sub (sum_R (log a)) (sum_R (log b)))) "
     "(sub (sum_R (log a)) (sum_R (log b)))) (sub (sum_R (log a)) (sum_R (log b))))", False),
    ("log-sum-exp", "(log (sum_R (exp a)))", "(lse_R a)", False),
    # Masked: the entries the mask drops count as exp(-inf) = 0 (padding in attention, ragged batches).
    ("log-sum-exp-masked", "(log (sum_R (where c (exp a) 0)))", "(lse_R (where c a -inf))", False),
    ("log-sum-exp-masked-else", "(log (sum_R (where c 0 (exp a))))", "(lse_R (where c -inf a))", False),
    ("pow-of-prod", "(pow (prod_R a) b)", "(prod_R (pow a b))", False),
    ("softmax", "(div (exp a) (sum_R (exp a)))", "(exp (sub a (lse_R a)))", False),
    ("log-softmax", "(log (div (exp a) (sum_R (exp a))))", "(sub a (lse_R a))", False),
    ("expanded-distance", "(sub (add (sum_R (mul a a)) (sum_R (mul b b))) (mul 2 (sum_R (mul a b))))",
     "(sum_R (mul (sub a b) (sub a b)))", False),
    ("norm-scaled", "(sqrt (sum_R (mul a a)))",
     "(where (lt 0 (max_R (abs a))) (mul (max_R (abs a)) (sqrt (sum_R (mul (div a (max_R (abs a))) "
     "(div a (max_R (abs a))))))) 0)", False),
    ("dot-scaled", "(sum_R (mul a b))",
     "(mul (mul (max_R (abs a)) (max_R (abs b))) "
     "(sum_R (mul (div a (max_R (abs a))) (div b (max_R (abs b))))))",
     False),
    ("sqrt-of-scaled", "(sqrt (mul (mul a a) b))", "(mul (abs a) (sqrt b))", False),
    # A p-norm with a traced p, sum(a**p)**(1/p), scaled by the largest element before the power (as
    # norm-scaled): no power over- or underflows unless the result does, and nothing is raised to a large
    # exponent (exp(lse(p log a) / p) would lose log2 |log result| bits in the exp). Guarded: only where
    # no element is negative (a**p of a negative a is another function) and one is positive; elsewhere
    # the written form.
    ("power-sum-root", "(pow (sum_R (pow a b)) (div 1 b))",
     "(where (le 0 (min_R a)) (where (lt 0 (max_R a)) (mul (max_R a) (pow (sum_R (pow (div a (max_R a)) b)) "
     "(div 1 b))) (pow (sum_R (pow a b)) (div 1 b))) (pow (sum_R (pow a b)) (div 1 b)))", False),
]

_SHIFT_A, _SHIFT_B = "(sub a (div (sum_R a) N))", "(sub b (div (sum_R b) N))"
#: sum((a - ma)(b - mb)) - sum(a - ma) sum(b - mb) / N, over N: the corrected two-pass covariance.
_COV = (f"(div (sub (sum_R (mul {_SHIFT_A} {_SHIFT_B})) (div (mul (sum_R {_SHIFT_A}) (sum_R {_SHIFT_B})) N)) "
        "N)")
_VAR = _COV.replace(_SHIFT_B, _SHIFT_A)

#: Identities that need the number of elements a reduction reads (``N``, known per program).
_COUNT_SOURCE: list[tuple[str, str, str]] = [
    ("log-mean-exp", "(log (div (sum_R (exp a)) N))",
     "(add (max_R a) (log1p (div (sum_R (expm1 (sub a (max_R a)))) N)))"),
    ("sum-exp-expm1", "(sum_R (exp a))", "(add (sum_R (expm1 a)) N)"),
    # A power mean with a traced p, mean(a**p)**(1/p), in log space about the element m that dominates
    # (the largest for p > 0, the smallest for p < 0): m * exp(log1p(mean(expm1(p log(a/m)))) / p).
    # mean(a**p) is 1 + O(p) for small p, and raising it to 1/p multiplies its rounding by 1/p; here the
    # O(p) part is kept (log1p of the mean of expm1), nothing overflows, and the exp's argument lies in
    # [log(1/N) / p, 0]. Guarded: only where every element is positive (log a is real) and p is not 0;
    # elsewhere the written form.
    ("power-mean", "(pow (div (sum_R (pow a b)) N) (div 1 b))",
     "(where (lt 0 (min_R a)) (where (ne b 0) (mul (where (lt 0 b) (max_R a) (min_R a)) (exp (div (log1p "
     "(div (sum_R (expm1 (mul b (log (div a (where (lt 0 b) (max_R a) (min_R a))))))) N)) b))) "
     "(pow (div (sum_R (pow a b)) N) (div 1 b))) (pow (div (sum_R (pow a b)) N) (div 1 b)))"),
    # The same mean scaled by the largest element (as power-sum-root): accurate where p is not small,
    # without the exp's amplification of the log-space form; the search's regimes choose between them.
    ("power-mean-scaled", "(pow (div (sum_R (pow a b)) N) (div 1 b))",
     "(where (le 0 (min_R a)) (where (lt 0 (max_R a)) (mul (max_R a) (pow (div (sum_R (pow (div a (max_R a)) "
     "b)) N) (div 1 b))) (pow (div (sum_R (pow a b)) N) (div 1 b))) "
     "(pow (div (sum_R (pow a b)) N) (div 1 b)))"),
    # A root mean square scaled by the largest magnitude before squaring (no square overflows or
    # underflows unless the result does); written with a product or a power.
    ("rms-scaled", "(sqrt (div (sum_R (mul a a)) N))",
     "(where (lt 0 (max_R (abs a))) (mul (max_R (abs a)) (sqrt (div (sum_R (mul (div a (max_R (abs a))) "
     "(div a (max_R (abs a))))) N))) 0)"),
    ("rms-scaled-pow", "(sqrt (div (sum_R (pow a 2)) N))",
     "(where (lt 0 (max_R (abs a))) (mul (max_R (abs a)) (sqrt (div (sum_R (mul (div a (max_R (abs a))) "
     "(div a (max_R (abs a))))) N))) 0)"),
    # A covariance or variance written expanded, E[ab] - E[a]E[b]: the two terms cancel where the means
    # are large against the spread. Shifted by the rounded means, with the corrected two-pass term
    # (Chan, Golub & LeVeque) that removes what the rounding of the means leaves: nothing large cancels.
    ("cov-shifted", "(sub (div (sum_R (mul a b)) N) (mul (div (sum_R a) N) (div (sum_R b) N)))", _COV),
    ("var-shifted", "(sub (div (sum_R (mul a a)) N) (mul (div (sum_R a) N) (div (sum_R a) N)))", _VAR),
    ("var-shifted-pow", "(sub (div (sum_R (pow a 2)) N) (pow (div (sum_R a) N) 2))", _VAR),
    ("geometric-mean", "(pow (prod_R a) INV)",
     "(where (lt 2.2250738585072014e-308 (prod_R a)) (where (lt (prod_R a) 1.7976931348623157e308) "
     "(pow (prod_R a) INV) (exp (div (sum_R (log a)) N))) (exp (div (sum_R (log a)) N)))"),
]


def parse(text: str) -> Term:
    """An s-expression over ``OPS`` as a term; pattern variables are ``("pvar", name)``."""
    tokens = text.replace("(", " ( ").replace(")", " ) ").split()
    pos = 0

    def go() -> Term:
        nonlocal pos
        tok = tokens[pos]
        pos += 1
        if tok == "(":
            op = tokens[pos]
            pos += 1
            args = []
            while tokens[pos] != ")":
                args.append(go())
            pos += 1
            if ((op.endswith("_R") and op[:-2] in REDUCTIONS) or is_array_op(op)) and len(args) == 1:
                return (op, *args)
            if op not in OPS or OPS[op].arity != len(args):
                raise ValueError(f"bad operator {op!r} with {len(args)} operands in {text!r}")
            return (op, *args)
        try:
            return const(float(tok))
        except ValueError:
            return ("pvar", tok)

    term = go()
    if pos != len(tokens):
        raise ValueError(f"trailing tokens in {text!r}")
    return term


def _pvars(term: Term) -> set[str]:
    if term[0] == "pvar":
        return {term[1]}
    if term[0] == "const":
        return set()
    return set().union(*(_pvars(c) for c in term[1:]))


def _build(source: dict[str, list[tuple[str, str, str, bool]]]) -> tuple[Rule, ...]:
    rules = []
    for family, entries in source.items():
        for name, lhs_text, rhs_text, both in entries:
            lhs, rhs = parse(lhs_text), parse(rhs_text)
            pairs = [(name, lhs, rhs)] + ([(name + "-rev", rhs, lhs)] if both else [])
            for n, left, right in pairs:
                if left[0] == "pvar" or not _pvars(right) <= _pvars(left):
                    raise ValueError(f"rule {n}: the right side uses variables the left side does not bind")
                rules.append(Rule(n, family, left, right))
    return tuple(rules)


_SOURCE.update(IDENTITY_SOURCE)  # complex arithmetic and powers (issue 36): ``_rules_identities``
for _family, _entries in SPECIAL_SOURCE.items():  # Bessel, incomplete gamma/beta, piecewise (issue 47)
    _SOURCE[_family] = [*_SOURCE.get(_family, []), *_entries]
#: Every directed rule, in family order.
RULES: tuple[Rule, ...] = _build(_SOURCE)
#: The reduction identities with ``_R`` standing for the axes (``sum_R``): see :func:`rules_for`.
REDUCTION_RULES: tuple[Rule, ...] = _build({"reductions": _REDUCTION_SOURCE})


def _suffixed(term: Term, suffix: str) -> Term:
    if term[0] in ("pvar", "const"):
        return term
    kind = term[0][:-2] + suffix if term[0].endswith("_R") else term[0]
    return (kind, *(_suffixed(c, suffix) for c in term[1:]))


def rules_for(term: Term, counts: dict[str, int] | None = None) -> tuple[Rule, ...]:
    """:data:`REDUCTION_RULES` instantiated for every axes of a reduction in ``term`` (none without);
    with ``counts`` (reduction name -> elements it reads), the identities that need that count too; the
    selection identities for every selection in ``term`` (``_selection``)."""
    count_rules = []
    for kind, n in (counts or {}).items():
        suffix = kind[len(reduction_axes(kind)[0]):] if is_reduction(kind) else None  # type: ignore[index]
        if suffix is None:
            continue
        for name, lhs, rhs in _COUNT_SOURCE:
            text = [x.replace("_R", suffix).replace("INV", repr(1.0 / n)).replace("N", repr(float(n)))
                    for x in (lhs, rhs)]
            count_rules.append(Rule(f"{name}{suffix}", "reductions", parse(text[0]), parse(text[1])))
    suffixes: list[str] = []
    stack = [term]
    while stack:
        t = stack.pop()
        if t[0] in ("var", "const"):
            continue
        parsed = reduction_axes(t[0]) if is_reduction(t[0]) else None
        if parsed is not None:
            suffix = t[0][len(parsed[0]):]
            if suffix not in suffixes:
                suffixes.append(suffix)
        stack.extend(t[1:])
    from ._selection import selection_rules

    selecting = tuple(Rule(name, "selection", parse(lhs), parse(rhs))
                      for name, lhs, rhs in selection_rules(term))
    return tuple(Rule(f"{r.name}{sx}", r.family, _suffixed(r.lhs, sx), _suffixed(r.rhs, sx))
                 for sx in suffixes for r in REDUCTION_RULES) + tuple(count_rules) + selecting


def _match(pattern: Term, term: Term, binding: dict[str, Term]) -> bool:
    if pattern[0] == "pvar":
        bound = binding.get(pattern[1])
        if bound is None:
            binding[pattern[1]] = term
            return True
        return bound == term
    if pattern[0] != term[0] or len(pattern) != len(term):
        return False
    if pattern[0] == "const":
        return pattern[1] == term[1]
    return all(_match(p, t, binding) for p, t in zip(pattern[1:], term[1:]))


def _instantiate(pattern: Term, binding: dict[str, Term]) -> Term:
    if pattern[0] == "pvar":
        return binding[pattern[1]]
    if pattern[0] == "const":
        return pattern
    return (pattern[0], *(_instantiate(p, binding) for p in pattern[1:]))


def apply_at_root(term: Term, rules: tuple[Rule, ...] = RULES) -> list[Term]:
    """Every term one rule rewrites ``term`` into at its root, the right side written out literally."""
    out = []
    for rule in rules:
        binding: dict[str, Term] = {}
        if _match(rule.lhs, term, binding):
            out.append(_instantiate(rule.rhs, binding))
    return out
