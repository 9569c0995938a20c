"""``tridiagonal_solve``: the exact solution of a tridiagonal system, by elimination on balls.

``dl``, ``d``, ``du`` hold the sub-, main and super-diagonal (``dl[0]`` and ``du[-1]`` unused), ``b`` the
right-hand sides (``..., m, n``). Gaussian elimination without pivoting (Thomas's algorithm) is exact in
real arithmetic whenever every pivot is nonzero; a pivot whose ball contains 0 makes the rows after it
indeterminate, so those elements escalate and end uncertain (a system that needs a row exchange, or a
singular one, is never answered with a guess). XLA's ``perturb_singular`` (replacing a zero pivot by a
tiny one) is a float device with no real meaning: such a system is refused.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..core._arb import FUNCTIONS
from ..core._common import INDET, Rule, ints_to_arb

__all__ = ["RULES"]

_ADD, _SUB, _MUL, _DIV = (FUNCTIONS[n] for n in ("add", "sub", "mul", "div"))


def _pivot(v: Any) -> Any:
    return INDET if v is None or not (v > 0 or v < 0) else v


def _solve_one(dl: list[Any], d: list[Any], du: list[Any], b: np.ndarray) -> np.ndarray:
    m, n = b.shape
    c_prime: list[Any] = [None] * m
    rhs = [list(b[i]) for i in range(m)]
    denom = _pivot(d[0])
    for i in range(m):
        if i:
            denom = _pivot(_SUB(d[i], _MUL(dl[i], c_prime[i - 1])))
            rhs[i] = [_SUB(rhs[i][j], _MUL(dl[i], rhs[i - 1][j])) for j in range(n)]
        c_prime[i] = _DIV(du[i], denom) if i < m - 1 else None
        rhs[i] = [_DIV(r, denom) for r in rhs[i]]
    out = np.empty((m, n), dtype=object)
    out[m - 1] = rhs[m - 1]
    for i in range(m - 2, -1, -1):
        out[i] = [_SUB(rhs[i][j], _MUL(c_prime[i], out[i + 1, j])) for j in range(n)]
    return out


def _tridiagonal_solve(ctx: Any, eqn: Any, dl: np.ndarray, d: np.ndarray, du: np.ndarray,
                       b: np.ndarray) -> np.ndarray:
    if eqn.params.get("perturb_singular"):
        raise ctx.unsupported(eqn, "perturb_singular replaces a zero pivot by a tiny float: no real meaning")
    dl, d, du, b = (x if x.dtype == object else ints_to_arb(x) for x in (dl, d, du, b))
    out = np.empty(b.shape, dtype=object)
    for batch in np.ndindex(*b.shape[:-2]):
        out[batch] = _solve_one(dl[batch].tolist(), d[batch].tolist(), du[batch].tolist(), b[batch])
    return out


RULES: dict[str, Rule] = {"tridiagonal_solve": _tridiagonal_solve}
