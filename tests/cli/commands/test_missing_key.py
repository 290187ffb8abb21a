"""A command whose model has no key says so in one line, the same line in every command, before
LiteLLM is imported (its import alone takes seconds).

Each command runs as a subprocess the way users start it, without any provider key or base URL, with
``PYTHONPROFILEIMPORTTIME`` set (``-X importtime``): its import report tells whether LiteLLM was loaded.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from tests.support.cli import CALCULATOR, CALCULATOR_DATASET, REPO, cli, osmosis

REWARD = "examples.calculator.reward:calculator_reward"
RUBRIC = "support_followup"  # examples/rubric_configs.yaml: openai/gpt-5-mini
LINE = (
    "Error: model '{}' cannot be used: no API key for its provider "
    "(set OPENAI_API_KEY in the environment, or pass an API key)"
)


def _argv(command: str, tmp_path: Path) -> list[str]:
    agent = ["-m", CALCULATOR, "-d", str(CALCULATOR_DATASET), "--model", "openai/gpt-4o-mini"]
    judge = ["--rubric", RUBRIC, "-c", "rubric_configs.yaml", "--journal", str(tmp_path / "j.sqlite")]
    if command == "test":
        return ["test", *agent]
    if command == "eval":
        return ["eval", *agent, "--eval-fn", REWARD]
    if command == "eval-rubric":
        return ["eval-rubric", "-r", RUBRIC, "-d", str(REPO / "examples" / "sample_data.jsonl"),
                "-c", "rubric_configs.yaml"]  # fmt: skip
    if command == "regrade":
        answers = tmp_path / "rollouts.jsonl"
        made = cli("rollout", "run", "-m", CALCULATOR, "-d", str(CALCULATOR_DATASET), "--model", "scripted",
                   "-o", str(answers), "-q", "--journal", str(tmp_path / "rollout.sqlite"), home=tmp_path)  # fmt: skip
        assert made.returncode == 0, made.stderr
        return ["regrade", str(answers), "-d", str(CALCULATOR_DATASET), *judge]
    (tmp_path / "answers.jsonl").write_text('{"solution_str": "hello", "ground_truth": "x"}\n')
    return ["reward", "score", "-d", "answers.jsonl", *judge]


@pytest.mark.parametrize("command", ["test", "eval", "eval-rubric", "regrade", "reward score"])
def test_a_missing_key_is_one_line_before_litellm_is_imported(command: str, tmp_path: Path) -> None:
    shutil.copy(REPO / "examples" / "rubric_configs.yaml", tmp_path)
    # A process of its own: only a fresh interpreter's import-time report tells whether LiteLLM was imported.
    result = osmosis(*_argv(command, tmp_path), cwd=tmp_path, home=tmp_path,
                     env={"PYTHONPROFILEIMPORTTIME": "1"})  # fmt: skip
    assert result.returncode == 1, result.stdout
    imports = [line for line in result.stderr.splitlines() if line.startswith("import time:")]
    errors = [line for line in result.stderr.splitlines() if not line.startswith("import time:")]
    model = "openai/gpt-4o-mini" if command in ("test", "eval") else "openai/gpt-5-mini"
    assert errors == [LINE.format(model)]
    assert any(re.search(r"\|\s+osmosis_ai\.cli$", line) for line in imports)  # the report is there
    assert not [line for line in imports if re.search(r"\|\s+litellm(\.|$)", line)]
