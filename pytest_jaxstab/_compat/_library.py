"""JAX's library functions recognised in a jaxpr by the function a call wraps, on every supported JAX.

A JAX release may move a library function into a call of its own, or out of one: jax 0.12.1 wraps
``jax.nn.logsumexp`` in the ``custom_jvp`` ``_logsumexp_impl`` and ``jax.nn.softmax`` in ``_softmax``
(0.10 and 0.12.0 inline both, unless ``jax_softmax_custom_jvp`` is set, which gives the same
``_softmax`` call), and ``jax.nn.soft_sign``'s body in ``_soft_sign_and_scale``, a ``custom_jvp`` with
two results whose derivative is exact. A rule that reads such a function asks :func:`library_function`
what a call computes: the answer comes from the wrapped function's name and, since names such as
``softmax`` are also users' names, from the JAX source file defining it, never from one release's
equations. A call this table does not know is no library function: a rule refuses it.

``jax.scipy.special.ndtr`` and ``log_ndtr`` moved in 0.12.1 (from an inlined formula and a
``custom_jvp`` of ``log_ndtr`` in ``scipy/special.py`` to ``jit`` calls around the ``custom_jvp``
``_ndtr`` / ``_log_ndtr`` in ``lax/erf.py``, and became accurate in both tails): the oracle judges them
by their mathematics wherever they are (``oracles/library/_routines.py`` reads :func:`library_places`),
and the catalogue rewrites the formulas written around them. A function JAX inlines
(:data:`INLINED_CALLS`) is recognised by the frames its equations were traced under
(:func:`inlined_library_function`); :data:`ACCURATE` says which implementations a rule leaves alone.

:data:`LIBRARY_CALLS` and :data:`INLINED_CALLS` are the one place that holds these names; a release
that renames or moves one changes a line here.
"""

from __future__ import annotations

import functools
import os
from typing import Any

import jax

from .._primitives import CUSTOM_DERIVATIVES
from ._jaxpr import as_closed, custom_call_parts, primitive_name

__all__ = ["ACCURATE", "INLINED_CALLS", "LIBRARY_CALLS", "accurate_library_call", "inlined_library_function",
           "library_function", "library_places", "traced_in_accurate_call"]

_JAX_DIR = os.path.dirname(os.path.abspath(jax.__file__))

#: ``(wrapped function's name, its file under the jax package)`` -> the function the call computes, for
#: the calls whose derivative rule (a ``custom_jvp``'s) or body (a ``jit``'s) is that function's, exact.
#: Each row says which releases make the call.
LIBRARY_CALLS: dict[tuple[str, str], str] = {
    # jax 0.12.1: a custom_jvp whose rule is the softmax (0.10, 0.12.0: inlined equations)
    ("_logsumexp_impl", "_src/ops/special.py"): "logsumexp",
    # jax 0.12.1 (default) and 0.10 to 0.12.0 with jax_softmax_custom_jvp: y·(dx - sum(y·dx))
    ("_softmax", "_src/ops/special.py"): "softmax",
    ("_softmax", "_src/nn/functions.py"): "softmax",
    # a jit on every supported release
    ("log_softmax", "_src/nn/functions.py"): "log_softmax",
    ("soft_sign", "_src/nn/functions.py"): "soft_sign",
    # jax 0.12.1: (x / (|x| + 1), 1 / (|x| + 1)) with the derivative 1/(|x| + 1)², no cancellation
    ("_soft_sign_and_scale", "_src/nn/functions.py"): "soft_sign_and_scale",
    # jax.scipy.special.ndtr / log_ndtr (norm.cdf, sf, logcdf, logsf). jax 0.12.1: a jit of `ndtr` /
    # `log_ndtr` around the custom_jvp `_ndtr` / `_log_ndtr` (`_log_ndtr` calls `_ndtr` itself)
    ("ndtr", "_src/lax/erf.py"): "ndtr",
    ("_ndtr", "_src/lax/erf.py"): "ndtr",
    ("log_ndtr", "_src/lax/erf.py"): "log_ndtr",
    ("_log_ndtr", "_src/lax/erf.py"): "log_ndtr",
    # jax 0.10 to 0.12.0: a custom_jvp of `log_ndtr` (its value and derivative are not exact: ACCURATE)
    ("log_ndtr", "_src/scipy/special.py"): "log_ndtr",
    # jax.scipy.special.i0 / i1 (jax 0.12.1): custom_jvps of exp(|x|)·i0e(x) / i1e(x), derivatives i1
    # and the recurrence's series (the catalogue's log_bessel reads them under a log)
    ("i0_impl", "_src/numpy/lax_numpy.py"): "i0",
    ("_i1", "_src/numpy/lax_numpy.py"): "i1",
    # jax.scipy.special.betaln (jax 0.12.1): a jit of `_betaln`, log|B(a, b)| (lgamma_sum reads it)
    ("_betaln", "_src/scipy/betaln.py"): "betaln",
}

#: Library functions JAX inlines (no call: their equations sit in the caller's jaxpr), recognised by
#: the frame of the function that traced them: ``(function's name, its file under the jax package) ->
#: the function``. jax 0.10 to 0.12.0 write ``ndtr`` as ``erfc(-x·(1/√2 rounded))/2`` (erf, erfc and
#: select equations); on 0.12.1 that function only calls the jit above.
INLINED_CALLS: dict[tuple[str, str], str] = {
    ("ndtr", "_src/scipy/special.py"): "ndtr",
}

