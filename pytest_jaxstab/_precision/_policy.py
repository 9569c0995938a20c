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
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .. import _compat as C
from .._check._upcast import body_of, enterable, is_float, source_of, work
from .._check._upcast_loops import LOOPS, bodies
from .._errors import ArgumentError
from ._grad_plan import GradientPlan, grad_options, make_grad_fn, plan_gradient
from ._plan import PrecisionPlan, _dtypes, _tuned, tune_precision

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
        backward: True for a line of a gradient plan whose backward operations only are kept (then
            ``primitives`` and ``work`` are those of the backward pass).
    """

    line: str
    text: str
    primitives: tuple[str, ...]
    work: int
    backward: bool = False

    def __str__(self) -> str:
        code = f" `{self.text}`" if self.text else ""
        only = "backward only: " if self.backward else ""
        return f"{self.line}{code} ({only}{', '.join(self.primitives)})"


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
        gradient: with ``grad=True``, the :class:`GradientPlan` of the loss's gradient (then ``plan`` is
            None: the forward output is not judged, and ``fn`` keeps the gradient plan's lines).
        grad_fn: with ``grad=True``, ``grad_fn(params, batch)``: the gradient with respect to
            ``params`` under the gradient plan, a pytree like ``params`` of float32 arrays (an integer
            leaf gets ``jax.dtypes.float0`` zeros, as ``jax.grad(allow_int=True)`` gives), the loss
            scale applied and removed inside; composes with ``jax.jit``.
    """

    param_dtype: str
    compute_dtype: str
    output_dtype: str
    high: str
    layers: tuple[LayerPolicy, ...]
    plan: PrecisionPlan | None
    fn: Callable[..., Any]
    gradient: GradientPlan | None = None
    grad_fn: Callable[..., Any] | None = None

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
        """Whether the tuned model is within the plan's tolerance (``plan.reached``, or
        ``gradient.reached`` with ``grad=True``)."""
        return self.gradient.reached if self.gradient is not None else bool(self.plan and self.plan.reached)

    @property
    def loss_scale(self) -> float | None:
        """With ``grad=True``, the static power-of-two loss scale ``grad_fn`` applies (1: none needed);
        None without a gradient plan."""
        return None if self.gradient is None else self.gradient.loss_scale

    def layer(self, name: str) -> LayerPolicy:
        """The layer called ``name``; ``KeyError`` naming the layers when there is none."""
        for layer in self.layers:
            if layer.name == name:
                return layer
        raise KeyError(f"no layer {name!r}; the layers are {', '.join(x.name for x in self.layers)}")

    def __str__(self) -> str:
        if self.gradient is not None:
            return _gradient_text(self, self.gradient)
        plan = self.plan
        assert plan is not None
        kept = sum(1 for layer in self.layers if layer.keep)
        rows = [f"precision policy: {self.jmp_policy} (jmp); {kept} of {len(self.layers)} layer(s) keep "
                f"operations in {self.high} ({plan.high_share:.1%} of the float work), "
                f"{len(plan.rewrites)} rewrite(s)"]
        rows += _layer_rows(self)
        rows.append(f"  original: {plan.original}")
        status = "within" if plan.reached else "NOT within"
        rows.append(f"  tuned:    {plan.tuned} ({status} {plan.tolerance_ulps:g} ulps on "
                    f"{plan.tuned.samples} samples)")
        if plan.note:
            rows.append(f"  note: {plan.note}")
        return "\n".join(rows)


def _layer_rows(policy: PrecisionPolicy) -> list[str]:
    rows = []
    width = max((len(layer.name) for layer in policy.layers), default=0)
    for layer in policy.layers:
        if not layer.keep and not layer.rewrites:
            rows.append(f"  {layer.name:<{width}}  all {policy.compute_dtype}")
            continue
        first = True
        for op in layer.keep:
            label = layer.name if first else ""
            rows.append(f"  {label:<{width}}  keep in {policy.high}: {op}")
            first = False
        for rule, where in layer.rewrites:
            label = layer.name if first else ""
            rows.append(f"  {label:<{width}}  rewrite {rule} at {where or '<no user frame>'}")
            first = False
    return rows


def _gradient_text(policy: PrecisionPolicy, grad: GradientPlan) -> str:
    kept = sum(1 for layer in policy.layers if layer.keep)
    rows = [f"precision policy (gradient): {policy.jmp_policy} (jmp), loss scale "
            f"{grad.loss_scale:g}; {kept} of {len(policy.layers)} layer(s) keep operations in {policy.high} "
            f"({grad.high_share:.1%} of the gradient's float work), {len(grad.rewrites)} rewrite(s)"]
    rows += _layer_rows(policy)
    rows += [f"  carry kept in {policy.high}: {carry}" for carry in grad.carries]
    return "\n".join(rows + grad.figure_rows())


