"""A check of a function of complex arrays, as a check of a function of their real and imaginary parts.

`jst.check(fn, dtype="complex64", ...)` judges `fn` on inputs whose two parts are drawn jointly by the
complex strategies (`strategies/_complex.py`: polar, near-real, near-imaginary, diagonal, ...). Inside
the check each complex argument `z` is two real arguments `z.re`, `z.im` of the part dtype (float32 for
complex64, float64 for complex128) and `fn` is called on `lax.complex(z.re, z.im)`: shrinking moves one
part at a time, witnesses and baselines store the parts' exact bits, and the conditioning of the
stability lens moves each part by one ulp on its own (componentwise, as for real inputs). Outputs stay
as `fn` returns them: a complex output is scored by the normwise metric (`oracles.error_bits`,
docs/architecture.md, "The error metric"), a real one (`abs`, `angle`) by the real metric.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .._dtypes import component_dtype
from ..strategies._domain import per_argument_domains

__all__ = ["ComplexSplit", "split_complex"]


@dataclasses.dataclass(frozen=True)
class ComplexSplit:
    """The real case a complex case becomes: part dtype, two shapes, names and domains per argument."""

    part: np.dtype[Any]
    shapes: list[tuple[int, ...]]
    names: list[str]
    domains: list[Any]

    def wrap(self, call: Callable[..., Any]) -> Callable[..., Any]:
        """`call` (a function of complex arrays) as a function of their parts, in argument order."""
        import jax

        def on_parts(*parts: Any) -> Any:
            zs = [jax.lax.complex(parts[i], parts[i + 1]) for i in range(0, len(parts), 2)]
            return call(*zs)

        on_parts.__name__ = getattr(call, "__name__", "fn")
        on_parts.__qualname__ = getattr(call, "__qualname__", on_parts.__name__)
        return on_parts


def split_complex(dtype: np.dtype[Any], shapes: Sequence[tuple[int, ...]], names: Sequence[str],
                  domain: Any) -> ComplexSplit:
    """The real case of a complex one: each argument's domain applies to both of its parts."""
    domains = per_argument_domains(domain, len(shapes))
    return ComplexSplit(
        part=component_dtype(dtype),
        shapes=[s for s in shapes for _ in range(2)],
        names=[f"{n}.{p}" for n in names for p in ("re", "im")],
        domains=[d for d in domains for _ in range(2)],
    )
