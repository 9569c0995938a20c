"""Random jnp programs for the soundness fuzz of ``jst.stabilize`` (issue 38 item 3).

Used by ``tests/test_soundness_fuzz.py`` (a fixed seed in CI) and ``benchmarks/bench_soundness_fuzz.py``
(many seeds); not a test module itself.

**The programs.** :func:`programs` draws expression trees of depth 2-5 over the catalogue's operations
*as users spell them*: ``exp``, ``log``, ``log1p`` and ``log(1 + x)``, ``expm1``, ``sqrt``, squares as
``x * x``, ``x ** 2``, ``jnp.square(x)``, ``x ** 2.0``; ``1 - x``, ``1 + x``, ``1 / x``, ``+ - * /``,
``maximum``, ``where``, ``abs``, ``tanh``; ``jax.nn.sigmoid`` and ``1 / (1 + exp(-x))``, softplus and
``log(1 + exp(x))``, ``log(sigmoid)``, ``exp(a) * exp(b)``, ``exp(a) / exp(b)``, ``x * log(x)``; sums,
means and maxima over an axis (with ``keepdims`` or not), ``jax.nn.logsumexp`` and
``log(sum(exp(x)))``, ``softmax``/``log_softmax`` and their written forms, ``jnp.linalg.norm`` and
``sqrt(sum(x * x))``, ``jnp.var``/``jnp.std`` and ``mean(x ** 2) - mean(x) ** 2``. Leaves are the
inputs (1-3 float32 vectors of one length, 4 or 8) and the constants 1, 2, 0.5, -1, 1e-3. An operand
used twice by a spelling (``a * a``) is written out twice or bound to a temporary, at random: the
catalogue sees both shapes of program. Each program is Python source, and what runs is that source
(``exec``), so a failing example prints exactly the program that failed.

**The inputs** (:func:`draw_inputs`) are deterministic from the seed: ordinary values in [-3, 3], the
same positive, magnitudes 1e-6..1e6 of both signs, values near where forms break (0, +-1, the float32
overflow of ``exp`` near 88.7, large magnitudes), float32 bit patterns drawn uniformly, and vectors
mixing these element by element; all finite, no subnormals (XLA flushes them).

**The comparison** (:func:`check_program`). ``f`` is the program, ``g = jst.stabilize(f)``; both run
under ``jax.jit`` in float32 (one jit holding both, their gradients and their vmaps: XLA's compiles
are most of the fuzz's time) and the exact value comes from ``jst.oracles.evaluate(f, ...)``. Only
elements whose exact value is finite and certain, and where the original keeps at least one correct
bit (``bits(f) < 23``, :data:`HOPELESS_BITS`: an error of 2^23 ulps is as large as the value), are
judged. (Where the original is that wrong, e.g. a ``where`` whose test is NaN in the original, the
comparison says nothing: at ``where(t > 1 - softmax(exp(a) / exp(b)), log1p(expm1(m)), t)`` the
original's quotient is inf/inf, its test false, its value 24 bits off; the rewritten quotient is
finite, its test right, and the branch it takes overflows in both programs.) An element FAILS when

- the rewritten value is not finite where the original's is, or
- ``bits(g) > max(bits(f), A) + B`` with ``A = 4`` and ``B = 4`` bits (:data:`FLOOR_BITS`,
  :data:`MARGIN_BITS`), and neither excuse below explains it.

Why these constants: a stable form may round more often than the written one (a shift, a ``log1p``
of a quotient, a second pass of a variance: each a rounding of its own, a few ulps at most), and
where the original happens to be correctly rounded that is still 2-3 bits: ``A = 4`` is a floor of
16 ulps below which no rewritten value is judged worse. Above it, the rewritten value may not lose
more than ``B = 4`` bits (16 times the original's error in ulps) beyond the original's. A wrong
identity is tens of bits off at generic inputs (``exp(a / 2)`` for ``exp(a) ** 2`` is 23 bits off at
``a = 1``), so neither constant hides one. Measured (``bench_soundness_fuzz.py``, seeds 0-9, 1,500
programs, jax 0.12): of the 1,488 programs that pass, the rewrite is worse than ``max(bits(f), A)``
somewhere by more than 0 bits on 107, more than 2 on 16, more than 3 on 7, at most by 3.86 bits.

**Three excuses** (the refinements of the comparison), each computed only at inputs where an element
is worse, and printed with a failure:

- *Conditioning.* Where the problem is ill-conditioned (a sum that cancels, a ``where`` whose test
  is near its threshold), two programs that round differently inside are far apart at the output,
  and which of them is nearer the exact value is luck, not stability (``jst.improve`` excuses the
  same, ``_search/_stable.py``). A worse element is excused when ``bits(g) <= max(cond, A) + B``,
  ``cond`` the componentwise relative condition of the exact function in output ulps
  (``_check._conditioning.conditioning_ulps``: how far the exact result moves when every input
  moves one unit roundoff) as ``log2(1 + cond)``.
- *The original's luck.* An original that is accurate at the input but not at its neighbours was
  lucky there, and a rewrite cannot be faulted for not sharing the luck: the gradient of
  ``log(sum(exp(x - logsumexp(x))))`` is exactly 0, and the written program's gradient rounds to
  exactly 0 at some inputs and to noise of 1e-9 (30 bits, the metric is relative) at their
  neighbours. A worse element is excused when ``bits(g) <= max(n, A) + B``, ``n`` the original's
  worst error at :data:`NEIGHBOURS` inputs each of whose elements moved one float up or down.
  A wrong identity is as wrong at the neighbours, where the original stays accurate.
- *The gradient's rounding floor* (gradients only). ``jax.grad(sum o f)`` ends in a sum over the
  outputs, ``sum_i df_i/dx_j``; where the exact gradient is 0 or a tiny remainder of that sum, any
  program that rounds its terms leaves a residue of the terms' size times the unit roundoff, and the
  relative metric calls it 30 bits (at ``softmax(t) / sum(softmax(t))``, whose sum is 1 so its
  gradient 0, the written program happens to round to exactly 0 at every neighbour too, so the
  second excuse does not see its luck). A worse gradient element is excused when its absolute error
  is at most ``2^B * u * S_j``, ``S_j = sum_i |df_i/dx_j|`` (the terms' magnitudes, from
  ``jax.jacrev`` in float32: a scale, not a value) and ``u = 2^-24``: Higham's bound for a sum's
  rounding without its ``n - 1`` (so tighter), with the same ``B``. A wrong identity's gradient is
  wrong by the terms' size, not by 2^-20 of it.

A non-finite rewritten value is never excused.

**Gradients and vmap.** The gradient of ``sum(f(*x))`` with respect to every argument is judged the
same way, the reference being the oracle's value of the original's gradient program (the exact
evaluation of the jaxpr of ``jax.grad(sum o f)`` is the exact derivative). ``jax.vmap`` over a batch of
3 samples is judged against the samples' exact values. A program whose jaxpr (or its gradient's) holds
a primitive the oracle cannot evaluate is skipped and counted (:attr:`Outcome.skipped`), never
silently.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import pytest_jaxstab as jst
from pytest_jaxstab._check._conditioning import conditioning_ulps

#: Bits below which a rewritten value is never judged worse (module docstring).
FLOOR_BITS = 4.0
#: Bits the rewritten value may lose beyond ``max(original, FLOOR_BITS)`` or the conditioning.
MARGIN_BITS = 4.0
#: Bits of error at which a float32 value has no correct bit (2^23 ulps: as large as the value itself):
#: where the original is that far off, there is nothing the rewrite could make worse.
HOPELESS_BITS = 23.0
#: Input samples per program (the first :data:`VMAP_BATCH` of them also form the vmapped batch).
SAMPLES = 6
VMAP_BATCH = 3
CONSTANTS = ("1", "2", "0.5", "-1", "1e-3")
_TINY = float(np.finfo(np.float32).tiny)

# ------------------------------------------------------------------------------------ the grammar
# A spelling is a template: {a} {b} {c} are operands in a call's argument position (never need
# parentheses), {pa} {pb} {pc} the same operands next to an operator (parenthesised unless atomic).
# Kinds: "e" elementwise (operands of any shape, broadcast), "r" reduction of a vector to a scalar,
# "k" reduction that keeps its axis (a (1,) vector), "v" vector to vector.
_FAMILIES: dict[str, tuple[str, int, tuple[str, ...]]] = {
    "exp": ("e", 1, ("jnp.exp({a})",)),
    "log": ("e", 1, ("jnp.log({a})",)),
    "log1p": ("e", 1, ("jnp.log1p({a})", "jnp.log(1 + {pa})")),
    "expm1": ("e", 1, ("jnp.expm1({a})", "jnp.exp({a}) - 1")),
    "sqrt": ("e", 1, ("jnp.sqrt({a})",)),
    "square": ("e", 1, ("{pa} * {pa}", "{pa} ** 2", "jnp.square({a})", "{pa} ** 2.0")),
    "one_minus": ("e", 1, ("1 - {pa}",)),
    "one_plus": ("e", 1, ("1 + {pa}",)),
    "reciprocal": ("e", 1, ("1 / {pa}",)),
    "neg": ("e", 1, ("-{pa}",)),
    "tanh": ("e", 1, ("jnp.tanh({a})",)),
    "abs": ("e", 1, ("jnp.abs({a})",)),
    "sigmoid": ("e", 1, ("jax.nn.sigmoid({a})", "1 / (1 + jnp.exp(-{pa}))")),
    "softplus": ("e", 1, ("jax.nn.softplus({a})", "jnp.log(1 + jnp.exp({a}))")),
    "log_sigmoid": ("e", 1, ("jnp.log(jax.nn.sigmoid({a}))", "jax.nn.log_sigmoid({a})",
                             "jnp.log(1 / (1 + jnp.exp(-{pa})))")),
    "xlogx": ("e", 1, ("{pa} * jnp.log({a})",)),
    "add": ("e", 2, ("{pa} + {pb}",)),
    "sub": ("e", 2, ("{pa} - {pb}",)),
    "mul": ("e", 2, ("{pa} * {pb}",)),
    "div": ("e", 2, ("{pa} / {pb}",)),
    "maximum": ("e", 2, ("jnp.maximum({a}, {b})",)),
    "exp_mul": ("e", 2, ("jnp.exp({a}) * jnp.exp({b})",)),
    "exp_div": ("e", 2, ("jnp.exp({a}) / jnp.exp({b})",)),
    "where": ("e", 3, ("jnp.where({pa} > 0, {b}, {c})", "jnp.where({pa} > {pb}, {c}, {a})")),
    "sum": ("r", 1, ("jnp.sum({a})", "jnp.sum({a}, axis=0)")),
    "sum_keep": ("k", 1, ("jnp.sum({a}, axis=-1, keepdims=True)",)),
    "mean": ("r", 1, ("jnp.mean({a})", "jnp.mean({a}, axis=0)")),
    "mean_keep": ("k", 1, ("jnp.mean({a}, axis=-1, keepdims=True)",)),
    "max": ("r", 1, ("jnp.max({a})",)),
    "logsumexp": ("r", 1, ("jax.nn.logsumexp({a})", "jnp.log(jnp.sum(jnp.exp({a})))",
                           "jax.nn.logsumexp({a}, axis=0)")),
    "logsumexp_keep": ("k", 1, ("jnp.log(jnp.sum(jnp.exp({a}), axis=-1, keepdims=True))",
                                "jax.nn.logsumexp({a}, axis=-1, keepdims=True)")),
    "norm": ("r", 1, ("jnp.linalg.norm({a})", "jnp.sqrt(jnp.sum({pa} * {pa}))",
                      "jnp.sqrt(jnp.sum({pa} ** 2))")),
    "var": ("r", 1, ("jnp.var({a})", "jnp.mean({pa} ** 2) - jnp.mean({a}) ** 2",
                     "jnp.mean(jnp.square({a})) - jnp.square(jnp.mean({a}))")),
    "std": ("r", 1, ("jnp.std({a})", "jnp.sqrt(jnp.var({a}))",
                     "jnp.sqrt(jnp.mean({pa} ** 2) - jnp.mean({a}) ** 2)")),
    "softmax": ("v", 1, ("jax.nn.softmax({a})", "jnp.exp({a}) / jnp.sum(jnp.exp({a}))")),
    "log_softmax": ("v", 1, ("jax.nn.log_softmax({a})", "jnp.log(jax.nn.softmax({a}))",
                             "{pa} - jax.nn.logsumexp({a})",
                             "{pa} - jnp.log(jnp.sum(jnp.exp({a})))")),
}
#: Families whose result keeps a vector shape whatever the operands (reductions keeping their axis
#: and vector-to-vector maps); elementwise ones keep it when an operand does.
_VECTOR_KINDS = ("k", "v")
_NAMES = tuple(_FAMILIES)

_ATOM = re.compile(r"^(?:[A-Za-z_][\w.]*|\d[\w.]*)$")


def _atomic(text: str) -> bool:
    """A name, a non-negative literal, or one call whose parenthesis closes at the end."""
    if _ATOM.match(text):
        return True
    m = re.match(r"^[A-Za-z_][\w.]*\(", text)
    if not m or not text.endswith(")"):
        return False
    depth = 0
    for i, ch in enumerate(text[m.end() - 1:], start=m.end() - 1):
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0:
            return i == len(text) - 1
    return False


@dataclasses.dataclass
class _Node:
    text: str
    vector: bool  # its value has the inputs' vector shape ((n,) or (1,)), not a scalar
    leaf: bool
    const: bool = False


class _Builder:
    """Draws one program's expression, writing temporaries into ``lines``."""

    def __init__(self, rng: np.random.Generator, nargs: int) -> None:
        self.rng = rng
        self.nargs = nargs
        self.lines: list[str] = []
        self.used: set[str] = set()

    def leaf(self) -> _Node:
        name = f"x{self.rng.integers(self.nargs)}"
        self.used.add(name)
        return _Node(name, True, True)

    def const(self) -> _Node:
        return _Node(str(self.rng.choice(CONSTANTS)), False, True, const=True)

    def expr(self, depth: int, vector: bool) -> _Node:
        """An expression of exactly ``depth`` levels of families (0: an input); ``vector`` asks for a
        result of vector shape (the operand of a reduction or of softmax)."""
        if depth == 0:
            return self.leaf()
        while True:
            name = _NAMES[self.rng.integers(len(_NAMES))]
            kind, arity, spellings = _FAMILIES[name]
            if vector and kind == "r":
                continue
            break
        spelling = spellings[self.rng.integers(len(spellings))]
        deep = self.rng.integers(arity)  # the operand that carries the full depth
        operands = []
        for i in range(arity):
            d = depth - 1 if i == deep else int(self.rng.integers(depth))
            wants_vector = kind != "e" or (vector and i == deep)
            if kind == "e" and i > 0 and i != deep and self.rng.random() < 0.2:
                operands.append(operands[0])  # the same operand twice: x - x, exp(a) * exp(a)
            elif (kind == "e" and arity > 1 and i != deep and not (name == "where" and i == 0)
                    and self.rng.random() < 0.3):
                operands.append(self.const())
            else:
                operands.append(self.expr(d, wants_vector))
        vec = kind in _VECTOR_KINDS or (kind == "e" and any(o.vector for o in operands))
        return _Node(self._spell(spelling, operands), vec, False)

    def _spell(self, spelling: str, operands: list[_Node]) -> str:
        keys = "abc"
        texts = {}
        for key, node in zip(keys, operands):
            text = node.text
            twice = spelling.count("{" + key + "}") + spelling.count("{p" + key + "}") > 1
            if twice and not node.leaf and self.rng.random() < 0.5:
                name = f"t{len(self.lines)}"
                self.lines.append(f"{name} = {text}")
                text = name
            texts[key] = text
            texts["p" + key] = text if _atomic(text) else f"({text})"
        return spelling.format(**texts)


