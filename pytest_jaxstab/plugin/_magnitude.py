"""How large the inputs of a scanned function may be: the note a failing ``--jaxstab-scan`` item gets
when nothing declared its domain.

A scanned function with no domain is drawn over its dtype's whole range. Many are meant for modest
inputs and fail only because an intermediate leaves the format's range far above them
(``q @ k.T`` of entries near 1e20 in float32). Without a domain to go on, the failure reads as a false
alarm. This module re-checks the function on bounded domains ``(-10**e, 10**e)`` and, when it passes
at some magnitude and fails just above it because an intermediate overflows, says up to which
magnitude, which primitive at which line leaves the format's range above it, and how to declare the
domain. A function that fails even for ``|inputs| <= 1``, or above its largest passing magnitude by a
loss of precision rather than an overflow (``log(1 + exp(x))`` at x = -40: the catalogue's rewrite is
the fix there, not a domain), gets no note.

Cost: a binary search over the decimal exponents ``0 .. floor(log10(max))`` of the dtype, each step one
``jst.check`` of at most :data:`RECHECK_EXAMPLES` inputs with a fixed seed, no gradient, no timing:
at most 7 re-checks in float32 and bfloat16, 4 in float16, 10 in float64. Only a failing scan item
without a declared domain pays it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

__all__ = ["RECHECK_EXAMPLES", "magnitude_note"]

#: Inputs drawn per re-check (fewer when the case itself draws fewer).
RECHECK_EXAMPLES = 20
#: Seed of the re-checks when the session sets none: the note is the same on every run.
RECHECK_SEED = 0


def magnitude_note(fn: Callable[..., Any], *, shapes: Any, dtype: str, result: Any, chosen: Any,
                   name: str, qualified: str) -> str:
    """The paragraph appended to the failure of a scanned function checked without a domain, or "".

    Args:
        fn: the function as the scan calls it (its drawn arrays as arguments).
        shapes, dtype: the case's.
        result: the failing :class:`CaseResult` over the unbounded domain.
        chosen: the case's ``jst.settings`` (lens, tolerance, seed, budgets).
        name: the case's node id (the re-checks' draws are keyed by it).
        qualified: ``module.function``, as the ini key ``jaxstab_scan_config`` names it.

    Returns:
        "" when the function fails at every magnitude, or not by an overflow just above the largest
        magnitude ``10**e`` at which it passes (or the unbounded result did not fail); otherwise a
        paragraph: that magnitude, the primitive and line where the overflow is born at ``10**(e+1)``,
        and the domain to declare.
    """
    if result.outcome != "failed":
        return ""
    from .._check import check
    from .._dtypes import dtype_info
    from .._settings import root, settings

    top = math.floor(math.log10(float(dtype_info(dtype).max)))
    values = chosen.as_dict()
    values.update(max_examples=min(values["max_examples"], RECHECK_EXAMPLES), grad=False, timing=False,
                  seed=RECHECK_SEED if values["seed"] is None else values["seed"])
    quick = settings(root(), **values)
    runs: dict[int, Any] = {top + 1: result}  # top + 1: unbounded, the failure at hand

    def at(exponent: int) -> Any:
        bound = 10.0 ** exponent
        runs[exponent] = check(fn, shapes=shapes, dtype=dtype, domain=(-bound, bound), settings=quick,
                               name=name)
        return runs[exponent]

    if at(0).outcome == "failed":
        return ""  # fails for |inputs| <= 1 already: not a question of magnitude
    lo, hi = 0, top + 1  # passes at 10**lo, fails at 10**hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if at(mid).outcome == "failed":
            hi = mid
        else:
            lo = mid
    return _note(lo, hi, top, runs, dtype, chosen, qualified)


def _note(lo: int, hi: int, top: int, runs: dict[int, Any], dtype: str, chosen: Any, qualified: str) -> str:
    """The paragraph, when the failure just above ``10**lo`` is an intermediate overflowing; else ""."""
    failed = runs[hi]
    origin = next((o for o in failed.nan_origins if o.variant == failed.judged), None)
    if origin is None or origin.kind != "overflow":
        return ""  # a loss of precision (or a NaN) above some magnitude: not the format's range
    where = "over the whole range" if hi > top else f"at |inputs| up to 1e{hi}"
    text = f" (`{origin.line_text.strip()}`)" if origin.line_text.strip() else ""
    word = "stable" if chosen.judge == "stability" else "within the tolerance"
    bound = f"1e{lo}"
    checks = len(runs) - 1
    seed = RECHECK_SEED if chosen.seed is None else chosen.seed
    return (f"\n\nNo domain was declared, so the inputs were drawn over {dtype}'s whole range. The function "
            f"is {word} for |inputs| up to {bound}; above, `{origin.primitive}` at {_shown(origin.location)}"
            f"{text} leaves {dtype}'s range ({where}). (Found by {checks} re-checks with domains "
            f"(-1eK, 1eK), K by binary search, {min(chosen.max_examples, RECHECK_EXAMPLES)} inputs each, "
            f"seed {seed}.) If the function is meant for such inputs, declare its domain: "
            f"@jst.domain((-{bound}, {bound})) on it, or in the ini file jaxstab_scan_config = {qualified} = "
            f"{{\"domain\": (-{bound}, {bound})}}, or jaxstab_scan_domain = -{bound} {bound} for every "
            "scanned function.")


def _shown(location: str | None) -> str:
    """``file:line`` with the file relative to the rootdir, as failure messages show it."""
    if not location:
        return "?"
    from .._files import short_path

    file, sep, line = location.rpartition(":")
    return f"{short_path(file)}:{line}" if sep and line.isdigit() else short_path(location)
