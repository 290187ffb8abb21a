"""One exit-status rule for every command (docs/guides/cli.md, "Exit statuses"): a malformed command
line is a usage error, 2, with the command's usage and what is missing; a refused input or a failed
run is 1 with one ``Error:`` line. Interrupted runs (130, 143, 129) are in
``tests/cli/commands/test_interrupts.py`` and ``test_signals.py``, ``serve``'s in ``test_serve.py``
and ``test_serve_workers.py``, ``workspace`` when not logged in in ``test_workspace.py``."""

from __future__ import annotations

import json

import pytest

from osmosis_ai.cli.main import main
from tests.cli.test_typos import usage_error


@pytest.mark.parametrize(
    ("argv", "missing"),
    [
        (["eval"], "-m/--module (or --mcp/--mcp-url), -d/--dataset, --eval-fn"),
        (["eval", "-m", "a:b"], "-d/--dataset, --eval-fn"),
        (["eval", "-d", "rows.jsonl"], "-m/--module (or --mcp/--mcp-url), --eval-fn"),
        (["test"], "-d/--dataset"),
        (["rollout", "run"], "-d/--dataset, --model"),
        (["reward", "score", "-f", "a:b"], "-d/--dataset"),
        (["regrade", "--reward", "a:b"], "RESULTS"),
        (["eval-rubric", "-r", "tone"], "-d/--data/--dataset"),
    ],
)  # fmt: skip
def test_a_missing_option_is_a_usage_error_naming_what_is_missing(
    capsys: pytest.CaptureFixture[str], argv: list[str], missing: str
) -> None:
    err = usage_error(capsys, argv)
    assert err.startswith("usage: osmosis ")
    assert f"error: the following arguments are required: {missing}\n" in err


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        # As in 0.2, which checked the agent after parsing: a value error.
        (["eval", "-d", "rows.jsonl", "--eval-fn", "f:g"],
         "Error: osmosis eval needs -m/--module (or --mcp/--mcp-url) (see osmosis eval --help)"),
        (["test", "-d", "rows.jsonl"], "Error: osmosis test needs one of -m/--module, --mcp, --mcp-url (see osmosis test --help)"),
        (["rollout", "run", "-m", "a:b", "-d", "missing.jsonl", "--model", "scripted", "--limit", "0"],
         "Error: --limit: invalid value 0: expected 1 or more"),
        (["eval", "-m", "a:b", "-d", "missing.jsonl", "--eval-fn", "f:g", "--concurrency", "0"],
         "Error: --concurrency/--batch-size: invalid value 0: expected 1 or more"),
    ],
)  # fmt: skip
def test_a_refused_value_is_1_with_one_line(
    capsys: pytest.CaptureFixture[str], argv: list[str], line: str
) -> None:
    assert main(argv) == 1
    captured = capsys.readouterr()
    assert captured.err.strip() == line and captured.out == ""


def test_a_usage_error_found_by_the_command_is_one_json_object_under_json(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as raised:
        main(["eval", "--json"])
    assert raised.value.code == 2
    error = json.loads(capsys.readouterr().out)["error"]
    assert error["code"] == "usage_error" and error["details"]["command"] == "osmosis eval"
    assert "-d/--dataset, --eval-fn" in error["message"]
