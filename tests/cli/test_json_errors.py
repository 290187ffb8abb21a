"""``--json`` on every command (run in-process; tests/cli/commands/test_user_code_output.py keeps a real
process's stdout to the one object): stdout is exactly one JSON object, its result, and on failure an
``{"error": {"code", "message", "details"}}`` member (alone, or beside the result when the run got
that far)."""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from osmosis_ai.cli.main import COMMANDS, main
from tests.support.cli import CALCULATOR, CALCULATOR_DATASET, REPO, cli

MISSING = "no-such-file.jsonl"


@pytest.fixture(autouse=True)
def _logging_restored() -> Iterator[None]:
    """The commands run in-process here set up logging the way a command line does (a stderr handler,
    the agents' own failures silenced); other tests get the logging they had."""
    root, rollout = logging.getLogger(), logging.getLogger("osmosis_ai.rollout")
    handlers, level, rollout_level = list(root.handlers), root.level, rollout.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    rollout.setLevel(rollout_level)


def one_object(stdout: str) -> dict[str, Any]:
    document = json.loads(stdout)
    assert isinstance(document, dict)
    return document


def assert_error(document: dict[str, Any], code: str, *, command: str) -> dict[str, Any]:
    error = document["error"]
    assert set(error) == {"code", "message", "details"}
    assert error["code"] == code and error["message"] and error["details"]["command"] == command
    return error


# One command line per command (and per sub-command), each failing or succeeding without network
# beyond loopback; ``expected`` is the exit status, ``code`` the error's code (None: no error).
CASES: list[tuple[list[str], int, str | None]] = [
    (["login", "--device", "--timeout", "5"], 1, "login_error"),
    (["whoami"], 1, None),
    (["logout", "-y"], 0, None),
    (["workspace", "list"], 1, None),  # not logged in, as whoami
    (["workspace", "current"], 1, None),
    (["workspace", "switch", "nobody"], 1, None),
    (["preview", "-p", "examples/rubric_configs.yaml"], 0, None),
    (["preview", "-p", MISSING], 1, "cli_error"),
    (["eval-rubric", "-r", "support_followup", "-d", MISSING], 1, "cli_error"),
    (["serve", "-m", "no_such_module:agent", "--skip-register"], 1, "user_code_error"),
    (["validate", "-m", CALCULATOR], 0, None),
    (["validate", "-m", "no_such_module:agent"], 1, "user_code_error"),
    (["rollout", "run", "-m", CALCULATOR, "-d", str(CALCULATOR_DATASET), "--model", "scripted"], 0, None),
    (["rollout", "bench", "-m", CALCULATOR, "--rollouts", "4"], 0, None),
    (["rollout", "check", "-m", CALCULATOR, "-d", MISSING, "--tokenizer", "nowhere"], 1, "dataset_not_found_error"),
    (["rollout", "list"], 0, None),
    (["rollout", "init", "Not A Name"], 1, "workspace_error"),
    (["eval", "-m", CALCULATOR, "-d", MISSING, "--eval-fn", "examples.calculator.reward:calculator_reward"], 1, "dataset_not_found_error"),
    (["eval", "cache", "dir"], 0, None),
    (["eval", "cache", "ls"], 0, None),
    (["eval", "cache", "rm", "--all"], 1, "cli_error"),
    (["eval", "run", MISSING], 1, "cli_error"),
    (["test", "-m", CALCULATOR, "-d", MISSING], 1, "dataset_not_found_error"),
    (["test", "-m", CALCULATOR, "-d", str(CALCULATOR_DATASET), "--trajectories", str(REPO / "pyproject.toml")], 1, "output_path_error"),
    (["reward", "score", "-f", "examples.calculator.reward:calculator_reward", "-d", MISSING], 1, "dataset_not_found_error"),
    (["report", MISSING], 1, None),
    (["regrade", MISSING, "--reward", "tests.support.rewards:contains"], 1, "cli_error"),
    (["completion", "bash"], 0, None),
    (["sandbox", "check"], 0 if shutil.which("bwrap") else 1, None),
    (["train", MISSING], 1, "cli_error"),
    (["eval", "--modle", "x"], 2, "usage_error"),
]  # fmt: skip


