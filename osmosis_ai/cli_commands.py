"""Legacy import path of the command classes of ``osmosis`` (see :mod:`osmosis_ai.cli.command_objects`)."""

from __future__ import annotations

from osmosis_ai.cli.command_objects import (
    EvalRubricCommand,
    LoginCommand,
    LogoutCommand,
    PreviewCommand,
    WhoamiCommand,
    WorkspaceCommand,
)

__all__ = [
    "EvalRubricCommand",
    "LoginCommand",
    "LogoutCommand",
    "PreviewCommand",
    "WhoamiCommand",
    "WorkspaceCommand",
]
