"""A Parquet dataset with dates, decimals and durations runs in every command; a binary column or a lone
surrogate escape is one error line, before any model call."""

from __future__ import annotations

import datetime
import decimal
import json
from pathlib import Path

import pytest

from tests.support.cli import cli
from tests.support.openai_server import OpenAIServer, Reply

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

AGENT = "tests.support.agents:agent_loop"
CALCULATOR = "examples.calculator.agent:agent_loop"


def _parquet(tmp_path: Path, extra: dict[str, object]) -> Path:
    path = tmp_path / "data.parquet"
    prompts = {"system_prompt": "s", "user_prompt": "What is 12 + 7?", "ground_truth": "19"}
    pq.write_table(pa.table({k: [v, v] for k, v in {**prompts, **extra}.items()}), path)
    return path


EXTRAS = {
    "asked_at": datetime.datetime(2024, 1, 2, 3, 4, 5),
    "due": datetime.date(2024, 1, 3),
    "price": decimal.Decimal("1.25"),
    "budget": datetime.timedelta(seconds=2),
}


def _commands(url: str, data: Path, tmp_path: Path) -> dict[str, list[str]]:
    model = ["--model", "m", "--base-url", url]
    evals = ["--eval-fn", "tests.support.evals:exact", "--journal", str(tmp_path / "j.sqlite")]
    rollouts = ["--model", "scripted", "--journal", str(tmp_path / "r.sqlite")]
    return {
        "test": ["test", "-m", AGENT, "-d", str(data), *model, "-q"],
        "eval": ["eval", "-m", AGENT, "-d", str(data), *evals, *model, "-q"],
        "rollout": ["rollout", "run", "-m", CALCULATOR, "-d", str(data), *rollouts, "-q"],
    }


@pytest.mark.parametrize("command", ["test", "eval", "rollout"])
def test_dates_decimals_and_durations_reach_the_agent_as_json(
    command: str, openai_server: OpenAIServer, tmp_path: Path
) -> None:
    openai_server.default = Reply(content="19")
    data = _parquet(tmp_path, EXTRAS)
    ran = cli(*_commands(openai_server.url, data, tmp_path)[command])
    assert ran.returncode == 0, ran.stderr
    unit = "rollouts" if command == "rollout" else "rows" if command == "test" else "runs"
    assert ran.stdout.startswith(f"2 {unit}: 2 completed (100.0%)")
    if command != "rollout":
        metadata = openai_server.requests[-1].json.get("metadata")
        assert metadata is None or json.dumps(metadata)  # whatever reaches the model is JSON


@pytest.mark.parametrize("command", ["test", "eval", "rollout"])
def test_a_binary_column_is_one_line_before_any_model_call(
    command: str, openai_server: OpenAIServer, tmp_path: Path
) -> None:
    data = _parquet(tmp_path, {"image": b"\x89PNG"})
    ran = cli(*_commands(openai_server.url, data, tmp_path)[command])
    assert ran.returncode == 1
    assert ran.stderr == (
        f"Error: {data}: row 0, column 'image': binary data (4 bytes) cannot travel in a request's JSON "
        "metadata; convert that column to strings (e.g. base64) or drop it\n"
    )
    assert openai_server.requests == []


@pytest.mark.parametrize("command", ["test", "rollout"])
def test_a_lone_surrogate_in_a_later_row_is_one_line(
    command: str, openai_server: OpenAIServer, tmp_path: Path
) -> None:
    openai_server.default = Reply(content="19")
    data = tmp_path / "data.jsonl"
    good = json.dumps({"system_prompt": "s", "user_prompt": "What is 12 + 7?", "ground_truth": "19"})
    data.write_text(good + "\n" + good.replace("7?", "7? \\ud800") + "\n")
    ran = cli(*_commands(openai_server.url, data, tmp_path)[command])
    assert ran.returncode == 1
    assert ran.stderr.startswith(f"Error: {data}: row 1, column 'user_prompt' (line 2): holds the escape")
    assert len(ran.stderr.splitlines()) == 1
