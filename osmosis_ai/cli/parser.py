"""The ``osmosis`` argument parser: no abbreviations, "did you mean" on typos, two exit statuses.

Every parser and sub-parser of the command line is a :class:`Parser`:

* ``allow_abbrev`` is off, so ``--mode`` is an unknown option rather than a silent ``--model``;
* a usage error names the sub-command it happened in (``osmosis eval: error: ...``), also for an
  unknown option, which argparse would otherwise report from the top-level parser;
* an unknown option, command or choice comes with the closest known names (:mod:`difflib`), and an
  unknown option is reported as itself even when argparse would complain about what follows it
  (in ``eval --modle X``, the mistake is ``--modle``, not ``X`` in the sub-command's place);
* a malformed command line (unknown option, missing argument, a word where a number belongs) is a
  usage error, exit status 2, also when a command finds it itself
  (:class:`~osmosis_ai.cli.errors.UsageError`, reported through :func:`command_parser`); a well-formed value outside its range (``--n 0``) or options that
  cannot be combined (``-m`` with ``--mcp``, ``--fresh`` with ``--retry-failed``) raise
  :class:`~osmosis_ai.cli.errors.CLIError`, which ``main`` reports as ``Error: ...`` with exit
  status 1 (docs/compatibility.md);
* under ``--json`` (:data:`JSON_ERRORS`) a usage error is one ``{"error": {...}}`` object on stdout.
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import sys
from collections.abc import Iterable, Sequence
from contextvars import ContextVar
from typing import Any, NoReturn, Protocol

from osmosis_ai.cli.errors import CLIError

USAGE_STATUS = 2
JSON_ERRORS: ContextVar[bool] = ContextVar("osmosis_json_errors", default=False)
"""Whether the command line being parsed asked for ``--json`` (set by ``main``)."""

_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")
_PARSER_ATTR = "_osmosis_parser"


class OutOfRange(Exception):
    """Raised by an argument type for a well-formed value outside its range: a value error (exit 1),
    not a usage error. Deliberately not a ``ValueError``, which argparse would turn into one."""


def suggestions(word: str, known: Iterable[str]) -> list[str]:
    """The known names closest to ``word``: the best one, and a second only when it is as close."""
    close = difflib.get_close_matches(word, sorted(set(known)), n=2, cutoff=0.7)
    if len(close) < 2:
        return close
    first, second = (difflib.SequenceMatcher(None, word, name).ratio() for name in close)
    return close if second >= first - 0.1 else close[:1]


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest known name, or an empty string."""
    close = suggestions(word, known)
    if not close:
        return ""
    return " (did you mean " + " or ".join(repr(name) for name in close) + "?)"


def _option_name(action: argparse.Action) -> str:
    return "/".join(action.option_strings) or (
        action.metavar if isinstance(action.metavar, str) else action.dest
    )


def option_label(parser: argparse.ArgumentParser, dest: str) -> str:
    """How the help shows the argument storing ``dest``: ``-m/--module``, or a positional's metavar."""
    for action in parser._actions:
        if action.dest == dest:
            if action.option_strings:
                return "/".join(action.option_strings[:2])
            return action.metavar if isinstance(action.metavar, str) else dest
    return dest


