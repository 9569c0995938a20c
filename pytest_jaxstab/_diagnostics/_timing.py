"""Jitted timing of a function (and its rewritten variant) on every backend present.

For each platform (cpu, gpu, tpu) one device is used: the function is placed and compiled for it,
called once to warm up (compilation and first-run allocations are excluded), then timed as
``timeit.Timer.autorange`` does: the number of calls per repeat grows 1, 2, 5, 10, 20, ... until one
repeat lasts at least ``target_s / min_repeats``; then ``min_repeats`` repeats are taken and the median
per-call time is reported with the min and max. Every call is followed by ``block_until_ready``, so a
figure is the latency of one dispatched call, not the throughput of a pipelined queue.

Two seams keep the GPU/TPU paths testable without such hardware: :func:`_devices` (one device per
platform) and :func:`_compile_for` (place, compile, return a zero-argument call). A record's
``backend``/``device`` name the device the results actually live on when that can be read from them,
so a record never claims a device that did not run the code.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import jax

from .._errors import ArgumentError, ArgumentTypeError, require_callable, tracing

__all__ = ["BackendTiming", "time_backends"]

# Platforms asked for explicitly: jax.devices() alone lists only the default backend's devices.
_PLATFORMS = ("cpu", "gpu", "tpu")
_MAX_LOOPS = 10**7
# The clock, a seam: tests replace it with a fake one to check the loop-count logic exactly.
_clock = time.perf_counter


@dataclasses.dataclass(frozen=True)
class BackendTiming:
    """Timing of one function (and optionally its rewritten variant) on one device.

    Times are seconds per call: the median of ``repeats`` repeats and the fastest/slowest repeat.
    ``ratio`` is ``rewritten_s / original_s`` (below 1: the rewrite is faster). ``*_temp_bytes`` and
    ``*_peak_bytes`` come from XLA's ``compiled.memory_analysis()`` (None where unavailable).
    """

    backend: str
    device: str
    original_s: float
    original_min_s: float
    original_max_s: float
    loops: int
    repeats: int
    rewritten_s: float | None = None
    rewritten_min_s: float | None = None
    rewritten_max_s: float | None = None
    rewritten_loops: int | None = None
    ratio: float | None = None
    original_temp_bytes: int | None = None
    rewritten_temp_bytes: int | None = None
    original_peak_bytes: int | None = None
    rewritten_peak_bytes: int | None = None

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (docs/architecture.md, "The pytest surface": ``backend``, ``original_s``,
        ``rewritten_s``, ``ratio``, plus the other fields)."""
        return dataclasses.asdict(self)

    def __str__(self) -> str:
        text = (f"{self.backend} ({self.device}): original {_fmt_s(self.original_s)} "
                f"[{_fmt_s(self.original_min_s)} .. {_fmt_s(self.original_max_s)}]")
        if self.rewritten_s is not None:
            text += (f", rewritten {_fmt_s(self.rewritten_s)} [{_fmt_s(self.rewritten_min_s)} .. "
                     f"{_fmt_s(self.rewritten_max_s)}]")
        if self.ratio is not None:
            text += f", ratio {self.ratio:.2f}"
        text += f" (median of {self.repeats} x {self.loops} calls)"
        if self.original_temp_bytes is not None:
            text += f", temp {self.original_temp_bytes} B"
            if self.rewritten_temp_bytes is not None:
                text += f" -> {self.rewritten_temp_bytes} B"
        return text


def time_backends(fn: Callable[..., Any], *args: Any, rewritten: Callable[..., Any] | None = None,
                  min_repeats: int = 5, target_s: float = 0.2) -> list[BackendTiming]:
    """Time ``jax.jit(fn)(*args)`` (and ``rewritten``) on one device of every platform present.

    Args:
        fn: a JAX function of arrays.
        *args: example inputs (arrays or pytrees); they are placed on each device.
        rewritten: optional variant with the same signature (e.g. ``jst.stabilize(fn)``).
        min_repeats: number of timed repeats (at least 1; the median is reported).
        target_s: rough time budget per variant and device, which sets the calls per repeat.

    Returns:
        One :class:`BackendTiming` per platform, in the order cpu, gpu, tpu (those present).

    Raises:
        TraceError: JAX cannot trace ``fn`` (or ``rewritten``): the user's line, JAX's reason, a hint.

    Example:
        >>> import jax.numpy as jnp
        >>> recs = time_backends(jnp.sin, jnp.ones(8), target_s=0.01)
        >>> recs[0].backend
        'cpu'
    """
    require_callable("jst.time_backends", fn)
    if rewritten is not None and not callable(rewritten):
        raise ArgumentTypeError(f"time_backends: rewritten must be a callable or None, got "
                                f"{type(rewritten).__name__}")
    if int(min_repeats) < 1:
        raise ArgumentError(f"time_backends: min_repeats must be >= 1, got {min_repeats}")
    if not target_s > 0:
        raise ArgumentError(f"time_backends: target_s must be > 0 seconds, got {target_s}")
    records = []
    for device in _devices():
        call, compiled = _compile_for(device, fn, args)
        orig = _measure(call, int(min_repeats), float(target_s))
        platform, dev_name = _where_ran(orig.out, device)
        rec: dict[str, Any] = dict(backend=platform, device=dev_name, original_s=orig.median,
                                   original_min_s=orig.min, original_max_s=orig.max, loops=orig.loops,
                                   repeats=len(orig.times))
        rec.update(original_temp_bytes=_memory(compiled, "temp_size_in_bytes"),
                   original_peak_bytes=_memory(compiled, "peak_memory_in_bytes"))
        if rewritten is not None:
            rcall, rcompiled = _compile_for(device, rewritten, args)
            rew = _measure(rcall, int(min_repeats), float(target_s))
            rec.update(rewritten_s=rew.median, rewritten_min_s=rew.min, rewritten_max_s=rew.max,
                       rewritten_loops=rew.loops, ratio=rew.median / orig.median if orig.median else None,
                       rewritten_temp_bytes=_memory(rcompiled, "temp_size_in_bytes"),
                       rewritten_peak_bytes=_memory(rcompiled, "peak_memory_in_bytes"))
        records.append(BackendTiming(**rec))
    return records


