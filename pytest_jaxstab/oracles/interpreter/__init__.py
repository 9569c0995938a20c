"""The oracle's run: the interpreter over balls and ``evaluate`` at rising precisions.

``_interpreter`` walks a closed jaxpr over Arb balls at one working precision, dispatching each
primitive to ``primitives/``, ``linalg/``, ``complex/`` or ``library/``; ``_evaluate``
(``jst.oracles.evaluate``) runs it at rising precisions until every output element is proven;
``_limits`` takes limits where a value is undefined and derivatives at JAX's ties from the exact
neighbours of the point; ``_rows`` proves a program row-separable, so that a pass re-runs only the rows
with an undecided element; ``_live`` names the equations no output reads, which the interpreter skips
(a dead ``eq(x, max(x))`` in a derivative must not stop a pass), and ``_extremum`` decides a comparison
of a value with its own row's ``reduce_max``/``reduce_min`` where one element strictly leads its row
(issue 47). ``evaluate`` runs the float64 fast path (``oracles/fast``) first. See
docs/architecture.md, "The oracle".
"""
