"""``osmosis eval cache dir|ls|rm``: the journals ``osmosis eval`` keeps, listed and removed.

``dir`` prints the journal root; ``ls`` lists the journals (newest first; a table on a terminal,
tab-separated lines without a header when piped) filtered by ``--model``/``--dataset`` (substrings,
any case) and ``--status``; ``rm`` removes one task id's journal, every journal (``--all``) or the
filtered ones, asking ``[y/N]`` first for anything but a task id unless ``-y``. Each takes ``--json``
(``rm --json`` never asks: it needs a task id or ``-y``).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from osmosis_ai.cli.errors import CLIError

STATUSES = ("in_progress", "completed")


def add_parser(subparsers: Any) -> None:
    """Add ``cache`` and its sub-commands to ``osmosis eval``'s sub-commands."""
    cache = subparsers.add_parser("cache", help="list or remove the journals of earlier evaluations",
                                  description="The journals osmosis eval keeps to resume runs.")  # fmt: skip
    actions = cache.add_subparsers(dest="cache_command", metavar="{dir,ls,rm}")
    directory = actions.add_parser("dir", help="print the journal directory")
    listing = actions.add_parser("ls", help="list journals")
    removal = actions.add_parser("rm", help="remove journals")
    for sub in (directory, listing, removal):
        sub.add_argument("--json", action="store_true", help="print the result as one JSON object")
    removal.add_argument("task_id", nargs="?", metavar="TASK_ID", help="the journal to remove")
    removal.add_argument("--all", action="store_true", help="remove every journal")
    removal.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")
    for sub in (listing, removal):
        sub.add_argument("--model", help="only journals whose model contains this (any case)")
        sub.add_argument("--dataset", help="only journals whose dataset path contains this (any case)")
        sub.add_argument("--status", choices=STATUSES, help="only journals with this status")
    cache.set_defaults(cache_usage=cache.format_usage())


def run(args: argparse.Namespace) -> int:
    from osmosis_ai.runs.journal_store import journal_root

    command = getattr(args, "cache_command", None)
    if command is None:
        print(args.cache_usage, end="")
        return 0
    root = journal_root()
    if command == "dir":
        if args.json:
            from osmosis_ai.cli.output import print_json

            print_json({"path": str(root)})
        else:
            print(root)
        return 0
    if command == "ls":
        return _list(root, args)
    return _remove(root, args)


def _selected(root: Any, args: argparse.Namespace) -> list[Any]:
    from osmosis_ai.runs.journal_store import entries

    return [e for e in entries(root) if e.matches(model=args.model, dataset=args.dataset, status=args.status)]


def _list(root: Any, args: argparse.Namespace) -> int:
    from osmosis_ai.cli.output import console

    found = _selected(root, args)
    if args.json:
        from osmosis_ai.cli.output import print_json

        print_json({"root": str(root), "journals": [_entry_json(e) for e in found]})
        return 0
    if not found:
        print("No cached evaluations found.")
        return 0
    rows = [
        [e.task_id, e.model, e.dataset, e.info.status, str(e.info.runs),
         time.strftime("%Y-%m-%d %H:%M", time.localtime(e.info.created_at))]
        for e in found
    ]  # fmt: skip
    if console.is_tty:
        console.table(rows, headers=["TASK ID", "MODEL", "DATASET", "STATUS", "RUNS", "CREATED"])
    else:
        for row in rows:
            print("\t".join(row))
    return 0


def _entry_json(entry: Any) -> dict[str, Any]:
    created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(entry.info.created_at))
    return {"task_id": entry.task_id, "model": entry.model, "dataset": entry.dataset, "status": entry.info.status,
            "runs": entry.info.runs, "created_at": created, "path": str(entry.info.path)}  # fmt: skip


def _remove(root: Any, args: argparse.Namespace) -> int:
    from osmosis_ai.runs.journal_store import remove

    filtered = args.model is not None or args.dataset is not None or args.status is not None
    if args.task_id is None and not args.all and not filtered:
        raise CLIError(
            "osmosis eval cache rm needs a TASK_ID, --all, or a filter (--model, --dataset, --status)"
        )
    targets = _selected(root, args)
    if args.task_id is not None:
        targets = [e for e in targets if e.task_id == args.task_id]
    if not targets:
        what = f"task id {args.task_id}" if args.task_id else "the filters"
        raise CLIError(f"no journal under {root} matches {what}; see osmosis eval cache ls")
    if args.task_id is None and not args.yes and args.json:
        raise CLIError(
            f"--json does not ask before removing {len(targets)} journal(s): add -y (or give a TASK_ID)"
        )
    if args.task_id is None and not args.yes:
        for entry in targets:
            print(f"  {entry.task_id}  {entry.model}  {entry.dataset}  {entry.info.status}")
        try:
            answer = input(f"Remove {len(targets)} journal(s)? [y/N] ")
        except (EOFError, KeyboardInterrupt):
            print("\nAborted.", file=sys.stderr)
            return 130
        if answer.strip().lower() not in {"y", "yes"}:
            print("Aborted.")
            return 0
    for entry in targets:
        remove(entry.info.path, root)
    if args.json:
        from osmosis_ai.cli.output import print_json

        print_json({"removed": [_entry_json(e) for e in targets]})
    else:
        print(f"Removed {len(targets)} journal(s).")
    return 0
