"""Users' routines declared to the oracle: :func:`define` (see ``_library``)."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import jax
from flint import arb

from ..._errors import ArgumentError, OracleError
from ._routines import USER, Routine, _strict

__all__ = ["define"]

Ball = Any


def define(fn: Callable[..., Any] | None = None, *, exact: Callable[..., Any],
           derivative: Callable[..., Any] | None = None, name: str | None = None) -> Any:
    """Declares what a routine of yours computes, so the oracle judges it by that and not its code.

    Use it on an approximation (a truncated series, a rational fit, a piecewise formula): the exact
    oracle then evaluates ``exact`` wherever a program calls the routine, so the approximation's own
    error is measured instead of being reproduced exactly. ``local_error`` and ``find_nan_origin``
    treat each call as one operation named after the routine, at the line that called it.

    Args:
      fn: the routine: a Python function of arrays, elementwise (each output element depends on the
        input elements at the same index; scalar arguments broadcast), returning one float array.
      exact: its mathematical definition on Arb balls: called with one ``flint.arb`` per argument (an
        exact ball for a float or integer input), it returns an ``arb`` ball that encloses the true
        value for every point of the argument balls (python-flint's functions do this), or ``None``
        where the value does not exist (NaN). Never a float: the oracle's results are proven.
      derivative: its exact derivative, called as ``exact`` is: for a routine of one argument, a ball
        enclosing ``f'(x)``; of several, a tuple with one ball per argument (the partial derivatives).
        A gradient check (``grad=True``) then judges JAX's gradient against it. Without it, the
        gradient's reference for this routine is the derivative of its *body* evaluated exactly, and
        the check's note says so.
      name: the name shown in reports (default: ``fn.__name__``).

    Returns:
      ``fn`` compiled with ``jax.jit`` (which marks its calls in the program); usable as a decorator,
      ``@define(exact=...)``.

    Raises:
      ArgumentError: ``fn`` or ``exact`` is not a Python function.

    Example:
      >>> import jax, jax.numpy as jnp, numpy as np
      >>> from pytest_jaxstab import oracles
      >>> @oracles.define(exact=lambda x: x.exp().log1p())
      ... def my_softplus(x):  # cheap: drops exp(-x) above 20
      ...     return jnp.where(x > 20.0, x, jnp.log1p(jnp.exp(x)))
      >>> with jax.enable_x64(True):
      ...     r = oracles.evaluate(my_softplus, np.float64(30.0))
      >>> float(r.values) > 30.0  # the function, 30 + 9.4e-14, not the approximation's 30
      True
    """
    if fn is None:
        return lambda f: define(f, exact=exact, derivative=derivative, name=name)
    if not callable(exact):
        raise ArgumentError(f"define: exact must be a function of flint.arb balls, got "
                            f"{type(exact).__name__}")
    if derivative is not None and not callable(derivative):
        raise ArgumentError(f"define: derivative must be a function of flint.arb balls (or None), got "
                            f"{type(derivative).__name__}")
    target = inspect.unwrap(fn)
    while isinstance(target, functools.partial):
        target = inspect.unwrap(target.func)
    code = getattr(target, "__code__", None)
    if code is None or not callable(fn):
        raise ArgumentError(f"define: fn must be a Python function (def or lambda), got {type(fn).__name__}")
    try:
        nargs = len(inspect.signature(fn).parameters)
    except (TypeError, ValueError) as exc:
        raise ArgumentError(f"define: cannot read the arguments of {fn!r}: {exc}") from exc
    shown = name or getattr(target, "__name__", "routine")
    key = (target.__name__, code.co_filename, code.co_firstlineno)
    partials = None if derivative is None else tuple(_user_partial(derivative, shown, nargs, i)
                                                     for i in range(nargs))
    USER[key] = Routine(shown, _user_exact(exact, shown), nargs, "user", partials=partials)
    return jax.jit(fn)


def _user_partial(derivative: Callable[..., Any], name: str, nargs: int, i: int) -> Callable[..., Ball]:
    """The ``i``-th partial derivative out of a user's ``derivative`` (a ball, or a tuple of ``nargs``)."""

    @_strict
    def f(*xs: arb) -> Ball:
        r = derivative(*xs)
        if nargs > 1 or isinstance(r, tuple):
            if not isinstance(r, tuple) or len(r) != nargs:
                raise OracleError(f"the derivative declared for {name!r} returned {type(r).__name__}; a "
                                  f"routine of {nargs} arguments needs a tuple of {nargs} flint.arb balls "
                                  "(its partial derivatives, in argument order)")
            r = r[i]
        if r is None or isinstance(r, arb):
            return r
        raise OracleError(f"the derivative declared for {name!r} returned {type(r).__name__}, not a "
                          "flint.arb ball (or None where there is no derivative)")

    return f


def _user_exact(exact: Callable[..., Any], name: str) -> Callable[..., Ball]:
    @_strict
    def f(*xs: arb) -> Ball:
        r = exact(*xs)
        if r is None or isinstance(r, arb):
            return r
        raise OracleError(f"the exact function declared for {name!r} returned {type(r).__name__}, not a "
                          f"flint.arb ball (or None for no real value): return a ball, e.g. x.exp()")

    return f
