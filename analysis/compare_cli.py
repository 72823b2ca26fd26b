"""The ``brokerbench compare RUN_A RUN_B`` sub-command (baseline vs contender)."""

from __future__ import annotations

import argparse
from pathlib import Path


def cmd_compare(args: argparse.Namespace) -> int:
    from analysis.compare import compare_runs, text_report, write_csv

    comparison = compare_runs(args.baseline, args.contender)
    print(text_report(comparison))
    if args.csv is not None:
        write_csv(comparison, args.csv)
        print(f"\ncomparison: {args.csv}")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``compare`` to the ``brokerbench`` command line."""
    compare = subparsers.add_parser(
        "compare",
        help="compare two analysed runs point by point (baseline vs contender)",
        description="Compare two analysed runs: per sweep point (matched by threads, nodes "
        "and message size) the baseline and contender value of each metric, the absolute and "
        "relative change, and whether that is better or worse.",
    )
    compare.add_argument("baseline", type=Path, metavar="RUN_A", help="baseline run directory")
    compare.add_argument("contender", type=Path, metavar="RUN_B", help="contender run directory")
    compare.add_argument("--csv", type=Path, help="also write the comparison as CSV here")
    compare.set_defaults(handler=cmd_compare)
