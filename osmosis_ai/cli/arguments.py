"""Numeric argument types shared by the commands: a bad value is argparse's usage error (exit 2)
with a message that says what was expected, never a traceback."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable


def whole_number(minimum: int, maximum: int | None = None, *, name: str = "value") -> Callable[[str], int]:
    """An ``int`` argument within ``[minimum, maximum]`` (no upper bound when ``maximum`` is None)."""
    expected = f"{minimum}-{maximum}" if maximum is not None else f"{minimum} or more"

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid {name} {text!r}: expected a whole number") from None
        if value < minimum or (maximum is not None and value > maximum):
            raise argparse.ArgumentTypeError(f"invalid {name} {value}: expected {expected}")
        return value

    return parse


def finite_number(minimum: float | None = None, *, exclusive: bool = False) -> Callable[[str], float]:
    """A finite ``float`` argument (``nan`` and ``inf``, which ``float()`` accepts, are refused), at least
    ``minimum`` (greater than it when ``exclusive``)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
        if minimum is not None and (value <= minimum if exclusive else value < minimum):
            bound = "greater than" if exclusive else "at least"
            raise argparse.ArgumentTypeError(f"must be {bound} {minimum:g}, got {text!r}")
        return value

    return parse


def fraction(text: str) -> float:
    """A number between 0 and 1, inclusive (a share of rows, a failure rate)."""
    value = finite_number(0)(text)
    if value > 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {text!r}")
    return value


def add_agent_arguments(
    parser: argparse.ArgumentParser, *, module_help: str
) -> argparse._MutuallyExclusiveGroup:
    """The required choice of the agent: ``-m MODULE:ATTR``, ``--mcp DIR`` or ``--mcp-url URL``.

    Returns the group so a command can add another way to name it (``rollout run --url``);
    :func:`osmosis_ai.cli.loading.load_agent` turns the parsed choice into an agent loop.
    """
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("-m", "--module", "--agent", dest="module", metavar="MODULE:ATTR", help=module_help)
    group.add_argument(
        "--mcp",
        metavar="DIR",
        help="MCP tools directory (its main.py creates a fastmcp server): the model calls these tools",
    )
    group.add_argument(
        "--mcp-url",
        metavar="URL",
        help="running MCP server (streamable HTTP, e.g. http://127.0.0.1:8000/mcp): the model calls its tools",
    )
    return group
