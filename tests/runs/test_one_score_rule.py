"""One score rule on every path: the agent's own reward (``ctx.complete(..., reward=...)``) is judged the same
by ``osmosis test`` and ``osmosis eval`` (the agent in this process), by ``osmosis rollout run -m`` (the agent
behind an in-process rollout server, its reward on the wire) and by ``osmosis rollout run --url`` against
``osmosis serve`` (another process). A reward that is not a finite real number is the item's
``reward_error`` with the score rule's message, never a number; a numpy scalar is a number."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import cli
from tests.support.serve import ServeProcess

AGENT = "reward_agent:agent_loop"
AGENT_SOURCE = '''
import numpy

from osmosis_ai.rollout import RolloutAgentLoop

REWARDS = {"bool": True, "str": "0.5", "float32": numpy.float32(0.5), "nan": float("nan"), "float": 0.5}


class RewardAgent(RolloutAgentLoop):
    """Calls the model once, then completes with the reward the row's ``case`` names."""

    name = "reward_agent"

    def get_tools(self, request):
        return []

    async def run(self, ctx):
        messages = list(ctx.request.messages)
        reply = await ctx.chat(messages)
        return ctx.complete([*messages, reply.message], reward=REWARDS[ctx.request.metadata["case"]])


agent_loop = RewardAgent()
'''
EVAL_FN_SOURCE = "def one(solution_str, ground_truth, extra_info):\n    return 1.0\n"

REFUSED = "the agent's reward must be a finite real number (a float, or an int), got "
# case -> (exit status, outcome, reward, error) as every command reports it
EXPECTED: dict[str, tuple[int, str, float | None, str | None]] = {
    "bool": (
        1,
        "reward_error",
        None,
        REFUSED + "True of type bool; a bool is not a score: return 1.0 or 0.0",
    ),
    "str": (1, "reward_error", None, REFUSED + "'0.5' of type str"),
    "nan": (1, "reward_error", None, REFUSED + "nan of type float"),
    "float32": (0, "completed", 0.5, None),
    "float": (0, "completed", 0.5, None),
}
CASES = list(EXPECTED)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The agent, an eval function and a one-row dataset per case, in the directory the commands run in."""
    directory = tmp_path_factory.mktemp("one_score_rule")
    (directory / "reward_agent.py").write_text(AGENT_SOURCE)
    (directory / "eval_one.py").write_text(EVAL_FN_SOURCE)
    for case in CASES:
        row = {"system_prompt": "s", "user_prompt": "What is 1 + 1?", "ground_truth": "2", "case": case}
        (directory / f"{case}.jsonl").write_text(json.dumps(row) + "\n")
    return directory


@pytest.fixture(scope="module")
def served(workdir: Path) -> Iterator[str]:
    """``osmosis serve`` of the agent (one process for every case): its URL."""
    server = ServeProcess("--local", "--no-validate", "-m", AGENT, cwd=workdir)
    try:
        server.wait_ready()
        yield server.url
    finally:
        code, _, err = server.stop()
        assert code == 0, err


def _run(workdir: Path, *args: str) -> int:
    ran = cli(*args, cwd=workdir)
    assert "Traceback" not in ran.stderr
    return ran.returncode


def _test(workdir: Path, case: str, tmp_path: Path) -> tuple[Any, ...]:
    out = tmp_path / "test.json"
    code = _run(
        workdir, "test", "-m", AGENT, "-d", f"{case}.jsonl", "--model", "scripted", "-q", "-o", str(out)
    )
    (result,) = json.loads(out.read_text())["results"]
    return code, result["outcome"], result["reward"], result["reward_error"]


def _eval(workdir: Path, case: str, tmp_path: Path) -> tuple[Any, ...]:
    out = tmp_path / "eval"
    args = ("-d", f"{case}.jsonl", "--eval-fn", "eval_one:one", "--model", "scripted", "-q")
    code = _run(workdir, "eval", "-m", AGENT, *args, "--output-path", str(out))
    (path,) = out.rglob("results_*.json")
    (result,) = json.loads(path.read_text())["runs"]
    return code, result["outcome"], result.get("error")  # eval's results do not show the agent's reward


def _rollout(workdir: Path, case: str, tmp_path: Path, *target: str) -> tuple[Any, ...]:
    out = tmp_path / "records.jsonl"
    args = ("-d", f"{case}.jsonl", "--model", "scripted", "-q", "-o", str(out))
    code = _run(workdir, "rollout", "run", *target, *args)
    (record,) = [json.loads(line) for line in out.read_text().splitlines()]
    return code, record["outcome"], record["reward"], record["reward_error"]


@pytest.mark.parametrize("case", CASES)
def test_osmosis_test(workdir: Path, case: str, tmp_path: Path) -> None:
    assert _test(workdir, case, tmp_path) == EXPECTED[case]


@pytest.mark.parametrize("case", CASES)
def test_osmosis_eval(workdir: Path, case: str, tmp_path: Path) -> None:
    code, outcome, _, error = EXPECTED[case]
    assert _eval(workdir, case, tmp_path) == (code, outcome, error)


@pytest.mark.parametrize("case", CASES)
def test_rollout_run_with_the_agent_in_process(workdir: Path, case: str, tmp_path: Path) -> None:
    assert _rollout(workdir, case, tmp_path, "-m", AGENT) == EXPECTED[case]


@pytest.mark.parametrize("case", CASES)
def test_rollout_run_against_osmosis_serve(workdir: Path, served: str, case: str, tmp_path: Path) -> None:
    assert _rollout(workdir, case, tmp_path, "--url", served) == EXPECTED[case]
