"""``jst.stabilize`` and ``jst.explain``: the public entry points of the rewrite pass.

Takes a user function and options; hands on the stabilized function (``search=`` adds ``jst.improve``'s
program where it beats the catalogue's) or the list of rewrites. This stage's only job is to check the
arguments and choose: the transformation itself is the rewrites' (``rewrites/_transform.py``), the
search is ``_search``'s. It sits above both, so that neither imports the other's caller
(docs/architecture.md, "Stage order"); nothing in the package imports it but the package root.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from .._errors import ArgumentTypeError, function_name, require_callable
from ..rewrites import _transform
from ..rewrites.engine._engine import Explanation
from ..rewrites.engine._rule import Rule

__all__ = ["explain", "stabilize"]

F = TypeVar("F", bound=Callable[..., Any])


def _check_rules(entry: str, rules: Any, exclude: Any) -> None:
    for name, value in (("rules", rules), ("exclude", exclude)):
        if value is None and name == "rules":
            continue
        if not isinstance(value, (str, Rule, Iterable)):  # one rule or name, or several
            raise ArgumentTypeError(
                f"{entry}: {name} must be a rule, a rule name or a list of them (e.g. {name}=[\"log1p\"] or "
                f"jst.rewrites.STABILITY); got {value!r:.60} ({type(value).__name__}).")


def stabilize(fn: F, *, rules: Iterable[Rule | str] | None = None, exclude: Iterable[Rule | str] = (),
              search: bool | dict[str, Any] = False, custom_derivatives: str = "keep",
              derivatives: str = "rules") -> F:
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
      search: also search for a more accurate program (``jst.improve``, per input signature on the first
        call, positional float arguments only) and run it when it beats the original; otherwise the
        rewritten program runs. A dict instead of True passes options to ``jst.improve``
        (``max_examples``, ``time_limit``, ...).
      custom_derivatives: ``"keep"`` (default) keeps each ``jax.custom_jvp``/``custom_vjp`` rule,
        attached to the stabilised primal; ``"primal"`` replaces every such rule by the derivative
        AD computes from the stabilised primal (the ``primal_derivative`` rule), for a rule that
        ``jst.check(..., grad=True)`` shows wrong or less accurate than the primal.
      derivatives: ``"rules"`` (default): autodiff differentiates the stabilised program, whose
        derivative-only rules carry accurate derivatives; ``"program"``: the derivative as a
        program too: on the first differentiation the stabilised function's JVP is traced,
        rewritten by the catalogue (``expm1(x) + 1 -> exp(x)``, ``0 · inf`` at a structural zero,
        ...) and installed as its ``custom_jvp`` rule where that changes it (values bit for bit).

    Returns:
      The stabilized function.

    Raises:
      ArgumentTypeError: ``fn`` is not callable, ``rules``/``exclude`` are not rules or names,
        ``search`` is neither a bool nor a dict.

    Example::

        f = jst.stabilize(lambda x: jnp.log(jnp.sum(jnp.exp(x))))
        f(jnp.array([1000.0, 0.0]))   # 1000.0, not inf
    """
    require_callable("jst.stabilize", fn)
    entry = f"jst.stabilize({function_name(fn)})"
    _check_rules(entry, rules, exclude)
    if not isinstance(search, (bool, dict)):
        raise ArgumentTypeError(
            f"{entry}: search must be True, False or a dict of jst.improve options (e.g. "
            f"search={{\"time_limit\": 30}}); got {search!r:.60} ({type(search).__name__}).")
    stabilized = _transform.stabilize(fn, rules=rules, exclude=exclude, custom_derivatives=custom_derivatives,
                                      derivatives=derivatives)
    if search is False:
        return stabilized
    from .._search._apply import searched

    options = search if isinstance(search, dict) else {}
    return searched(fn, stabilized, **options)  # type: ignore[return-value]


def explain(fn: Callable[..., Any], *example_args: Any, rules: Iterable[Rule | str] | None = None,
            exclude: Iterable[Rule | str] = (), **example_kwargs: Any) -> Explanation:
    """List the rewrites ``jst.stabilize`` would apply to ``fn`` on arguments like these.

    Returns an :class:`Explanation`: a list of ``Applied(rule, location, before, after, path)`` in
    program order; ``str()`` prints one short before/after per rewrite with the user's ``file:line``.

    Raises:
      ArgumentTypeError: ``fn`` is not callable, or ``rules``/``exclude`` are not rules or names.

    Example::

        print(jst.explain(lambda x: jnp.log(1 + x), jnp.ones(3)))
        # model.py:3: log1p
        #     - log(add(1, x))
        #     + log1p(x)
    """
    require_callable("jst.explain", fn)
    _check_rules(f"jst.explain({function_name(fn)})", rules, exclude)
    return _transform.explain(fn, *example_args, rules=rules, exclude=exclude, **example_kwargs)