@dataclasses.dataclass(frozen=True)
class Program:
    """One random program: its source (``def f(x0, ...)``), the function it defines, the number and
    length of its vector arguments, and where it came from (``seed``, ``index``)."""

    seed: int
    index: int
    source: str
    nargs: int
    size: int
    fn: Callable[..., Any] = dataclasses.field(repr=False, compare=False)

    @property
    def name(self) -> str:
        return f"seed {self.seed} tree {self.index}"


def make_program(seed: int, index: int) -> Program:
    """The ``index``-th program of ``seed`` (deterministic: the same pair gives the same source)."""
    rng = np.random.default_rng([seed, index, 0x50F7])
    nargs = int(rng.integers(1, 4))
    size = int(rng.choice([4, 8]))
    depth = int(rng.integers(2, 6))
    builder = _Builder(rng, nargs)
    root = builder.expr(depth, vector=bool(rng.random() < 0.5))
    params = ", ".join(f"x{i}" for i in range(nargs))
    body = [*builder.lines, f"return {root.text}"]
    source = f"def f({params}):\n" + "".join(f"    {line}\n" for line in body)
    namespace: dict[str, Any] = {"jax": jax, "jnp": jnp}
    exec(compile(source, f"<soundness {seed}:{index}>", "exec"), namespace)
    return Program(seed, index, source, nargs, size, namespace["f"])


