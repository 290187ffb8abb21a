"""``osmosis validate``: check a RolloutAgentLoop (name, tools, run) without serving it; no network."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-m", "--module", required=True, help="agent loop as 'module.path:attribute' (instance or class)"
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="also list warnings")


def run(args: argparse.Namespace) -> int:
    from osmosis_ai.rollout.cli_utils import load_agent_loop
    from osmosis_ai.rollout.server.serve import validate_and_report

    result = validate_and_report(load_agent_loop(args.module), verbose=args.verbose)
    return 0 if result.valid else 1
