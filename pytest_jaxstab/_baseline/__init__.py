"""Stage: the baseline gate.

Takes the run's :class:`~pytest_jaxstab._results.CaseResult` list and a committed baseline file; hands
on, per case, the gate's decision (known, regressed, new, improved, unchanged) and the run's exit
status. Two modules: ``_store`` reads and writes the file (validated on load, written atomically, never
losing an entry of a case that did not run), ``_gate`` compares under ``--jaxstab-compare-fail``
margins. Knows nothing of pytest.
"""

from ._gate import DEFAULT_MARGINS as DEFAULT_MARGINS
from ._gate import PRUNE_ADVICE as PRUNE_ADVICE
from ._gate import CaseComparison as CaseComparison
from ._gate import Comparison as Comparison
from ._gate import RegressionMargin as RegressionMargin
from ._gate import compare as compare
from ._gate import format_baseline_summary as format_baseline_summary
from ._gate import parse_compare_fail as parse_compare_fail
from ._plans import PlanEntry as PlanEntry
from ._plans import compare_plans as compare_plans
from ._store import BASELINE_VERSION as BASELINE_VERSION
from ._store import DEFAULT_BASELINE_PATH as DEFAULT_BASELINE_PATH
from ._store import Baseline as Baseline
from ._store import BaselineEntry as BaselineEntry
from ._store import load_baseline as load_baseline
from ._store import owner_test as owner_test
from ._store import save_baseline as save_baseline
from ._store import stale_nodeids as stale_nodeids
