"""The rewrite pass as a JAX transformation: the rules' part of ``jst.stabilize`` and ``jst.explain``.

The public entry points (``_stabilize/``: argument checks, ``search=``) call these; so do the stages
that need the catalogue's rewrite of a function (``_check._verify``, ``_search._pipeline``), which sit
below the entry points and cannot import them (docs/architecture.md, "Stage order").
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import jax
import numpy as np

from .. import _compat
from .._errors import ArgumentError, function_name, tracing
from . import _tangent
from .engine._engine import Explanation, rewrite_jaxpr
from .engine._rule import Rule, resolve

__all__ = ["explain", "rewrite", "stabilize"]

F = TypeVar("F", bound=Callable[..., Any])


def _default_rules() -> tuple[Rule, ...]:
    from .catalogue import STABILITY

    return tuple(STABILITY)


def _trace(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any, Any]:
    with tracing(fn):
        return _compat.trace(fn, *args, **kwargs)


def _not_arrays(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> ArgumentError:
    """The error for arguments that are not arrays (a method's ``self``, a string option, ...)."""
    bad = []
    for path, leaf in jax.tree_util.tree_flatten_with_path((args, kwargs))[0]:
        try:
            _compat.typeof(leaf)
        except TypeError:
            where, rest = path[0], path[1:]
            head = rest[0] if rest else None
            key = getattr(head, "idx", getattr(head, "key", "?"))
            name = f"argument {key}" if getattr(where, "idx", 0) == 0 else f"keyword argument {key!r}"
            tail = jax.tree_util.keystr(tuple(rest[1:])) if len(rest) > 1 else ""
            bad.append(f"{name}{tail} = {leaf!r:.60} ({type(leaf).__name__})")
    if not bad:  # pragma: no cover - typeof failed on a leaf it accepts one by one
        bad.append("an argument JAX cannot take")
    method = bool(args) and hasattr(type(args[0]), getattr(fn, "__name__", "\0"))
    hint = ("jst.stabilize transforms functions of arrays (pytrees of arrays): "
            "bind non-array (static) arguments first with functools.partial, e.g. "
            "jst.stabilize(functools.partial(f, mode=\"fast\")).")
    if method:
        hint += (" For a method, stabilize the bound method (self.f = jst.stabilize(self.f) in __init__) "
                 "or a function of the arrays it computes with, not the method in the class body.")
    return ArgumentError(f"jst.stabilize({function_name(fn)}): {'; '.join(bad)} is not a JAX array. {hint}")


def _signature(leaves: list[Any]) -> tuple[Any, ...]:
    sig = []
    for leaf in leaves:
        aval = _compat.typeof(leaf)
        sig.append((tuple(aval.shape), np.dtype(aval.dtype).str, bool(getattr(aval, "weak_type", False))))
    return tuple(sig)


def stabilize(fn: F, *, rules: Iterable[Rule | str] | None = None, exclude: Iterable[Rule | str] = (),
              custom_derivatives: str = "keep", derivatives: str = "rules") -> F:
    """Rewrite ``fn``'s numerically unstable patterns into stable ones; a JAX transformation.

    The returned function has ``fn``'s signature. On the first call per input signature (tree
    structure, shapes, dtypes) it traces ``fn`` to a jaxpr, applies ``rules`` to a fixed point (also
    inside nested ``jit``, ``scan``, ``while``, ``cond`` and custom-derivative primal bodies) and caches
    the result; every call then evaluates the rewritten jaxpr on the arguments. It composes with
    ``jax.jit``, ``jax.grad`` and ``jax.vmap`` in any order. Array arguments may be pytrees and keyword
    arguments; non-array (static) arguments must be bound with ``functools.partial``.

    Args:
      fn: the function to rewrite.
      rules: rules or rule names; ``None`` means ``jst.rewrites.STABILITY``.
      exclude: rules or names to leave out.
      custom_derivatives: ``"keep"`` (default) keeps each ``jax.custom_jvp``/``custom_vjp`` rule,
        attached to the stabilised primal; ``"primal"`` replaces every such rule by the derivative
        AD computes from the stabilised primal (the ``primal_derivative`` rule), for a rule that
        ``jst.check(..., grad=True)`` shows wrong or less accurate than the primal.
      derivatives: ``"rules"`` (default): autodiff differentiates the stabilised program (the
        derivative-only rules give it accurate derivatives); ``"program"``: also trace its JVP on
        the first differentiation, rewrite that program with the catalogue and install it as the
        function's ``custom_jvp`` rule where it changes (``rewrites/_tangent.py``).

    Returns:
      The stabilized function.

    Example::

        f = jst.stabilize(lambda x: jnp.log(jnp.sum(jnp.exp(x))))
        f(jnp.array([1000.0, 0.0]))   # 1000.0, not inf
    """
    chosen = _with_derivatives(resolve(rules, exclude, _default_rules() if rules is None else ()),
                               custom_derivatives, fn)
    if derivatives not in ("rules", "program"):
        raise ArgumentError(
            f"jst.stabilize({function_name(fn)}): derivatives={derivatives!r} is not one of 'rules' "
            "(differentiate the stabilised program) or 'program' (also rewrite its JVP program).")
    trules = _tangent.tangent_rules(chosen) if derivatives == "program" else None
    cache: dict[Any, tuple[Any, Any, Any]] = {}

    @functools.wraps(fn)
    def stabilized(*args: Any, **kwargs: Any) -> Any:
        leaves, in_tree = jax.tree_util.tree_flatten((args, kwargs))
        try:
            key = (in_tree, _signature(leaves))
        except TypeError:
            raise _not_arrays(fn, args, kwargs) from None
        entry = cache.get(key)
        if entry is None:
            closed, _, out_tree = _trace(fn, args, kwargs)
            new, _ = rewrite_jaxpr(closed, chosen)
            # A function closing over an outer trace's values (called inside someone's jit) yields
            # tracer consts: valid for this trace only, so never cached (nor given a JVP program).
            traced_consts = any(_compat.is_tracer(c) for c in new.consts)
            run = _compat.as_fun(new)
            if trules is not None and not traced_consts and not _tangent.has_custom_vjp(new):
                run = _tangent.with_tangent_program(run, [_compat.typeof(v) for v in leaves], trules)
            entry = (new, out_tree, run)
            if not traced_consts:
                cache[key] = entry
        _, out_tree, run = entry
        outs = run(*leaves)
        return jax.tree_util.tree_unflatten(out_tree, outs)

    stabilized.jaxstab_rules = chosen  # type: ignore[attr-defined]
    stabilized.jaxstab_cache = cache  # type: ignore[attr-defined]
    return stabilized  # type: ignore[return-value]


def _with_derivatives(chosen: tuple[Rule, ...], mode: str, fn: Callable[..., Any]) -> tuple[Rule, ...]:
    """``chosen`` plus ``primal_derivative`` for ``custom_derivatives="primal"``."""
    if mode == "keep":
        return chosen
    if mode != "primal":
        raise ArgumentError(
            f"jst.stabilize({function_name(fn)}): custom_derivatives={mode!r} is not one of 'keep' "
            "(keep each custom_jvp/custom_vjp rule) or 'primal' (differentiate the stabilised primal "
            "instead).")
    from .catalogue._derivatives import PRIMAL_DERIVATIVE

    if any(r.name == PRIMAL_DERIVATIVE.name for r in chosen):
        return chosen
    return (*chosen, PRIMAL_DERIVATIVE)


def explain(fn: Callable[..., Any], *example_args: Any, rules: Iterable[Rule | str] | None = None,
            exclude: Iterable[Rule | str] = (), **example_kwargs: Any) -> Explanation:
    """List the rewrites ``jst.stabilize`` would apply to ``fn`` on arguments like these.

    Returns an :class:`Explanation`: a list of ``Applied(rule, location, before, after, path)`` in
    program order; ``str()`` prints one short before/after per rewrite with the user's ``file:line``.

    Example::

        print(jst.explain(lambda x: jnp.log(1 + x), jnp.ones(3)))
        # model.py:3: log1p
        #     - log(add(1, x))
        #     + log1p(x)
    """
    chosen = resolve(rules, exclude, _default_rules() if rules is None else ())
    closed, _, _ = _trace(fn, example_args, example_kwargs)
    _, applied = rewrite_jaxpr(closed, chosen, describe=True)
    return Explanation(applied)


def rewrite(fn: Callable[..., Any], *example_args: Any, rules: Iterable[Rule | str] | None = None,
            exclude: Iterable[Rule | str] = (), **example_kwargs: Any) -> tuple[Any, Explanation]:
    """The rewritten closed jaxpr of ``fn`` on arguments like these, with the rewrites applied."""
    chosen = resolve(rules, exclude, _default_rules() if rules is None else ())
    closed, _, _ = _trace(fn, example_args, example_kwargs)
    new, applied = rewrite_jaxpr(closed, chosen, describe=True)
    return new, Explanation(applied)