def programs(seed: int, count: int, start: int = 0) -> Iterator[Program]:
    """``count`` programs of ``seed``, indices ``start`` .. ``start + count - 1``."""
    for index in range(start, start + count):
        yield make_program(seed, index)


# ------------------------------------------------------------------------------------- the inputs
def _flush(x: np.ndarray) -> np.ndarray:
    return np.where(np.abs(x) < _TINY, np.float32(0), x).astype(np.float32)


def _one(rng: np.random.Generator, kind: str, n: int) -> np.ndarray:
    sign = rng.choice([-1.0, 1.0], n)
    if kind == "ordinary":
        x = rng.uniform(-3, 3, n)
    elif kind == "positive":
        x = rng.uniform(0.01, 3, n)
    elif kind == "magnitudes":
        x = sign * 10.0 ** rng.uniform(-6, 6, n)
    elif kind == "positive magnitudes":
        x = 10.0 ** rng.uniform(-6, 6, n)
    elif kind == "edges":
        # near the points where forms break: 0 (log1p, expm1, x log x), +-1 (1 - x, log(x)), the
        # float32 overflow of exp (88.72), and large magnitudes (a square or an exp overflows)
        centre = rng.choice([0.0, 1.0, -1.0, 88.7, -88.7, 104.0, -104.0, 30.0, -30.0, 1e4, -1e4], n)
        x = centre + sign * 10.0 ** rng.uniform(-7, -1, n) * np.maximum(1.0, np.abs(centre))
    elif kind == "bits":
        bits = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
        x = bits.view(np.float32)
        x = np.where(np.isfinite(x), x, np.float32(1)).astype(np.float64)
    else:
        raise ValueError(kind)
    return _flush(np.asarray(x, np.float64).astype(np.float32))


