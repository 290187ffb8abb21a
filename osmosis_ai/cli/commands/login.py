"""``osmosis login [--device] [--no-browser] [-f] [--json]``: log in to the Osmosis Platform.

The browser flow opens the Platform's login page, which hands the token back to a one-shot server
on this machine's loopback interface. ``--device`` (chosen by itself when there is no display and
``--no-browser`` was not given) shows a code to enter on any other device instead: the way to log
in on a GPU box over SSH. Either way the token is verified with the Platform before it is stored.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any

from osmosis_ai.cli.commands._platform import add_json_flag, print_json, say, workspace_json, workspace_line
from osmosis_ai.cli.output import console, warn

if TYPE_CHECKING:
    from osmosis_ai.auth.device import DeviceAuthorization
    from osmosis_ai.auth.session import LoginResult


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-f", "--force", action="store_true", help="log in again even if already logged in")
    parser.add_argument("--no-browser", action="store_true", help="print the login URL instead of opening it")
    parser.add_argument("--device", action="store_true", help="log in with a code entered on another device")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for the browser")
    add_json_flag(parser)
    parser.epilog = (
        "The Platform is https://platform.osmosis.ai unless OSMOSIS_PLATFORM_URL names another (https, or "
        "http on loopback; a .env file counts). Credentials go to ~/.config/osmosis/credentials.json "
        "(OSMOSIS_CONFIG_DIR moves it), the token into the OS keyring when one is available; "
        "OSMOSIS_TOKEN overrides the stored login (CI)."
    )


def has_display() -> bool:
    """Whether a browser can be opened here: always on macOS/Windows, with X11/Wayland elsewhere."""
    if sys.platform in ("darwin", "win32"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def _say(message: str, *, as_json: bool, style: str | None = None) -> None:
    # With --json, stdout carries only the result; the instructions go to stderr.
    # soft_wrap: a long login URL must stay on one line to be copied.
    say(message, style=style, err=as_json, flush=True, soft_wrap=True)


def run(args: argparse.Namespace) -> int:
    from osmosis_ai.auth import store
    from osmosis_ai.auth.errors import LoginError, UnreadableCredentialsError

    try:
        active = store.current_store().get_active_credentials()
    except UnreadableCredentialsError as exc:  # set aside already: this login starts a new file
        warn(str(exc))
        active = None
    if active is not None and active.is_usable() and not args.force:
        if args.json:
            print_json({"logged_in": True, "already": True, "workspace": workspace_json(active, active=True)})
        else:
            say(f"Already logged in as {active.user.email} ({workspace_line(active)}).")
            console.print("Use 'osmosis login --force' to log in again.")
        return 0
    device = args.device or (not args.no_browser and not has_display())
    try:
        result = _device_login(args.json) if device else _browser_login(args)
    except LoginError as exc:
        if args.json:
            print_json({"logged_in": False})
            raise
        console.print_error(f"[ERROR] {exc}")
        return 1
    except KeyboardInterrupt:
        _say("Login cancelled.", as_json=args.json)
        return 1
    _report(result, as_json=args.json)
    return 0


def _device_login(as_json: bool) -> LoginResult:
    from osmosis_ai.auth.device import device_login

    def show(authorization: DeviceAuthorization) -> None:
        _say(f"To log in, open {authorization.verification_uri}", as_json=as_json)
        _say(f"and enter the code: {authorization.user_code}", as_json=as_json, style="bold")
        if authorization.verification_uri_complete:
            _say(f"(or open {authorization.verification_uri_complete} directly)", as_json=as_json)
        _say("Waiting for approval...", as_json=as_json, style="dim")

    return device_login(on_code=show)


def _browser_login(args: argparse.Namespace) -> LoginResult:
    from osmosis_ai.auth.browser import browser_login

    def show(url: str, opened: bool) -> None:
        _say(
            "Open this URL to log in:" if not opened else "Opened the login page in your browser:",
            as_json=args.json,
        )
        _say(url, as_json=args.json)
        _say("Waiting for the browser...", as_json=args.json, style="dim")

    return browser_login(open_browser=not args.no_browser, timeout=args.timeout, on_url=show)


def _report(result: LoginResult, *, as_json: bool) -> None:
    from osmosis_ai.auth import settings

    if as_json:
        data: dict[str, Any] = {"logged_in": True, "revoked_previous_tokens": result.revoked_previous_tokens}
        if result.credentials is not None:
            data["workspace"] = workspace_json(result.credentials, active=True)
        print_json(data)
        return
    say(f"[OK] Logged in as {result.user.email}", style="green")
    if result.user.name:
        say(f"  Name: {result.user.name}")
    say(f"  Workspace: {result.organization.name} ({result.organization.role})")
    console.print(f"  Token expires: {result.expires_at.date().isoformat()}")
    if result.revoked_previous_tokens:
        console.print(f"  {result.revoked_previous_tokens} previous token(s) for this device were revoked.")
    say(f"  Credentials saved to {settings.credentials_file()}", style="dim")
