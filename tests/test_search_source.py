"""The printed program (``Improvement.source``): a sub-expression printed more than once is named once,
and the ``def`` computes exactly what the term does (array constants included). The reference values
come from evaluating the term itself with ``jax.numpy``, not from the printer."""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np

from pytest_jaxstab._check._trace import x64_scope
from pytest_jaxstab._search._expr import Table, evaluate_jax
from pytest_jaxstab._search._source import function_source

F64 = np.dtype(np.float64)


def _run(source: str, *args: Any) -> Any:
    namespace: dict[str, Any] = {"jnp": jnp}
    exec(source, namespace)
    return namespace["f"](*args)


def test_a_repeated_sub_expression_is_named_once_and_the_program_is_unchanged():
    x, y = ("var", 0), ("var", 1)
    key = ("lt", ("add", x, y), ("const", 0.0))
    guarded = ("where", key, x, ("const", 1.5))  # a regime's guarded input: three uses below
    term = ("add", ("mul", guarded, guarded), ("sqrt", ("abs", ("sub", guarded, y))))
    src = function_source(term, ["x", "y"], "f")
    body = src.splitlines()
    # The guard is defined once (one line), its key inside it; the return line reads the name.
    assert sum("jnp.where" in line for line in body) == 1, src
    assert body[-1].count("t0") == 3 or body[-1].count("t1") == 3, src
    xs, ys = np.array([-2.0, 0.5, 3.0, -0.25]), np.array([1.0, -4.0, 2.0, 0.125])
    with x64_scope(F64):
        want = np.asarray(evaluate_jax(term, [jnp.asarray(xs), jnp.asarray(ys)], F64))
        got = np.asarray(_run(src, xs, ys))
    assert np.array_equal(got, want)


def test_an_array_constant_prints_as_the_values_drawn_bit_for_bit():
    v = ("var", 0)
    drawn = np.array([1e-300, -3.0000000000000004, 2.5e10, np.nextafter(1.0, 2.0)])
    key = ("lt", ("scalar", ("sum_all", v)), ("const", 0.0))
    term = ("sum_all", ("where", key, v, ("const", Table.of(drawn))))
    src = function_source(term, ["v"], "f", (1,))
    assert "jnp.asarray([" in src
    with x64_scope(F64):
        for arg in (np.array([-1.0, -2.0, 0.5, 0.25]), np.array([4.0, -1.0, 0.5, 0.25])):
            want = np.asarray(evaluate_jax(term, [jnp.asarray(arg)], F64)).reshape(())
            assert np.array_equal(np.asarray(_run(src, arg)).reshape(()), want)
        # Where the constant is taken, the program reads the drawn values exactly (1e-300 and
        # nextafter(1, 2) survive the printing): the sum is that of the float64 values drawn.
        got = float(_run(src, np.array([4.0, -1.0, 0.5, 0.25])).reshape(()))
        assert got == float(jnp.sum(jnp.asarray(drawn)))
