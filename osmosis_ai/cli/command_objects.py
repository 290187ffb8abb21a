"""Command objects over the sub-command modules: ``configure_parser(parser)`` adds a command's
options and sets ``handler``; ``run(args)`` runs it. The 0.2 import paths of the command classes
(``osmosis_ai.cli_commands``, ``osmosis_ai.rollout.cli``, the ``cli`` modules of
``osmosis_ai.rollout.eval``) are these; ``osmosis_ai.cli.main.main(argv)`` is what the console
script runs."""

from __future__ import annotations

import argparse
import importlib
from typing import ClassVar


class CommandObject:
    """One sub-command (``module``: its module under ``osmosis_ai.cli.commands``)."""

    module: ClassVar[str]

    def configure_parser(self, parser: argparse.ArgumentParser) -> None:
        importlib.import_module(self.module).add_arguments(parser)
        parser.set_defaults(handler=self.run)

    def run(self, args: argparse.Namespace) -> int:
        from osmosis_ai.cli.output_file import check_files

        check_files(args)
        status: int = importlib.import_module(self.module).run(args)
        return status


class PreviewCommand(CommandObject):
    """``osmosis preview``."""

    module = "osmosis_ai.cli.commands.preview"


class EvalRubricCommand(CommandObject):
    """``osmosis eval-rubric``."""

    module = "osmosis_ai.cli.commands.eval_rubric"


class LoginCommand(CommandObject):
    """``osmosis login``."""

    module = "osmosis_ai.cli.commands.login"


class WhoamiCommand(CommandObject):
    """``osmosis whoami``."""

    module = "osmosis_ai.cli.commands.whoami"


class LogoutCommand(CommandObject):
    """``osmosis logout``."""

    module = "osmosis_ai.cli.commands.logout"


class WorkspaceCommand(CommandObject):
    """``osmosis workspace``."""

    module = "osmosis_ai.cli.commands.workspace"


class ServeCommand(CommandObject):
    """``osmosis serve``."""

    module = "osmosis_ai.cli.commands.serve"


class ValidateCommand(CommandObject):
    """``osmosis validate``."""

    module = "osmosis_ai.cli.commands.validate"


class TestCommand(CommandObject):
    """``osmosis test``."""

    module = "osmosis_ai.cli.commands.test"


class EvalCommand(CommandObject):
    """``osmosis eval``."""

    module = "osmosis_ai.cli.commands.eval"
