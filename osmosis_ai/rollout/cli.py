"""Legacy import path of the rollout command classes (see :mod:`osmosis_ai.cli.command_objects`)."""

from __future__ import annotations

from osmosis_ai.cli.command_objects import EvalCommand, ServeCommand, TestCommand, ValidateCommand

__all__ = ["EvalCommand", "ServeCommand", "TestCommand", "ValidateCommand"]