def command_parser(parser: argparse.ArgumentParser, path: str) -> argparse.ArgumentParser:
    """The parser of the (sub-)command ``path`` names (``osmosis eval``), found below ``parser``."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                if path == sub.prog or path.startswith(sub.prog + " "):
                    return command_parser(sub, path)
    return parser


class Parser(argparse.ArgumentParser):
    """An ``argparse.ArgumentParser`` with the behaviour described in the module docstring."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)
        self._seen: list[str] = []
        self._exclusive: list[Exclusive] = []

    # -- options that cannot be combined ---------------------------------------------------------

    def add_exclusive(self, *, required: bool = False, missing_is_usage: bool = False) -> Exclusive:
        """Options of which at most one may be given (exactly one with ``required``). Two of them is a
        value error (exit status 1); none of a required group is one too, or a usage error (exit
        status 2) with ``missing_is_usage``, for a command whose option is required outright
        (``serve -m``)."""
        group = Exclusive(self, required=required, missing_is_usage=missing_is_usage)
        self._exclusive.append(group)
        return group

    # -- parsing -----------------------------------------------------------------------------------

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        self._seen = list(sys.argv[1:] if args is None else args)
        parsed, extras = super().parse_known_args(args, namespace)
        # The innermost parser runs first; its mark survives the copy into the outer namespaces.
        if getattr(parsed, _PARSER_ATTR, None) is None:
            setattr(parsed, _PARSER_ATTR, self)
        return parsed, extras

    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> argparse.Namespace:
        parsed, extras = self.parse_known_args(args, namespace)
        innermost: Parser = getattr(parsed, _PARSER_ATTR, self)
        delattr(parsed, _PARSER_ATTR)
        if extras:
            innermost.error(innermost._unrecognized_message(extras))
        innermost._check_exclusive(parsed)
        parsed.command_path = innermost.prog
        return parsed

    def _check_exclusive(self, parsed: argparse.Namespace) -> None:
        for group in self._exclusive:
            given = [d for d in group.dests if getattr(parsed, d, None) not in (None, False)]
            names = ", ".join(self._flag_of(d) for d in group.dests)
            if len(given) > 1:
                both = " and ".join(self._flag_of(d) for d in given)
                raise CLIError(f"{both} cannot be combined: give one of {names}")
            if group.required and not given:
                if group.missing_is_usage:
                    self.error(f"one of the arguments {names} is required")
                raise CLIError(f"{self.prog} needs one of {names} (see {self.prog} --help)")

    def _flag_of(self, dest: str) -> str:
        return option_label(self, dest)

    # -- values --------------------------------------------------------------------------------------

    def _get_value(self, action: argparse.Action, arg_string: str) -> Any:
        try:
            return super()._get_value(action, arg_string)
        except OutOfRange as exc:
            raise CLIError(f"{_option_name(action)}: {exc}") from None

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        if action.choices is not None and value not in action.choices:
            choices = [str(choice) for choice in action.choices]
            hint = did_you_mean(str(value), choices)
            if isinstance(action, argparse._SubParsersAction):
                raise argparse.ArgumentError(
                    None, f"unknown command {value!r}{hint}; choose from {', '.join(choices)}"
                )
            raise argparse.ArgumentError(
                action, f"invalid choice {value!r}{hint}; choose from {', '.join(choices)}"
            )

    # -- errors --------------------------------------------------------------------------------------

    def _long_options(self) -> list[str]:
        return [s for s in self._option_string_actions if s.startswith("--")] or list(
            self._option_string_actions
        )

    def _subcommands(self) -> set[str]:
        names: set[str] = set()
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                names.update(action.choices)
        return names

    def _unknown_options(self) -> list[str]:
        """The option-like words of this parser's own arguments that it does not know."""
        unknown = []
        words = iter(self._seen)
        commands = self._subcommands()
        for word in words:
            if word == "--" or word in commands:
                break
            if not word.startswith("-") or word == "-" or _NEGATIVE_NUMBER.match(word):
                if commands:
                    break  # the sub-command's place: what follows is the sub-command's to judge
                continue
            name = word.split("=", 1)[0]
            action = self._option_string_actions.get(name)
            if action is None and not word.startswith("--") and len(word) > 2:
                action = self._option_string_actions.get(word[:2])  # -dFILE, -qv
                if action is not None:
                    continue
            if action is None:
                if not self._known_below(name):
                    unknown.append(name)
            elif action.nargs != 0 and "=" not in word:
                next(words, None)  # the option's value, even if it starts with '-'
        return unknown

    def _known_below(self, name: str) -> bool:
        """Whether a sub-command of this parser takes the option ``name`` (``rollout --json``: the
        sub-command is what is missing)."""
        return any(
            isinstance(action, argparse._SubParsersAction)
            and any(name in sub._option_string_actions for sub in action.choices.values())
            for action in self._actions
        )

    def _unrecognized_message(self, extras: Sequence[str]) -> str:
        options = [word for word in extras if word.startswith("-") and not _NEGATIVE_NUMBER.match(word)]
        if not options:
            return f"unrecognized arguments: {' '.join(extras)}"
        parts = [f"{name.split('=', 1)[0]}{did_you_mean(name.split('=', 1)[0], self._long_options())}"
                 for name in options]  # fmt: skip
        noun = "option" if len(parts) == 1 else "options"
        return f"unrecognized {noun}: {', '.join(parts)}"

    def error(self, message: str) -> NoReturn:
        unknown = self._unknown_options()
        if unknown:
            # The unknown option is the mistake; whatever argparse tripped over next is its consequence.
            message = self._unrecognized_message(unknown)
        if JSON_ERRORS.get():
            details = {"command": self.prog, "usage": " ".join(self.format_usage().split())}
            print(json.dumps({"error": {"code": "usage_error", "message": message, "details": details}}))
            sys.stdout.flush()
        else:
            self.print_usage(sys.stderr)
            print(f"{self.prog}: error: {message}", file=sys.stderr)
            print(f"Run '{self.prog} --help' for the options.", file=sys.stderr)
        raise SystemExit(USAGE_STATUS)


class Exclusive:
    """Options of which at most one may be given; see :meth:`Parser.add_exclusive`."""

    def __init__(self, parser: Parser, *, required: bool, missing_is_usage: bool) -> None:
        self._parser = parser
        self.dests: list[str] = []
        self.required = required
        self.missing_is_usage = missing_is_usage

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        action = self._parser.add_argument(*args, **kwargs)
        self.dests.append(action.dest)
        return action


class OptionGroup(Protocol):
    """Where options are added: an :class:`Exclusive`, or argparse's mutually exclusive group."""

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action: ...


def add_exclusive(
    parser: argparse.ArgumentParser, *, required: bool = False, missing_is_usage: bool = False
) -> OptionGroup:
    """:meth:`Parser.add_exclusive`; on a plain ``argparse.ArgumentParser`` (a command object
    configuring a parser of its caller's), argparse's own mutually exclusive group."""
    if isinstance(parser, Parser):
        return parser.add_exclusive(required=required, missing_is_usage=missing_is_usage)
    return parser.add_mutually_exclusive_group(required=required)
