"""What a check hands on: a case's result (``_case.CaseResult``), the records it is made of
(``_records``) and its precision plans (``_plans``). Plain data, JSON round-trippable, so results travel
from pytest-xdist workers to the controller and into baselines unchanged."""

from ._case import CaseResult as CaseResult
from ._plans import GradErrorFigures as GradErrorFigures
from ._plans import GradientPlanRecord as GradientPlanRecord
from ._plans import KeptLine as KeptLine
from ._plans import PlanFigures as PlanFigures
from ._plans import PrecisionRecord as PrecisionRecord
from ._plans import ScaleBound as ScaleBound
from ._plans import gradient_status as gradient_status
from ._plans import loss_scale_text as loss_scale_text
from ._records import LocalErrorRecord as LocalErrorRecord
from ._records import NanOriginRecord as NanOriginRecord
from ._records import Point as Point
from ._records import RewriteRecord as RewriteRecord
from ._records import RewriteRegression as RewriteRegression
from ._records import TimingRecord as TimingRecord
from ._records import VariantStats as VariantStats
from ._records import Verdict as Verdict
from ._records import Witness as Witness
from ._records import decode_array as decode_array
from ._records import encode_array as encode_array