def _is_shape(x: Any) -> bool:
    return isinstance(x, tuple) and all(isinstance(d, int) and not isinstance(d, bool) for d in x)


def _batch_domain(domain: Any, batch_shapes: Any) -> Any:
    """``domain`` keyed by the names of a dict ``batch_shapes`` (``{"x": (0, 1), "y": (-2, 2)}``) as the
    positions of the batch leaves (JAX flattens a dict in sorted key order); any other ``domain`` as is."""
    if not (isinstance(domain, dict) and isinstance(batch_shapes, dict) and domain
            and all(isinstance(k, str) for k in domain)):
        return domain
    unknown = sorted(set(domain) - set(batch_shapes))
    if unknown:
        raise ArgumentError(f"domain: no batch leaf named {', '.join(map(repr, unknown))}; batch_shapes has "
                            f"{', '.join(map(repr, sorted(batch_shapes)))}")
    if not all(_is_shape(v) for v in batch_shapes.values()):
        raise ArgumentError("domain by name applies to a flat dict of batch shapes; give one domain per leaf "
                            "(a list, in the order jax.tree_util flattens batch_shapes)")
    return {i: domain[k] for i, k in enumerate(sorted(batch_shapes)) if k in domain}


def _cast(tree: Any, dtype: Any) -> Any:
    """Floating leaves to ``dtype``, the others as they are (``jmp.Policy.cast_to_compute``)."""
    return jax.tree_util.tree_map(
        lambda a: jnp.asarray(a, dtype) if is_float(jnp.result_type(a)) else a, tree)


def _param_dtype(params: Any) -> str:
    names = {np.dtype(jnp.result_type(a)).name for a in jax.tree_util.tree_leaves(params)
             if is_float(jnp.result_type(a))}
    return names.pop() if len(names) == 1 else ("mixed" if names else "none")


