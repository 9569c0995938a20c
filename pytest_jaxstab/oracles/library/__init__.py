"""Library routines judged by their mathematics, not by the approximation that implements them.

``_routines`` (the known routines, recognised by their calls, and their exact definitions),
``_define`` (users' routines: ``jst.oracles.define``), ``_derivatives`` (their exact derivatives),
``_exact`` (``jaxstab_exact``: one oracle-only equation standing for a routine, with its exact
derivative), ``_inline`` (the routines JAX inlines on older versions, recognised by their frames) and
``_reference`` (the gradient's reference: the derivative of the exact function).

``_inline`` and ``_reference`` replace routine calls in a jaxpr with the rewrite engine's public API
(``Rule(matcher=...)``, ``Match``, ``rewrite_jaxpr``), as a user's structural rule would: the oracle
stands above the rewrites and never the other way round (docs/architecture.md, "Stage order").
"""
