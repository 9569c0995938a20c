"""At inputs where the problem is ill-conditioned a candidate is judged by the stability lens
(``_search._stable``): worse than the original there only within the conditioning is excused."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from pytest_jaxstab._check._trace import trace_case, x64_scope
from pytest_jaxstab._search._judge import Samples
from pytest_jaxstab._search._stable import Conditioning

F64 = np.dtype(np.float64)


def _setup(xs: list[float], ys: list[float]) -> tuple[Samples, Conditioning]:
    with x64_scope(F64):
        case = trace_case(lambda x, y: x - y, F64, [(), ()])
        samples = Samples.build(("sub", ("var", 0), ("var", 1)), F64, [np.array(xs), np.array(ys)])
    return samples, Conditioning(case.closed, case.judged_outputs[0], F64, float("inf"))


def test_worse_within_the_conditioning_is_excused_and_beyond_it_is_not():
    # x - y at x = 1 + 2^-30, y = 1: the rounding of the inputs moves the difference by ~2^30 of its
    # ulps (conditioning ~31 bits, by hand: |x| u / ulp(2^-30) = 2^-53 / 2^-82 = 2^29 per input); at
    # x = 3, y = 1 it is ~1-2 bits. A candidate 25 bits off is within the first, far beyond the second.
    samples, cond = _setup([1 + 2.0 ** -30, 3.0], [1.0, 1.0])
    bits0, bits1 = cond.bits(samples, 0), cond.bits(samples, 1)
    assert bits0 is not None and bits1 is not None
    assert 29 <= float(bits0) <= 32 and float(bits1) <= 3
    excused = cond.excused(samples, np.array([25.0, 25.0]), np.array([0.0, 0.0]), 2.0)
    assert excused.tolist() == [True, False]


def test_no_excuse_where_the_candidate_is_not_worse():
    samples, cond = _setup([1 + 2.0 ** -30], [1.0])
    assert cond.excused(samples, np.array([1.0]), np.array([0.0]), 2.0).tolist() == [False]
    assert not cond._bits  # nothing computed: the conditioning costs oracle calls only where needed


def test_full_precision_conditioning_excuses_any_error():
    # x - y = 2^-52 at x = 1 + 2^-52: one unit roundoff on each input moves the exact result by 2^52 of
    # its ulps (2^-53 / 2^-104 = 2^51 each), i.e. by the whole result: no result is meaningful there,
    # and a candidate with every bit wrong is excused.
    samples, cond = _setup([1 + 2.0 ** -52], [1.0])
    bits = cond.bits(samples, 0)
    assert bits is not None and float(bits) >= 52
    assert cond.excused(samples, np.array([64.0]), np.array([0.0]), 2.0).tolist() == [True]
    _ = jnp  # jax is imported for x64_scope's effect on tracing only