def precision_policy(fn: Callable[..., Any], params: Any, batch_shapes: Any, *, dtype: Any,
                     domain: Any = None, high: Any = "float32", output_dtype: Any = None,
                     settings: Any = None, grad: bool = False, **options: Any) -> PrecisionPolicy:
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
        in ``jax.tree_util`` order, or, for a dict of shapes, a dict by leaf name).
      high: the precision kept operations run in, ``"float32"`` (default) or ``"float64"``.
      output_dtype: the dtype ``.fn`` returns (default ``dtype``; the accuracy is judged in ``dtype``).
      settings: a ``jst.settings``; its ``seed`` and ``rules`` are used.
      grad: judge the gradient of ``fn`` (a loss) with respect to ``params`` instead of its output
        (issue 49): against the exact derivative, norm-wise, at the static loss scale it needs (measured
        for float16), and keep the fewest lines in ``high`` (in both passes, or in the backward pass
        only) for it to be within ``grad_tolerance``; ``.gradient`` is the :class:`GradientPlan`,
        ``.grad_fn(params, batch)`` the gradient under it (float32), ``.loss_scale`` the scale.
      **options: as ``jst.tune_precision``'s: ``tolerance_ulps`` (4), ``samples`` (64), ``seed`` (0),
        ``rules``. With ``grad=True``: ``grad_tolerance`` (1e-2 norm-wise), ``samples`` (32),
        ``seed``, ``rules``, ``loss_scale`` (None: measured; or a power of two), ``near_fit`` (True: a
        quarter of the batches moved to the loss's minimum over the batch, as late training meets them).

    Returns:
      A :class:`PrecisionPolicy`: ``str()`` is the per-layer table, ``.layers`` the structured view,
      ``.plan`` the whole program's plan, ``.fn`` the tuned model (with ``grad=True``: ``.gradient``,
      ``.grad_fn``, ``.loss_scale``).

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

        pol = jst.precision_policy(loss, params, {"x": (32, 64), "y": (32,)}, dtype="float16",
                                   domain=[(0, 1), (-2, 2)], grad=True)
        g = pol.grad_fn(params, batch)   # float32 gradient, the loss scale applied and removed
    """
    if not isinstance(grad, bool):
        raise ArgumentError(f"grad={grad!r}: expected True (judge the loss's gradient) or False")
    domain = _batch_domain(domain, batch_shapes)
    low, hi = _dtypes(dtype, high)
    leaves, treedef = jax.tree_util.tree_flatten(batch_shapes, is_leaf=_is_shape)
    if not leaves or not all(_is_shape(s) for s in leaves):
        raise ArgumentError(f"batch_shapes={batch_shapes!r}: expected a shape (a tuple of ints) or a "
                            "pytree of shapes")
    try:
        out_dtype = low if output_dtype is None else np.dtype(jnp.dtype(output_dtype))
    except TypeError as exc:
        raise ArgumentError(f"output_dtype={output_dtype!r}: {exc}") from None
    if not is_float(out_dtype):
        raise ArgumentError(f"output_dtype={output_dtype!r}: expected a floating dtype")
    if grad:
        return _gradient_policy(fn, params, leaves, treedef, low, hi, out_dtype, domain, settings, options)
    for name in ("grad_tolerance", "loss_scale", "near_fit"):
        if name in options:
            raise ArgumentError(f"{name}= applies to the gradient's plan: pass grad=True, or drop {name}=")
    low_params = _cast(params, low)

    def model(*batch: Any) -> Any:
        return fn(low_params, jax.tree_util.tree_unflatten(treedef, list(batch)))

    model.__name__ = getattr(fn, "__name__", "model")
    shapes = leaves[0] if len(leaves) == 1 else tuple(leaves)
    plan = tune_precision(model, shapes=shapes, dtype=low, domain=domain, high=hi, settings=settings,
                          **options)
    specs = [jax.ShapeDtypeStruct(s, low) for s in leaves]
    closed, _, _ = C.trace(model, *specs)
    layers = _layers(closed, frozenset(plan.lines), plan.rewrites, _entry(fn))
    rules: Any = ()
    if plan.rewrites:
        from .._check._spec import resolve_rules

        rules = resolve_rules(options.get("rules", getattr(settings, "rules", None)))
    return PrecisionPolicy(param_dtype=_param_dtype(params), compute_dtype=low.name,
                           output_dtype=np.dtype(out_dtype).name, high=hi.name, layers=layers, plan=plan,
                           fn=_tuned_model(fn, rules, frozenset(plan.lines), hi, low, out_dtype))


def _tuned_model(fn: Callable[..., Any], rules: Any, lines: frozenset[str], hi: np.dtype[Any],
                 low: np.dtype[Any], out_dtype: Any) -> Callable[..., Any]:
    tuned = _tuned(fn, rules, lines, hi)

    def tuned_model(params: Any, batch: Any) -> Any:
        out = tuned(_cast(params, low), _cast(batch, low))
        return _cast(out, out_dtype)

    tuned_model.__name__ = f"tuned_{getattr(fn, '__name__', 'model')}"
    tuned_model.__doc__ = fn.__doc__
    return tuned_model


def _gradient_policy(fn: Callable[..., Any], params: Any, leaves: list[Any], treedef: Any, low: np.dtype[Any],
                     hi: np.dtype[Any], out_dtype: Any, domain: Any, settings: Any, options: dict[str, Any]
                     ) -> PrecisionPolicy:
    """``precision_policy(..., grad=True)``: the gradient plan of the loss ``fn`` with respect to the
    floating leaves of ``params`` (cast to ``low``, fixed), batches of ``leaves`` drawn."""
    opts = grad_options(options, settings)
    flat, ptree = jax.tree_util.tree_flatten_with_path(params)
    floating = [k for k, (_, a) in enumerate(flat) if is_float(jnp.result_type(a))]
    if not floating:
        raise ArgumentError("params: grad=True differentiates the floating leaves of params, and it has none")
    names = [f"params{jax.tree_util.keystr(flat[k][0])}" for k in floating]

    def flat_loss(given: list[Any]) -> Callable[..., Any]:
        def loss(*args: Any) -> Any:
            values = [a for _, a in given]
            for k, a in zip(floating, args[:len(floating)]):
                values[k] = a
            batch = jax.tree_util.tree_unflatten(treedef, list(args[len(floating):]))
            return fn(jax.tree_util.tree_unflatten(ptree, values), batch)

        loss.__name__ = getattr(fn, "__name__", "loss")
        return loss

    fixed = [np.asarray(jnp.asarray(flat[k][1], low)) for k in floating]
    gplan = plan_gradient(flat_loss(flat), fixed, leaves, dtype=low, high=hi, domain=domain, names=names,
                          options=opts, diff=list(range(len(floating))))
    low_params = _cast(params, low)
    specs = [jax.ShapeDtypeStruct(s, low) for s in leaves]
    closed, _, _ = C.trace(lambda *b: fn(low_params, jax.tree_util.tree_unflatten(treedef, list(b))), *specs)
    layers = _layers(closed, frozenset(gplan.lines), gplan.rewrites, _entry(fn), dict(gplan.backward_ops))

    def grad_fn(params: Any, batch: Any) -> Any:
        given = jax.tree_util.tree_flatten_with_path(params)[0]
        fp = [jnp.asarray(given[k][1], low) for k in floating]
        b = jax.tree_util.tree_leaves(_cast(batch, low))
        gf = make_grad_fn(flat_loss(given), list(range(len(floating))), gplan.keys, hi, gplan.loss_scale, low,
                          gplan.rules)
        grads = dict(zip(floating, gf(*fp, *b)))
        out = [grads[k] if k in grads else np.zeros(np.shape(a), jax.dtypes.float0)
               for k, (_, a) in enumerate(given)]
        return jax.tree_util.tree_unflatten(ptree, out)

    grad_fn.__name__ = f"grad_{getattr(fn, '__name__', 'loss')}"
    return PrecisionPolicy(param_dtype=_param_dtype(params), compute_dtype=low.name,
                           output_dtype=np.dtype(out_dtype).name, high=hi.name, layers=layers, plan=None,
                           fn=_tuned_model(fn, gplan.rules, frozenset(gplan.lines), hi, low, out_dtype),
                           gradient=gplan, grad_fn=grad_fn)


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
        src = source_of(outer, eqn, outer is not None)
        own = C.user_frames(eqn)
        # inside an entered call, a library body (jnp's jitted helpers) keeps the frames of whoever
        # traced it first: the enclosing call's frames are the right ones, as refine_source decides
        mine = frames if (outer is not None and src is outer) or not own else own
        here = scopes + C.user_scopes(eqn)
        if enterable(eqn):
            yield from _ops(body_of(eqn)[0], entry, src, mine, here)
            continue
        if C.primitive_name(eqn) in LOOPS:  # a loop's body is its layer's work (issue 49)
            for body in bodies(eqn):
                yield from _ops(body, entry, src, mine, here)
            continue
        if not any(is_float(C.aval(v).dtype) for v in eqn.outvars if hasattr(C.aval(v), "dtype")):
            continue
        functions, sites = _frames_path(mine or (), entry)
        key = (here,) if here else (functions, sites)
        yield _Op(key, here, functions, None if src is None else str(src),
                  "" if src is None else src.text, C.primitive_name(eqn), work(eqn))


def _layers(closed: Any, kept: frozenset[str], rewrites: Sequence[tuple[str, str | None]],
            entry: tuple[str, str] | None, backward: dict[str, tuple[tuple[str, ...], int]] | None = None
            ) -> tuple[LayerPolicy, ...]:
    """The layers of ``closed`` with the plan's ``kept`` lines (and, for a gradient plan, the lines kept
    in the ``backward`` pass only, with their backward operations) per layer."""
    backward = backward or {}
    groups: dict[tuple[Any, ...], list[_Op]] = {}
    for op in _ops(closed, entry):
        groups.setdefault(op.key, []).append(op)
    seen: dict[str, int] = {}
    layers = []
    for ops in groups.values():
        base = "/".join(ops[0].scopes) or "/".join(ops[0].functions) or "<no user frame>"
        seen[base] = seen.get(base, 0) + 1
        name = base if seen[base] == 1 else f"{base}#{seen[base]}"
        keep = []
        for line in dict.fromkeys(op.line for op in ops if op.line in kept or op.line in backward):
            mine = [op for op in ops if op.line == line]
            if line in backward:
                prims, total = backward[str(line)]
                keep.append(KeptOperation(str(line), mine[0].text, prims, total, backward=True))
                continue
            prims = tuple(dict.fromkeys(op.primitive for op in mine))
            keep.append(KeptOperation(str(line), mine[0].text, prims, sum(op.work for op in mine)))
        lines = {op.line for op in ops}
        layers.append(LayerPolicy(
            name=name, scopes=ops[0].scopes, functions=ops[0].functions, keep=tuple(keep),
            rewrites=tuple(dict.fromkeys((rule, where) for rule, where in rewrites if where in lines)),
            primitives=tuple(dict.fromkeys(op.primitive for op in ops)), work=sum(op.work for op in ops),
            high_work=sum(k.work for k in keep if not k.backward)))
    return tuple(layers)
