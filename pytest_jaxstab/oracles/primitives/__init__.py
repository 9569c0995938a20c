"""The exact semantics of JAX's primitives on balls, one family per module.

``_elementwise`` (arithmetic, transcendental, comparisons, casts), ``_reductions`` (reductions,
cumulative operations, ``dot_general``, ``sort``), ``_structural`` (shapes, slicing, indexing,
padding), ``_conv``, ``_windows`` (pooling and its derivatives), ``_topk``, ``_special`` (the special
functions of ``jax.lax``), ``_random`` (PRNG keys and integer bit arithmetic), ``_effects``
(value-neutral effects, one-device parallelism), ``_hijax`` (JAX's high-level primitives) and
``_refusals`` (what the oracle refuses, each with its reason). Each takes balls from ``core/`` and
hands balls on; the interpreter (``interpreter/``) dispatches to them.
"""
