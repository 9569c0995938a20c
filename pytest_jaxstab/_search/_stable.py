"""Where the problem itself is ill-conditioned, a candidate is judged by the stability lens.

``improve`` offers a candidate only if it is nowhere worse than the original beyond rounding noise. At
an input where the problem is ill-conditioned (a loss whose terms cancel: a KL divergence near 0, a
log-sum-exp near 0, a sum of logs whose result is near 0), no program reaches the accuracy bar: the
written program may happen to be correctly rounded there while an accurate rewrite loses as many bits as
the conditioning allows, and a comparison of forward errors rejects the rewrite for what no program
can avoid. There, the candidate's error is compared with the conditioning (the stability lens of
``jst.check``, docs/architecture.md, "Two lenses: stability and accuracy"): a candidate within the
conditioning (plus rounding noise) at such an input is *excused* there.

The conditioning is computed with the oracle (``_check._conditioning.conditioning_ulps``, one exact
evaluation per input element) only at the inputs where a candidate is worse than the original, at most
:data:`MAX_POINTS` of them per sample set, and cached.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from .._check._conditioning import conditioning_ulps
from .._dtypes import dtype_info
from ._judge import Samples

__all__ = ["MAX_POINTS", "Conditioning"]

#: Inputs per sample set whose conditioning may be computed (each costs one oracle evaluation per input
#: element); beyond it, a worse candidate is simply worse.
MAX_POINTS = 12


class Conditioning:
    """The conditioning of the original program at sample points, in bits (``log2(1 + cond ulps)``).

    Args:
        closed: the original program's closed jaxpr, traced at the shapes of one sample (scalars for
            scalar programs, one example's arrays for array programs).
        judged_output: which output of ``closed`` the samples judge.
        dtype: the samples' dtype.
        deadline: ``time.perf_counter()`` after which nothing more is computed (unknown: not excused).
    """

    def __init__(self, closed: Any, judged_output: int, dtype: np.dtype[Any], deadline: float) -> None:
        self.closed = closed
        self.output = judged_output
        self.dtype = dtype
        self.deadline = deadline
        self._bits: dict[tuple[int, int], np.ndarray | None] = {}
        self._spent: dict[int, int] = {}
        self.excused_points = 0
        self.precision = float(dtype_info(dtype).significand_bits)

    def bits(self, samples: Samples, index: int) -> np.ndarray | None:
        """Conditioning bits of each output element at sample ``index`` (None when not computed)."""
        key = (id(samples), index)
        if key in self._bits:
            return self._bits[key]
        if self._spent.get(id(samples), 0) >= MAX_POINTS or time.perf_counter() > self.deadline:
            return None
        self._spent[id(samples)] = self._spent.get(id(samples), 0) + 1
        args = [np.asarray(a[index]) for a in samples.args]
        exact = np.asarray(samples.exact[index])
        try:
            cond = conditioning_ulps(self.closed, args, [exact], [self.output], [self.dtype])[0]
        except Exception:  # the conditioning is a bonus: unknown means not excused
            cond = None
        out = None if cond is None else np.log2(1.0 + np.nan_to_num(np.asarray(cond, np.float64), nan=0.0))
        self._bits[key] = out
        return out

    def excused(self, samples: Samples, cand: np.ndarray, orig: np.ndarray, noise: float) -> np.ndarray:
        """Per element of ``cand`` (errors on ``samples``), whether it is worse than ``orig`` by more than
        ``noise`` bits only where the problem's conditioning explains it: the candidate's error is within
        the conditioning plus ``noise``."""
        out = np.zeros(cand.shape, bool)
        worse = np.nan_to_num(cand, nan=64.0) > np.nan_to_num(orig, nan=math.inf) + noise
        if not worse.any():
            return out
        rows = np.flatnonzero(worse.reshape(worse.shape[0], -1).any(axis=1)) if worse.ndim else []
        for i in rows:
            b = self.bits(samples, int(i))
            if b is None or np.size(b) not in (1, np.size(cand[i])):
                continue
            c = np.nan_to_num(cand[i], nan=64.0)
            # A conditioning of 2^(p-1) ulps or more: a rounding of the inputs moves the exact result by
            # as much as the result itself (a sum cancelling to 1e-92), so no program's result means
            # anything there.
            limit = np.where(np.broadcast_to(b, np.shape(c)) >= self.precision - 1, np.inf, b + noise)
            out[i] = worse[i] & (c <= limit)
        return out

    def count(self, excused: np.ndarray) -> None:
        """Record how many samples an offered candidate was excused at (for the status line)."""
        self.excused_points = int(np.asarray(excused).reshape(len(excused), -1).any(axis=1).sum())
