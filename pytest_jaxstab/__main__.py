"""`python -m pytest_jaxstab merge REPORT... [--report=...] [--save-baseline=PATH] [--compare=PATH]`.

Merges the JSON reports of a suite's shards (CI jobs, pytest-split groups) into the reports and the
baseline one serial run of the whole suite writes. Nothing is written when a shard is bad.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command line; returns the exit status (0 ok, 1 a case regressed, 2 bad input)."""
    parser = argparse.ArgumentParser(prog="python -m pytest_jaxstab")
    sub = parser.add_subparsers(dest="command", required=True)
    merge = sub.add_parser("merge", help="merge shard JSON reports into one run's reports and baseline")
    merge.add_argument("reports", nargs="+", metavar="REPORT", help="the JSON report of each shard")
    merge.add_argument("--report", action="append", default=None, metavar="KIND[:PATH]",
                       help="term (default), json:PATH or html:PATH; repeatable")
    merge.add_argument("--save-baseline", default=None, metavar="PATH",
                       help="write the baseline (entries of cases no shard ran are kept)")
    merge.add_argument("--compare", default=None, metavar="PATH",
                       help="compare with this baseline; exit 1 when a case regressed")
    merge.add_argument("--compare-fail", default=None, metavar="EXPR",
                       help="regression margins, as --jaxstab-compare-fail")
    args = parser.parse_args(argv)
    from ._errors import JaxstabError
    from ._report._merge import run_merge

    try:
        return run_merge(args.reports, reports=args.report or ["term"],
                         save_baseline=None if args.save_baseline is None else Path(args.save_baseline),
                         compare=None if args.compare is None else Path(args.compare),
                         compare_fail=args.compare_fail, out=sys.stdout)
    except JaxstabError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
