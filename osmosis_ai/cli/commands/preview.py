"""``osmosis preview -p PATH``: print the rubric configs (YAML) or dataset records (JSONL) in a file."""

from __future__ import annotations

import argparse
from pathlib import Path

from osmosis_ai.cli.eval_rubric.preview import preview_object, render_preview


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-p", "--path", required=True, type=Path, help="a rubric config (.yaml/.yml) or dataset (.jsonl)"
    )
    parser.add_argument("--json", action="store_true", help="print the entries as one JSON object")


def run(args: argparse.Namespace) -> int:
    if args.json:
        from osmosis_ai.cli.output import print_json

        print_json(preview_object(args.path))
        return 0
    print("\n".join(render_preview(args.path)))
    return 0
