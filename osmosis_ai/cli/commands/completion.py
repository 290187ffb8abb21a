"""``osmosis completion bash|zsh|fish``: print the shell completion script (see :mod:`osmosis_ai.cli.completion`)."""

from __future__ import annotations

import argparse

from osmosis_ai.cli.completion import SHELLS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("shell", choices=SHELLS, help="the shell to complete in")
    parser.add_argument("--json", action="store_true", help='print {"shell": ..., "script": ...} instead')
    parser.epilog = (
        "Load it in the current shell: source <(osmosis completion bash) | source <(osmosis completion zsh) "
        "| osmosis completion fish | source. Add that line to your shell's start-up file to keep it."
    )


def run(args: argparse.Namespace) -> int:
    from osmosis_ai.cli.completion import render
    from osmosis_ai.cli.main import build_parser
    from osmosis_ai.cli.output import print_json

    script = render(args.shell, build_parser("*"))
    if args.json:
        print_json({"shell": args.shell, "script": script})
    else:
        print(script, end="")
    return 0
