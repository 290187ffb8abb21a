"""``osmosis rollout init NAME`` and ``osmosis rollout list``: the 0.3 workspace's rollouts
(:mod:`osmosis_ai.rollout.workspace`).

``init`` writes ``rollouts/NAME/`` and ``configs/eval/NAME.toml`` into the workspace (the nearest
directory upwards with a ``rollouts/`` directory, else the current one), refusing in one line when any
of them exists; ``list`` names the workspace's rollouts. Both take ``--json``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from osmosis_ai.cli import output


def add_parsers(sub: Any) -> None:
    """Add ``init`` and ``list`` to ``osmosis rollout``'s sub-commands."""
    init = sub.add_parser(
        "init",
        help="scaffold a 0.3 rollout: rollouts/NAME/ and configs/eval/NAME.toml",
        description="Scaffold a 0.3 rollout in this workspace: rollouts/NAME/{main.py,pyproject.toml,"
        "dataset.jsonl} and configs/eval/NAME.toml. Nothing that exists is written over.",
    )
    init.add_argument(
        "name", metavar="NAME", help="the rollout's name: lowercase letters, digits and hyphens"
    )
    listing = sub.add_parser(
        "list",
        help="list this workspace's rollouts",
        description="List the rollouts of this workspace (rollouts/*/main.py).",
    )
    for parser in (init, listing):
        parser.add_argument("--json", action="store_true", help="print the result as one JSON object")


def run(args: argparse.Namespace) -> int:
    from osmosis_ai.rollout.workspace import find_workspace

    workspace = find_workspace(Path.cwd())
    return _init(args, workspace) if args.rollout_command == "init" else _list(args, workspace)


def _shown(path: Path, workspace: Path) -> str:
    return path.relative_to(workspace).as_posix()


def _init(args: argparse.Namespace, workspace: Path) -> int:
    from osmosis_ai.rollout.workspace import eval_config_path, scaffold

    written = scaffold(workspace, args.name)
    files = [_shown(path, workspace) for path in written]
    if args.json:
        output.print_json({"name": args.name, "workspace": str(workspace), "files": files})
        return 0
    print(f"Created rollout {args.name!r} in {workspace}:")
    for file in files:
        print(f"  {file}")
    print(f"Next: osmosis eval run {_shown(eval_config_path(workspace, args.name), workspace)}")
    return 0


def _list(args: argparse.Namespace, workspace: Path) -> int:
    from osmosis_ai.rollout.workspace import rollouts

    found = rollouts(workspace)
    if args.json:
        listed = [{"name": r.name, "directory": _shown(r.directory, workspace),
                   "eval_config": _shown(r.eval_config, workspace) if r.eval_config else None} for r in found]  # fmt: skip
        output.print_json({"workspace": str(workspace), "rollouts": listed})
        return 0
    if not found:
        print(f"No rollouts in {workspace} (osmosis rollout init NAME makes one).")
        return 0
    width = max(len(r.name) for r in found) + 2
    for r in found:
        config = _shown(r.eval_config, workspace) if r.eval_config else "(no eval config)"
        print(f"{r.name.ljust(width)}{_shown(r.directory, workspace)}/  {config}")
    return 0
