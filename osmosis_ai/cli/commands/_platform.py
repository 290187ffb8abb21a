"""What the Platform commands (login, logout, whoami, workspace) share: ``--json`` and describing a workspace."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from osmosis_ai.cli import output
from osmosis_ai.cli.output import Console, console

if TYPE_CHECKING:
    from osmosis_ai.auth.store import WorkspaceCredentials


def say(text: str, *, style: str | None = None, err: bool = False, **kwargs: Any) -> None:
    """Print ``text`` literally (never read as rich markup), on stderr with ``err``."""
    target = Console(file=sys.stderr) if err else console
    target.print(target.escape(text) if target.use_rich else text, style=style, **kwargs)


def add_json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the result as one JSON object")


def print_json(data: dict[str, Any]) -> None:
    output.print_json(dict(sorted(data.items())), indent=2)


def workspace_json(credentials: WorkspaceCredentials, *, active: bool = False) -> dict[str, Any]:
    """A workspace for ``--json`` output; the token itself is never part of it."""
    return {
        "id": credentials.organization.id,
        "name": credentials.organization.name,
        "role": credentials.organization.role,
        "user": {"id": credentials.user.id, "email": credentials.user.email, "name": credentials.user.name},
        "expires_at": credentials.expires_at.isoformat(),
        "expired": credentials.is_expired(),
        "invalid": credentials.invalid,
        "active": active,
        "platform_url": credentials.platform_url,
    }


def workspace_line(credentials: WorkspaceCredentials, *, active: bool = False) -> str:
    """``name (role)`` with `` (active)``, `` [expired]``, `` [rejected]`` and keyring marks as they apply."""
    line = f"{credentials.workspace_name} ({credentials.organization.role})"
    if active:
        line += " (active)"
    if credentials.is_expired():
        line += " [expired]"
    elif credentials.invalid:
        line += " [rejected: log in again]"
    elif credentials.token_problem:
        line += " [token not readable from the OS keyring: log in again]"
    return line


NOT_LOGGED_IN = (
    "Not logged in. Run 'osmosis login' (or 'osmosis login --device' on a machine without a browser)."
)
