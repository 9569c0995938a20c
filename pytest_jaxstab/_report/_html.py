"""The HTML report: one self-contained file, a section per case with a plot of error against input
magnitude for both variants, as Herbie's report shows it (people look at a plot rather than read a table).

No external resources (no CDN, no JavaScript): the plots are inline SVG rendered by matplotlib, which is
imported lazily and is an optional dependency (`pip install 'pytest-jaxstab[html]'`).
"""

from __future__ import annotations

import html
import io
import math
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .._files import jaxstab_version, write_text_atomic
from .._results import CaseResult, GradientPlanRecord, Point, VariantStats, Witness
from ._json import GATE_DECISIONS

__all__ = ["write_html"]

_COLOURS = {"original": "#d62728", "rewritten": "#1f77b4"}  # matplotlib's tab:red / tab:blue

_CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 60em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.1em; font-family: monospace; word-break: break-all; }
section { border-top: 1px solid #ccc; padding-top: .5em; margin-top: 2em; }
table { border-collapse: collapse; margin: .5em 0; font-size: .9em; }
th, td { border: 1px solid #ddd; padding: .2em .5em; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.failed { color: #b00; font-weight: bold; } .passed { color: #070; font-weight: bold; }
pre, code { background: #f6f6f6; } pre { padding: .5em; white-space: pre-wrap; }
.note { color: #666; font-size: .85em; } .plot svg { max-width: 100%; height: auto; }
"""


def write_html(path: str | os.PathLike[str], cases: Sequence[CaseResult], *, jax_version: str,
               backends: Sequence[str], gate: Mapping[str, str] | None = None,
               gradient_gate: Mapping[str, str] | None = None) -> None:
    """Writes the HTML report: one self-contained file (inline CSS and SVG), written atomically.

    Per case: the error figures of both variants, the rewrites that fired, the NaN/Inf origins (primitive,
    location, the line's text), the timings, the witnesses, and a plot of error bits against log10 of the
    largest input magnitude of each sample (`CaseResult.points`), one colour per variant.

    Args:
        path: the file to write; its directory is created if missing.
        cases: the results to report.
        jax_version: `jax.__version__` of the run.
        backends: the JAX backends present.
        gate: when the run compared with a baseline, the gate's decision per case nodeid ("known",
            "regressed", "new", "improved", "unchanged"). Shown beside the stability verdict, never
            merged with it: a known instability is unstable and does not fail the run.
        gradient_gate: the gate's decision on the gradient of each ``grad=True`` case, when compared.

    A case checked with ``grad=True`` also shows its gradient's figures beside the value's (both
    variants, verdict, gate decision) and the gradient's NaN/Inf origins, lines of the backward pass.
    A case (or gradient) a rewrite makes worse than written says so: "wrong rewrite" as its verdict,
    and a paragraph naming the rules, their lines, both figures and the input. A case checked with
    ``tune_precision=True`` shows its precision plan: the lines kept high, the rewrites, both programs'
    figures.

    Raises:
        ImportError: matplotlib is not installed; the message says `pip install 'pytest-jaxstab[html]'`.

    Example:
        >>> import tempfile
        >>> case = CaseResult("tests/test_loss.py::test_lse", "float32", samples=200)
        >>> with tempfile.TemporaryDirectory() as d:
        ...     write_html(os.path.join(d, "jaxstab.html"), [case], jax_version="0.12.0", backends=["cpu"])
        ...     with open(os.path.join(d, "jaxstab.html"), encoding="utf-8") as f:
        ...         page = f.read()
        >>> page.startswith("<!DOCTYPE html>"), "test_lse" in page
        (True, True)
    """
    _require_matplotlib()  # before any work, so a missing extra fails fast and clearly
    unstable = sum(c.outcome == "failed" for c in cases)
    wrong = sum(c.rewrite_regression is not None or (c.gradient is not None and c.gradient.rewrite_regression
                                                     is not None) for c in cases)
    verdicts = (f"stability verdict: {len(cases) - unstable} stable, {unstable} unstable (tolerance "
                "exceeded or overflow" + (f"; {wrong} made worse by a wrong rewrite" if wrong else "") + ")")
    decisions = ""
    if gate is not None:
        counts = {s: sum(1 for c in cases if gate.get(c.nodeid) == s) for s in GATE_DECISIONS}
        failing = counts["regressed"]
        decisions = (" &middot; baseline gate: " + ", ".join(f"{n} {s}" for s, n in counts.items())
                     + (f" ({failing} fail the run)" if failing else " (no case fails the run)"))
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        "<title>pytest-jaxstab report</title>",
        f"<style>{_CSS}</style></head><body>",
        "<h1>pytest-jaxstab report</h1>",
        f"<p>{len(cases)} cases &middot; {_e(verdicts)}{decisions}</p>",
        f"<p>jax {_e(jax_version)} &middot; backends: "
        f"{_e(', '.join(backends) or '-')} &middot; pytest-jaxstab {_e(jaxstab_version())}</p>",
        _summary_table(cases, gate),
    ]
    parts.extend(_case_section(i, case, gate, gradient_gate) for i, case in enumerate(cases))
    parts.append("</body></html>\n")
    write_text_atomic(path, "\n".join(parts))


def _require_matplotlib() -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError as e:
        raise ImportError(
            "the jaxstab HTML report needs matplotlib, which is not installed: "
            "pip install 'pytest-jaxstab[html]' (or choose --jaxstab-report=term or json:PATH)"
        ) from e


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _bits(value: float) -> str:
    return f"{value:.2f}"


def _seconds(s: float) -> str:
    if not math.isfinite(s):
        return str(s)
    if s < 1e-3:
        return f"{s * 1e6:.1f} µs"
    return f"{s * 1e3:.2f} ms" if s < 1 else f"{s:.3f} s"


def _table(head: Sequence[str], rows: Sequence[Sequence[str]], numeric: Sequence[int] = ()) -> str:
    """A table; cells are already-escaped HTML; columns in `numeric` align right."""
    out = ["<table><tr>", *(f"<th>{h}</th>" for h in head), "</tr>"]
    for row in rows:
        out.append("<tr>")
        out.extend(f'<td class="num">{c}</td>' if j in numeric else f"<td>{c}</td>"
                   for j, c in enumerate(row))
        out.append("</tr>")
    out.append("</table>")
    return "".join(out)


def _verdict(case: CaseResult) -> str:
    word = "unstable" if case.outcome == "failed" else "stable"
    if case.rewrite_regression is not None:
        word = "wrong rewrite"
    return f'<span class="{_e(case.outcome)}">{word}</span>'


def _wrong_rewrite(case: CaseResult, what: str = "") -> list[str]:
    """A rewrite that makes the function worse: the rules at their lines, both figures, the input."""
    reg = case.rewrite_regression
    if reg is None:
        return []
    args = ", ".join(np.array2string(np.asarray(a).astype(np.float64), threshold=8, precision=9)
                     for a in reg.inputs)
    return [f'<p class="failed">{_e(what)}{_e(reg)}: the case fails whatever apply=, judge= and the '
            f"baseline say</p>", f'<p class="note">at the input <code>{_e(args[:300])}</code></p>']


def _lens(case: CaseResult) -> str:
    stats = case.judged_stats
    if stats.judge != "stability":
        return "judge=accuracy (the forward error is judged)"
    return (f"judge=stability: {stats.beyond_bits:.1f} bits beyond what conditioning explains "
            f"(conditioning {stats.conditioning_bits:.1f} bits at the worst input, "
            f"{stats.underflow_notes} underflow notes)")


def _decision(case: CaseResult, gate: Mapping[str, str] | None) -> str:
    if gate is None:
        return '<span class="note">not compared</span>'
    status = gate.get(case.nodeid, "-")
    css = "failed" if status == "regressed" else "note"
    return f'<span class="{css}">{_e(status)}</span>'


def _summary_table(cases: Sequence[CaseResult], gate: Mapping[str, str] | None) -> str:
    rows = []
    for i, case in enumerate(cases):
        rows.append([
            f'<a href="#case-{i}">{_e(case.nodeid)}</a>', _e(case.dtype), _verdict(case),
            _decision(case, gate), str(case.samples), str(case.discarded), str(case.uncertain),
            _bits(case.original.max_error_bits), str(case.original.overflows),
            _bits(case.rewritten.max_error_bits), str(case.rewritten.overflows),
            *_gradient_cells(case),
        ])
    return _table(["case", "dtype", "stability verdict", "baseline gate", "samples", "discarded", "uncertain",
                   "original max bits", "original overflows", "rewritten max bits", "rewritten overflows",
                   "gradient (judged) max bits", "gradient (judged) overflows"],
                  rows, numeric=(4, 5, 6, 7, 8, 9, 10, 11, 12))


def _gradient_cells(case: CaseResult) -> list[str]:
    if case.gradient is None:
        return ['<span class="note">-</span>'] * 2
    stats = case.gradient.judged_stats
    return [_bits(stats.max_error_bits), str(stats.overflows)]


def _stats_row(name: str, stats: VariantStats, judged: bool) -> list[str]:
    label = _e(name) + (" (judged)" if judged else "")
    return [label, _bits(stats.max_error_bits), _bits(stats.mean_error_bits), str(stats.overflows),
            _e(stats.verdict)]


def _case_section(index: int, case: CaseResult, gate: Mapping[str, str] | None = None,
                  gradient_gate: Mapping[str, str] | None = None) -> str:
    out = [f'<section id="case-{index}">', f"<h2>{_e(case.nodeid)}</h2>",
           f"<p>stability verdict: {_verdict(case)} &middot; baseline gate: {_decision(case, gate)}"
           f" &middot; dtype {_e(case.dtype)}"
           f" &middot; {case.samples} samples ({case.discarded} outside the domain, {case.uncertain} "
           f"uncertain) &middot; tolerance {case.tolerance_bits:g} bits &middot; {_lens(case)}</p>"]
    out.append(_table(
        ["variant", "max error (bits)", "mean error (bits)", "overflows", "verdict"],
        [_stats_row("original", case.original, case.judged != "rewritten"),
         _stats_row("rewritten", case.rewritten, case.judged == "rewritten")],
        numeric=(1, 2, 3),
    ))
    out.extend(_wrong_rewrite(case))
    if case.gradient is not None:
        out.extend(_gradient_section(case.gradient, gradient_gate))
    if case.message:
        out.append(f"<pre>{_e(case.message)}</pre>")
    if case.note:
        out.append(f'<p class="note">{_e(case.note)}</p>')
    out.append("<h3>Error against input magnitude</h3>")
    out.append(_plot_svg(case, index))
    out.append("<h3>Rewrites</h3>")
    if case.rewrites:
        out.append(_table(["rule", "location"],
                          [[_e(r.rule), f"<code>{_e(r.location or '?')}</code>"] for r in case.rewrites]))
    else:
        out.append('<p class="note">no rule fired</p>')
    out.append("<h3>NaN/Inf origins</h3>")
    if case.nan_origins:
        out.append(_table(
            ["variant", "primitive", "location", "kind", "line", "path"],
            [[_e(n.variant), f"<code>{_e(n.primitive)}</code>", f"<code>{_e(n.location or '?')}</code>",
              _e(n.kind), f"<code>{_e(n.line_text)}</code>", _e(n.path)] for n in case.nan_origins],
        ))
    else:
        out.append('<p class="note">no non-finite result</p>')
    out.extend(_local_error_section(case))
    out.extend(_precision_section(case))
    out.append("<h3>Timing (jitted)</h3>")
    if case.timing:
        out.append(_table(
            ["backend", "original", "rewritten", "rewritten / original"],
            [[_e(t.backend), _seconds(t.original_s), _seconds(t.rewritten_s), f"{t.ratio:.2f}x"]
             for t in case.timing],
            numeric=(1, 2, 3),
        ))
    else:
        out.append('<p class="note">not timed</p>')
    if case.witnesses:
        out.append("<h3>Witnesses (worst inputs found)</h3>")
        out.append(_table(["variant", "error (bits)", "overflow", "arguments"],
                          [_witness_row(w) for w in case.witnesses], numeric=(1,)))
    out.append("</section>")
    return "\n".join(out)


def _gradient_section(grad: CaseResult, gradient_gate: Mapping[str, str] | None) -> list[str]:
    """The gradient's figures (``grad=True``) beside the value's, and where its NaN/Inf were born."""
    decision = '<span class="note">not compared</span>'
    if gradient_gate is not None:
        decision = f'<span class="note">{_e(gradient_gate.get(grad.nodeid, "-"))}</span>'
    out = ["<h3>Gradient (jax.grad; a VJP with ones for non-scalar outputs)</h3>",
           f"<p>stability verdict: {_verdict(grad)} &middot; baseline gate: {decision}"
           f" &middot; {grad.samples} samples ({grad.discarded} outside the domain, {grad.uncertain} "
           "uncertain) &middot; judged against the exact derivative of the function as written</p>",
           _table(["variant", "max error (bits)", "mean error (bits)", "overflows", "verdict"],
                  [_stats_row("original", grad.original, grad.judged != "rewritten"),
                   _stats_row("rewritten", grad.rewritten, grad.judged == "rewritten")],
                  numeric=(1, 2, 3)),
           *_wrong_rewrite(grad, "gradient: ")]
    if grad.nan_origins:
        out.append("<p>NaN/Inf origins in the backward pass:</p>")
        out.append(_table(
            ["variant", "primitive", "location", "kind", "line"],
            [[_e(n.variant), f"<code>{_e(n.primitive)}</code>", f"<code>{_e(n.location or '?')}</code>",
              _e(n.kind), f"<code>{_e(n.line_text)}</code>"] for n in grad.nan_origins],
        ))
    return out


def _local_error_section(case: CaseResult) -> list[str]:
    """Where the function as written loses bits (``jst.local_error``): one bar per line, worst first.

    Plain HTML bars (no plot library): the bar is the line's max bits on the scale of the dtype's width
    (a lighter inner bar the mean), the tolerance drawn as a mark."""
    out = ["<h3>Where bits are lost (local error per line)</h3>"]
    if not case.local_error:
        out.append('<p class="note">not computed, or no operation loses a bit</p>')
        return out
    scale = {"float16": 16.0, "bfloat16": 16.0, "float32": 32.0, "float64": 64.0}.get(case.dtype, 64.0)
    tol = min(100.0, 100.0 * case.tolerance_bits / scale)
    rows = []
    for e in case.local_error:
        width, mean = min(100.0, 100.0 * e.max_bits / scale), min(100.0, 100.0 * e.mean_bits / scale)
        at = "position:absolute;left:0;"
        bar = (f'<div style="position:relative;width:16em;height:0.9em;background:#eee">'
               f'<div style="{at}top:0;height:100%;width:{width:.1f}%;background:#c44"></div>'
               f'<div style="{at}top:25%;height:50%;width:{mean:.1f}%;background:#f99"></div>'
               f'<div style="position:absolute;left:{tol:.1f}%;top:0;height:100%;'
               f'border-left:1px dashed #333"></div></div>')
        removed = {True: "yes", False: "no", None: "-"}[e.removed]
        rows.append([f"<code>{_e(e.location or '?')}</code>", f"<code>{_e(e.primitive)}</code>", _e(e.kind),
                     bar, _bits(e.max_bits), _bits(e.mean_bits), f"{100 * e.share_over_tolerance:.0f}%",
                     removed, f"<code>{_e(e.code)}</code>"])
    out.append(_table(["location", "primitive", "kind", "bits lost (max, mean; dashed: tolerance)", "max",
                       "mean", "samples over tolerance", "removed by rewriting", "line"], rows,
                      numeric=(4, 5, 6)))
    return out


def _precision_section(case: CaseResult) -> list[str]:
    """The precision plan (``tune_precision=True``): the lines to keep high, the rewrites, the figures."""
    plan = case.precision
    if plan is None:
        return []
    out = [f"<h3>Precision plan: which lines must stay {_e(plan.high)}</h3>"]
    if plan.error:
        out.append(f'<p class="note">no plan: {_e(plan.error)}</p>')
        return out
    status = "within" if plan.reached else "<strong>NOT within</strong>"
    out.append(f"<p>{_e(plan.dtype)} program: {len(plan.lines)} line(s) kept in {_e(plan.high)} "
               f"({100 * plan.high_share:.1f}% of the float work), {len(plan.rewrites)} rewrite(s); the "
               f"tuned program is {status} {plan.tolerance_ulps:g} ulps on {plan.samples} samples</p>")
    if plan.lines:
        out.append(_table(["keep in " + _e(plan.high), "function", "line"],
                          [[f"<code>{_e(k.location or '?')}</code>", f"<code>{_e(k.function or '?')}</code>",
                            f"<code>{_e(k.text)}</code>"] for k in plan.lines]))
    if plan.rewrites:
        out.append(_table(["rewrite", "location"],
                          [[_e(r.rule), f"<code>{_e(r.location or '?')}</code>"] for r in plan.rewrites]))
    if not plan.lines and not plan.rewrites:
        out.append('<p class="note">nothing to keep high: the program is accurate in its dtype</p>')
    out.append(_table(["program", "max error (bits)", "max ulps", "mean error (bits)", "non-finite"],
                      [[name, _bits(f.max_bits), "inf" if f.max_ulps == float("inf") else f"{f.max_ulps:.3g}",
                        _bits(f.mean_bits), str(f.overflows)]
                       for name, f in (("as written", plan.original), ("tuned", plan.tuned))],
                      numeric=(1, 2, 3, 4)))
    if plan.note:
        out.append(f'<p class="note">{_e(plan.note)}</p>')
    return out + _gradient_plan_section(plan.gradient)


def _gradient_plan_section(plan: GradientPlanRecord | None) -> list[str]:
    """The gradient's plan (``grad=True``): the lines kept in both passes and in the backward pass
    only, the loss scale and what set its range, the norm-wise figures as written, scaled and tuned."""
    if plan is None:
        return []
    out = [f"<h3>Gradient plan: which lines must stay {_e(plan.high)} for the gradient</h3>"]
    if plan.error:
        out.append(f'<p class="note">no gradient plan: {_e(plan.error)}</p>')
        return out
    status = _e(plan.status()) if plan.reached else f"<strong>{_e(plan.status())}</strong>"
    out.append(f"<p>{_e(plan.dtype)} backward pass: {len(plan.lines)} line(s) kept in {_e(plan.high)} in "
               f"both passes, {len(plan.backward_lines)} in the backward pass only "
               f"({100 * plan.high_share:.1f}% of the gradient's float work), {len(plan.rewrites)} "
               f"rewrite(s); the tuned gradient is {status}</p>")
    kept = [(k, "both passes") for k in plan.lines] + [(k, "backward only") for k in plan.backward_lines]
    if kept:
        out.append(_table(["keep in " + _e(plan.high), "pass", "function", "line"],
                          [[f"<code>{_e(k.location or '?')}</code>", where,
                            f"<code>{_e(k.function or '?')}</code>", f"<code>{_e(k.text)}</code>"]
                           for k, where in kept]))
    if plan.carries:
        out.append(_table(["carry kept in " + _e(plan.high)],
                          [[f"<code>{_e(c)}</code>"] for c in plan.carries]))
    if plan.rewrites:
        out.append(_table(["rewrite", "location"],
                          [[_e(r.rule), f"<code>{_e(r.location or '?')}</code>"] for r in plan.rewrites]))
    out.append(f"<p>{_e(plan.scale_text())}</p>")
    rows = [("as written (scale 1)", plan.original),
            (f"as written (scale {plan.loss_scale:g})", plan.scaled), ("tuned", plan.tuned)]
    out.append(_table(["gradient", "max norm-wise relative error", "mean", "non-finite", "samples"],
                      [[name, _rel(f.max_error), _rel(f.mean_error), str(f.nonfinite), str(f.samples)]
                       for name, f in rows], numeric=(1, 2, 3, 4)))
    if plan.note:
        out.append(f'<p class="note">{_e(plan.note)}</p>')
    return out


def _rel(x: float) -> str:
    return "inf" if x == float("inf") else f"{x:.2e}"


def _witness_row(w: Witness) -> list[str]:
    args = ", ".join(np.array2string(np.asarray(a).astype(np.float64), threshold=8, precision=9)
                     if np.asarray(a).ndim else repr(float(a)) for a in w.args)
    if len(args) > 300:
        args = args[:299] + "…"
    return [_e(w.variant), _bits(w.error_bits), "yes" if w.overflow else "no", f"<code>{_e(args)}</code>"]


# --- the plot ----------------------------------------------------------------------------------------


def _log_magnitudes(points: Sequence[Point]) -> tuple[np.ndarray, str]:
    """x coordinates: log10 of each sample's largest input magnitude (`Point.magnitude` is |x|, not its
    log). Zero (no log) is drawn one decade left of the smallest, infinity one decade right of the
    largest, so every sample is on the plot; the returned note says so when it happens."""
    m = np.abs(np.array([p.magnitude for p in points], dtype=np.float64))
    finite = np.isfinite(m) & (m > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        logs = np.log10(m)
    lo = float(logs[finite].min()) if finite.any() else 0.0
    hi = float(logs[finite].max()) if finite.any() else 0.0
    logs = np.where(m == 0, lo - 1.0, logs)
    logs = np.where(np.isinf(m), hi + 1.0, logs)
    notes = []
    if (m == 0).any():
        notes.append("inputs of magnitude 0 are drawn at the left edge")
    if np.isinf(m).any():
        notes.append("infinite inputs at the right edge")
    return logs, "; ".join(notes)


def _plot_svg(case: CaseResult, index: int) -> str:
    if not case.points:
        return '<p class="note">no samples to plot</p>'
    import matplotlib
    from matplotlib.figure import Figure  # no pyplot: no global figure state, no GUI backend

    logs, note = _log_magnitudes(case.points)
    keep = ~np.isnan(logs)
    fig = Figure(figsize=(7.0, 3.2))
    ax = fig.subplots()
    for variant in ("original", "rewritten"):
        bits = np.array([getattr(p, f"{variant}_bits") for p in case.points], dtype=np.float64)
        ax.scatter(logs[keep], bits[keep], s=12, alpha=0.6, color=_COLOURS[variant], label=variant,
                   edgecolors="none")
    ax.axhline(case.tolerance_bits, color="#888", linestyle="--", linewidth=1, label="tolerance")
    ax.set_xlabel("log10 |x| (largest input magnitude of the sample)")
    ax.set_ylabel("error (bits)")
    ax.set_ylim(bottom=-0.5)  # markers at 0 bits (the common case) stay whole
    ax.grid(True, alpha=0.3)
    ax.legend(loc="best", fontsize="small")
    fig.tight_layout()
    buffer = io.StringIO()
    # Text stays text (smaller, searchable); a salt per plot keeps SVG ids unique within the page.
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": f"jaxstab-case-{index}"}):
        fig.savefig(buffer, format="svg", metadata={"Date": None})
    svg = buffer.getvalue()
    # Inline SVG needs neither the XML prolog nor the DOCTYPE (which names a remote DTD), nor the RDF
    # metadata (remote vocabulary URIs): keep only the <svg> element itself.
    svg = svg[svg.index("<svg"):]
    svg = re.sub(r"<metadata>.*?</metadata>\s*", "", svg, flags=re.DOTALL)
    caption = f'<p class="note">{_e(note)}</p>' if note else ""
    return f'<div class="plot">{svg}</div>{caption}'
