"""The one table of primitive facts: which JAX primitives act element by element, which are glue, which
reduce or accumulate, which call a sub-jaxpr, and which decide (are discontinuous in their operands).

The rewrite matcher, scan fusion, the NaN-origin walker and the oracle all ask these named subsets, so a
primitive added here is known to every stage at once. Names are ``Primitive.name`` strings, so this
module imports nothing from JAX (version differences in names, such as ``pjit`` vs ``jit``, are listed
side by side).
"""

from __future__ import annotations

__all__ = [
    "ACCUMULATING",
    "CALLS",
    "CUSTOM_DERIVATIVES",
    "DISCONTINUOUS",
    "ELEMENTWISE",
    "GLUE",
    "REDUCTIONS",
]

#: Compute each output element from the same-index element of each operand (scalars broadcast); no
#: shape parameter, so they can be re-bound unchanged on slices.
ELEMENTWISE: frozenset[str] = frozenset({
    "abs", "acos", "acosh", "add", "add_any", "and", "asin", "asinh", "atan", "atan2", "atanh",
    "bessel_i0e", "bessel_i1e", "cbrt", "ceil", "clamp", "complex", "conj", "convert_element_type",
    "copy", "copy_p", "cos", "cosh", "digamma", "div", "eq", "erf", "erf_inv", "erfc", "exp", "exp2",
    "expm1", "floor", "ge", "gt", "igamma", "igamma_grad_a", "igammac", "imag", "integer_pow", "is_finite",
    "le", "lgamma", "log", "log1p", "log2", "logistic", "lt", "max", "min", "mul", "ne", "neg", "nextafter",
    "not", "one_minus_square", "or",
    "polygamma", "pow", "random_gamma_grad", "real", "reduce_precision", "regularized_incomplete_beta",
    "rem", "round", "rsqrt", "select_n", "sign", "sin", "sinh", "sqrt", "square", "stop_gradient", "sub",
    "tan", "tanh", "xor", "zeta",
    # JAX 0.12.1's IEEE 754-2019 operations
    "acospi", "asinpi", "atan2pi", "atanpi", "cospi", "exp2m1", "fma", "fmuladd", "log2p1", "sinpi", "tanpi",
})

#: Inserted by JAX around the user's operations without changing any element's value (``keepdims``
#: broadcasts, reshapes, copies): the matcher sees through them.
GLUE: frozenset[str] = frozenset({
    "broadcast_in_dim", "reshape", "copy", "copy_p", "squeeze", "expand_dims",
})

#: Reduce an operand over ``axes``.
REDUCTIONS: frozenset[str] = frozenset({
    "reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "reduce_and", "reduce_or", "reduce_xor",
    "argmax", "argmin",
})

#: Accumulate many products or sums: a NaN from finite operands means an internal overflow followed by
#: inf - inf (so NaN origins report it as "overflow").
ACCUMULATING: frozenset[str] = frozenset({
    "reduce_sum", "dot_general", "cumsum", "conv_general_dilated", "reduce_window_sum", "reduce_prod",
    "cumprod",
})

#: Call one sub-jaxpr with the same inputs and outputs (the primitive's name differs across JAX versions).
CALLS: frozenset[str] = frozenset({
    "jit", "pjit", "closed_call", "core_call", "remat", "remat2", "checkpoint",
})

#: Carry a user's derivative rule (``jax.custom_jvp`` / ``jax.custom_vjp``) around a primal sub-jaxpr.
CUSTOM_DERIVATIVES: frozenset[str] = frozenset({
    "custom_jvp_call", "custom_vjp_call", "custom_vjp_call_jaxpr",
})

#: Results jump where an operand crosses a decision point: comparisons, selections, rounding to
#: integers, ties of max/min, sorting. An exact evaluator must decide them, not guess.
DISCONTINUOUS: frozenset[str] = frozenset({
    "eq", "ne", "lt", "le", "gt", "ge", "select_n", "max", "min", "clamp", "floor", "ceil", "round",
    "sign", "convert_element_type", "sort", "argmax", "argmin", "reduce_max", "reduce_min", "rem",
    "cond", "while", "is_finite", "nextafter",
})