#: The kinds of sample, in the order the samples of a program cycle through them after the first.
KINDS = ("ordinary", "positive", "magnitudes", "edges", "positive magnitudes", "bits")


def draw_inputs(program: Program, count: int = SAMPLES) -> list[tuple[np.ndarray, ...]]:
    """``count`` argument tuples for ``program``: sample ``k`` draws every element of every argument
    from one kind of ``KINDS`` (sample 0 ordinary) or, one time in four, each element from a kind of
    its own (a vector that mixes magnitudes, as a logsumexp's dominated rows do)."""
    rng = np.random.default_rng([program.seed, program.index, 0x1A9])
    samples = []
    for k in range(count):
        args = []
        kind = KINDS[k % len(KINDS)]
        mixed = k > 0 and rng.random() < 0.25
        for _ in range(program.nargs):
            if mixed:
                kinds = rng.choice(KINDS, program.size)
                args.append(np.array([_one(rng, str(kd), 1)[0] for kd in kinds], np.float32))
            else:
                args.append(_one(rng, kind, program.size))
        samples.append(tuple(args))
    return samples


# ------------------------------------------------------------------------------- the comparison
def _floats(a: np.ndarray) -> str:
    """``a`` as a Python list of float32 literals that read back exactly (nested for a batch)."""
    if a.ndim == 0:
        return str(np.float32(a))
    return "[" + ", ".join(_floats(row) for row in a) + "]"


