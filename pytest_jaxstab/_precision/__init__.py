"""Mixed precision: which lines of a bfloat16/float16 program must stay float32 (``jst.tune_precision``).

``_plan`` (the entry point and :class:`PrecisionPlan`), ``_search`` (samples, figures, the greedy and the
pruning), ``_upcast`` (the transformation computing chosen lines in the high precision).
"""

from ._plan import PrecisionPlan as PrecisionPlan
from ._plan import tune_precision as tune_precision

__all__ = ["PrecisionPlan", "tune_precision"]
