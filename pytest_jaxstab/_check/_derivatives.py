"""The conditioning's first-order figure from reverse passes: one float64 VJP per judged output element.

``sum_i |x_i df_j/dx_i|`` (``_conditioning``'s module docstring) is one row of the Jacobian weighted by
the inputs: a reverse pass with the one-hot cotangent ``e_j`` gives that row whole, so the cost is one
pass per judged output element, never one exact evaluation per input element (issue 46: the finite
differences through the oracle made a (32, 128) layer norm's check take nine minutes, quadratic in the
elements). The passes run the program with every float equation raised to float64 (``_upcast``,
``lines=None``), jitted, ``CHUNK`` cotangents at a time under ``vmap``.

A float64 pass is an approximation of the exact derivative, so each row is *checked*, not proven: it is
kept only where the float64 forward value of that element agrees with the exact one (the oracle's) to
one ulp of the judged dtype (or ``AGREE`` relative, for float64 programs), so the float64 program is not
itself lost there, and where the row is finite. Other
elements are reported unsettled (NaN) for the caller's exact fallback (``_conditioning``): finite
differences through the oracle where the program is small, otherwise no allowance (the error then
counts whole: a conservative verdict, never a pass it has not earned).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .. import _compat
from ..oracles import evaluate
from ..oracles.fast import enclose
from ..oracles.interpreter._rows import batched
from ..oracles.library._exact import differentiable
from ._upcast import run_upcast

__all__ = ["AGREE", "CHUNK", "LOST", "PASS_BYTES", "ROW_WIDTH", "SIGNS", "SMALL_CHUNK", "Derivatives",
           "Unserved", "far_off", "trusted"]

#: Relative agreement between the float64 forward value and the exact one for a row to be trusted:
#: 2^-30 leaves the float64 pass 23 correct bits where it computes, far more than the one bit the
#: conditioning figure is used to (a log2 allowance).
AGREE = 2.0**-30
#: How wide (relative) the fast path's bounds of a row's weighted sum may be for ``exact_rows`` to take
#: their midpoint in place of the oracle's exact row: 2^-4, a figure within 0.09 bits of the exact one,
#: far inside the bit the conditioning allowance is read to.
ROW_WIDTH = 2.0**-4
#: Cotangents per reverse pass (vmapped); fewer when an input is large (:data:`PASS_BYTES`).
CHUNK = 256
#: Cotangents of the small pass, for a request of a few rows (the element of largest error, a column
#: or two): a pass costs its size whatever is asked, and one compilation more is cheaper than 256 rows.
SMALL_CHUNK = 16
#: Sign patterns of the lower bound's forward passes (``Derivatives.lower_bounds``).
SIGNS = 8
#: Bytes of float64 gradients one pass may hold (its cotangents' rows of every input). Measured (2-core
#: x86-64, XLA CPU, 4,096 rows of a ``gelu(x @ w + b)`` layer at (32, 256) @ (256, 256), 74k float inputs,
#: min of 3): 64 MiB (113 rows a pass) 4.9 s, 16 MiB (28 rows) 0.91 s, 4 MiB 0.84 s, 2 MiB 1.1 s: the
#: gradients a pass writes must stay in cache, and fewer rows than that pay the per-call overhead.
PASS_BYTES = 16 * 2**20


def _floating(dtype: Any) -> bool:
    return bool(np.issubdtype(np.dtype(dtype), np.floating))


class Unserved(Exception):
    """The float64 passes cannot run this program (JAX cannot lower it raised to float64); the caller
    takes its exact fallback, as for a program that was never ``usable``."""


class Derivatives:
    """Jacobian rows of a real program in float64, weighted by the inputs (module docstring).

    ``usable`` is False for programs the passes cannot serve (complex values, no float input): the
    caller then uses finite differences through the oracle. A *row-separable* program (each output row
    reads only the same row of its batched inputs: ``oracles/interpreter/_rows``) whose float inputs are
    all batched takes one pass per column instead of one per element: the cotangent picks column ``k``
    in every row at once, and each row of the result is that row's own Jacobian row (the rows of the
    inputs it reads are its own), so a (32, 512) layer norm takes 512 passes, not 16,384.
    """

    def __init__(self, closed: Any, judged_outputs: Sequence[int]) -> None:
        self.closed = closed
        self.judged_outputs = list(judged_outputs)
        in_avals = [_compat.aval(v) for v in _compat.invars(closed)]
        out_avals = [_compat.aval(v) for v in _compat.outvars(closed)]
        self.floats = [k for k, a in enumerate(in_avals) if _floating(a.dtype)]
        self.out_shapes = [tuple(out_avals[i].shape) for i in self.judged_outputs]
        complex_ = any(np.issubdtype(np.dtype(a.dtype), np.complexfloating) for a in (*in_avals, *out_avals))
        judged_real = all(_floating(out_avals[i].dtype) for i in self.judged_outputs)
        # a gradient's reference holds routines' partials, which JAX cannot differentiate (issue 47)
        self.usable = bool(self.floats) and judged_real and not complex_ and differentiable(closed)
        n_float = sum(math.prod(in_avals[k].shape) for k in self.floats)
        self.chunk = max(1, min(CHUNK, PASS_BYTES // max(8 * n_float, 1)))
        rows = batched(closed) if self.usable else None
        # rows per judged output where the one-pass-per-column trick holds, else 1 (one pass per element)
        self.rows = [rows[0] if rows is not None and all(rows[1][k] for k in self.floats) and rows[2][i]
                     else 1 for i in self.judged_outputs]
        self._passes: dict[int, Callable[..., Any]] = {}
        self._lower: Callable[..., Any] | None = None
        self._forward: Callable[..., Any] | None = None
        self._wide: tuple[list[Any], list[Any]] | None = None
        # ``exact_rows``'s derivative programs by (output, rows, kind): they depend on shapes alone, and
        # the oracle's own caches are keyed on the program.
        self._traced: dict[tuple[int, int, str], Any] = {}
        # The inputs of the last ``lower_bounds`` and its float64 values there (``seen``).
        self._seen: tuple[list[Any], list[np.ndarray]] | None = None

    def _served(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)``, a jitted float64 pass. A program JAX cannot lower raised to float64 (a
        ``custom_jvp`` slogdet over ``lu`` whose transposed derivative mixes the raised float64 with the
        rule's float32) makes the passes unusable for the rest of the check: :class:`Unserved`."""
        try:
            return fn(*args)
        except ValueError as exc:
            if "lower" not in str(exc):
                raise
            self.usable = False
            raise Unserved(str(exc).splitlines()[0]) from exc

    def _pass(self, t: int) -> Callable[..., Any]:
        """The jitted pass for judged output ``t``: ``(args, cols) -> (weighted sums, forward values)``,
        both ``(len(cols), rows)``: per column picked in every row, each row's figure."""
        if t in self._passes:
            return self._passes[t]
        closed, leaf, floats = self.closed, self.judged_outputs[t], self.floats
        rows = self.rows[t]
        width = math.prod(self.out_shapes[t]) // rows

        def run(args: Sequence[Any], cols: Any) -> tuple[Any, Any]:
            def f(*xs: Any) -> Any:
                full = list(args)
                for k, x in zip(floats, xs):
                    full[k] = x
                out = run_upcast(closed, None, np.dtype(np.float64), full, declared=False)[leaf]
                return jnp.reshape(jnp.asarray(out, jnp.float64), (rows, width))

            xs = [jnp.asarray(args[k], jnp.float64) for k in floats]
            y, pullback = jax.vjp(f, *xs)
            picks = jnp.broadcast_to(jax.nn.one_hot(cols, width, dtype=jnp.float64)[:, None, :],
                                     (cols.shape[0], rows, width))
            grads = jax.vmap(pullback)(picks)
            total = jnp.zeros((cols.shape[0], rows), jnp.float64)
            for x, g in zip(xs, grads):
                weighted = jnp.where(jnp.isfinite(x), jnp.abs(x * g), 0.0)
                total = total + jnp.sum(jnp.reshape(weighted, (cols.shape[0], rows, -1)), axis=2)
            return total, jnp.transpose(y[:, cols])

        self._passes[t] = fn = jax.jit(run)
        return fn

    def _widened(self, args: Sequence[np.ndarray]) -> list[Any]:
        # Keyed on the arrays themselves, held: an id alone could be a freed array's, reused.
        held = self._wide
        if held is None or len(held[0]) != len(args) or not all(a is b for a, b in zip(held[0], args)):
            held = self._wide = (list(args), [np.asarray(a, np.float64) if k in self.floats else np.asarray(a)
                                              for k, a in enumerate(args)])
        return held[1]

    def lower_bounds(self, args: Sequence[np.ndarray]) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per judged output, ``(lower, f)``: a lower bound of every element's ``sum_i |x_i df_j/dx_i|``
        and its float64 value, from :data:`SIGNS` forward passes at once: for signs ``s_i = +-1``,
        ``|sum_i s_i x_i df_j/dx_i| <= sum_i |x_i df_j/dx_i|``, so the largest over the sign patterns
        bounds every element from below (Khintchine: within a small factor of the sum's 2-norm). One
        pass per pattern for all elements together: a cheap figure the lens uses to skip the elements
        whose error it already explains (``_stability``)."""
        wide = self._widened(args)
        if self._lower is None:
            closed, floats, leaves = self.closed, self.floats, self.judged_outputs

            def run(full: Sequence[Any], signs: Sequence[Any]) -> tuple[list[Any], list[Any]]:
                def f(*xs: Any) -> list[Any]:
                    whole = list(full)
                    for k, x in zip(floats, xs):
                        whole[k] = x
                    outs = run_upcast(closed, None, np.dtype(np.float64), whole, declared=False)
                    return [jnp.reshape(jnp.asarray(outs[i], jnp.float64), (-1,)) for i in leaves]

                xs = [jnp.asarray(full[k], jnp.float64) for k in floats]
                tangents = [jnp.where(jnp.isfinite(x), s * x, 0.0) for x, s in zip(xs, signs)]
                y = f(*xs)
                moved = jax.vmap(lambda *ts: jax.jvp(f, tuple(xs), tuple(ts))[1])(*tangents)
                return [jnp.max(jnp.abs(m), axis=0) for m in moved], y

            self._lower = jax.jit(run)
        rng = np.random.default_rng(zlib.crc32(b"".join(np.ascontiguousarray(wide[k]).tobytes()
                                                        for k in self.floats)))
        signs = [np.where(rng.random((SIGNS, *np.shape(wide[k]))) < 0.5, -1.0, 1.0) for k in self.floats]
        with _compat.enable_x64():
            lows, ys = self._served(self._lower, wide, signs)
        out = [(np.asarray(lo), np.asarray(y)) for lo, y in zip(lows, ys)]
        self._seen = (list(args), [y for _, y in out])  # the arrays held: their ids cannot be reused
        return out

    def seen(self, args: Sequence[np.ndarray], t: int) -> np.ndarray | None:
        """The float64 values of judged output ``t`` (flat) that the last :meth:`lower_bounds` computed,
        when it ran on these very arrays ``args``; else None. The reverse passes compute the same
        float64 program: an element it lost there is lost in them too."""
        if self._seen is None or len(self._seen[0]) != len(args) or not all(
                a is b for a, b in zip(self._seen[0], args)):
            return None
        return self._seen[1][t]

    def forward(self, trials: Sequence[Sequence[np.ndarray]]) -> list[np.ndarray]:
        """Per judged output, the float64 values at each input of ``trials`` (stacked on a first axis):
        one vmapped, jitted pass for them all."""
        if self._forward is None:
            closed, floats, leaves = self.closed, self.floats, self.judged_outputs

            def run(fixed: Sequence[Any], stacks: Sequence[Any]) -> list[Any]:
                def f(*xs: Any) -> list[Any]:
                    whole = list(fixed)
                    for k, x in zip(floats, xs):
                        whole[k] = x
                    outs = run_upcast(closed, None, np.dtype(np.float64), whole, declared=False)
                    return [jnp.asarray(outs[i], jnp.float64) for i in leaves]

                return jax.vmap(f)(*stacks)

            self._forward = jax.jit(run)
        fixed = [np.asarray(a) for a in trials[0]]
        stacks = [np.stack([np.asarray(t[k], np.float64) for t in trials]) for k in self.floats]
        with _compat.enable_x64():
            return [np.asarray(v) for v in self._served(self._forward, fixed, stacks)]

    def exact_rows(self, args: Sequence[np.ndarray], t: int, flat: np.ndarray,
                   negligible: np.ndarray | None = None) -> np.ndarray:
        """``sum_i |x_i df_j/dx_i|`` for the flat indices ``flat`` of judged output ``t`` from the program's
        own derivative evaluated by the exact oracle: the reverse passes for those elements (a ``vmap``
        of one VJP per element) traced in the program's dtypes and handed to ``oracles.evaluate``, every
        decision of the derivative (a ``relu``'s kink, a ``where``, a ``max``) taken on the exact
        values. For the elements the float64 passes cannot vouch for (the float64 program decides or
        cancels otherwise than the exact one: ``x @ w`` whose exact value is a tiny remainder); NaN
        where the oracle cannot evaluate that derivative. The oracle's fast path bounds each row's
        weighted sum first (taken inside the traced derivative, in float64: a cast is the identity to
        the oracle; ``oracles.fast.enclose``): a row whose bounds pin it within :data:`ROW_WIDTH` needs
        no Arb ball, and only the others are evaluated exactly. ``negligible`` (per row): a sum the
        bounds hold below it is taken as their upper bound whatever their width (a figure far below an
        ulp: a row through a ``relu`` that is off)."""
        flat = np.asarray(flat, dtype=np.int64)
        out = np.full(len(flat), np.nan)
        if not len(flat):
            return out
        closed, leaf, floats = self.closed, self.judged_outputs[t], self.floats
        size = math.prod(self.out_shapes[t])
        run = _compat.as_fun(closed)
        dtype = np.dtype(_compat.aval(_compat.outvars(closed)[leaf]).dtype)
        weights = []
        for k in floats:
            x = np.asarray(args[k], np.float64)
            with np.errstate(invalid="ignore"):
                weights.append(np.where(np.isfinite(x), np.abs(x), 0.0))

        def rows(full: Sequence[Any], picks: Any) -> list[Any]:
            def f(*xs: Any) -> Any:
                whole = list(full)
                for k, x in zip(floats, xs):
                    whole[k] = x
                return jnp.reshape(run(*whole)[leaf], (size,))

            _, pullback = jax.vjp(f, *(full[k] for k in floats))
            return list(jax.vmap(pullback)(picks))

        def sums(full: Sequence[Any], picks: Any, scale: Sequence[Any]) -> Any:
            total = jnp.zeros((picks.shape[0],), jnp.float64)
            for w, g in zip(scale, rows(full, picks)):
                part = w[None] * jnp.abs(jnp.asarray(g, jnp.float64))
                total = total + jnp.sum(jnp.reshape(part, (picks.shape[0], -1)), axis=1)
            return total

        def program(chosen: np.ndarray) -> tuple[Any, list[Any]]:
            picks = np.zeros((len(chosen), size), dtype)
            picks[np.arange(len(chosen)), chosen] = 1
            inputs = [*(np.asarray(a) for a in args), picks, *weights]
            with _compat.enable_x64():
                made = traced("sums", len(chosen),
                              lambda: jax.make_jaxpr(sums)([np.asarray(a) for a in args], picks, weights))
            return made, inputs

        def traced(kind: str, n: int, make: Callable[[], Any]) -> Any:
            key = (t, n, kind)
            if key not in self._traced:
                if len(self._traced) >= 64:
                    self._traced.clear()
                self._traced[key] = make()
            return self._traced[key]

        try:
            derivative, inputs = program(flat)
            # First the fast path's float64 bounds of every row's sum: a row they pin within
            # ``ROW_WIDTH`` takes its midpoint (the figure is used to a bit); only the rest (an undecided
            # kink or branch, a cancellation) are owed the oracle's exact values.
            bounds = enclose(derivative, inputs)
            todo = np.arange(len(flat))
            if bounds is not None:
                ((low, high),) = bounds
                low = np.fmax(low, 0.0)  # a sum of magnitudes
                with np.errstate(all="ignore"):
                    pinned = np.isfinite(high) & (high <= low * (1 + ROW_WIDTH))
                    tiny = np.isfinite(high) & ~pinned & (high <= (0.0 if negligible is None else negligible))
                out[pinned] = 0.5 * (low[pinned] + high[pinned])
                out[tiny] = high[tiny]
                pinned |= tiny
                todo = np.flatnonzero(~pinned)
            if not len(todo):
                return out
            # The rest from the oracle: the Jacobian rows' entries themselves, in the program's dtype,
            # summed here. (Summed inside the program, a sum's enclosure is as wide as its widest term,
            # and the mixed pass recomputed every term in Arb: a relu layer's check took 2.5x longer.)
            picks = np.zeros((len(todo), size), dtype)
            picks[np.arange(len(todo)), flat[todo]] = 1
            plain = [np.asarray(a) for a in args]
            entries = traced("rows", len(todo), lambda: jax.make_jaxpr(rows)(plain, picks))
            exact = evaluate(entries, *[np.asarray(a) for a in args], picks)
            total = np.zeros(len(todo))
            with np.errstate(all="ignore"):
                for w, g in zip(weights, jax.tree_util.tree_leaves(exact.values)):
                    total += (w[None] * np.abs(np.asarray(g, np.float64))).reshape(len(todo), -1).sum(axis=1)
            out[todo] = np.where(np.isfinite(total), total, np.nan)
        except Exception:  # a derivative the oracle cannot take (an unsupported primitive): unknown
            return out
        return out

    def weighted_rows(self, args: Sequence[np.ndarray], t: int, flat: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray]:
        """``(sum_i |x_i df_j/dx_i|, f_j)`` in float64 at the flat indices ``flat`` of judged output ``t``."""
        rows = self.rows[t]
        width = math.prod(self.out_shapes[t]) // rows
        flat = np.asarray(flat, dtype=np.int64)
        row_of, col_of = np.divmod(flat, width)
        cols, where = np.unique(col_of, return_inverse=True)
        sums, values = np.empty(len(flat)), np.empty(len(flat))
        if not len(flat):
            return sums, values
        wide = self._widened(args)
        table_s, table_v = np.empty((len(cols), rows)), np.empty((len(cols), rows))
        small = min(SMALL_CHUNK, self.chunk)
        with _compat.enable_x64():
            run = self._pass(t)
            start = 0
            while start < len(cols):
                # Two sizes of pass, so two compilations at most: the full one, and a small one for
                # what is left when it is a few rows (the lens often asks for one element).
                size = small if len(cols) - start <= small else self.chunk
                part = cols[start:start + size]
                s, y = self._served(run, wide, jnp.asarray(np.resize(part, size), jnp.int32))
                table_s[start:start + len(part)] = np.asarray(s)[:len(part)]
                table_v[start:start + len(part)] = np.asarray(y)[:len(part)]
                start += len(part)
        return table_s[where, row_of], table_v[where, row_of]


#: How far beyond the trust threshold (``trusted``) a float64 forward value must be for the reverse
#: passes of that program to be skipped (``far_off``): a pass computes the same float64 program, and a
#: value 2^10 times further off than the threshold allows is not one a different fusion of it brings back.
LOST = 2.0**10


def far_off(values: np.ndarray, exact: np.ndarray, spacing: np.ndarray) -> np.ndarray:
    """Where a float64 forward value is far from the exact one (:data:`LOST` times what ``trusted``
    allows, or not finite): the float64 program is lost there, and its rows would not be trusted."""
    e = np.asarray(exact, np.float64)
    with np.errstate(all="ignore"):
        close = np.abs(values - e) <= LOST * np.maximum(spacing, AGREE * np.abs(e))
    return ~(np.isfinite(values) & close)


def trusted(values: np.ndarray, exact: np.ndarray, spacing: np.ndarray, sums: np.ndarray) -> np.ndarray:
    """Where a float64 row can be used: finite, and its forward value within one output ulp
    (``spacing``, the judged dtype's at the exact value) or ``AGREE`` relative of the exact one,
    whichever is larger: the float64 program is not lost at that element."""
    e = np.asarray(exact, np.float64)
    with np.errstate(all="ignore"):
        close = np.abs(values - e) <= np.maximum(spacing, AGREE * np.abs(e))
    return np.isfinite(sums) & np.isfinite(values) & np.isfinite(e) & close
