"""Random keys, random bits and bit-level integer operations: exact, because they are integer arithmetic.

A PRNG key (``jax.random.key``: a ``key<fry>`` array) and everything computed from keys alone
(``random_seed``, ``random_wrap``/``unwrap``, ``random_split``, ``random_fold_in``, ``random_bits``,
``threefry2x32``, and the shape operations on key arrays) involve no real numbers: their results are
integers that JAX computes exactly. The oracle therefore evaluates such an equation by binding its
primitive eagerly on the concrete operands, which is JAX's own integer arithmetic and so the exact
program's. Key values live in the interpreter's environment as JAX key arrays; integer results come
back as numpy arrays.

The same holds for bit-level integer primitives numpy has no ufunc for (``shift_right_logical``,
``population_count``, ``clz``, ``mulhi``, ...): any equation whose operands and results are all integers,
booleans or keys may be bound eagerly (:func:`is_integral`).

``random_gamma`` (``jax.random.gamma``, ``beta``, ``dirichlet``) and, on JAX 0.12.1+, ``random_poisson``
(``jax.random.poisson``) are JAX's own samplers (found through ``_compat``, which knows where each release
keeps them), traced once per operand shape and evaluated exactly like any program.

``bitcast_convert_type`` reinterprets bits. From an integer to a float it yields that float exactly (how
``jax.random.uniform`` makes floats in [1, 2)); from a float it has no real-number meaning, so like
``nextafter`` it applies to the operand rounded to its dtype, which must be decided (``Undecided``
otherwise, so the element escalates until the ball rounds to one float).
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import numpy as np

from ... import _compat
from ..core._balls import round_balls, to_arb_array
from ..core._common import Rule, Undecided, is_float

__all__ = [
    "KEY_PRIMITIVES", "RULES", "concrete", "involves_keys", "is_integral", "is_key", "select_leading",
    "stack",
]

#: Primitives on keys or random bits: always bound eagerly on their concrete (integer or key) operands.
KEY_PRIMITIVES: frozenset[str] = frozenset({
    "random_seed", "random_wrap", "random_unwrap", "random_split", "random_fold_in", "random_bits",
    "random_clone", "threefry2x32", "threefry4x32", "philox2x32", "philox4x32", "rng_bit_generator",
    "shift_right_logical", "population_count", "clz", "mulhi", "iota_2x32_shape",
    "raw_bits",  # JAX 0.12.1: a key's raw stream words, before random_bits shapes them
})


def is_key(dtype: Any) -> bool:
    """Whether ``dtype`` is a PRNG key dtype (``key<fry>``, ``key<rbg>``, ...)."""
    try:
        return _is_key(dtype)
    except TypeError:  # unhashable: not a dtype the cache takes
        return bool(jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key))


@functools.cache
def _is_key(dtype: Any) -> bool:
    try:
        return bool(jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key))
    except TypeError:
        return False


@functools.cache
def _integral(dtype: Any) -> bool:
    if is_key(dtype):
        return True
    try:
        return np.dtype(dtype).kind in "biu"
    except TypeError:
        return False


def is_integral(eqn: Any) -> bool:
    """Whether every operand and result of ``eqn`` is an integer, boolean or key (no real number)."""
    atoms = [*eqn.invars, *eqn.outvars]
    return bool(atoms) and all(_integral(_compat.aval(a).dtype) for a in atoms)


def involves_keys(eqn: Any) -> bool:
    """Whether ``eqn`` reads or writes a key array."""
    return any(is_key(_compat.aval(a).dtype) for a in (*eqn.invars, *eqn.outvars))


def stack(values: list[Any]) -> Any:
    """``np.stack``, or ``jnp.stack`` for key arrays (a scan's per-step keys)."""
    if values and not isinstance(values[0], np.ndarray):
        return jax.numpy.stack(values)
    return np.stack(values)


def select_leading(pred: np.ndarray, new: Any, old: Any) -> Any:
    """``where(pred, new, old)`` with ``pred`` over the leading axes (a batched while loop's step)."""
    if not isinstance(old, np.ndarray):  # key arrays
        mask = jax.numpy.reshape(pred, pred.shape + (1,) * (old.ndim - pred.ndim))
        return jax.numpy.where(mask, new, old)
    mask = pred.reshape(pred.shape + (1,) * (old.ndim - pred.ndim))
    return np.where(mask, new, old)


def _from_jax(x: Any, aval: Any) -> Any:
    return x if is_key(aval.dtype) else np.asarray(x)


def concrete(ctx: Any, eqn: Any, *args: Any) -> Any:
    """Binds ``eqn``'s primitive on its concrete integer/key operands: JAX's exact integer arithmetic."""
    with jax.ensure_compile_time_eval():
        outs = _compat.bind(eqn, list(args))
    vals = [_from_jax(o, _compat.aval(v)) for o, v in zip(outs, eqn.outvars)]
    return vals if eqn.primitive.multiple_results else vals[0]


def _bitcast(ctx: Any, eqn: Any, x: np.ndarray) -> np.ndarray:
    src = np.dtype(_compat.aval(eqn.invars[0]).dtype)
    new = np.dtype(eqn.params["new_dtype"])
    if is_float(src):
        rounded, decided = round_balls(x, src)
        if not np.asarray(decided).all():
            raise Undecided
        bits = np.asarray(rounded, dtype=src)
    else:
        bits = np.asarray(x, dtype=src)
    if new.itemsize < src.itemsize:  # a trailing axis of the narrower pieces
        out = np.ascontiguousarray(bits)[..., None].view(new)
    elif new.itemsize > src.itemsize:  # the trailing axis folds into one wider value
        out = np.ascontiguousarray(bits).view(new)[..., 0]
    else:
        out = bits.view(new)
    return to_arb_array(out) if is_float(new) else np.asarray(out)


@functools.cache
def _gamma_program(key_aval: Any, a_aval: Any, log_space: bool) -> Any:
    return _compat.random_gamma_program(key_aval, a_aval, log_space)


@functools.cache
def _poisson_program(key_aval: Any, lam_aval: Any, dtype: Any) -> Any:
    return _compat.random_poisson_program(key_aval, lam_aval, dtype)


def _random_gamma(ctx: Any, eqn: Any, key: Any, a: np.ndarray) -> np.ndarray:
    """``jax.random.gamma``: JAX's rejection sampler evaluated exactly (its acceptance tests decided on
    balls, so a draw the float program accepts by a rounding may be rejected by the exact one)."""
    avals = tuple(_compat.aval(v) for v in eqn.invars)
    program = _gamma_program(*avals, bool(eqn.params.get("log_space", False)))
    if program is None:  # pragma: no cover - another JAX layout
        raise ctx.unsupported(eqn, "this JAX release's gamma sampler is not reachable")
    return ctx.call(program, [key, a])[0]


def _random_poisson(ctx: Any, eqn: Any, key: Any, lam: np.ndarray) -> np.ndarray:
    """``jax.random.poisson`` (JAX 0.12.1+): JAX's sampler (Knuth's product of uniforms, Hormann's
    transformed rejection) evaluated exactly, its loop exits and acceptance tests decided on balls."""
    avals = tuple(_compat.aval(v) for v in eqn.invars)
    program = _poisson_program(*avals, np.dtype(eqn.params["dtype"]))
    if program is None:  # pragma: no cover - another JAX layout
        raise ctx.unsupported(eqn, "this JAX release's Poisson sampler is not reachable")
    return ctx.call(program, [key, lam])[0]


RULES: dict[str, Rule] = {name: concrete for name in KEY_PRIMITIVES}
RULES["bitcast_convert_type"] = _bitcast
RULES["random_gamma"] = _random_gamma
RULES["random_poisson"] = _random_poisson
