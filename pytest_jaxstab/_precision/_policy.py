"""``jst.precision_policy``: which operations of each layer of a model must stay float32 (issue 34, item 3).

A model is ``fn(params, batch)``, as ``jmp`` users write them. The view casts the parameters to the compute
dtype (``jmp.Policy.cast_to_compute``: floating leaves only), draws the batch, and asks
:func:`._plan.tune_precision` for the plan of the whole program (its search, its figures: nothing is
searched here). Then it attributes each floating-point equation of the program to a *layer* and reports,
per layer, the operations on the plan's lines:

- a layer is the ``jax.named_scope`` path the equation was traced under when it has one (what Flax and
  Haiku modules, or the user, named), otherwise the chain of the user's functions from ``fn`` down to the
  one whose line made it (``block/layer_norm``); one function reached from two call sites is two layers
  (``layer_norm``, ``layer_norm#2``), in program order;
- a plan keeps *lines* (the upcast transformation works per source line), so a line shared by two layers
  (one ``layer_norm`` called twice) is kept in both: the report says so rather than pretend otherwise.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .. import _compat as C
from .._errors import ArgumentError
from ._plan import PrecisionPlan, _dtypes, _tuned, tune_precision
from ._upcast import _enterable, _is_float, _source, _sub, work

__all__ = ["KeptOperation", "LayerPolicy", "PrecisionPolicy", "precision_policy"]


@dataclasses.dataclass(frozen=True)
class KeptOperation:
    """One source line of a layer computed in the high precision.

    Attributes:
        line: ``"file.py:LINE"``, as ``PrecisionPlan.lines``.
        text: the line's source text (``""`` when the file cannot be read).
        primitives: the layer's floating-point operations on that line, in program order, each once
            (``("reduce_sum", "mul", "sub")`` for a one-pass variance).
        work: their floating-point work (as ``PrecisionPlan.high_share`` counts it).
    """

    line: str
    text: str
    primitives: tuple[str, ...]
    work: int

    def __str__(self) -> str:
        code = f" `{self.text}`" if self.text else ""
        return f"{self.line}{code} ({', '.join(self.primitives)})"


@dataclasses.dataclass(frozen=True)
class LayerPolicy:
    """One layer of the model and what of it to keep in the high precision.

    Attributes:
        name: the layer (its ``jax.named_scope`` path, or its functions' path; see the module).
        scopes: the ``jax.named_scope`` names, outermost first (``()`` when none).
        functions: the user's functions from the model down to the layer's own, outermost first.
        keep: the layer's lines computed in the high precision (empty: all of it in the compute dtype).
        rewrites: ``(rule, "file.py:LINE")`` of the plan's stability rewrites on the layer's lines.
        primitives: every floating-point operation of the layer, in program order, each once.
        work: the layer's floating-point work; ``high_work``: of it, on kept lines.
    """

    name: str
    scopes: tuple[str, ...]
    functions: tuple[str, ...]
    keep: tuple[KeptOperation, ...]
    rewrites: tuple[tuple[str, str | None], ...]
    primitives: tuple[str, ...]
    work: int
    high_work: int

    @property
    def high_share(self) -> float:
        """The share of the layer's floating-point work done in the high precision."""
        return self.high_work / self.work if self.work else 0.0


@dataclasses.dataclass(frozen=True)
class PrecisionPolicy:
    """A ``jmp``-style mixed-precision policy for a model, with the layers that must keep float32 parts.

    Attributes:
        param_dtype: the parameters' floating dtype as given (``jmp``'s ``param_dtype``; ``"mixed"`` when
            they differ); ``compute_dtype``: the low dtype the model runs in; ``output_dtype``: what
            ``fn`` returns; ``high``: the precision kept operations run in.
        layers: every layer with floating-point work, in program order (those keeping nothing too).
        plan: the whole program's :class:`PrecisionPlan` (lines, rewrites, figures, ``note``).
        fn: the tuned model, ``fn(params, batch)``: floating parameters and batch cast to
            ``compute_dtype``, the kept lines in ``high``, the plan's rewrites applied, the output cast
            to ``output_dtype``; composes with ``jax.jit``, ``jax.grad``, ``jax.vmap``.
    """

    param_dtype: str
    compute_dtype: str
    output_dtype: str
    high: str
    layers: tuple[LayerPolicy, ...]
    plan: PrecisionPlan
    fn: Callable[..., Any]

    @property
    def jmp_policy(self) -> str:
        """The policy string ``jmp.get_policy`` reads (``"params=float32,compute=bfloat16,output=..."``)."""
        return f"params={self.param_dtype},compute={self.compute_dtype},output={self.output_dtype}"

    @property
    def high_layers(self) -> tuple[str, ...]:
        """The names of the layers with operations to keep in ``high`` (or a rewrite), in program order."""
        return tuple(layer.name for layer in self.layers if layer.keep or layer.rewrites)

    @property
    def reached(self) -> bool:
        """Whether the tuned model is within the plan's tolerance (``plan.reached``)."""
        return self.plan.reached

    def layer(self, name: str) -> LayerPolicy:
        """The layer called ``name``; ``KeyError`` naming the layers when there is none."""
        for layer in self.layers:
            if layer.name == name:
                return layer
        raise KeyError(f"no layer {name!r}; the layers are {', '.join(x.name for x in self.layers)}")

    def __str__(self) -> str:
        plan = self.plan
        kept = sum(1 for layer in self.layers if layer.keep)
        rows = [f"precision policy: {self.jmp_policy} (jmp); {kept} of {len(self.layers)} layer(s) keep "
                f"operations in {self.high} ({plan.high_share:.1%} of the float work), "
                f"{len(plan.rewrites)} rewrite(s)"]
        width = max((len(layer.name) for layer in self.layers), default=0)
        for layer in self.layers:
            if not layer.keep and not layer.rewrites:
                rows.append(f"  {layer.name:<{width}}  all {self.compute_dtype}")
                continue
            first = True
            for op in layer.keep:
                label = layer.name if first else ""
                rows.append(f"  {label:<{width}}  keep in {self.high}: {op}")
                first = False
            for rule, where in layer.rewrites:
                label = layer.name if first else ""
                rows.append(f"  {label:<{width}}  rewrite {rule} at {where or '<no user frame>'}")
                first = False
        rows.append(f"  original: {plan.original}")
        status = "within" if plan.reached else "NOT within"
        rows.append(f"  tuned:    {plan.tuned} ({status} {plan.tolerance_ulps:g} ulps on "
                    f"{plan.tuned.samples} samples)")
        if plan.note:
            rows.append(f"  note: {plan.note}")
        return "\n".join(rows)


def _is_shape(x: Any) -> bool:
    return isinstance(x, tuple) and all(isinstance(d, int) and not isinstance(d, bool) for d in x)


def _cast(tree: Any, dtype: Any) -> Any:
    """Floating leaves to ``dtype``, the others as they are (``jmp.Policy.cast_to_compute``)."""
    return jax.tree_util.tree_map(
        lambda a: jnp.asarray(a, dtype) if _is_float(jnp.result_type(a)) else a, tree)


def _param_dtype(params: Any) -> str:
    names = {np.dtype(jnp.result_type(a)).name for a in jax.tree_util.tree_leaves(params)
             if _is_float(jnp.result_type(a))}
    return names.pop() if len(names) == 1 else ("mixed" if names else "none")


def precision_policy(fn: Callable[..., Any], params: Any, batch_shapes: Any, *, dtype: Any,
                     domain: Any = None, high: Any = "float32", output_dtype: Any = None,
                     settings: Any = None, **options: Any) -> PrecisionPolicy:
    """Which operations of each layer of ``fn(params, batch)`` must stay float32 when it runs in ``dtype``.

    The per-layer view of :func:`jst.tune_precision` for a whole model, as ``jmp`` policies are written:
    the parameters (floating leaves) are cast to the compute ``dtype``, batches of ``batch_shapes`` are
    drawn over ``domain`` as ``jst.check`` draws inputs, the model's output is measured against the exact
    result, and the plan's lines (the fewest to keep in ``high`` for every output element to be within
    ``tolerance_ulps`` ulps of ``dtype``, or the stability rewrite that does it alone) are reported per
    layer: the ``jax.named_scope`` or user function that each operation comes from.

    Args:
      fn: the model, ``fn(params, batch)``, returning an array or a pytree of arrays (logits, a loss).
      params: the parameters it reads, a pytree of arrays (fixed, not drawn; integer leaves pass as they
        are). Measured with these values: a policy holds for the parameters it was measured with.
      batch_shapes: the batch's shape (``(8, 32)``) or a pytree of shapes (``{"x": (8, 32), "y": (8,)}``):
        ``fn`` receives arrays of ``dtype`` in that structure.
      dtype: the compute dtype, ``"bfloat16"`` or ``"float16"``.
      domain: the batch's domain, as ``jst.check``'s (one ``(lo, hi)`` for every leaf, or one per leaf
        in ``jax.tree_util`` order).
      high: the precision kept operations run in, ``"float32"`` (default) or ``"float64"``.
      output_dtype: the dtype ``.fn`` returns (default ``dtype``; the accuracy is judged in ``dtype``).
      settings: a ``jst.settings``; its ``seed`` and ``rules`` are used.
      **options: as ``jst.tune_precision``'s: ``tolerance_ulps`` (4), ``samples`` (64), ``seed`` (0),
        ``rules``.

    Returns:
      A :class:`PrecisionPolicy`: ``str()`` is the per-layer table, ``.layers`` the structured view,
      ``.plan`` the whole program's plan, ``.fn`` the tuned model.

    Raises:
      ArgumentError: bad ``batch_shapes``, ``output_dtype`` or any argument ``jst.tune_precision``
        refuses, each named.

    Example::

        def block(p, x):
            with jax.named_scope("ln"):
                m = jnp.mean(x, -1, keepdims=True)
                v = jnp.mean(x * x, -1, keepdims=True) - m * m
                h = (x - m) / jnp.sqrt(v + 1e-5) * p["g"]
            with jax.named_scope("mlp"):
                return jax.nn.gelu(h @ p["w"])
        pol = jst.precision_policy(block, params, (4, 64), dtype="bfloat16", domain=(8, 12))
        print(pol)            # per layer ("ln", "mlp"): the lines to keep in float32, or "all bfloat16"
        pol.fn(params, x)     # the tuned block
    """
    low, hi = _dtypes(dtype, high)
    leaves, treedef = jax.tree_util.tree_flatten(batch_shapes, is_leaf=_is_shape)
    if not leaves or not all(_is_shape(s) for s in leaves):
        raise ArgumentError(f"batch_shapes={batch_shapes!r}: expected a shape (a tuple of ints) or a "
                            "pytree of shapes")
    try:
        out_dtype = low if output_dtype is None else np.dtype(jnp.dtype(output_dtype))
    except TypeError as exc:
        raise ArgumentError(f"output_dtype={output_dtype!r}: {exc}") from None
    if not _is_float(out_dtype):
        raise ArgumentError(f"output_dtype={output_dtype!r}: expected a floating dtype")
    low_params = _cast(params, low)

    def model(*batch: Any) -> Any:
        return fn(low_params, jax.tree_util.tree_unflatten(treedef, list(batch)))

    model.__name__ = getattr(fn, "__name__", "model")
    shapes = leaves[0] if len(leaves) == 1 else tuple(leaves)
    plan = tune_precision(model, shapes=shapes, dtype=low, domain=domain, high=hi, settings=settings,
                          **options)
    specs = [jax.ShapeDtypeStruct(s, low) for s in leaves]
    closed, _, _ = C.trace(model, *specs)
    layers = _layers(closed, plan, _entry(fn))
    rules: Any = ()
    if plan.rewrites:
        from .._check._spec import resolve_rules

        rules = resolve_rules(options.get("rules", getattr(settings, "rules", None)))
    tuned = _tuned(fn, rules, frozenset(plan.lines), hi)

    def tuned_model(params: Any, batch: Any) -> Any:
        out = tuned(_cast(params, low), _cast(batch, low))
        return _cast(out, out_dtype)

    tuned_model.__name__ = f"tuned_{getattr(fn, '__name__', 'model')}"
    tuned_model.__doc__ = fn.__doc__
    return PrecisionPolicy(param_dtype=_param_dtype(params), compute_dtype=low.name,
                           output_dtype=np.dtype(out_dtype).name, high=hi.name, layers=layers, plan=plan,
                           fn=tuned_model)


# ------------------------------------------------------------------------------------------ layers
def _entry(fn: Callable[..., Any]) -> tuple[str, str] | None:
    """``(file, function)`` of the model's own frame, where a layer's function path starts."""
    call = type(fn).__dict__.get("__call__")  # a callable object (an equinox/flax-style module)
    code = getattr(fn, "__code__", None) or getattr(call, "__code__", None)
    # frames name their function by its qualified name on Python >= 3.11 (co_qualname)
    return None if code is None else (code.co_filename, getattr(code, "co_qualname", code.co_name))


def _short(function: str) -> str:
    """A function's name without the ``<locals>`` path of where it was defined (``Block.__call__`` kept)."""
    return function.rsplit("<locals>.", 1)[-1]


@dataclasses.dataclass
class _Op:
    """One floating-point equation: its layer key, user line (text) and work."""

    key: tuple[Any, ...]
    scopes: tuple[str, ...]
    functions: tuple[str, ...]
    line: str | None
    text: str
    primitive: str
    work: int


def _frames_path(frames: tuple[tuple[str, int, str], ...], entry: tuple[str, str] | None
                 ) -> tuple[tuple[str, ...], tuple[Any, ...]]:
    """The functions from the model down (outermost first) and the call sites that tell two uses of one
    function apart (the callers' lines, the innermost frame's own line left out)."""
    chain = list(frames)
    if entry is not None:
        for k, (file, _, function) in enumerate(chain):
            if (file, function) == entry:
                chain = chain[:k + 1]
                break
        else:
            chain = chain[:1]
    else:
        chain = chain[:1]
    chain.reverse()
    functions = tuple(_short(f) for _, _, f in chain)
    # the model's own function is the path's root: dropped from the name unless it is all there is
    named = functions[1:] if len(functions) > 1 else functions
    sites = tuple((file, line) for file, line, _ in chain[:-1])
    return named, sites


def _ops(closed: Any, entry: tuple[str, str] | None, outer: Any = None, frames: Any = None,
         scopes: tuple[str, ...] = ()) -> Iterator[_Op]:
    for eqn in C.eqns(closed):
        src = _source(outer, eqn, outer is not None)
        own = C.user_frames(eqn)
        # inside an entered call, a library body (jnp's jitted helpers) keeps the frames of whoever
        # traced it first: the enclosing call's frames are the right ones, as refine_source decides
        mine = frames if (outer is not None and src is outer) or not own else own
        here = scopes + C.user_scopes(eqn)
        if _enterable(eqn):
            yield from _ops(_sub(eqn)[0], entry, src, mine, here)
            continue
        if not any(_is_float(C.aval(v).dtype) for v in eqn.outvars if hasattr(C.aval(v), "dtype")):
            continue
        functions, sites = _frames_path(mine or (), entry)
        key = (here,) if here else (functions, sites)
        yield _Op(key, here, functions, None if src is None else str(src),
                  "" if src is None else src.text, C.primitive_name(eqn), work(eqn))


def _layers(closed: Any, plan: PrecisionPlan, entry: tuple[str, str] | None) -> tuple[LayerPolicy, ...]:
    groups: dict[tuple[Any, ...], list[_Op]] = {}
    for op in _ops(closed, entry):
        groups.setdefault(op.key, []).append(op)
    kept = set(plan.lines)
    seen: dict[str, int] = {}
    layers = []
    for ops in groups.values():
        base = "/".join(ops[0].scopes) or "/".join(ops[0].functions) or "<no user frame>"
        seen[base] = seen.get(base, 0) + 1
        name = base if seen[base] == 1 else f"{base}#{seen[base]}"
        keep = []
        for line in dict.fromkeys(op.line for op in ops if op.line in kept):
            mine = [op for op in ops if op.line == line]
            prims = tuple(dict.fromkeys(op.primitive for op in mine))
            keep.append(KeptOperation(str(line), mine[0].text, prims, sum(op.work for op in mine)))
        lines = {op.line for op in ops}
        layers.append(LayerPolicy(
            name=name, scopes=ops[0].scopes, functions=ops[0].functions, keep=tuple(keep),
            rewrites=tuple(dict.fromkeys((rule, where) for rule, where in plan.rewrites if where in lines)),
            primitives=tuple(dict.fromkeys(op.primitive for op in ops)), work=sum(op.work for op in ops),
            high_work=sum(k.work for k in keep)))
    return tuple(layers)
