"""The primitives the oracle refuses, each with its reason: the documented complement of its rules.

Every primitive JAX registers is either evaluated exactly (``SUPPORTED_PRIMITIVES``; integer and key
arithmetic is bound eagerly, see ``_random``) or listed here; ``tests/test_oracle_coverage.py`` walks
JAX's registry and fails on any primitive in neither, so a JAX release that adds a real-valued
primitive is noticed. The reason is part of the ``UnsupportedPrimitive`` message a user sees.
"""

from __future__ import annotations

__all__ = ["REFUSED_PRIMITIVES"]

_FACTORS = ("its factors are unique only up to signs, order or a basis of each repeated eigenvalue, so "
            "they are not functions of the matrix to round exactly; not evaluated yet")
_NOT_YET = "a real-valued primitive the exact oracle does not evaluate yet"
_OPAQUE = ("opaque code (a Python callback, a foreign or exported function, a GPU kernel): no jaxpr to "
           "evaluate")
_MULTI_DEVICE = ("a collective or transfer between several devices; the oracle evaluates one-device "
                 "shard_map/pmap only")
_STATE = "mutable references (jax.experimental state, Pallas): not a function of values"
_INTERNAL = ("a JAX-internal primitive (shape polymorphism, tokens, autodiff or partial-evaluation "
             "machinery) that a traced user function does not contain")
_BLOCK_SCALED = ("block-scaled low-precision matrix products (fp8/mx formats): their scales are not real "
                 "arithmetic")

#: Primitive name -> why the exact oracle refuses it.
REFUSED_PRIMITIVES: dict[str, str] = {
    **dict.fromkeys(("eig", "geqrf", "geqp3", "householder_product", "ormqr",
        "schur", "hessenberg", "tridiagonal"), _FACTORS),
    **dict.fromkeys(("reduce_window", "select_and_scatter", "cholesky_update",
        "symmetric_product", "ragged_dot_general", "approx_top_k", "reduce"),
        _NOT_YET),
    **dict.fromkeys(("pure_callback", "io_callback", "ffi_call", "call_exported", "cudnn_fusion",
        "custom_partitioning", "dot_product_attention_fwd", "dot_product_attention_bwd",
        "dot_product_attention_fwd_wrapper", "dot_product_attention_bwd_wrapper",
        "dot_product_attention_fp8_fwd", "dot_product_attention_fp8_bwd",
        "dot_product_attention_fp8_fwd_wrapper", "dot_product_attention_fp8_bwd_wrapper"), _OPAQUE),
    **dict.fromkeys(("scaled_matmul", "scaled_matmul_wrapper", "scaled_dot"), _BLOCK_SCALED),
    **dict.fromkeys(("all_to_all", "all_to_all_start", "all_to_all_done", "all_gather_start",
        "all_gather_done", "all_gather_reduced", "all_gather_reduced_start", "reduce_scatter",
        "reduce_scatter_start", "reduce_scatter_done", "ppermute_start", "ppermute_done", "psum_done",
        "psum_invariant_start", "psend", "precv", "ragged_all_to_all", "pbroadcast_dynamic",
        "preduced", "unreduced_psum", "unreduced_pmax", "unreduced_pmin", "unreduced_reduce_scatter",
        "vary_unreduced_cast", "reduced_vary_cast",
        # the names jax 0.10 registers for some of these
        "pbroadcast_start", "pbroadcast_done", "psum_start", "unreduced_psum_start",
        "unreduced_reduce_scatter_start", "reduced_vary_cast_p", "vary_unreduced_cast_p"), _MULTI_DEVICE),
    **dict.fromkeys(("get", "swap", "addupdate", "new_ref", "empty_ref", "free_ref", "freeze",
        "accum_grad_in_ref", "run_state", "broadcast_to",
        # jax 0.10's mutable boxes and logs, and Pallas's core_map
        "new_box", "box_get", "box_set", "new_log", "log_read", "log_extend", "core_map"), _STATE),
    **dict.fromkeys(("after_all", "create_token", "dim_as_value", "dimension_size", "shape_assertion",
        "eq_to", "lt_to", "le_to", "empty", "empty2", "dce_sink", "unreachable", "tie", "name",
        "stage", "zeros_like", "custom_lin", "linear_call", "custom_vmap_call", "remat_opt",
        "custom_jvp_call_jaxpr", "eval_jaxpr", "call_hi_primitive", "call_hi_primitive_linearized",
        "create_linear", "pin", "unpin", "to_edtype", "from_edtype", "relayout",
        "call"), _INTERNAL),  # `call`: jax 0.10's generic call_p, which traced functions do not hold
    "rng_uniform": "XLA's stateful uniform generator: its draws are not a function of the program's inputs",
    "check": ("checkify's error effect (checkify.check): judge the function without it, or checkify "
              "outside the judged function"),
}
