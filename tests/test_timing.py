"""time_backends: structure and sanity of the records, the GPU path through the seams.

No absolute speed is asserted. The loop-count logic is checked exactly with a fake clock; the GPU/TPU
path runs with the platform list and the compile step faked (this machine may have no GPU), and a
record must name the device its results actually came from.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pytest_jaxstab import BackendTiming, time_backends
from pytest_jaxstab._diagnostics import _timing

FAST = {"min_repeats": 5, "target_s": 0.005}


def naive_lse(x):
    return jnp.log(jnp.sum(jnp.exp(x)))


def check_sane(rec: BackendTiming, repeats: int) -> None:
    assert rec.repeats == repeats
    assert rec.loops >= 1
    assert 0 < rec.original_min_s <= rec.original_s <= rec.original_max_s
    assert math.isfinite(rec.original_max_s)


def test_one_record_per_platform_present():
    platforms = []
    for backend in ("cpu", "gpu", "tpu"):
        with contextlib.suppress(RuntimeError):
            platforms.append(jax.devices(backend)[0].platform)
    recs = time_backends(naive_lse, jnp.ones(64), **FAST)
    assert sorted(r.backend for r in recs) == sorted(set(platforms))
    for rec in recs:
        check_sane(rec, 5)
        assert rec.rewritten_s is rec.ratio is rec.rewritten_temp_bytes is None
        assert rec.device  # the device string actually used


def test_with_a_rewritten_variant():
    (rec, *_) = time_backends(naive_lse, jnp.ones(64), rewritten=jax.nn.logsumexp, min_repeats=6,
                              target_s=0.006)
    check_sane(rec, 6)
    assert rec.rewritten_min_s is not None and rec.rewritten_s is not None
    assert rec.rewritten_max_s is not None and rec.rewritten_loops is not None
    assert 0 < rec.rewritten_min_s <= rec.rewritten_s <= rec.rewritten_max_s
    assert rec.ratio == pytest.approx(rec.rewritten_s / rec.original_s, rel=1e-12)
    assert rec.rewritten_loops >= 1
    d = json.loads(json.dumps(rec.to_json()))
    assert {"backend", "original_s", "rewritten_s", "ratio"} <= set(d)
    text = str(rec)
    assert text.startswith(f"{rec.backend} ({rec.device}): original ")
    assert "ratio" in text


def test_memory_figures_are_xlas_on_cpu():
    # XLA's CPU backend reports memory statistics (jax 0.10.2 to 0.12): each figure must be there and
    # be the one of its own variant, read independently here through jax's public lowering API.
    def scanned(v):
        return jnp.cumsum(v) * 2.0  # a scan: needs scratch space

    x = jnp.ones(4096, jnp.float32)
    (rec, *_) = time_backends(scanned, x, rewritten=jnp.sin, **FAST)
    assert rec.backend == "cpu"  # cpu is always present, and listed first
    original = jax.jit(scanned).lower(x).compile().memory_analysis()
    rewritten = jax.jit(jnp.sin).lower(x).compile().memory_analysis()
    assert original is not None and rewritten is not None
    assert rec.original_temp_bytes == original.temp_size_in_bytes > 0
    assert rec.rewritten_temp_bytes == rewritten.temp_size_in_bytes
    assert rec.original_peak_bytes == original.peak_memory_in_bytes
    assert rec.rewritten_peak_bytes == rewritten.peak_memory_in_bytes
    # the peak holds at least the 16 KiB argument and the 16 KiB result
    assert original.peak_memory_in_bytes >= 2 * 4096 * 4


# --------------------------------------------------------------------------------------- autorange
class FakeClock:
    """A clock that advances only when the timed function runs: ``cost`` seconds per call."""

    def __init__(self, cost: float) -> None:
        self.t, self.cost, self.calls = 0.0, cost, 0

    def __call__(self) -> float:
        return self.t

    def run(self):
        self.t += self.cost
        self.calls += 1
        return np.zeros(())


@pytest.mark.parametrize(("cost", "target_s", "loops"),
                         [(1.5e-3, 0.01, 2), (1.5e-4, 0.01, 20), (3e-5, 0.01, 100), (1.0, 0.01, 1)])
def test_loop_count_grows_like_autorange(monkeypatch, cost, target_s, loops):
    clock = FakeClock(cost)
    monkeypatch.setattr(_timing, "_clock", clock)
    m = _timing._measure(clock.run, 5, target_s)
    # smallest of 1, 2, 5, 10, ... whose repeat lasts >= target_s / repeats (costs avoid ties)
    want = next(n for n in (1, 2, 5, 10, 20, 50, 100, 200, 500) if n * cost >= target_s / 5)
    assert m.loops == want == loops
    assert m.times == pytest.approx([cost] * 5)
    assert len(m.times) == 5


# ------------------------------------------------------------------------------ faked GPU platform
@dataclasses.dataclass(frozen=True)
class FakeDevice:
    platform: str
    id: int

    def __str__(self) -> str:
        return f"{self.platform}:{self.id}"


class FakeStats:
    temp_size_in_bytes = 1234
    peak_memory_in_bytes = 5678


class FakeCompiled:
    def __init__(self, fn, args, raises=False):
        self.fn, self.args, self.raises = fn, args, raises

    def memory_analysis(self):
        if self.raises:
            raise NotImplementedError("no memory analysis on this backend")
        return FakeStats()


def fake_devices(monkeypatch, devices):
    def devices_fn(backend=None):
        found = [d for d in devices if backend is None or d.platform == backend]
        if not found:
            raise RuntimeError(f"Unknown backend {backend}")
        return found

    monkeypatch.setattr(jax, "devices", devices_fn)


def test_faked_gpu_platform_goes_through_the_seam(monkeypatch):
    cpu, gpu0, gpu1 = FakeDevice("cpu", 0), FakeDevice("gpu", 0), FakeDevice("gpu", 1)
    fake_devices(monkeypatch, [gpu0, gpu1, cpu])
    seen = []

    def compile_for(device, fn, args):
        seen.append((device, fn))
        host = [np.asarray(a) for a in args]  # numpy results: no device to read back
        return (lambda: np.asarray(fn(*host))), FakeCompiled(fn, args, raises=device.platform == "cpu")

    monkeypatch.setattr(_timing, "_compile_for", compile_for)
    recs = time_backends(naive_lse, jnp.ones(8), rewritten=jax.nn.logsumexp, **FAST)
    assert [r.backend for r in recs] == ["cpu", "gpu"]  # one per platform, first device of each
    assert [r.device for r in recs] == ["cpu:0", "gpu:0"]
    assert [d for d, _ in seen] == [cpu, cpu, gpu0, gpu0]
    assert [f for _, f in seen] == [naive_lse, jax.nn.logsumexp] * 2
    gpu = recs[1]
    check_sane(gpu, 5)
    assert (gpu.original_temp_bytes, gpu.rewritten_temp_bytes, gpu.original_peak_bytes) == (1234, 1234, 5678)
    assert recs[0].original_temp_bytes is None  # memory_analysis raised there


def test_a_record_names_where_results_really_live(monkeypatch):
    fake_devices(monkeypatch, [FakeDevice("gpu", 0)])
    real_cpu = jax.local_devices(backend="cpu")[0]

    def compile_for(device, fn, args):  # a broken seam that ignores the device it was given
        compiled = jax.jit(fn).lower(*args).compile()
        return (lambda: compiled(*args)), compiled

    monkeypatch.setattr(_timing, "_compile_for", compile_for)
    (rec,) = time_backends(naive_lse, jnp.ones(8), **FAST)
    assert (rec.backend, rec.device) == ("cpu", str(real_cpu))  # no GPU timing claimed


def test_real_compile_seam_places_on_the_device():
    device = jax.devices("cpu")[0]
    call, compiled = _timing._compile_for(device, naive_lse, (jnp.ones(4),))
    out = call()
    assert out.devices() == {device}
    assert float(out) == pytest.approx(float(np.log(4 * np.e)), rel=2**-20)  # float32: 20 bits
    assert hasattr(compiled, "memory_analysis")


def test_devices_seam_one_per_platform(monkeypatch):
    fake_devices(monkeypatch, [FakeDevice("tpu", 3), FakeDevice("gpu", 1), FakeDevice("gpu", 0),
                               FakeDevice("cpu", 0)])
    assert [str(d) for d in _timing._devices()] == ["cpu:0", "gpu:1", "tpu:3"]


@pytest.mark.parametrize(("kwargs", "err", "match"), [
    ({"min_repeats": 0}, ValueError, "min_repeats"),
    ({"target_s": 0.0}, ValueError, "target_s"),
    ({"rewritten": 3}, TypeError, "rewritten"),
])
def test_bad_arguments(kwargs, err, match):
    with pytest.raises(err, match=match):
        time_backends(naive_lse, jnp.ones(4), **kwargs)
    with pytest.raises(TypeError, match="callable"):
        time_backends("f", jnp.ones(4))  # pyright: ignore[reportArgumentType]  (on purpose)