@dataclasses.dataclass
class Failure:
    """One element where the rewritten program is worse (module docstring): what, where, the values."""

    program: Program
    what: str  # "value", "gradient wrt x1", "vmap"
    args: tuple[np.ndarray, ...]
    index: tuple[int, ...]
    original: float
    rewritten: float
    exact: float
    bits_original: float
    bits_rewritten: float
    conditioning_bits: float | None
    neighbour_bits: float | None  # the original's worst error at the input's neighbours
    rules: list[str]

    def __str__(self) -> str:
        inputs = "\n".join(f"    x{i} = np.array({_floats(a)}, dtype=np.float32)"
                           for i, a in enumerate(self.args))
        rules = [f"{rule} x{self.rules.count(rule)}" if self.rules.count(rule) > 1 else rule
                 for rule in dict.fromkeys(self.rules)]
        cond = "" if self.conditioning_bits is None else f", conditioning {self.conditioning_bits:.1f} bits"
        if self.neighbour_bits is not None:
            cond += f", original at the neighbours {self.neighbour_bits:.1f} bits"
        return (f"{self.program.name}: {self.what} at element {list(self.index)}\n"
                + "".join(f"    {line}\n" for line in self.program.source.splitlines())
                + f"  input:\n{inputs}\n"
                + f"  original {self.original!r} ({self.bits_original:.1f} bits), rewritten "
                  f"{self.rewritten!r} ({self.bits_rewritten:.1f} bits), exact {self.exact!r}{cond}\n"
                + f"  rules fired: {', '.join(rules) or '(none)'}\n"
                + f"  reproduce: check_program(make_program({self.program.seed}, {self.program.index})) "
                  "(tests/soundness_programs.py)")


