"""A mistyped command line: no abbreviations, "did you mean", the sub-command named, 0.2's exit statuses.

Usage errors (a malformed command line) exit 2 from argparse's ``SystemExit``, as in 0.2; value
errors (well-formed but out of range, or options that cannot go together) make ``main`` return 1
with ``Error: ...``, as 0.2's test and eval did.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from osmosis_ai.cli.main import main
from tests.support.cli import cli

EVAL = ["eval", "-m", "nowhere:agent", "-d", "missing.jsonl", "--eval-fn", "nowhere:fn"]


def usage_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    with pytest.raises(SystemExit) as raised:
        main(argv)
    assert raised.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "Traceback" not in captured.err
    return captured.err


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["eval", "--modle", "X"], "osmosis eval: error: unrecognized option: --modle (did you mean '--module' or '--model'?)"),
        (["eval", "--mode", "X"], "osmosis eval: error: unrecognized option: --mode (did you mean '--model' or '--module'?)"),
        (["test", "--datset", "rows.jsonl"], "osmosis test: error: unrecognized option: --datset (did you mean '--dataset'?)"),
        (["evl"], "osmosis: error: unknown command 'evl' (did you mean 'eval'?)"),
        (["rollout", "rn"], "osmosis rollout: error: unknown command 'rn' (did you mean 'run'?)"),
        (["eval", "cache", "lss"], "osmosis eval cache: error: unknown command 'lss' (did you mean 'ls'?)"),
        (["workspace", "swtch", "team"], "osmosis workspace: error: unknown command 'swtch' (did you mean 'switch'?)"),
        (["serve", "-m", "a:b", "--log-level", "debg"], "osmosis serve: error: argument --log-level: invalid choice 'debg' (did you mean 'debug'?)"),
        (["whoami", "--jsn"], "osmosis whoami: error: unrecognized option: --jsn (did you mean '--json'?)"),
        (["eval", "cache", "ls", "--modle", "x"], "osmosis eval cache ls: error: unrecognized option: --modle (did you mean '--model'?)"),
    ],
)  # fmt: skip
def test_a_typo_is_named_with_the_nearest_names(
    capsys: pytest.CaptureFixture[str], argv: list[str], line: str
) -> None:
    lines = usage_error(capsys, argv).splitlines()
    assert lines[-2].startswith(line)
    assert lines[-1] == f"Run '{line.split(': error')[0]} --help' for the options."


def test_an_abbreviation_is_not_taken_for_the_full_option(capsys: pytest.CaptureFixture[str]) -> None:
    # --max-turn would have meant --max-turns with argparse's default allow_abbrev.
    err = usage_error(capsys, [*EVAL, "--max-turn", "3"])
    assert "unrecognized option: --max-turn (did you mean '--max-turns'?)" in err


def test_an_unknown_option_is_reported_by_the_innermost_command(capsys: pytest.CaptureFixture[str]) -> None:
    err = usage_error(
        capsys, ["rollout", "run", "-m", "a:b", "-d", "x.jsonl", "--model", "scripted", "--concurency", "4"]
    )
    assert (
        "osmosis rollout run: error: unrecognized option: --concurency (did you mean '--concurrency'?)" in err
    )


def test_a_word_where_a_number_belongs_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    err = usage_error(capsys, [*EVAL, "--n", "many"])
    assert "osmosis eval: error: argument --n: invalid value 'many': expected a whole number" in err


def test_an_option_value_that_starts_with_a_dash_is_not_an_unknown_option(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The value of --api-key is taken as is; the error is the one that is really there.
    err = usage_error(capsys, ["eval", "--api-key", "-not-an-option", "--modle", "x"])
    assert "unrecognized option: --modle" in err and "-not-an-option" not in err.splitlines()[-2]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--n", "0"], "Error: --n: invalid value 0: expected 1 or more"),
        (["--batch-size", "0"], "Error: --concurrency/--batch-size: invalid value 0: expected 1 or more"),
        (["--offset", "-1"], "Error: --offset: invalid value -1: expected 0 or more"),
        (["--max-turns", "0"], "Error: --max-turns: invalid value 0: expected 1 or more"),
        (["--max-failure-rate", "2"], "Error: --max-failure-rate: must be between 0 and 1, got '2'"),
        (["--mcp", "tools"], "Error: -m/--module and --mcp cannot be combined: give one of -m/--module, --mcp, --mcp-url"),
        (["--fresh", "--retry-failed"], "Error: --fresh and --retry-failed cannot be combined: give one of --fresh, --retry-failed"),
    ],
)  # fmt: skip
def test_a_value_error_returns_1_with_one_line(
    capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    assert main([*EVAL, *extra]) == 1
    captured = capsys.readouterr()
    assert captured.err.strip() == message and captured.out == ""


def test_test_without_an_agent_returns_1(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["test", "-d", "rows.jsonl"]) == 1
    assert capsys.readouterr().err.strip() == (
        "Error: osmosis test needs one of -m/--module, --mcp, --mcp-url (see osmosis test --help)"
    )


def test_serve_without_an_agent_is_a_usage_error_as_in_0_2(capsys: pytest.CaptureFixture[str]) -> None:
    err = usage_error(capsys, ["serve"])
    assert "osmosis serve: error: one of the arguments -m/--module, --mcp, --mcp-url is required" in err


def test_typos_on_a_whole_command_line() -> None:
    modle = cli("eval", "--modle", "X")
    assert modle.returncode == 2 and modle.stdout == ""
    assert (
        "osmosis eval: error: unrecognized option: --modle (did you mean '--module' or '--model'?)"
        in modle.stderr
    )
    assert "invalid choice" not in modle.stderr and "Traceback" not in modle.stderr
    command = cli("evl", "--help")
    assert command.returncode == 2 and "did you mean 'eval'?" in command.stderr
    value = cli(*EVAL, "--n", "0")
    assert value.returncode == 1 and value.stderr.strip() == "Error: --n: invalid value 0: expected 1 or more"


def test_python_m_osmosis_ai_cli_runs_the_command_line() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "osmosis_ai.cli", "evl"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2 and "did you mean 'eval'?" in result.stderr


def test_an_option_of_the_sub_commands_names_the_missing_sub_command(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # --quiet belongs to `rollout run`: what is missing is the sub-command, not a valid option.
    err = usage_error(capsys, ["rollout", "--quiet"])
    assert "osmosis rollout: error: the following arguments are required: {run,bench,check,init,list}" in err