def test_every_command_is_covered() -> None:
    assert {argv[0] for argv, _, _ in CASES} == set(COMMANDS)


@pytest.mark.parametrize(("argv", "expected", "code"), CASES, ids=[" ".join(c[0][:3]) for c in CASES])
def test_json_of_every_command_parses(
    tmp_path: Path, argv: list[str], expected: int, code: str | None
) -> None:
    env = {"OSMOSIS_CONFIG_DIR": str(tmp_path / "config"), "OSMOSIS_CACHE_DIR": str(tmp_path / "cache"),
           "OSMOSIS_PLATFORM_URL": "http://127.0.0.1:9"}  # fmt: skip
    result = cli(*argv, "--json", env=env)
    assert result.returncode == expected, result.stderr
    document = one_object(result.stdout)
    assert "Traceback" not in result.stderr
    if code is not None:
        assert_error(document, code, command="osmosis " + " ".join(argv[: _depth(argv)]))
    elif expected != 0:
        assert "error" in document or document.get("valid") is False or document.get("logged_in") is False


def _depth(argv: list[str]) -> int:
    """How many words of ``argv`` name the command (``eval cache ls`` is 3, ``eval`` is 1)."""
    if argv[:2] == ["eval", "cache"]:
        return 3
    if argv[:2] == ["eval", "run"]:
        return 2
    return 2 if argv[0] in {"rollout", "workspace", "reward"} else 1


FAILING_AGENT = """
from osmosis_ai.rollout import RolloutAgentLoop


class Failing(RolloutAgentLoop):
    name = "failing"

    def get_tools(self, request):
        return []

    async def run(self, ctx):
        raise RuntimeError("the agent broke")


agent_loop = Failing()
"""


def test_a_failed_run_keeps_its_result_beside_the_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "failing_agent.py").write_text(FAILING_AGENT)
    monkeypatch.chdir(tmp_path)
    status = main(["rollout", "run", "-m", "failing_agent:agent_loop", "-d", str(CALCULATOR_DATASET),
                   "--model", "scripted", "--json"])  # fmt: skip
    assert status == 1
    document = one_object(capsys.readouterr().out)
    assert document["rows"] > 0 and document["outcomes"]["agent_error"] == document["rows"]
    assert_error(document, "cli_error", command="osmosis rollout run")


def test_an_error_object_names_the_class_and_its_plain_attributes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["test", "-m", CALCULATOR, "-d", MISSING, "--json"]) == 1
    captured = capsys.readouterr()
    error = assert_error(one_object(captured.out), "dataset_not_found_error", command="osmosis test")
    assert error["details"]["type"] == "osmosis_ai.errors.DatasetNotFoundError"
    assert MISSING in error["message"]
    assert captured.err.startswith("Error: ")  # the person at the terminal still reads one line


def test_a_value_error_under_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", "-m", CALCULATOR, "-d", MISSING, "--eval-fn", "a:b", "--n", "0", "--json"]) == 1
    error = assert_error(one_object(capsys.readouterr().out), "cli_error", command="osmosis eval")
    assert error["message"] == "--n: invalid value 0: expected 1 or more"


def test_a_usage_error_under_json(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as raised:
        main(["eval", "cache", "lss", "--json"])
    assert raised.value.code == 2
    captured = capsys.readouterr()
    error = assert_error(one_object(captured.out), "usage_error", command="osmosis eval cache")
    assert "did you mean 'ls'?" in error["message"] and error["details"]["usage"].startswith(
        "usage: osmosis eval cache"
    )
    assert captured.err == ""


def test_preview_json_lists_the_entries(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["preview", "-p", str(REPO / "examples" / "sample_data.jsonl"), "--json"]) == 0
    document = one_object(capsys.readouterr().out)
    assert document["kind"] == "jsonl_records" and document["count"] == len(document["items"]) > 0


def test_validate_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "-m", CALCULATOR, "--json"]) == 0
    document = one_object(capsys.readouterr().out)
    assert document["valid"] is True and document["tool_count"] > 0 and document["errors"] == []
