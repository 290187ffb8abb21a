"""Argument parsing and dispatch for ``osmosis``.

Sub-commands are listed in one table and imported only when invoked, so ``osmosis --help`` and
``osmosis --version`` cost an interpreter start and argparse, nothing more. Each command module
provides ``add_arguments(parser)`` and ``run(args) -> int``; library errors become ``Error: ...``
on stderr with exit status 1, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import NamedTuple

from osmosis_ai.consts import PACKAGE_VERSION, package_name


class Command(NamedTuple):
    module: str
    help: str


COMMANDS: dict[str, Command] = {
    "preview": Command("osmosis_ai.cli.commands.preview", "Show the rubric configs or dataset records in a file"),
    "eval-rubric": Command("osmosis_ai.cli.commands.eval_rubric", "Score a JSONL dataset with a rubric judge"),
    "serve": Command("osmosis_ai.cli.commands.serve", "Serve a RolloutAgentLoop over HTTP for training"),
    "validate": Command("osmosis_ai.cli.commands.validate", "Check a RolloutAgentLoop without serving it"),
    "rollout": Command("osmosis_ai.cli.commands.rollout", "Run rollouts end to end against a local TrainGate"),
}


def build_parser(selected: str | None = None) -> argparse.ArgumentParser:
    """The full parser; only the ``selected`` command's module is imported to add its options."""
    parser = argparse.ArgumentParser(
        prog="osmosis",
        description="Osmosis SDK: rewards, rubric judging and remote rollout for LLM RL training.",
    )
    parser.add_argument("-V", "--version", action="version", version=f"{package_name} {PACKAGE_VERSION}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, command in COMMANDS.items():
        sub = subparsers.add_parser(name, help=command.help, description=command.help)
        if name == selected:
            importlib.import_module(command.module).add_arguments(sub)
    return parser


def _selected_command(argv: Sequence[str]) -> str | None:
    for token in argv:
        if not token.startswith("-"):
            return token if token in COMMANDS else None
    return None


def _load_dotenv() -> None:
    """Load ``.env`` from the working directory without overriding the real environment."""
    from dotenv import find_dotenv, load_dotenv

    path = find_dotenv(usecwd=True)
    if path:
        load_dotenv(path, override=False)


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``osmosis`` with ``argv`` (default: ``sys.argv[1:]``) and return the exit status."""
    from osmosis_ai.errors import OsmosisError

    arguments = list(sys.argv[1:] if argv is None else argv)
    selected = _selected_command(arguments)
    parser = build_parser(selected)
    args = parser.parse_args(arguments)
    if args.command is None:
        parser.print_help()
        return 1
    _load_dotenv()
    try:
        status: int = importlib.import_module(COMMANDS[args.command].module).run(args)
    except OsmosisError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("Interrupted.", file=sys.stderr)
        return 130
    return status
