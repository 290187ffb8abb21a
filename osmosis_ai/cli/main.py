"""Argument parsing and dispatch for ``osmosis``.

Sub-commands are listed in one table and imported only when invoked. ``osmosis``, ``osmosis
--help`` and ``osmosis --version`` are answered from that table without importing argparse (which
alone costs more than an interpreter start), so they stay close to a bare ``python -c pass``. Each
command module provides ``add_arguments(parser)`` and ``run(args) -> int``; library errors become
``Error: ...`` on stderr with exit status 1, never a traceback.
"""

from __future__ import annotations

import sys

from osmosis_ai.consts import PACKAGE_VERSION, package_name

TYPE_CHECKING = False  # typing and argparse are imported only where needed; type checkers treat this as True
if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence

DESCRIPTION = "Osmosis SDK: rewards, rubric judging and remote rollout for LLM RL training."
VERSION = f"{package_name} {PACKAGE_VERSION}"


class Command:
    """A sub-command: the module that implements it, its one-line help, and the builtin exception
    types it reports as ``Error: ...`` besides the SDK's own (``OsmosisError``)."""

    __slots__ = ("help", "module", "reported")

    def __init__(self, module: str, help: str, reported: tuple[type[Exception], ...] = ()) -> None:
        self.module = module
        self.help = help
        self.reported = reported


COMMANDS: dict[str, Command] = {
    "login": Command("osmosis_ai.cli.commands.login", "Log in to the Osmosis Platform"),
    "whoami": Command("osmosis_ai.cli.commands.whoami", "Show who is logged in to the Osmosis Platform"),
    "logout": Command("osmosis_ai.cli.commands.logout", "Revoke and forget Osmosis Platform credentials"),
    "workspace": Command("osmosis_ai.cli.commands.workspace", "List, show or switch Platform workspaces"),
    "preview": Command(
        "osmosis_ai.cli.commands.preview", "Show the rubric configs or dataset records in a file"
    ),
    "eval-rubric": Command(
        "osmosis_ai.cli.commands.eval_rubric", "Score a JSONL dataset with a rubric judge"
    ),
    # A missing server extra (ImportError) and out-of-range settings from the environment
    # (pydantic's ValidationError is a ValueError) are the user's to fix, not tracebacks.
    "serve": Command(
        "osmosis_ai.cli.commands.serve",
        "Serve a RolloutAgentLoop, or a 0.3 workflow and grader, over HTTP for training",
        reported=(ImportError, ValueError),
    ),
    "validate": Command("osmosis_ai.cli.commands.validate", "Check a RolloutAgentLoop without serving it"),
    "rollout": Command(
        "osmosis_ai.cli.commands.rollout",
        "Run rollouts end to end against a local TrainGate; scaffold and list 0.3 rollouts",
    ),
    "eval": Command(
        "osmosis_ai.cli.commands.eval",
        "Evaluate an agent loop over a dataset with eval functions, n runs per row (eval run: a 0.3 rollout)",
    ),
    "test": Command(
        "osmosis_ai.cli.commands.test", "Run an agent loop in-process over a dataset with a LiteLLM model"
    ),
    "regrade": Command(
        "osmosis_ai.cli.commands.regrade", "Score the answers of earlier runs again with another grader"
    ),
    "reward": Command(
        "osmosis_ai.cli.commands.reward",
        "Score a dataset of answers with a reward function, isolated and killable",
    ),
    "train": Command(
        "osmosis_ai.cli.commands.train",
        "Train a rollout server's model with GRPO (TRL) on this machine, from a TOML config",
    ),
    "report": Command(
        "osmosis_ai.cli.commands.report", "Turn results files into one self-contained HTML report"
    ),
    "sandbox": Command(
        "osmosis_ai.cli.commands.sandbox",
        "Show which sandbox isolation this machine offers for model-written code",
    ),
    "completion": Command(
        "osmosis_ai.cli.commands.completion", "Print the shell completion script for bash, zsh or fish"
    ),
}