@dataclasses.dataclass
class Outcome:
    """What checking one program found."""

    program: Program
    rules: list[str]  # the rules that fired, in program order (jst.explain)
    failures: list[Failure]
    judged: int = 0  # elements judged (values, gradients and vmapped values together)
    skipped: str | None = None  # why the program (or its gradient) was not judged
    excused: int = 0  # elements worse than the original where the conditioning explains it
    excess: float = -np.inf  # the most bits(g) - max(bits(f), FLOOR_BITS) of the other judged elements


def _leaves(x: Any) -> list[np.ndarray]:
    return [np.asarray(v) for v in jax.tree_util.tree_leaves(x)]


class _Judge:
    """Compares the original's and the rewritten program's values with the exact ones, element-wise;
    the conditioning is computed from ``closed`` only where an element is worse."""

    def __init__(self, program: Program, rules: list[str], failures: list[Failure]) -> None:
        self.program = program
        self.rules = rules
        self.failures = failures
        self.judged = 0
        self.excused = 0  # worse elements that the conditioning explains
        self.excess = -np.inf  # the most bits(g) - max(bits(f), A) of any other judged element

    def crashed(self, what: str, args: tuple[np.ndarray, ...], error: Exception) -> None:
        nan = float("nan")
        self.failures.append(Failure(self.program, f"{what}: the rewritten program raised "
                                     f"{type(error).__name__}: {error}", args, (), nan, nan, nan, nan,
                                     nan, None, None, self.rules))

    def compare(self, what: str, args: tuple[np.ndarray, ...], orig: np.ndarray, rew: np.ndarray,
                exact: np.ndarray, certain: np.ndarray,
                excuses: Sequence[Callable[[], np.ndarray | None]] = ()) -> None:
        """Judges one output; ``excuses`` (the conditioning, the original's error at the input's
        neighbours, in bits per element) are computed only where an element is worse."""
        orig, rew = np.broadcast_to(orig, exact.shape), np.broadcast_to(rew, exact.shape)
        ok = np.broadcast_to(np.asarray(certain, bool), exact.shape) & np.isfinite(exact)
        bits_f, bits_g = _bits(orig, exact), _bits(rew, exact)
        ok = ok & ~(bits_f >= HOPELESS_BITS)  # the original has no correct bit to lose there
        self.judged += int(ok.sum())
        lost = ok & np.isfinite(orig) & ~np.isfinite(rew)
        worse = ok & np.isfinite(rew) & (bits_g > np.maximum(bits_f, FLOOR_BITS) + MARGIN_BITS)
        explained: list[np.ndarray | None] = []
        for excuse in excuses:
            bits = excuse() if worse.any() else None
            explained.append(bits)
            if bits is not None:
                excused = worse & (bits_g <= np.maximum(np.broadcast_to(bits, exact.shape), FLOOR_BITS)
                                   + MARGIN_BITS)
                self.excused += int(excused.sum())
                worse &= ~excused
                ok = ok & ~excused  # the excess below measures the elements not excused
        excess = np.where(ok & np.isfinite(rew), bits_g - np.maximum(bits_f, FLOOR_BITS), -np.inf)
        self.excess = max(self.excess, float(np.max(excess, initial=-np.inf)))
        for where in np.argwhere(np.atleast_1d(lost | worse)):
            idx = tuple(int(i) for i in where)[:exact.ndim]
            cond, near = (None if b is None else float(np.broadcast_to(b, exact.shape)[idx])
                          for b in [*explained, None, None][:2])
            self.failures.append(Failure(
                self.program, what, args, idx, float(orig[idx]), float(rew[idx]),
                float(exact[idx]), float(bits_f[idx]), float(bits_g[idx]), cond, near, self.rules))


