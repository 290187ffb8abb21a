"""``osmosis preview -p PATH``: print the rubric configs (YAML) or dataset records (JSONL) in a file."""

from __future__ import annotations

import argparse
from pathlib import Path

from osmosis_ai.cli.eval_rubric.preview import render_preview


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-p", "--path", required=True, type=Path, help="a rubric config (.yaml/.yml) or dataset (.jsonl)"
    )


def run(args: argparse.Namespace) -> int:
    print("\n".join(render_preview(args.path)))
    return 0
