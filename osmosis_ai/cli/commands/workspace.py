"""``osmosis workspace list | current | switch NAME``: the workspaces stored for the current Platform."""

from __future__ import annotations

import argparse

from osmosis_ai.cli.commands._platform import (
    NOT_LOGGED_IN,
    add_json_flag,
    print_json,
    say,
    workspace_json,
    workspace_line,
)
from osmosis_ai.cli.output import console, json_failure


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    add_json_flag(actions.add_parser("list", help="list the workspaces you are logged in to"))
    add_json_flag(actions.add_parser("current", help="show the active workspace"))
    switch = actions.add_parser("switch", help="make another workspace the active one")
    switch.add_argument("name", help="workspace name or id")
    add_json_flag(switch)


def run(args: argparse.Namespace) -> int:
    from osmosis_ai.auth import store

    if args.action is None:
        console.print("usage: osmosis workspace {list,current,switch NAME}")
        return 0
    if args.action == "switch":
        switched = store.activate(args.name)
        if switched is None:
            if args.json:
                print_json({"switched": False, "name": args.name})
                json_failure(f"no workspace named {args.name!r}; see 'osmosis workspace list'")
            else:
                say(f"No workspace named {args.name!r}.")
                console.print("Run 'osmosis workspace list' to see yours, or 'osmosis login' to add one.")
            return 1
        if args.json:
            print_json({"switched": True, "workspace": workspace_json(switched, active=True)})
        else:
            say((f"Switched to workspace {switched.workspace_name!r}."), style="green")
        return 0
    current = store.current_store()
    if args.action == "list":
        entries = [(key == current.active_workspace, c) for key, c in current.workspaces.items()]
        if args.json:
            print_json({"workspaces": [workspace_json(c, active=a) for a, c in entries]})
        if not entries:
            return _not_logged_in(args)
        for is_active, credentials in [] if args.json else entries:
            say("  " + workspace_line(credentials, active=is_active))
        return 0
    active = current.get_active_credentials()
    if args.json:
        print_json({"workspace": workspace_json(active, active=True) if active else None})
    if active is None:
        return _not_logged_in(args)
    if not args.json:
        say(f"Current workspace: {workspace_line(active)}")
        say(f"  User: {active.user.email}")
        console.print(f"  Expires: {active.expires_at.date().isoformat()}")
    return 0


def _not_logged_in(args: argparse.Namespace) -> int:
    """No workspace to list or show: a refusal (exit status 1), as ``whoami`` says it."""
    if args.json:
        json_failure(NOT_LOGGED_IN)
    else:
        console.print(NOT_LOGGED_IN)
    return 1