def _bits(approx: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """``error_bits``, with XLA's flush of subnormal results forgiven as ``jst.check`` forgives it: a
    zero or subnormal value where the exact one is subnormal scores 0."""
    with np.errstate(all="ignore"):
        bits = np.asarray(jst.oracles.error_bits(approx, exact), np.float64)
        return np.where((np.abs(exact) < _TINY) & (np.abs(approx) < _TINY), 0.0, bits)


def _neighbour(a: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``a`` with every element moved one float up or down at random (none past the largest)."""
    away = np.where(rng.random(a.shape) < 0.5, -np.inf, np.inf).astype(np.float32)
    moved = np.nextafter(a, away)
    return _flush(np.where(np.isfinite(moved), moved, a))


#: Neighbours of an input at which the original's error is measured (the second excuse).
NEIGHBOURS = 4


class _Excuses:
    """What may explain a worse element at one input of one variant (the value or the gradient),
    computed on first use: the problem's conditioning there, and the original's own error at the
    input's neighbours (module docstring), each in bits per element of each output."""

    def __init__(self, closed: Any, args: tuple[np.ndarray, ...], exact: list[np.ndarray],
                 original_at: Callable[[tuple[np.ndarray, ...]], list[np.ndarray]], seed: Any) -> None:
        self.closed, self.args, self.exact = closed, args, exact
        self.original_at, self.seed = original_at, seed
        self._conditioning: dict[int, np.ndarray | None] = {}
        self._neighbours: list[np.ndarray] | None = None

    def conditioning(self, out: int) -> np.ndarray | None:
        if out not in self._conditioning:
            try:
                ulps = conditioning_ulps(self.closed, list(self.args), self.exact, [out],
                                         [self.exact[out].dtype])[0]
                # unknown (NaN) excuses nothing; inf (a moved input makes it overflow) does
                self._conditioning[out] = np.log2(1.0 + np.nan_to_num(ulps, nan=0.0))
            except Exception:  # unknown conditioning: nothing is excused
                self._conditioning[out] = None
        return self._conditioning[out]

    def neighbours(self, out: int) -> np.ndarray | None:
        if self._neighbours is None:
            rng = np.random.default_rng(self.seed)
            worst = [np.zeros(e.shape) for e in self.exact]
            for _ in range(NEIGHBOURS):
                moved = tuple(_neighbour(a, rng) for a in self.args)
                result = jst.oracles.evaluate(self.closed, *moved)
                for i, (o, e, c) in enumerate(zip(self.original_at(moved), _leaves(result.values),
                                                  _leaves(result.certain))):
                    bits = np.where(np.broadcast_to(c, e.shape) & np.isfinite(e),
                                    _bits(np.broadcast_to(o, e.shape), e), 0.0)
                    worst[i] = np.maximum(worst[i], bits)
            self._neighbours = worst
        return self._neighbours[out]

    def of(self, out: int) -> list[Callable[[], np.ndarray | None]]:
        return [lambda: self.conditioning(out), lambda: self.neighbours(out)]


def _rounding_floor(f: Callable[..., Any], args: tuple[np.ndarray, ...], out: int, rew: np.ndarray,
                    exact: np.ndarray) -> np.ndarray:
    """The third excuse (module docstring): ``bits(g)`` itself where the gradient wrt argument
    ``out`` is within ``2^B * u * sum_i |df_i/dx_j|`` of the exact one (so the comparison excuses it),
    0 elsewhere (excuses nothing)."""
    jacobian = np.asarray(jax.jit(jax.jacrev(f, argnums=out))(*args), np.float64)
    scale = np.abs(jacobian).reshape(-1, *np.shape(args[out])).sum(axis=0)
    floor = 2.0 ** MARGIN_BITS * 2.0 ** -24 * scale
    with np.errstate(all="ignore"):
        within = np.abs(np.asarray(rew, np.float64) - exact) <= floor
    return np.where(within, _bits(rew, exact), 0.0)


def check_program(program: Program, samples: Sequence[tuple[np.ndarray, ...]] | None = None,
                  grad: bool = True, vmap: bool = True, exclude: Sequence[str] = ()) -> Outcome:
    """Runs ``program`` and ``jst.stabilize`` of it on ``samples`` (default :func:`draw_inputs`) and
    judges values, gradients and the vmapped values against the oracle (module docstring).
    ``exclude``: rules left out of the catalogue (a known bug, to see what else fails)."""
    f = program.fn
    samples = draw_inputs(program) if samples is None else samples
    failures: list[Failure] = []
    rules = [f"{a.rule} at {a.location}" for a in jst.explain(f, *samples[0], exclude=exclude)]
    judge = _Judge(program, rules, failures)
    outcome = Outcome(program, rules, failures)
    g = jst.stabilize(f, exclude=exclude)
    argnums = tuple(range(program.nargs))

    def total(fn: Callable[..., Any]) -> Callable[..., Any]:
        return lambda *a: jnp.sum(fn(*a))

    grads: tuple[Any, ...] = (jax.grad(total(f), argnums), jax.grad(total(g), argnums)) if grad else ()
    batch = tuple(np.stack([s[i] for s in samples[:VMAP_BATCH]]) for i in range(program.nargs))
    vmaps = (jax.vmap(f), jax.vmap(g)) if vmap else ()

    # One jit holds f, g, both gradients and both vmapped (on the batch): XLA's compiles are most of the
    # fuzz's time, and one compile of six programs costs about as much as two of one.
    @jax.jit
    def run(args: tuple[Any, ...], batch: tuple[Any, ...]) -> tuple[Any, ...]:
        return (f(*args), g(*args), *(d(*args) for d in grads), *(v(*batch) for v in vmaps))

    closed_of = {"value": jax.make_jaxpr(f)(*samples[0])}
    if grad:
        closed_of["gradient"] = jax.make_jaxpr(grads[0])(*samples[0])
    exact_values: list[np.ndarray] = []
    value_excuses: list[_Excuses] = []
    vmapped = None
    for k, args in enumerate(samples):
        try:
            ran = run(args, batch)
        except Exception as e:  # the rewrite itself broke the program: a failure of its own
            judge.crashed("value, gradient or vmap", args, e)
            break
        runs = {"value": ran[0:2], "gradient": ran[2:4]}
        vmapped = ran[-2:] if vmap else None
        for what, closed in list(closed_of.items()):
            try:
                result = jst.oracles.evaluate(closed, *args)
            except jst.oracles.UnsupportedPrimitive as e:  # raised before evaluating: skip, and say so
                outcome.skipped = f"{what}: {str(e).splitlines()[0]}"
                del closed_of[what]
                continue
            exact, certain = _leaves(result.values), _leaves(result.certain)
            orig, rew = (_leaves(r) for r in runs[what])
            slot = 0 if what == "value" else 2

            def original_at(moved: tuple[np.ndarray, ...], slot: int = slot) -> list[np.ndarray]:
                return _leaves(run(moved, batch)[slot])

            excuses = _Excuses(closed, args, exact, original_at, [program.seed, program.index, k, slot])
            for out, (o, r, e, c) in enumerate(zip(orig, rew, exact, certain)):
                label = what if what == "value" else f"gradient wrt x{out}"
                floor = [] if what == "value" else [
                    lambda out=out, r=r, e=e, args=args: _rounding_floor(f, args, out, r, e)]
                judge.compare(label, args, o, r, e, c, [*excuses.of(out), *floor])
            if what == "value":
                exact_values.append(np.where(certain[0], exact[0], np.nan))
                value_excuses.append(excuses)
    if vmap and vmapped is not None and len(exact_values) == len(samples):
        exact = np.stack(exact_values[:VMAP_BATCH])

        def stacked(which: int) -> Callable[[], np.ndarray | None]:
            def compute() -> np.ndarray | None:
                each = [x.of(0)[which]() for x in value_excuses[:VMAP_BATCH]]
                return None if any(b is None for b in each) else np.stack(each)
            return compute

        orig, rew = (np.asarray(v) for v in vmapped)
        judge.compare("vmap", batch, orig, rew, exact, ~np.isnan(exact), [stacked(0), stacked(1)])
    outcome.judged, outcome.excused, outcome.excess = judge.judged, judge.excused, judge.excess
    return outcome


def describe(outcome: Outcome) -> str:
    """A failing program as a failing example: the worst element of each kind that failed (value,
    each gradient, vmap), with the program, its input, the three values and the rules that fired."""
    worst: dict[str, Failure] = {}
    counts: dict[str, int] = {}
    for failure in outcome.failures:
        kind = failure.what.split(":")[0]
        counts[kind] = counts.get(kind, 0) + 1
        best = worst.get(kind)
        if best is None or np.nan_to_num(failure.bits_rewritten - failure.bits_original, nan=99.0) > \
                np.nan_to_num(best.bits_rewritten - best.bits_original, nan=99.0):
            worst[kind] = failure
    return "\n".join(f"{worst[kind]}\n  ({counts[kind]} element(s) of this kind failed)" for kind in worst)
