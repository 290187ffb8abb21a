"""``osmosis whoami``: who is logged in to the current Platform, and in which workspaces."""

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
    add_json_flag(parser)


def run(args: argparse.Namespace) -> int:
    from osmosis_ai.auth import settings, store
    from osmosis_ai.auth.client import verify_token

    url = settings.platform_url()
    token = settings.env_token()
    if token:  # CI: the environment's token is what commands use, so say whose it is
        identity = verify_token(token, base_url=url)
        if args.json:
            print_json({"platform_url": url, "source": "environment", "workspace": workspace_json(identity)})
        else:
            say(f"Email: {identity.user.email}")
            say(f"Workspace: {identity.workspace_name} ({identity.organization.role})")
            console.print(f"Token from {'/'.join(settings.TOKEN_ENVS)}", style="dim")
        return 0
    current = store.current_store()
    active = current.get_active_credentials()
    if active is None:
        if args.json:
            print_json({"platform_url": url, "logged_in": False, "workspaces": []})
            json_failure(NOT_LOGGED_IN)
        else:
            console.print(NOT_LOGGED_IN)
        return 1
    entries = [(key == current.active_workspace, c) for key, c in current.workspaces.items()]
    if args.json:
        print_json({
            "platform_url": url,
            "logged_in": True,
            "user": workspace_json(active)["user"],
            "workspaces": [workspace_json(c, active=is_active) for is_active, c in entries],
        })  # fmt: skip
        return 0
    say(f"Email: {active.user.email}")
    if active.user.name:
        say(f"Name: {active.user.name}")
    say(f"Platform: {url}", style="dim")
    console.print(f"Workspaces ({len(entries)}):")
    for is_active, credentials in entries:
        say("  " + workspace_line(credentials, active=is_active))
    return 0
