"""``osmosis sandbox check``: which isolation mechanisms this machine has and which sandbox tier is in force."""

from __future__ import annotations

import argparse
from typing import Any


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    check = actions.add_parser("check", help="show the mechanisms this machine has and the tier in force")
    check.add_argument("--json", action="store_true", help="print one JSON object instead")


def run(args: argparse.Namespace) -> int:
    from osmosis_ai._sync import run_sync
    from osmosis_ai.cli.output import console, error, json_failure, print_json
    from osmosis_ai.sandbox.machine import probe

    if args.action is None:
        console.print("usage: osmosis sandbox check [--json]")
        return 0
    machine = run_sync(probe())
    refusal = None if machine.tier else f"no sandbox tier on this machine: {machine.refusal}"
    if args.json:
        value: dict[str, Any] = {
            "tier": machine.tier,
            "refusal": machine.refusal,
            "python": machine.python,
            "python_note": machine.python_note,
            "mechanisms": [
                {
                    "name": m.name,
                    "available": m.available,
                    "used": m.used,
                    "detail": m.detail,
                    "protects": m.protects,
                }
                for m in machine.mechanisms
            ],
        }
        print_json(value)
        if refusal:
            json_failure(refusal)
        return 1 if refusal else 0
    rows = [
        [m.name, "yes" if m.available else "no", "used" if m.used else "-", m.detail, m.protects]
        for m in machine.mechanisms
    ]
    console.table(rows, headers=["mechanism", "here", "tier", "detail", "what it stops"])
    if refusal:
        error(refusal)
        return 1
    console.print(
        f"Tier in force: local (bubblewrap). Python code runs with {machine.python}: {machine.python_note}."
    )
    return 0
