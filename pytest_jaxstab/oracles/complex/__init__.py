"""Complex values in the oracle: Arb complex balls (``flint.acb``), their primitives and their rounding.

``_values`` (conversions, rounding each part to the component dtype, the complex rules the
interpreter dispatches to) and ``_order`` (complex ``max``/``min``, their reductions, sorts and
scatters, which reuse the real structural and reduction rules of ``primitives/``). See
docs/architecture.md, "The oracle".
"""
