"""Mixed precision: which lines of a bfloat16/float16 program must stay float32 (``jst.tune_precision``).

``_plan`` (the entry point and :class:`PrecisionPlan`), ``_search`` (samples, figures, the greedy and the
pruning), ``_upcast`` (the transformation computing chosen lines in the high precision), ``_policy`` (the
per-layer view of a model's plan, ``jst.precision_policy``).
"""

from ._plan import PrecisionPlan as PrecisionPlan
from ._plan import tune_precision as tune_precision
from ._policy import KeptOperation as KeptOperation
from ._policy import LayerPolicy as LayerPolicy
from ._policy import PrecisionPolicy as PrecisionPolicy
from ._policy import precision_policy as precision_policy

__all__ = ["KeptOperation", "LayerPolicy", "PrecisionPlan", "PrecisionPolicy", "precision_policy",
           "tune_precision"]
