"""``osmosis validate``: check a RolloutAgentLoop (name, tools, run) without serving it; no network."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from osmosis_ai.cli.output import console

if TYPE_CHECKING:
    from osmosis_ai.rollout.core.base import RolloutAgentLoop
    from osmosis_ai.rollout.validator import ValidationResult


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-m", "--module", required=True, help="agent loop as 'module.path:attribute' (instance or class)"
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="also list warnings")
    parser.add_argument(
        "--json", action="store_true", help="print the findings as one JSON object (exit status as without)"
    )


def run(args: argparse.Namespace) -> int:
    from osmosis_ai.rollout.loading import load_agent_loop

    agent_loop = load_agent_loop(args.module)
    if not args.json:
        return 0 if validate_and_report(agent_loop, verbose=args.verbose).valid else 1
    from osmosis_ai.cli.errors import CLIError
    from osmosis_ai.cli.output import print_json
    from osmosis_ai.rollout.validator import validate_agent_loop

    result = validate_agent_loop(agent_loop)
    name = result.agent_name or type(agent_loop).__name__
    print_json({"module": args.module, "agent": name, "valid": result.valid, "tool_count": result.tool_count,
                "errors": [str(e) for e in result.errors], "warnings": [str(w) for w in result.warnings]})  # fmt: skip
    if not result.valid:
        raise CLIError(f"agent loop {name!r} failed validation with {len(result.errors)} error(s)")
    return 0


def validate_and_report(agent_loop: RolloutAgentLoop, *, verbose: bool = False) -> ValidationResult:
    """Validate ``agent_loop`` and print the report (errors to stderr); returns the result."""
    from osmosis_ai.rollout.validator import validate_agent_loop

    result = validate_agent_loop(agent_loop)
    report_validation(result, result.agent_name or type(agent_loop).__name__, verbose=verbose)
    return result


def report_validation(result: ValidationResult, name: str, *, verbose: bool = False) -> None:
    """Print the report of a validation of the agent loop called ``name``."""
    warnings = [f"  - {warning}" for warning in result.warnings] if verbose else []
    if result.valid:
        console.print(console.escape(f"Agent loop {name!r} validated successfully ({result.tool_count} tools)."),
                      style="green")  # fmt: skip
        if result.warnings:
            console.print(f"{len(result.warnings)} warning(s){':' if verbose else ' (use -v to list them)'}")
        for line in warnings:
            console.print(console.escape(line), style="yellow")
        return
    lines = [f"Agent loop {name!r} failed validation with {len(result.errors)} error(s):"]
    lines += [f"  - {error}" for error in result.errors]
    if warnings:
        lines += [f"{len(result.warnings)} warning(s):", *warnings]
    for line in lines:
        console.print_error(line)
