"""The rewrite engine: the pattern DSL, matching, rules and the pass over a jaxpr.

``_pattern`` (the public DSL, ``jst.rewrites.pattern``), ``_graph`` (the graph a pass works on, what a
match is), ``_match`` (matching a pattern at one equation), ``_glue`` (seeing through broadcasts and
reshapes), ``_rule``
(``Rule``, the registry, resolving names), ``_complex_guard`` (which matches may read complex
values), ``_guards`` (the structural matchers of guarded ``where`` and masks), ``_engine``
(``rewrite_jaxpr``: the fixed-point pass, nested jaxprs, ``Applied`` records) and ``_instances`` (a
pattern spelled into the smallest programs that match it, for ``jst.verify_rule``).

Takes a closed jaxpr and rules; hands on the rewritten jaxpr and what fired. It knows the stable forms
(``forms/``) and nothing of the catalogue, which is written on top of it in the same public DSL as a
user's rules (docs/architecture.md, "Stage order").
"""
