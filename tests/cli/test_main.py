"""The ``osmosis`` command line: ``--version`` through the entry point as users run it (a subprocess), the
rest through its ``main()`` in this process; what ``--help`` imports in a fresh interpreter."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from osmosis_ai.cli.main import COMMANDS
from osmosis_ai.consts import PACKAGE_VERSION
from tests.support.cli import cli


def osmosis(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "osmosis_ai", *args], capture_output=True, text=True, timeout=60
    )


def test_version_prints_the_package_version() -> None:
    result = osmosis("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"osmosis-ai {PACKAGE_VERSION}"


def test_help_lists_every_command() -> None:
    result = cli("--help")
    assert result.returncode == 0
    for name in COMMANDS:
        assert name in result.stdout


def test_no_command_prints_help_and_exits_1() -> None:
    result = cli()
    assert result.returncode == 1
    assert "usage: osmosis" in result.stdout


def test_unknown_command_is_a_usage_error() -> None:
    result = cli("no-such-command")
    assert result.returncode == 2
    assert "unknown command 'no-such-command'" in result.stderr
    assert "Traceback" not in result.stderr


def test_help_imports_no_command_module() -> None:
    code = (
        "import sys\n"
        "from osmosis_ai.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith('osmosis_ai.cli.commands.')))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip().endswith("[]")


def test_help_and_version_do_not_import_argparse() -> None:
    code = (
        "import sys\n"
        "from osmosis_ai.cli import main\n"
        "main(['--help']); main(['--version'])\n"
        "print('argparse' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip().splitlines()[-1] == "False"


def test_a_command_help_goes_through_argparse() -> None:
    result = cli("validate", "--help")
    assert result.returncode == 0
    assert "usage: osmosis validate" in result.stdout


def test_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    records = (
        tmp_path / "many.jsonl"
    )  # far more output than a pipe buffers, so the writer sees the pipe close
    records.write_text("".join(json.dumps({"solution_str": f"answer {i}" * 20}) + "\n" for i in range(5000)))
    command = f"'{sys.executable}' -m osmosis_ai preview -p '{records}' | head -n 1"
    result = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=60)
    assert result.stdout.startswith("Loaded 5000 JSONL record(s)")
    assert "Traceback" not in result.stderr and "BrokenPipeError" not in result.stderr
