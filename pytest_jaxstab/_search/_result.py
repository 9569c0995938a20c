"""What ``jst.improve`` returns: the candidates on the accuracy/cost Pareto frontier, and the best one."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

__all__ = ["Candidate", "Improvement", "Offer", "Partial"]


@dataclasses.dataclass(frozen=True)
class Candidate:
    """One program the search measured.

    Attributes:
        source: the expression as JAX source (``jnp`` calls over the argument names).
        mean_bits: mean error in bits on the samples (judged by the exact oracle, jitted float result).
        max_bits: the largest error in bits on the samples.
        cost: the op-cost model's cost (rough relative CPU latency, one addition = 1; see
            ``pytest_jaxstab._search._expr``).
        kind: ``"original"``, ``"rewrite"`` (derived by the e-graph from identities), ``"series"`` (a
            truncated expansion around 0 or infinity: an approximation, valid near its point only),
            ``"regimes"`` (candidates joined by ``jnp.where`` on the range of an input or of a
            sub-expression; in an array program, per example), ``"regimes with
            series approximation"`` (one of the joined candidates is a series, used on its regime only)
            or ``"catalogue"`` (``jst.stabilize``'s rewrite, measured first; when it does not lower to a
            term, ``source`` is ``jst.stabilize(name)`` and ``term`` is None).
    """

    source: str
    mean_bits: float
    max_bits: float
    cost: float
    kind: str
    term: Any = dataclasses.field(default=None, repr=False, compare=False)


@dataclasses.dataclass(frozen=True)
class Offer:
    """A program ``jst.improve`` offers on the accuracy/cost trade-off.

    Attributes:
        candidate: its figures on the search's samples (``mean_bits``, ``max_bits``, ``cost``, ``kind``).
        fn: the program as a callable with the original function's signature.
        source: the program as a pasteable ``def``.
        mean_bits: mean error in bits, the worse of the search's and the re-check's samples.
        max_bits: max error in bits, the worse of both sample sets.
        seconds: jitted seconds per call over the re-check's points, by backend (``{"cpu": 1.2e-5}``);
            empty when timing was not possible.
    """

    candidate: Candidate
    fn: Callable[..., Any]
    source: str
    mean_bits: float
    max_bits: float
    seconds: dict[str, float] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Partial:
    """One partial derivative ``jst.improve(..., derivatives=...)`` judged (``Improvement.partials``).

    Attributes:
        argument: the argument it differentiates by.
        before: ``(mean, max)`` bits of the derivative program as autodiff builds it (a user's
            ``custom_jvp`` rule included), against the oracle's exact value of that program, on the
            search's samples.
        after: ``(mean, max)`` bits of the installed derivative (the tangent of ``Improvement.fn`` for a
            unit tangent on this argument) on the same samples; None when nothing was installed for it.
        improved: whether a better program was found for it (and passed the search's re-check).
        status: the search's status line, or why it was not searched (within the fix criterion
            already, or refused).
        source: the partial's program as a pasteable ``def`` (the improved one when improved).
        search: the search's own :class:`Improvement` (its frontier, re-check, ...); None when not
            searched.
    """

    argument: str
    before: tuple[float, float]
    after: tuple[float, float] | None
    improved: bool
    status: str
    source: str
    search: Improvement | None = dataclasses.field(default=None, repr=False, compare=False)

    def line(self) -> str:
        """One line of the report: before and after bits, or why it was left as autodiff builds it."""
        bm, bx = self.before
        text = f"d/d{self.argument}: mean {bm:.2f} bits, max {bx:.2f} bits as differentiated"
        if self.improved and self.after is not None:
            am, ax = self.after
            text += f" -> mean {am:.2f} bits, max {ax:.2f} bits installed"
        return f"{text} ({self.status})"


@dataclasses.dataclass
class Improvement:
    """The result of ``jst.improve``: the best program found, the Pareto frontier, and what happened.

    Attributes:
        fn: the best program as a callable with the original function's signature (the original
            function itself when nothing better was found).
        source: the best program as a pasteable ``def`` (uses ``import jax.numpy as jnp``); the original
            expression's source when nothing better was found.
        improved: whether a candidate better than the original was found and passed the re-check on
            fresh samples.
        status: one line: what was found, or why nothing is offered (unsupported primitive, nothing
            better, time limit, no sample could be judged).
        original: the original expression's figures.
        best: the offered candidate (``original`` when nothing better).
        frontier: the candidates no other beats on both mean error and cost, most accurate first.
        recheck: ``(original_mean, original_max, best_mean, best_max)`` bits on fresh samples.
        samples: points judged in the search; ``times``: seconds per stage.
        families: per kind of loss local error reported in the searched sub-expression (cancellation,
            overflow, ...), the rule families it chose for the first saturation phase, in its order
            (empty when no line lost enough bits to localize, or the search did not run).
        most_accurate: the most accurate program found (lowest mean error on both sample sets), as an
            :class:`Offer` with its jitted time; None when nothing better was found.
        cheapest: the cheapest program whose mean error is within 1 bit of ``most_accurate``'s (and
            whose max is within 2 bits of it), with its jitted time; ``most_accurate`` itself when none is
            cheaper. ``best`` (``fn``, ``source``) is the product's pick: the cheapest that *fixes* the
            program (``jst.improve``'s rule), which may be either or neither of these two.
        original_seconds: the original's jitted seconds per call over the same points, by backend.
        partials: with ``derivatives=`` (``jst.improve``), one :class:`Partial` per argument; ``fn`` is
            then ``jax.custom_jvp`` of the primal (the value's improved program when the value search ran
            and improved it, else the function as written) with the improved partials as its tangent,
            and ``source`` the pasteable ``@jax.custom_jvp`` definition with its ``defjvp``. ``original``,
            ``best``, ``frontier``, ``recheck`` and the offers are the value search's (None or empty with
            ``derivatives="only"``). Empty without ``derivatives=``.
        value: with ``derivatives=True``, the value search's own result (its status and report); None
            otherwise.
    """

    fn: Callable[..., Any]
    source: str
    improved: bool
    status: str
    original: Candidate | None = None
    best: Candidate | None = None
    frontier: list[Candidate] = dataclasses.field(default_factory=list)
    recheck: tuple[float, float, float, float] | None = None
    samples: int = 0
    times: dict[str, float] = dataclasses.field(default_factory=dict)
    families: dict[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
    most_accurate: Offer | None = None
    cheapest: Offer | None = None
    original_seconds: dict[str, float] = dataclasses.field(default_factory=dict)
    partials: tuple[Partial, ...] = ()
    value: Improvement | None = dataclasses.field(default=None, repr=False)

    def report(self) -> str:
        """A short text: the status, original vs best, the frontier and the best program's source; with
        ``derivatives=``, the before/after bits of each partial derivative too."""
        if self.partials:
            return self._derivative_report()
        lines = [f"jst.improve: {self.status}"]
        if self.families:
            lines.append("  rule families by kind of loss: " + "; ".join(
                f"{kind} -> {', '.join(fams)}" for kind, fams in self.families.items()))
        if self.original is not None:
            o = self.original
            lines.append(f"  original: mean {o.mean_bits:.2f} bits, max {o.max_bits:.2f}"
                         f" bits, cost {self.original.cost:g}   {self.original.source}")
        if self.improved and self.best is not None:
            b = self.best
            lines.append(f"  best:     mean {b.mean_bits:.2f} bits, max {b.max_bits:.2f} bits, "
                         f"cost {self.best.cost:g} ({self.best.kind})")
            if self.recheck is not None:
                om, ox, bm, bx = self.recheck
                lines.append(f"  re-check on fresh samples: original {om:.2f}/{ox:.2f}, "
                             f"best {bm:.2f}/{bx:.2f}"
                             " bits (mean/max)")
            for label, o in (("most accurate", self.most_accurate), ("cheapest within 1 bit", self.cheapest)):
                if o is not None:
                    speed = _speed(o.seconds, self.original_seconds)
                    lines.append(f"  {label + ':':22s} mean {o.mean_bits:.2f} bits, max {o.max_bits:.2f} "
                                 f"bits, cost {o.candidate.cost:g}, {speed}   {_short(o.candidate.source)}")
            if len(self.frontier) > 1:
                lines.append("  frontier (mean bits, cost):")
                lines.extend(f"    {c.mean_bits:6.2f}  {c.cost:5g}  {_short(c.source)}"
                             for c in self.frontier)
            lines.append("")
            lines.append(self.source.rstrip())
        return "\n".join(lines)

    def _derivative_report(self) -> str:
        lines = [f"jst.improve: {self.status}"]
        if self.value is not None:  # the value searched too: its figures, without its source
            shown = dataclasses.replace(self.value, source="").report().splitlines()
            lines += ["  value: " + shown[0].removeprefix("jst.improve: "),
                      *("  " + line for line in shown[1:] if line.strip())]
        lines += [f"  {p.line()}" for p in self.partials]
        if self.improved:
            lines += ["", self.source.rstrip()]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.report()


#: Characters of a candidate's one-line source the report shows; a longer one (a regime joining large
#: forms) is cut there: the whole program is the offer's ``source`` (a ``def`` with its repeated parts
#: named), the best one printed at the end of the report.
_SHOWN_CHARS = 200


def _short(source: str) -> str:
    if len(source) <= _SHOWN_CHARS:
        return source
    return f"{source[:_SHOWN_CHARS]} ... ({len(source)} characters in all: the offer's .source)"


def _speed(seconds: dict[str, float], original: dict[str, float]) -> str:
    """``jit 12.0 us/call on cpu (0.95x the original)`` per backend timed; ``not timed`` when none."""
    parts = []
    for backend, s in seconds.items():
        ratio = f" ({s / original[backend]:.2f}x the original)" if original.get(backend) else ""
        parts.append(f"jit {s * 1e6:.1f} us/call on {backend}{ratio}")
    return "; ".join(parts) or "not timed"
