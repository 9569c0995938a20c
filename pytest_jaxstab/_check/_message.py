"""The failure message of a case: the smallest failing input found, the error of
both variants on it, where the first NaN/Inf was born (with that line's text), the line where most bits
are lost (its text, the kind of loss, whether the rewritten function removes it), the rewrites that
fired, and which variant passes (docs/architecture.md, "The pytest surface")."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax.numpy as jnp
import numpy as np

from .._files import short_path
from .._results import CaseResult, VariantStats
from ._evaluate import SampleResult

__all__ = ["CheckWarning", "failure_message", "format_array", "nothing_judged", "passing_note"]


class CheckWarning(UserWarning):
    """Something a check did not do as asked, said rather than hidden: stored inputs skipped because
    they no longer fit the case, drawing stopped by the time budget."""

_LABEL = {"original": "function as written", "rewritten": "rewritten function"}


def format_array(a: np.ndarray) -> str:
    """``float32[16]: [89.0, 0.0, ...]``: dtype, shape and values (shortest repr that round-trips)."""
    a = np.asarray(a)
    head = f"{a.dtype}[{','.join(map(str, a.shape))}]"
    if a.ndim == 0:
        return f"{head} {_scalar(a)}"
    flat = a.reshape(-1)
    if flat.size > 12:
        # Long arrays: say what they are made of rather than elide the interesting element.
        values = flat.astype(np.float64)
        if np.all(values == values[0]) or np.all(np.isnan(values)):
            return f"{head} all {_scalar(flat[0])}"
        nonzero = np.flatnonzero(values)
        if len(nonzero) <= 6:
            at = ", ".join(f"[{_index(a.shape, i)}] = {_scalar(flat[i])}" for i in map(int, nonzero))
            return f"{head} all 0.0 except {at}"
    try:
        body = np.array2string(a.astype(np.float64) if a.dtype.itemsize < 4 else a, separator=", ",
                               threshold=12, edgeitems=3, floatmode="unique", max_line_width=100)
    except (TypeError, ValueError):  # exotic dtypes: element by element
        body = "[" + ", ".join(_scalar(v) for v in a.reshape(-1)[:12]) + "]"
    return f"{head} {body}"


def _index(shape: tuple[int, ...], flat_index: int) -> str:
    return ",".join(str(int(i)) for i in np.unravel_index(flat_index, shape))


def _scalar(v: Any) -> str:
    if np.iscomplexobj(v):
        return repr(complex(v))
    return repr(float(v)) if np.isfinite(float(v)) else str(float(v))


def _stats(s: VariantStats, tolerance: float) -> str:
    parts = [f"max error {s.max_error_bits:.1f} bits"]
    if s.judge == "stability" and (s.max_error_bits > tolerance or s.overflows):
        parts.append(f"{s.beyond_bits:.1f} bits beyond conditioning (conditioning "
                     f"{s.conditioning_bits:.1f} bits at the worst input)")
    if s.overflows:
        parts.append(f"{s.overflows} overflowing inputs")
    verdict = "passes" if s.verdict == "pass" else "fails"
    return f"{verdict} ({', '.join(parts)}; tolerance {tolerance:g} bits)"


def _worst_element(ex: SampleResult, variant: str) -> str:
    """The worst output element of a variant on an input: value, exact value, bits."""
    out = ex.outcomes[variant]
    best: tuple[float, int, tuple[int, ...]] | None = None
    for leaf, bits in enumerate(out.element_bits):
        if bits.size == 0 or np.isnan(bits).all():
            continue
        flat = np.nan_to_num(bits, nan=-1.0)
        idx = np.unravel_index(int(np.argmax(flat)), bits.shape)
        if best is None or flat[idx] > best[0]:
            best = (float(flat[idx]), leaf, tuple(int(i) for i in idx))
    if best is None:
        return f"{_LABEL[variant]}: no element could be judged"
    bits_v, leaf, idx = best
    where = f"[{','.join(map(str, idx))}]" if idx else ""
    output = "" if len(out.values) == 1 else f"output {leaf} "
    got = _scalar(np.asarray(out.values[leaf])[idx]) if idx else _scalar(np.asarray(out.values[leaf]))
    exact = _scalar(np.asarray(ex.exact[leaf])[idx]) if idx else _scalar(np.asarray(ex.exact[leaf]))
    flag = ", overflow" if out.overflow else ""
    at = f" {output}{where}".rstrip()
    return f"{_LABEL[variant]}{at}: {got} (exact {exact}): {bits_v:.1f} bits{flag}"


def _short(location: str | None) -> str | None:
    """``file:line`` with the file relative to the working directory when below it."""
    if not location:
        return location
    return short_path(location)


def _local_error_lines(result: CaseResult) -> list[str]:
    """Where the function as written loses the most bits (``jst.local_error``) and what rewriting does."""
    if not result.local_error or not result.local_error[0].significant:
        return []
    worst = result.local_error[0]
    text = (f"Most bits lost at {_short(worst.location) or '<unknown location>'}: {worst.kind} in "
            f"{worst.primitive}, up to {worst.max_bits:.1f} bits on its own "
            f"({100 * worst.share_over_tolerance:.0f}% of the worst inputs over tolerance)")
    if worst.removed is True:
        text += "; the rewritten function removes this loss."
    elif worst.removed is False:
        text += "; the rewritten function still loses them there."
    else:
        text += "."
    out = [text]
    if worst.code:
        out.append(f"    {worst.code}")
    # Lines are ranked by where the loss is born (``_diagnostics._local_error._rank_key``): a later line
    # listing more bits (a NaN from operands that had already underflowed) is named as what it is.
    more = max(result.local_error[1:], key=lambda x: x.max_bits, default=None)
    if more is not None and more.max_bits > worst.max_bits + 1.0:
        out.append(f"Then {more.kind} in {more.primitive} at {_short(more.location) or '<unknown location>'}"
                   f" ({more.max_bits:.1f} bits): a later loss whose operands were already wrong or which "
                   "ties past every significant bit; the line above is where the bits go first.")
    return out


def failure_message(result: CaseResult, minimal: SampleResult | None, names: Sequence[str],
                    applied: Sequence[Any]) -> str:
    """The message of a failed case; see the module docstring."""
    judged = result.judged
    other = "original" if judged == "rewritten" else "rewritten"
    js, os_ = result.judged_stats, (result.original if other == "original" else result.rewritten)
    lines = [f"{result.nodeid}: the {_LABEL[judged]} is numerically unstable in {result.dtype} "
             f"over {result.samples} inputs: {_stats(js, result.tolerance_bits)}."]
    if js.judge == "stability":
        lines.append(f"[judge=stability] unstable: {js.beyond_bits:.1f} bits beyond what conditioning "
                     "explains at this input" + (" (and a non-finite result where the exact one is finite)"
                                                 if js.overflows else "") + ".")
    else:
        lines.append("[judge=accuracy] the forward error is judged, whatever the problem's conditioning "
                     "(judge='stability' judges only the error beyond it).")
    if minimal is not None:
        lines.append("Smallest failing input found:")
        for name, a in zip(names, minimal.args):
            lines.append(f"    {name} = {format_array(a)}")
        lines.append("On it:")
        lines.append(f"    {_worst_element(minimal, judged)}")
        lines.append(f"    {_worst_element(minimal, other)}")
    for origin in result.nan_origins:
        lines.append(f"NaN/Inf born in the {_LABEL[origin.variant]}: {origin.kind or 'non-finite'} in "
                     f"{origin.primitive} at {_short(origin.location) or '<unknown location>'}")
        if origin.line_text:
            lines.append(f"    {origin.line_text}")
    lines.extend(_local_error_lines(result))
    if applied:
        fired = ", ".join(f"{a.rule} at {_short(a.location) or '?'}" for a in applied)
        lines.append(f"Rewrites that fired: {fired}.")
    else:
        lines.append("No rewrite rule fired on this function.")
    lines.append(f"The {_LABEL[other]} {_stats(os_, result.tolerance_bits)}.")
    if judged == "original" and os_.verdict == "pass":
        lines.append("Fix: run jst.stabilize(fn) (ship the rewritten function, and mark the test "
                     "@pytest.mark.stabilize(apply=True)), or apply the rewrites above by hand.")
    elif judged == "rewritten" and os_.verdict == "pass":
        lines.append("The rewrites make it worse here: exclude the offending rule (rules=/exclude=).")
    return "\n".join(lines)


#: How much more accurate (max error, bits) another evaluated variant must be before the note says a
#: better formula exists: the soundness check's 2 bits (``_check/_verify.py``), past rounding noise.
BETTER_BITS = 2.0


def _precision_bits(dtype: str) -> int | None:
    """The significand bits of a floating dtype (24 for float32); None for one numpy does not know."""
    try:
        return int(jnp.finfo(dtype).nmant) + 1
    except (TypeError, ValueError):
        return None


def passing_note(result: CaseResult) -> str:
    """A passing case's explanation under the stability lens: ill-conditioned inputs whose forward
    error exceeds the tolerance, and underflow-zone notes; empty when there is nothing to say."""
    s = result.judged_stats
    if s.judge != "stability":
        return ""
    notes = []
    if s.max_error_bits > result.tolerance_bits and (
            s.max_error_bits <= s.conditioning_bits + result.tolerance_bits or not s.underflow_notes):
        moves = 2.0 ** s.conditioning_bits - 1.0
        head = (f"ill-conditioned here: the exact result moves by {moves:.3g} ulps when the inputs "
                f"move by one ulp (forward error up to {s.max_error_bits:.1f} bits, conditioning "
                f"{s.conditioning_bits:.1f} bits)")
        other_label = "rewritten" if result.judged == "original" else "original"
        other = result.rewritten if result.judged == "original" else result.original
        bits = _precision_bits(result.dtype)
        if s.max_error_bits - other.max_error_bits > BETTER_BITS and not other.overflows:
            # what was evaluated next to it disproves any claim that nothing does better
            gain = s.max_error_bits - other.max_error_bits
            notes.append(f"{head}, yet the {other_label} function is {gain:.1f} "
                         f"bits more accurate on the same inputs (max {other.max_error_bits:.1f} bits): "
                         "a better formula exists. The stability lens passes what the conditioning could "
                         "explain; judge='accuracy' fails it.")
        elif bits is not None and s.conditioning_bits + result.tolerance_bits >= bits:
            notes.append(f"{head}: the conditioning plus the tolerance reaches {result.dtype}'s {bits} "
                         "bits, so the stability lens cannot tell a formula's error from the problem's "
                         "here. Judge with judge='accuracy', or on less clustered inputs (a domain "
                         "wider relative to its magnitude).")
        else:
            notes.append(f"{head}: a backward-stable formula has errors of this size on these inputs. "
                         "For more accuracy, judge='accuracy' and jst.improve.")
    if s.underflow_notes:
        notes.append(f"underflow: {s.underflow_notes} output elements within the dtype's precision of the "
                     "smallest normal lost what flushed or underflowed intermediates carried (not an "
                     "instability of the formula).")
    return " ".join(notes)


def nothing_judged(case_id: str, samples: int, discarded: int, uncertain: int, domain: Any,
                   out_dtypes: Sequence[Any], shapes: Sequence[tuple[int, ...]], cost: int) -> str:
    """Why a case where no output element could be judged is not a pass, and what to change."""
    head = f"{case_id}: nothing could be judged over {samples} inputs, so there is no verdict"
    if samples == 0:
        return f"{head}: no input was drawn."
    if any(0 in s for s in shapes) or cost == 0:
        shown = ", ".join(map(str, shapes))
        return f"{head}: some inputs have no elements (shapes {shown}) and no output could be judged."
    if discarded >= samples:
        return (f"{head}: on every input the exact result is not a real number (outside the function's "
                f"real domain: log or sqrt of a negative, 0/0, ...), domain={domain!r}. Narrow the domain "
                "to where the function is defined, e.g. domain=(0, 10) for sqrt or log.")
    if uncertain >= samples:
        return (f"{head}: the exact oracle could not decide the result to the dtype's precision on any "
                "input (every element uncertain, e.g. a comparison or a rounding exactly at a tie). Narrow "
                "the domain away from those points.")
    return (f"{head}: {discarded} inputs were outside the function's real domain and {uncertain} uncertain, "
            f"and no output element of the others could be judged (domain={domain!r}). Narrow the domain "
            "to where the function is defined.")
