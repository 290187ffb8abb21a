"""Every command that takes ``--model`` treats it alike: a missing key costs one line and no request,
``scripted`` is the offline solver, a key-less base URL just works.

The commands run in-process through ``main(argv)`` (that ``python -m osmosis_ai`` runs the same
``main`` is tests/cli/test_main.py's and test_typos.py's). Named providers are pointed at the local stand-in through their base-URL variables, so a
request sent despite a missing key would be counted there.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from osmosis_ai.cli.main import main
from tests.support.cli import CALCULATOR, CALCULATOR_DATASET
from tests.support.openai_server import OpenAIServer, Reply

REWARD = "examples.calculator.reward:calculator_reward"
KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")


def _argv(command: str, model: str, *extra: str) -> list[str]:
    common = ["-m", CALCULATOR, "-d", str(CALCULATOR_DATASET), "--model", model, "--limit", "2", *extra]
    if command == "eval":
        return ["eval", "--eval-fn", REWARD, *common]
    if command == "rollout run":
        return ["rollout", "run", *[a for a in common if a not in ("--limit", "2")]]
    return [command, *common]


@pytest.fixture
def no_keys(monkeypatch: pytest.MonkeyPatch, openai_server: OpenAIServer) -> OpenAIServer:
    """No provider key in the environment; OpenAI and Anthropic pointed at the stand-in."""
    for name in KEYS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENAI_API_BASE", openai_server.url)
    monkeypatch.setenv("ANTHROPIC_API_BASE", openai_server.url.removesuffix("/v1"))
    return openai_server


@pytest.mark.parametrize("command", ["test", "eval", "rollout run"])
@pytest.mark.parametrize(
    ("model", "variable"),
    [("openai/gpt-4o-mini", "OPENAI_API_KEY"), ("anthropic/claude-sonnet-4-5", "ANTHROPIC_API_KEY")],
)
def test_a_missing_key_is_one_line_and_no_request(
    no_keys: OpenAIServer, capsys: pytest.CaptureFixture[str], command: str, model: str, variable: str
) -> None:
    assert main(_argv(command, model, "-q")) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (
        f"Error: model '{model}' cannot be used: no API key for its provider "
        f"(set {variable} in the environment, or pass an API key)\n"
    )
    assert no_keys.requests == []


def test_a_given_key_is_not_asked_for(no_keys: OpenAIServer, capsys: pytest.CaptureFixture[str]) -> None:
    no_keys.default = Reply(content="The answer is #### 19")
    assert main(_argv("test", "openai/gpt-4o-mini", "-q", "--api-key", "sk-given")) == 0, capsys.readouterr()
    assert len(no_keys.requests) == 3 and no_keys.requests[0].headers["authorization"] == "Bearer sk-given"


@pytest.mark.parametrize("command", ["test", "eval", "rollout run"])
def test_a_key_less_base_url_works_in_every_command(
    no_keys: OpenAIServer, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    no_keys.default = Reply(content="#### 0")
    assert main(_argv(command, "openai/served-model", "--base-url", no_keys.url, "-q")) == 0, (
        capsys.readouterr()
    )
    assert {r.headers["authorization"] for r in no_keys.requests} == {"Bearer EMPTY"}
    assert {r.json["model"] for r in no_keys.requests} == {"served-model"}


@pytest.mark.parametrize("command", ["test", "eval", "rollout run"])
def test_scripted_is_the_offline_solver_in_every_command(
    no_keys: OpenAIServer, capsys: pytest.CaptureFixture[str], tmp_path: Path, command: str
) -> None:
    out = tmp_path / "out.json"
    assert main(_argv(command, "scripted", "-q", "-o", str(out))) == 0, capsys.readouterr()
    assert no_keys.requests == []
    assert _rewards(command, out) in ([1.0] * 2, [1.0] * 8)  # every calculator row solved


def _rewards(command: str, out: Path) -> list[float]:
    if command == "rollout run":
        return [json.loads(line)["reward"] for line in out.read_text().splitlines()]
    document = json.loads(out.read_text())
    if command == "eval":
        return [run["scores"][REWARD] for row in document["rows"] for run in row["runs"]]
    return [result["reward"] for result in document["results"]]


@pytest.mark.parametrize("command", ["test", "eval", "rollout run"])
def test_scripted_with_a_base_url_is_refused_with_a_hint(
    no_keys: OpenAIServer, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    assert main(_argv(command, "scripted", "--base-url", no_keys.url, "-q")) == 1
    _, err = capsys.readouterr()
    assert err == (
        "Error: 'scripted' is the offline calculator solver and takes no base URL; to use the model "
        f"served at {no_keys.url}, give the name it serves\n"
    )
    assert no_keys.requests == []
