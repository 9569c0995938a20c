"""_hypothesis_compat.py on the running Hypothesis: the private API it relies on is still there."""

from __future__ import annotations

from hypothesis.internal.conjecture import providers

from pytest_jaxstab import _hypothesis_compat


def _local_constants() -> object:
    provider = providers.HypothesisProvider(None)
    return provider._local_constants


def test_without_local_constants_hides_them_and_restores_them():
    descriptor = providers.HypothesisProvider.__dict__["_local_constants"]
    with _hypothesis_compat.without_local_constants():
        inside = _local_constants()
        assert providers.HypothesisProvider.__dict__["_local_constants"] is not descriptor
    assert providers.HypothesisProvider.__dict__["_local_constants"] is descriptor
    # the empty constants: no literal of any kind is offered to the draws
    assert not any(len(getattr(inside, kind)) for kind in ("integers", "floats", "bytes", "strings"))
