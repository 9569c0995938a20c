"""The oracle's numbers: Arb balls and what every other part of the oracle shares.

``_common`` (how values are held, the evaluation context, the errors), ``_ball_util``, ``_arb`` and
``_arb_binary`` (scalar real functions on balls, each result a rigorous enclosure), ``_balls`` (floats
to balls and back, complex floats to ``acb`` balls, the rounding test that decides an element),
``_rounding`` (exact conversions between mpmath numbers and the float dtypes) and ``_metrics`` (bits of
error against the exact result: docs/architecture.md, "The error metric"). Imports no other part of
the oracle.
"""
