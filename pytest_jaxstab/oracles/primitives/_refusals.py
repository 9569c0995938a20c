"""The primitives the oracle refuses, each with its reason: the documented complement of its rules.

Every primitive JAX registers is either evaluated exactly (``SUPPORTED_PRIMITIVES``; integer and key
arithmetic is bound eagerly, see ``_random``) or refused here, in one of two kinds:

* ``REFUSED_NUMERIC``: the short list of real-valued numeric primitives a user's program can reach and
  the oracle does not evaluate, each with its own reason;
* ``REFUSED_CATEGORIES``: primitives with no real-number computation of their own to judge (opaque
  code, collectives between devices, mutable state, JAX's internal machinery, ...), named by category,
  one reason per category.

``REFUSED_PRIMITIVES`` is both, name -> reason (the category's name leads its reason): the reason is part
of the ``UnsupportedPrimitive`` message a user sees. ``tests/test_oracle_coverage.py`` walks JAX's
registry and fails on any primitive in neither, so a JAX release that adds a primitive is noticed.
"""

from __future__ import annotations

__all__ = ["REFUSED_CATEGORIES", "REFUSED_NUMERIC", "REFUSED_PRIMITIVES"]

_HOUSEHOLDER = ("LAPACK's compact Householder encoding of a QR factorization (reflectors and scales): the "
                "routine's representation, not a function of the matrix to round; jnp.linalg.qr is evaluated")
_BLOCK_SCALED = ("a block-scaled low-precision matrix product (fp8/mx formats): its scales are a storage "
                 "format, not real arithmetic")
_REDUCER = ("a reduction with a user-written body, which XLA applies in an order it leaves unspecified: "
            "its value is defined only for an associative, commutative body; not evaluated")

#: Real-valued numeric primitives a user's program can reach that the oracle refuses: name -> reason.
REFUSED_NUMERIC: dict[str, str] = {
    "eig": ("eigenvalues of a non-symmetric matrix are complex and its eigenvectors unique only up to a "
            "complex phase per column; not evaluated yet (eigh, for symmetric matrices, is)"),
    "schur": ("the Schur form is not unique (the order of the eigenvalues on its diagonal, a unit phase or "
              "sign per Schur vector, the 2x2 blocks of the real form); not evaluated"),
    "hessenberg": ("the Hessenberg reduction's factors are fixed by the Householder sequence the routine "
                   "chooses, unique only up to signs while no subdiagonal vanishes; not evaluated"),
    "tridiagonal": ("the reduction of a symmetric matrix to tridiagonal form returns Householder "
                    "reflectors, the routine's encoding, unique only up to signs; not evaluated (eigh is)"),
    "geqrf": _HOUSEHOLDER,
    "geqp3": _HOUSEHOLDER + " (column-pivoted)",
    "householder_product": _HOUSEHOLDER,
    "ormqr": _HOUSEHOLDER,
    "reduce": _REDUCER,
    "reduce_window": _REDUCER + " (sum, max and min windows, i.e. pooling, are evaluated)",
    "select_and_scatter": (_REDUCER + " (select_and_scatter_add, max pooling's derivative, is "
                           "evaluated)"),
    "ragged_dot_general": "a grouped matrix product over ragged groups; not evaluated yet",
    "approx_top_k": ("an approximation by design (recall_target): which elements it returns is the "
                     "backend's algorithm, not a function of the values; top_k is evaluated"),
    "scaled_matmul": _BLOCK_SCALED,
    "scaled_matmul_wrapper": _BLOCK_SCALED,
    "scaled_dot": _BLOCK_SCALED,
    "rng_uniform": "XLA's stateful uniform generator: its draws are not a function of the program's inputs",
}

#: Primitives with no real-number computation of their own to judge, by category: name -> (reason, names).
REFUSED_CATEGORIES: dict[str, tuple[str, frozenset[str]]] = {
    "opaque code": (
        "a Python callback, a foreign or exported function, or a GPU kernel (cuDNN attention or fusion): "
        "no jaxpr to evaluate",
        frozenset({"pure_callback", "io_callback", "ffi_call", "call_exported", "cudnn_fusion",
                   "custom_partitioning", "dot_product_attention_fwd", "dot_product_attention_bwd",
                   "dot_product_attention_fwd_wrapper", "dot_product_attention_bwd_wrapper",
                   "dot_product_attention_fp8_fwd", "dot_product_attention_fp8_bwd",
                   "dot_product_attention_fp8_fwd_wrapper", "dot_product_attention_fp8_bwd_wrapper"}),
    ),
    "multi-device collective": (
        "a collective or transfer between several devices; the oracle evaluates one-device "
        "shard_map/pmap only",
        frozenset({"all_to_all", "all_to_all_start", "all_to_all_done", "all_gather_start",
                   "all_gather_done", "all_gather_reduced", "all_gather_reduced_start", "reduce_scatter",
                   "reduce_scatter_start", "reduce_scatter_done", "ppermute_start", "ppermute_done",
                   "psum_done", "psum_invariant_start", "psend", "precv", "ragged_all_to_all",
                   "pbroadcast_dynamic", "preduced", "unreduced_psum", "unreduced_pmax", "unreduced_pmin",
                   "unreduced_reduce_scatter", "vary_unreduced_cast", "reduced_vary_cast",
                   # jax 0.12.1's max/min reduce-scatters (bound only over axes of several devices)
                   "pmax_scatter", "pmin_scatter",
                   # the names jax 0.10 registers for some of these
                   "pbroadcast_start", "pbroadcast_done", "psum_start", "unreduced_psum_start",
                   "unreduced_reduce_scatter_start", "reduced_vary_cast_p", "vary_unreduced_cast_p"}),
    ),
    "mutable state": (
        "mutable references, boxes and logs (jax.experimental state, Pallas): not a function of values",
        frozenset({"get", "swap", "addupdate", "new_ref", "empty_ref", "free_ref", "freeze",
                   "accum_grad_in_ref", "run_state", "broadcast_to",
                   # jax 0.10's mutable boxes and logs, and Pallas's core_map
                   "new_box", "box_get", "box_set", "new_log", "log_read", "log_extend", "core_map"}),
    ),
    "error effect": (
        "checkify's error effect (checkify.check): judge the function without it, or checkify outside "
        "the judged function",
        frozenset({"check"}),
    ),
    "JAX internal": (
        "a JAX-internal primitive (shape polymorphism, tokens, layouts, autodiff or partial-evaluation "
        "machinery) that a traced user function does not contain",
        frozenset({"after_all", "create_token", "dim_as_value", "dimension_size", "shape_assertion",
                   "empty2", "dce_sink", "unreachable", "tie", "name",
                   "stage", "zeros_like", "custom_lin", "linear_call", "custom_vmap_call", "remat_opt",
                   "custom_jvp_call_jaxpr", "eval_jaxpr", "call_hi_primitive_linearized", "create_linear",
                   "pin", "unpin", "to_edtype",
                   "from_edtype", "relayout",
                   "call"}),  # `call`: jax 0.10's generic call_p, which traced functions do not hold
    ),
}

#: Primitive name -> why the exact oracle refuses it (``REFUSED_NUMERIC`` and every category's names).
REFUSED_PRIMITIVES: dict[str, str] = {
    **REFUSED_NUMERIC,
    **{name: f"{category}: {reason}" for category, (reason, names) in REFUSED_CATEGORIES.items()
       for name in sorted(names)},
}
