"""``osmosis eval-rubric`` like the other run commands: ``-q``, the judge named on the command line,
CSV and Parquet datasets through the one reader, and ``--pass-threshold``."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import cli
from tests.support.openai_server import OpenAIServer, Reply

CONFIG = """version: 1
rubrics:
  - id: tone
    rubric: Is the reply polite?
    score_min: 0
    score_max: 1
    model_info: {provider: anthropic, model: claude-x, timeout: 5}
"""
RECORDS = [{"rubric_id": "tone", "solution_str": f"reply {i}"} for i in range(3)]


def _judge(openai_server: OpenAIServer, scores: list[float]) -> None:
    replies = iter(scores)

    def handler(_payload: Any) -> Reply:
        return Reply(content=json.dumps({"score": next(replies, 0.0), "explanation": "ok"}))

    openai_server.handler = handler


def _run(tmp_path: Path, home: Path, url: str, data: str, *args: str) -> Any:
    (tmp_path / "rubric_configs.yaml").write_text(CONFIG, encoding="utf-8")
    # The YAML names Anthropic, without a key: the command line's judge is the one called.
    return cli("eval-rubric", "-r", "tone", "-d", data, "-o", "out.json", "--model", "openai/local-judge",
               "--base-url", url, "--api-key", "sk-local", *args, cwd=tmp_path, home=home)  # fmt: skip


def test_the_judge_is_named_on_the_command_line_and_q_prints_the_outcome_only(
    openai_server: OpenAIServer, tmp_path: Path, home: Path
) -> None:
    _judge(openai_server, [1.0, 0.5, 1.0])
    (tmp_path / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in RECORDS), encoding="utf-8")
    result = _run(tmp_path, home, openai_server.url, "data.jsonl", "-q")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "3 judgments: 3 completed (100.0%)\n"
    assert [r.json["model"] for r in openai_server.requests] == ["local-judge"] * 3
    assert {r.headers["authorization"] for r in openai_server.requests} == {"Bearer sk-local"}
    document = json.loads((tmp_path / "out.json").read_text())
    assert (document["provider"], document["model"]) == ("openai", "local-judge")
    assert "sk-local" not in json.dumps(document)


@pytest.mark.parametrize("suffix", ["csv", "parquet"])
def test_csv_and_parquet_datasets_are_read_by_the_one_reader(
    suffix: str, openai_server: OpenAIServer, tmp_path: Path, home: Path
) -> None:
    _judge(openai_server, [1.0, 1.0, 1.0])
    path = tmp_path / f"data.{suffix}"
    if suffix == "csv":
        with path.open("w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=["rubric_id", "solution_str"])
            writer.writeheader()
            writer.writerows(RECORDS)
    else:
        pyarrow = pytest.importorskip("pyarrow")
        import pyarrow.parquet as pq

        pq.write_table(pyarrow.Table.from_pylist(RECORDS), path)
    result = _run(tmp_path, home, openai_server.url, path.name, "-q")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "3 judgments: 3 completed (100.0%)\n"
    document = json.loads((tmp_path / "out.json").read_text())
    assert [r["input_record"]["solution_str"] for r in document["records"]] == [
        "reply 0",
        "reply 1",
        "reply 2",
    ]


def test_pass_threshold_decides_pass_at_k(openai_server: OpenAIServer, tmp_path: Path, home: Path) -> None:
    (tmp_path / "data.jsonl").write_text(json.dumps(RECORDS[0]) + "\n", encoding="utf-8")
    _judge(openai_server, [0.75, 0.5])
    result = _run(
        tmp_path, home, openai_server.url, "data.jsonl", "-n", "2", "--json", "--pass-threshold", "0.7"
    )
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["pass_at_k"]["1"]["value"] == 0.5 and summary["pass_at_k"]["2"]["value"] == 1.0
    assert json.loads((tmp_path / "out.json").read_text())["pass_threshold"] == 0.7


def test_the_scripted_solver_is_refused_as_a_judge_with_what_to_give(tmp_path: Path, home: Path) -> None:
    (tmp_path / "rubric_configs.yaml").write_text(CONFIG, encoding="utf-8")
    (tmp_path / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in RECORDS), encoding="utf-8")
    result = cli(
        "eval-rubric", "-r", "tone", "-d", "data.jsonl", "--model", "scripted", cwd=tmp_path, home=home
    )
    assert result.returncode == 1
    assert result.stderr.splitlines()[-1] == (
        "Error: --model scripted is the offline calculator solver of rollout run, test and eval; it cannot "
        "judge. Give a judge model (provider/model), or --base-url for a local OpenAI-compatible server"
    )
