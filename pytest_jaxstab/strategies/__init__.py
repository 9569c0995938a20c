"""Hypothesis strategies over extreme magnitudes: the fuzzer's eyes.

`floats` draws scalars of float16, bfloat16, float32 or float64 uniformly over the binades inside a
domain (as Herbie samples bit patterns), and with extra weight the values where numerics break; `arrays`
adds the shapes users' data takes (clusters around an offset, one dominant term, near-ties, cancelling
pairs, constants); `arguments` draws the arguments of one function together, related as x ~= y,
x >> y, x ~= -y, the same array twice or broadcast partners. All shrink towards small, simple
magnitudes and towards the float where a failure starts. `Domain` states an input domain;
`target_error` steers Hypothesis towards the worst error. `dtype_info` gives the facts about each
dtype the rest of the package uses.
"""

from .._dtypes import FLOAT_DTYPE_NAMES as FLOAT_DTYPE_NAMES
from .._dtypes import DtypeInfo as DtypeInfo
from .._dtypes import dtype_info as dtype_info
from ._arrays import arguments as arguments
from ._arrays import arrays as arrays
from ._domain import Domain as Domain
from ._floats import floats as floats
from ._targeting import target_error as target_error

__all__ = ["FLOAT_DTYPE_NAMES", "Domain", "DtypeInfo", "arguments", "arrays", "dtype_info", "floats",
           "target_error"]


def __dir__() -> list[str]:
    return sorted(__all__)
