"""The JAX releases the suite has passed on: the one list pyproject's range, the README and CI follow.

A JAX patch release may change how a library function lowers (0.12.1 moved ``ndtr``/``log_ndtr`` into
``custom_jvp`` calls with new bodies, wrapped ``logsumexp``/``softmax``/``soft_sign`` in custom rules and
added primitives): the catalogue and the oracle recognise library code, so a release nobody ran the suite
on may silently change what they see. ``pyproject.toml`` admits only the releases listed here (its upper
bound is the newest of them, the untested ones between are excluded with ``!=``), ``tests/test_compat.py``
fails with the installed version named when it is not listed, and ``.ci/run`` prints the versions it ran
on. How a new release is taken in: README, "Supported versions".
"""

from __future__ import annotations

import jax
import jaxlib

__all__ = ["RELEASES_BETWEEN", "TESTED_JAX", "installed_jax", "untested_jax"]

#: Each release the whole suite (both tiers) passed on, with the date of that run: ``(version, date)``.
#: The first is the oldest supported (``make test-compat``), the last the newest (``make test``).
TESTED_JAX: tuple[tuple[str, str], ...] = (
    ("0.10.2", "2026-12-06"),
    ("0.12.0.1", "2026-12-06"),
    ("0.12.1", "2026-12-06"),
)

#: Every JAX release the registry served between the oldest and the newest tested one on the date of the
#: newest entry above (``pip index versions jax``); those not in TESTED_JAX are excluded by pyproject.
RELEASES_BETWEEN: tuple[str, ...] = ("0.10.2", "0.11.0", "0.11.1", "0.11.2", "0.12.0", "0.12.0.1", "0.12.1")


def installed_jax() -> tuple[str, str]:
    """``(jax.__version__, jaxlib.__version__)`` of the running interpreter."""
    return jax.__version__, jaxlib.__version__


def untested_jax() -> str | None:
    """A message naming the installed JAX when it is not a tested release (or jaxlib differs from
    jax), else None."""
    jv, lv = installed_jax()
    tested = [v for v, _ in TESTED_JAX]
    if jv not in tested:
        return (f"jax {jv} is installed, but the suite has passed only on {', '.join(tested)}: run the "
                f"suite on it (make check-newest-jax) and add it to _compat/_versions.py:TESTED_JAX and "
                f"pyproject.toml's range, or install a tested release")
    if lv != jv:
        return f"jaxlib {lv} is installed beside jax {jv}: the tested releases pair equal versions"
    return None