def top_level_help() -> str:
    """The help of ``osmosis`` itself, in argparse's layout."""
    commands = [(name, command.help) for name, command in COMMANDS.items()]
    options = [
        ("-h, --help", "show this help message and exit"),
        ("-V, --version", "show the version and exit"),
    ]
    width = max(len(left) for left, _ in commands + options) + 2
    lines = ["usage: osmosis [-h] [-V] COMMAND ...", "", DESCRIPTION, "", "commands:"]
    lines += [f"  {left.ljust(width)}{text}" for left, text in commands]
    lines += ["", "options:"] + [f"  {left.ljust(width)}{text}" for left, text in options]
    lines += ["", "Run 'osmosis COMMAND --help' for the options of a command."]
    return "\n".join(lines)


def build_parser(selected: str | None = None) -> argparse.ArgumentParser:
    """The full parser; only the ``selected`` command's module is imported to add its options
    (``selected="*"``: every command's, for shell completion)."""
    import importlib

    from osmosis_ai.cli.parser import Parser

    parser = Parser(prog="osmosis", description=DESCRIPTION)
    parser.add_argument("-V", "--version", action="version", version=VERSION)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, command in COMMANDS.items():
        sub = subparsers.add_parser(name, help=command.help, description=command.help)
        if selected in (name, "*"):
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
    arguments = list(sys.argv[1:] if argv is None else argv)
    try:
        return _main(arguments)
    except BrokenPipeError:
        # The reader went away (``osmosis preview ... | head``): stop quietly, as Unix tools do, and
        # point stdout at /dev/null so the interpreter's final flush does not raise again.
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE


def _main(arguments: list[str]) -> int:
    if not arguments or arguments == ["-h"] or arguments == ["--help"]:
        print(top_level_help())
        return 0 if arguments else 1
    if arguments == ["-V"] or arguments == ["--version"]:
        print(VERSION)
        return 0
    return _dispatch(arguments)


def _verbose(args: argparse.Namespace) -> bool:
    """Whether the command was asked for details (``-v``/``--verbose``, ``--debug``, ``--log-level debug``)."""
    return (
        bool(getattr(args, "verbose", False) or getattr(args, "debug", False))
        or getattr(args, "log_level", None) == "debug"
    )


def _wants_json(arguments: Sequence[str]) -> bool:
    options = arguments[: arguments.index("--")] if "--" in arguments else arguments
    return "--json" in options


def _dispatch(arguments: list[str]) -> int:
    import importlib

    from osmosis_ai.cli import output
    from osmosis_ai.cli.errors import UsageError
    from osmosis_ai.cli.output_file import check_files
    from osmosis_ai.cli.parser import JSON_ERRORS, command_parser
    from osmosis_ai.cli.summary import check_loggers
    from osmosis_ai.errors import OsmosisError

    as_json = _wants_json(arguments)
    token = JSON_ERRORS.set(as_json)
    selected = _selected_command(arguments)
    reported: tuple[type[Exception], ...] = (OsmosisError,)
    if selected is not None:
        reported += COMMANDS[selected].reported
    args: argparse.Namespace | None = None
    try:
        with output.json_result(enabled=as_json) as result:
            try:
                parser = build_parser(selected)
                args = parser.parse_args(arguments)
                if args.command is None:
                    parser.print_help()
                    return 1
                _load_dotenv()
                check_files(args)
                check_loggers(args)
                # Under --json, what user code prints goes to stderr: stdout carries the one object.
                with output.logging_restored(), output.user_output_to_stderr(as_json):
                    status: int = importlib.import_module(COMMANDS[args.command].module).run(args)
            except UsageError as exc:
                command_parser(parser, _command_path(args, selected)).error(str(exc))
            except reported as exc:
                # The place where a failure becomes the user's ``Error: ...`` line (or, under
                # --json, the ``{"error": ...}`` object).
                if (
                    args is not None
                    and _verbose(args)
                    and isinstance(getattr(exc, "user_traceback", None), str)
                ):
                    print(exc.user_traceback, file=sys.stderr)  # type: ignore[attr-defined]
                result.fail(exc, command=_command_path(args, selected))
                output.error(exc)
                return 1
            except KeyboardInterrupt:
                result.fail(KeyboardInterrupt("interrupted"), command=_command_path(args, selected))
                print("Interrupted.", file=sys.stderr)
                return 130
            if status != 0:
                result.failed_quietly(status, command=_command_path(args, selected))
            return status
    finally:
        JSON_ERRORS.reset(token)


def _command_path(args: argparse.Namespace | None, selected: str | None) -> str:
    path = getattr(args, "command_path", None)
    if isinstance(path, str):
        return path
    return f"osmosis {selected}" if selected else "osmosis"
