"""``osmosis logout [WORKSPACE] [--all] [-y]``: revoke the token with the Platform, then forget it.

Revocation is best-effort: when the Platform cannot be reached or refuses, the credentials are still
removed from this machine, and the output says that the token itself may remain valid until it expires.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from osmosis_ai.cli.commands._platform import add_json_flag, print_json, say
from osmosis_ai.cli.output import console, json_failure

if TYPE_CHECKING:
    from osmosis_ai.auth.store import WorkspaceCredentials


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("workspace", nargs="?", help="workspace name or id (default: ask, or the only one)")
    parser.add_argument("--all", action="store_true", help="log out of every workspace of this Platform")
    parser.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")
    add_json_flag(parser)


def _confirm(question: str) -> bool:
    try:
        answer = console.input(f"{question} [y/N] ")
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")


def _choose(entries: list[tuple[str, WorkspaceCredentials]], active: str | None) -> list[str] | int:
    """The keys picked from a numbered menu, or an exit status when cancelled (0) or invalid (1)."""
    console.print("Log out of which workspace?")
    for index, (key, credentials) in enumerate(entries, 1):
        mark = " (active)" if key == active else ""
        say(f"  {index}. {credentials.workspace_name}{mark}")
    console.print(f"  {len(entries) + 1}. all of them")
    console.print("  0. cancel")
    try:
        choice = int(console.input("Choice: ").strip())
    except (EOFError, ValueError):
        console.print("Cancelled.")
        return 0
    if choice == 0:
        console.print("Cancelled.")
        return 0
    if choice == len(entries) + 1:
        return [key for key, _ in entries]
    if not 1 <= choice <= len(entries):
        console.print("Invalid selection.")
        return 1
    return [entries[choice - 1][0]]


def run(args: argparse.Namespace) -> int:
    from osmosis_ai.auth import store

    current = store.current_store()
    entries = list(current.workspaces.items())
    if not entries:
        if args.json:
            print_json({"logged_out": []})
        else:
            console.print("Not logged in.")
        return 0
    if args.all:
        keys = [key for key, _ in entries]
    elif args.workspace is not None:
        key = current.find(args.workspace)
        if key is None:
            say(f"No workspace named {args.workspace!r}; see 'osmosis workspace list'.", err=args.json)
            json_failure(f"no workspace named {args.workspace!r}; see 'osmosis workspace list'")
            return 1
        keys = [key]
    elif len(entries) == 1 or args.yes:
        keys = [entries[0][0] if len(entries) == 1 else str(current.active_workspace or entries[0][0])]
    else:
        picked = _choose(entries, current.active_workspace)
        if isinstance(picked, int):
            return picked
        keys = picked
    names = [current.workspaces[key].workspace_name for key in keys]
    if not args.yes and not _confirm(f"Log out of {', '.join(names)}?"):
        console.print("Cancelled.")
        return 0
    return _log_out(keys, current.workspaces, as_json=args.json)


def _log_out(keys: list[str], workspaces: dict[str, WorkspaceCredentials], *, as_json: bool) -> int:
    from osmosis_ai.auth import store
    from osmosis_ai.auth.client import revoke

    report: list[dict[str, Any]] = []
    for key in keys:
        credentials = workspaces[key]
        outcome = revoke(credentials)
        store.remove([key], platform_url=credentials.platform_url)
        report.append({"workspace": credentials.workspace_name, "id": credentials.organization.id,
                       "revoked": outcome.revoked, "reason": outcome.reason})  # fmt: skip
        if as_json:
            continue
        name = credentials.workspace_name
        if outcome.revoked:
            say(f"Logged out of {name}: the token is revoked.", style="green")
        else:
            say(
                f"Logged out of {name} on this machine only: {outcome.reason}, so the token was not "
                "revoked and stays valid until it expires.",
                style="yellow",
            )
    if as_json:
        print_json({"logged_out": report})
    else:
        console.print(f"Logged out from {len(report)}/{len(workspaces)} workspace(s).")
    return 0
