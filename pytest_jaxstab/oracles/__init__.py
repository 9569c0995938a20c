"""The exact oracle: what a JAX program computes over the reals, rounded correctly to its dtype.

``evaluate`` interprets a function's jaxpr over mpmath numbers (DESIGN.md section 4) and returns the
exact results correctly rounded to a float dtype; ``error_bits`` measures a float result against them
in bits (section 3). Nothing here knows about pytest.

Example:
  >>> import numpy as np
  >>> from pytest_jaxstab import oracles
  >>> x = np.float32(1e8)
  >>> exact = oracles.evaluate(lambda x: (x + 1) - x, x).values  # 1.0: float32 itself gives 0.0
  >>> round(float(oracles.error_bits(np.float32(0.0), exact)), 2)  # all the floats between 0 and 1
  29.99
"""

from ._common import OracleError as OracleError
from ._common import UnsupportedPrimitive as UnsupportedPrimitive
from ._evaluate import DEFAULT_MAX_PRECISION as DEFAULT_MAX_PRECISION
from ._evaluate import OracleResult as OracleResult
from ._evaluate import evaluate as evaluate
from ._interpreter import MAX_WHILE_ITERATIONS as MAX_WHILE_ITERATIONS
from ._interpreter import SUPPORTED_PRIMITIVES as SUPPORTED_PRIMITIVES
from ._metrics import error_bits as error_bits
from ._metrics import ordinals as ordinals
from ._metrics import summarize as summarize
from ._rounding import round_to_dtype as round_to_dtype
from ._rounding import to_mpf_array as to_mpf_array

__all__ = [
    "DEFAULT_MAX_PRECISION",
    "MAX_WHILE_ITERATIONS",
    "SUPPORTED_PRIMITIVES",
    "OracleError",
    "OracleResult",
    "UnsupportedPrimitive",
    "error_bits",
    "evaluate",
    "ordinals",
    "round_to_dtype",
    "summarize",
    "to_mpf_array",
]
