"""What user code hands back or prints cannot break a command's JSON: an agent's NaN reward is a
``reward_error`` by the one score rule (never a bare ``NaN`` in ``-o``/``--json``), and with ``--json``
stdout carries the one JSON object whatever the agent prints."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import cli, osmosis
from tests.support.openai_server import OpenAIServer, Reply

REWARDING = """
from osmosis_ai.rollout import RolloutAgentLoop


class Rewarding(RolloutAgentLoop):
    name = "rewarding"

    def get_tools(self, request):
        return []

    async def run(self, ctx):
        result = await ctx.chat(list(ctx.request.messages))
        reward = {{"nan": float("nan"), "inf": float("inf"), "true": True, "half": 0.5}}[ctx.request.metadata["mode"]]
        return ctx.complete([*ctx.request.messages, result.message], reward=reward)


agent_loop = Rewarding()
"""

PRINTING = """
import os
import subprocess
import sys

from osmosis_ai.rollout import RolloutAgentLoop

print("printed at import")


class Printing(RolloutAgentLoop):
    name = "printing"

    def get_tools(self, request):
        print("printed by get_tools")
        return []

    async def run(self, ctx):
        print("printed by run")
        sys.stdout.write("written to sys.stdout\\n")
        os.write(1, b"written to fd 1\\n")
        subprocess.run(["echo", "echoed by a subprocess"], check=True)
        result = await ctx.chat(list(ctx.request.messages))
        return ctx.complete([*ctx.request.messages, result.message], reward=1.0)


agent_loop = Printing()
"""


def _strict(text: str) -> Any:
    def refuse(constant: str) -> None:
        raise ValueError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


def _data(tmp_path: Path, modes: list[str]) -> Path:
    path = tmp_path / "data.jsonl"
    rows = [{"system_prompt": "s", "user_prompt": "q", "ground_truth": "2", "mode": m} for m in modes]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_an_agents_reward_that_is_not_a_score_is_a_reward_error(
    openai_server: OpenAIServer, tmp_path: Path,
) -> None:  # fmt: skip
    (tmp_path / "rewarding_agent.py").write_text(REWARDING.format())
    openai_server.default = Reply(content="2")
    out = tmp_path / "out.json"
    ran = cli("test", "-m", "rewarding_agent:agent_loop", "-d", str(_data(tmp_path, ["nan", "inf", "true", "half"])),
                      "--model", "m", "--base-url", openai_server.url, "-o", str(out), "--json", cwd=tmp_path)  # fmt: skip
    assert ran.returncode == 1
    summary = _strict(ran.stdout)  # the one object, valid JSON
    assert summary["outcomes"]["reward_error"] == 3 and summary["outcomes"]["completed"] == 1
    document = _strict(out.read_text())
    results = document["results"]
    assert [r["outcome"] for r in results] == ["reward_error"] * 3 + ["completed"]
    assert [r["reward"] for r in results] == [None, None, None, 0.5]
    assert "the agent's reward must be a finite real number" in results[0]["error"]
    assert "a bool is not a score" in results[2]["error"]
    assert document["summary"]["passed"] == 1
    assert ran.stderr.startswith("Error: ") and len(ran.stderr.splitlines()) == 1


@pytest.mark.parametrize("command", ["test", "eval", "rollout"])
def test_with_json_what_the_agent_prints_goes_to_stderr(
    command: str, openai_server: OpenAIServer, tmp_path: Path
) -> None:
    (tmp_path / "printing_agent.py").write_text(PRINTING)
    openai_server.default = Reply(content="2")
    data = str(_data(tmp_path, ["x", "y"]))
    agent = ["-m", "printing_agent:agent_loop", "-d", data]
    model = ["--model", "m", "--base-url", openai_server.url]
    journal = ["--journal", str(tmp_path / "j.sqlite")]
    argv = {
        "test": ["test", *agent, *model],
        "eval": ["eval", *agent, *model, "--eval-fn", "tests.support.evals:exact", *journal],
        "rollout": ["rollout", "run", *agent, *model, *journal],
    }[command]
    # A process of its own: the agent writes to file descriptor 1, which only a real stdout captures.
    result = osmosis(*argv, "--json", cwd=tmp_path, env={"PYTHONPATH": f"{tmp_path}:{Path.cwd()}"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("\n") == 1
    assert _strict(result.stdout)["rows"] == 2
    for printed in ("printed at import", "printed by get_tools", "printed by run", "written to sys.stdout",
                    "written to fd 1", "echoed by a subprocess"):  # fmt: skip
        assert printed in result.stderr
