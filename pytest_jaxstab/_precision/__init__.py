"""Mixed precision: which lines of a bfloat16/float16 program must stay float32 (``jst.tune_precision``).

``_plan`` (the entry point and :class:`PrecisionPlan`), ``_search`` (samples, figures, the greedy and the
pruning), ``_policy`` (the per-layer view of a model's plan, ``jst.precision_policy``). The gradient of a
loss (``precision_policy(..., grad=True)``, issue 49): ``_grad_program`` (the backward program, its exact
value, norm-wise figures), ``_loss_scale`` (the static loss scale), ``_grad_search`` (which lines),
``_grad_plan`` (:class:`GradientPlan`). The transformation computing chosen lines in the high precision
is ``_check/_upcast`` (loops: ``_check/_upcast_loops``).
"""

from ._grad_plan import GradientPlan as GradientPlan
from ._grad_program import GradFigures as GradFigures
from ._plan import PrecisionPlan as PrecisionPlan
from ._plan import tune_precision as tune_precision
from ._policy import KeptOperation as KeptOperation
from ._policy import LayerPolicy as LayerPolicy
from ._policy import PrecisionPolicy as PrecisionPolicy
from ._policy import precision_policy as precision_policy

__all__ = ["GradFigures", "GradientPlan", "KeptOperation", "LayerPolicy", "PrecisionPlan", "PrecisionPolicy",
           "precision_policy", "tune_precision"]
