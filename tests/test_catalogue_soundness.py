"""Every stability rule, fuzzed through the whole pipeline: the rewrite never makes things worse.

Each rule of ``jst.rewrites.STABILITY`` carries ``example`` (a small function made of its pattern),
``example_shapes`` and ``example_domain``. ``jst.check`` fuzzes the example in float32 with a fixed seed;
the rewritten function's max error may exceed the original's by at most 1 bit (one ulp of rounding
difference, e.g. a fused form rounding once more or less), and it may not overflow more often. A rule
that fails this is a bug in the rule, not a tolerance to widen.
"""

from __future__ import annotations

import jax
import pytest

from pytest_jaxstab._check import check_case
from pytest_jaxstab.rewrites import STABILITY, STABILITY_FAST

# The slow tier (`make test-slow`, run in full by CI; `make test` leaves it out): docs/architecture.md,
# "Tests and their tiers".
pytestmark = pytest.mark.slow

# the opt-in fast variants (STABILITY_FAST) are held to the same rule
# jax 0.10 inlines ndtri into its own equations, so a rule on ndtri(1 - p) has nothing to match there
OLD_JAX = tuple(int(v) for v in jax.__version__.split(".")[:2]) < (0, 11)
OLD_JAX_CANNOT_FIRE = {"ndtri_complement"} if OLD_JAX else set()
RULES = [rule for rule in (*STABILITY, *(r for r in STABILITY_FAST if r not in STABILITY))
         if rule.example is not None and rule.name not in OLD_JAX_CANNOT_FIRE]


def test_every_stability_rule_has_an_example():
    missing = [rule.name for rule in STABILITY if rule.example is None]
    # inv_matmul rewrites a matrix inverse into a solve: its example needs a well-conditioned matrix,
    # which a domain of element values cannot express (tests/test_catalogue.py covers it).
    assert set(missing) <= {"inv_matmul"}, missing


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.name)
def test_rewrite_is_never_worse(rule):
    # A derivative-only rule (the value bit-identical, only the derivative replaced) is judged where it
    # acts: on the gradient (a value check does not list it, by design: it cannot change a value).
    result = check_case(rule.example, shapes=list(rule.example_shapes), dtype="float32",
                   domain=rule.example_domain, max_examples=40, rules=[rule], derandomize=True,
                   name=f"catalogue::{rule.name}", grad=rule.derivative_only)
    judged = result.gradient if rule.derivative_only else result
    assert judged is not None
    assert [r.rule for r in judged.rewrites][:1] == [rule.name], "the rule must fire on its own example"
    original, rewritten = judged.original, judged.rewritten
    detail = (f"{rule.name}: original {original.max_error_bits:.1f} bits / {original.overflows} overflows, "
              f"rewritten {rewritten.max_error_bits:.1f} bits / {rewritten.overflows} overflows")
    assert rewritten.max_error_bits <= original.max_error_bits + 1.0, detail
    assert rewritten.overflows <= original.overflows, detail
