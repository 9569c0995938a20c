"""Stage: the verdict (``jst.check``), without pytest.

Takes a user function, its input shapes, dtype and domain; traces it once (``_trace``), rewrites it,
draws inputs (``_explore``: Hypothesis examples and their siblings), runs both variants and the oracle
on each (``_evaluate``), shrinks the simplest failing input (``_shrink``), replays stored failures first
(``_replay``) and writes the failure message (``_message``). Hands on a
:class:`~pytest_jaxstab._results.CaseResult`. Named ``_check`` so the package cannot shadow the
function ``jst.check``.
"""

from ._case import check as check
from ._case import check_case as check_case
from ._evaluate import StageTimes as StageTimes