#: The places above whose implementation is accurate everywhere, value and derivative (measured against
#: mpmath, float32 and float64): a stable form is no better, so the catalogue leaves a bare call alone.
#: jax 0.12.1's ndtr: within 3.3 ulps, its derivative 2.3, over [-13, 9] / [-37.5, 9]; its log_ndtr
#: within 3.2 ulps, its derivative 2.9, to -1e5. The older ones are not: ``ndtr``'s rounded 1/√2 times
#: the tail's condition number x² (1527 ulps at -34 in float64), ``log_ndtr`` the log of ``1 - Q``
#: rounded up to 5 / 8 (2^20 ulps at 5 in float32) and a truncated series below -20 (17 bits at -20).
ACCURATE: frozenset[tuple[str, str]] = frozenset({
    ("ndtr", "_src/lax/erf.py"), ("_ndtr", "_src/lax/erf.py"),
    ("log_ndtr", "_src/lax/erf.py"), ("_log_ndtr", "_src/lax/erf.py"),
})


def library_function(call: Any) -> str | None:
    """The JAX library function a call computes (a value of :data:`LIBRARY_CALLS`), or None.

    ``call``: a ``jit``/``custom_jvp_call``/``custom_vjp_call`` equation, or the body such a call
    carries (its ``jaxpr``/``call_jaxpr`` parameter, as a pattern's ``param(read=...)`` receives it).
    None for any other equation, a function not in the table, one of the table's names defined
    outside JAX (a user's ``softmax``), and a transformed copy of a call (a linearized or transposed
    ``jit`` keeps the function's source but computes something else).

    Example::

        eqn = jax.make_jaxpr(jax.nn.log_softmax)(jnp.ones(3)).eqns[0]
        library_function(eqn)  # "log_softmax"
    """
    place = _place(call)
    return None if place is None else LIBRARY_CALLS.get(place)


def _place(call: Any) -> tuple[str, str] | None:
    """``(wrapped function's name, its file under the jax package)`` of a call or body (None: no
    source recorded, a transformed copy, or a function outside JAX)."""
    body = _body(call)
    info = getattr(getattr(body, "jaxpr", body), "debug_info", None)
    src = getattr(info, "func_src_info", None)
    if not isinstance(src, str) or " at " not in src or getattr(info, "arg_names", None) is None:
        return None
    fname, _, where = src.rpartition(" at ")
    rel = _jax_file(where.rpartition(":")[0])
    return None if rel is None else (fname.split(" ")[0], rel)


@functools.lru_cache(maxsize=512)
def _jax_file(file: str) -> str | None:
    """``file``'s path under the jax package (``_src/lax/erf.py``), or None outside it."""
    path = os.path.abspath(file)
    if not path.startswith(_JAX_DIR + os.sep):
        return None
    return os.path.relpath(path, _JAX_DIR).replace(os.sep, "/")


def _body(call: Any) -> Any:
    """The body of a call equation; anything else (a body already) as it is."""
    if not hasattr(call, "primitive"):
        return call
    name = primitive_name(call)
    if name in CUSTOM_DERIVATIVES:
        return custom_call_parts(call)[0]
    if name == "jit" and "jaxpr" in call.params:
        return as_closed(call.params["jaxpr"])
    return None


def accurate_library_call(call: Any) -> bool:
    """Whether ``call`` (an equation or its body) calls one of the :data:`ACCURATE` places."""
    return _place(call) in ACCURATE


def library_places(function: str) -> tuple[tuple[str, str], ...]:
    """The calls of every supported release that compute ``function`` (``"log_ndtr"``): ``(file under
    the jax package, wrapped function's name)`` pairs, for tables keyed by file and name."""
    return tuple((file, name) for (name, file), f in LIBRARY_CALLS.items() if f == function)


def _jax_frames(eqn: Any) -> list[tuple[str, str | None, Any]]:
    """``(function, file under jax or None, frame)`` of the frames ``eqn`` was traced under, innermost
    first."""
    tb = eqn.source_info.traceback
    return [(f.function_name, _jax_file(f.file_name), f) for f in ([] if tb is None else tb.frames)]


def inlined_library_function(eqn: Any) -> tuple[str, tuple[str, str, int]] | None:
    """``(function, caller)`` where ``eqn`` is an equation of an inlined library function
    (:data:`INLINED_CALLS`): the function, and ``(name, file, line)`` of the frame that called it (one
    call of the function is one region of equations sharing that frame); the innermost, or None."""
    frames = _jax_frames(eqn)
    for k, (name, rel, _) in enumerate(frames[:-1]):
        function = None if rel is None else INLINED_CALLS.get((name, rel))
        if function is not None:
            up = frames[k + 1][2]
            return function, (up.function_name, up.file_name.replace("\\", "/"), int(up.line_num))
    return None


def traced_in_accurate_call(eqn: Any) -> bool:
    """Whether ``eqn`` belongs to the body of an :data:`ACCURATE` library function (traced under it):
    JAX's own formula, which a rule leaves alone."""
    return any(rel is not None and (name, rel) in ACCURATE for name, rel, _ in _jax_frames(eqn))
