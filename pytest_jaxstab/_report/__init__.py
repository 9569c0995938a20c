"""Stage: reports of a run's cases.

Takes :class:`~pytest_jaxstab._results.CaseResult` lists; hands on the terminal table (``_term``), the
JSON report, schema version 1 (``_json``), and the self-contained HTML report with error-versus-
magnitude plots (``_html``, matplotlib optional). Pure formatting: knows nothing of pytest; the gate's
decisions, when the run compared with a baseline, come in as plain strings per case and are shown beside
the stability verdict, never merged into it.
"""

from ._html import write_html as write_html
from ._json import GATE_DECISIONS as GATE_DECISIONS
from ._json import REPORT_VERSION as REPORT_VERSION
from ._json import build_report as build_report
from ._json import validate_report as validate_report
from ._json import write_json as write_json
from ._term import format_table as format_table