# --------------------------------------------------------------------------------------------- seams
def _devices() -> list[Any]:
    """The first device of each platform present, default backend first, then cpu, gpu, tpu."""
    found: list[Any] = []
    for platform in (None, *_PLATFORMS):
        try:
            found.extend(jax.devices() if platform is None else jax.devices(platform))
        except RuntimeError:  # that platform is not present (or failed to initialise)
            continue
    first: dict[str, Any] = {}
    for d in found:
        first.setdefault(d.platform, d)
    order = {p: i for i, p in enumerate(_PLATFORMS)}
    return sorted(first.values(), key=lambda d: order.get(d.platform, len(order)))


def _compile_for(device: Any, fn: Callable[..., Any], args: Sequence[Any]) -> tuple[Callable[[], Any], Any]:
    """Place ``args`` on ``device``, compile ``jax.jit(fn)`` for it; ``(call, compiled)``.

    ``call()`` runs the compiled executable once on the placed arguments; ``compiled`` is the
    ``jax.stages.Compiled`` (for ``memory_analysis``).
    """
    placed = jax.device_put(tuple(args), device)  # committed arrays: jit compiles for their device
    with tracing(fn):
        lowered = jax.jit(fn).lower(*placed)
    compiled = lowered.compile()
    return (lambda: compiled(*placed)), compiled


# ------------------------------------------------------------------------------------------ helpers
@dataclasses.dataclass(frozen=True)
class _Measured:
    times: list[float]  # seconds per call, one per repeat
    loops: int
    out: Any

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    @property
    def min(self) -> float:
        return min(self.times)

    @property
    def max(self) -> float:
        return max(self.times)


def _run(call: Callable[[], Any], loops: int) -> tuple[float, Any]:
    out = None
    start = _clock()
    for _ in range(loops):
        out = jax.block_until_ready(call())
    return _clock() - start, out


def _measure(call: Callable[[], Any], repeats: int, target_s: float) -> _Measured:
    _, out = _run(call, 1)  # warm-up: first-run allocations, lazy initialisation
    per_repeat = target_s / repeats
    loops = 1
    for loops in _loop_counts():
        elapsed, out = _run(call, loops)
        if elapsed >= per_repeat or loops >= _MAX_LOOPS:
            break
    times = []
    for _ in range(repeats):
        elapsed, out = _run(call, loops)
        times.append(elapsed / loops)
    return _Measured(times, loops, out)


def _loop_counts() -> Any:
    """1, 2, 5, 10, 20, 50, ... (``timeit.Timer.autorange``'s sequence)."""
    base = 1
    while True:
        for m in (1, 2, 5):
            yield base * m
        base *= 10


def _where_ran(out: Any, device: Any) -> tuple[str, str]:
    """``(platform, device string)`` of the device holding the results, else of ``device``."""
    for leaf in jax.tree_util.tree_leaves(out):
        devices = getattr(leaf, "devices", None)
        found: Any = devices() if callable(devices) else ()
        actual = next(iter(found), None)
        if actual is not None:
            return str(actual.platform), str(actual)
    return str(device.platform), str(device)


def _memory(compiled: Any, attr: str) -> int | None:
    """One figure of ``compiled.memory_analysis()``; None where the backend/version has none."""
    try:
        stats = compiled.memory_analysis()
    except Exception:  # some backends raise (unimplemented) rather than return None
        return None
    if isinstance(stats, (list, tuple)):
        stats = stats[0] if stats else None
    value = getattr(stats, attr, None)
    return int(value) if isinstance(value, (int, float)) and value >= 0 else None


def _fmt_s(s: float | None) -> str:
    if s is None:
        return "?"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if s >= scale:
            return f"{s / scale:.3g} {unit}"
    return f"{s / 1e-9:.3g} ns"
