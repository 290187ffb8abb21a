"""The evaluation engine: argument mapping for custom rubric functions, failures recorded per run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from osmosis_ai.cli.eval_rubric.dataset import load_records
from osmosis_ai.cli.eval_rubric.engine import RubricEvaluationEngine
from osmosis_ai.judge.retry import RetryPolicy
from osmosis_ai.outcome import Outcome
from tests.support.eval_rubric import MODEL, suite_from
from tests.support.openai_server import OpenAIServer, Reply


async def test_custom_rubric_functions_get_the_key_variable_not_the_key(tmp_path: Path) -> None:
    suite = suite_from(
        tmp_path,
        "rubrics:\n  - id: a\n    rubric: A\n    system_prompt: Be fair.\n"
        "    model_info: {provider: OpenAI, model: m, api_key: sk-secret, system_prompt: Be brief.}\n",
    )
    path = tmp_path / "d.jsonl"
    path.write_text(
        json.dumps(
            {
                "rubric_id": "a",
                "solution_str": "out",
                "metadata": {"k": 1},
                "extra_info": {"metadata": {"m": 2}},
            }
        )
        + "\n"
    )
    seen: list[dict[str, Any]] = []

    def rubric_fn(solution_str: str, extra_info: dict[str, Any]) -> float:
        seen.append(extra_info)
        return 0.5

    engine = RubricEvaluationEngine(rubric_fn, progress=False)
    (result,) = await engine.run(suite.get("a"), load_records(path, "a"), number=2)
    assert [run.score for run in result.runs] == [0.5, 0.5] and result.label == "record[1]"
    info = seen[0]
    assert "sk-secret" not in json.dumps(info)
    assert info["api_key_env"] == "OPENAI_API_KEY" and info["provider"] == "openai"
    assert info["system_prompt"] == "Be fair.\n\nBe brief."
    assert info["metadata"] == {"m": 2, "dataset_metadata": {"k": 1}}


async def test_engine_records_failures_without_raising(tmp_path: Path) -> None:
    suite = suite_from(tmp_path, f"rubrics:\n  - {{id: a, rubric: A, {MODEL}}}\n")
    path = tmp_path / "d.jsonl"
    path.write_text('{"rubric_id": "a", "solution_str": "out"}\n')

    async def broken(solution_str: str) -> float:
        raise ZeroDivisionError("boom")

    (result,) = await RubricEvaluationEngine(broken, progress=False).run(
        suite.get("a"), load_records(path, "a"), 1
    )
    assert (result.runs[0].status, result.runs[0].error) == ("error", "ZeroDivisionError: boom")
    assert result.runs[0].outcome is Outcome.REWARD_ERROR  # the user's scoring function failed


async def test_outcomes_of_judge_calls(openai_server: OpenAIServer, tmp_path: Path) -> None:
    suite = suite_from(
        tmp_path,
        "rubrics:\n  - id: a\n    rubric: A\n"
        f"    model_info: {{provider: openai, model: m, api_key: k, api_base: '{openai_server.url}'}}\n",
    )
    path = tmp_path / "d.jsonl"
    path.write_text('{"rubric_id": "a", "solution_str": "out"}\n' * 4)
    openai_server.queue(Reply(status=401), Reply(status=404), Reply(status=400))
    retry = RetryPolicy(max_attempts=1, malformed_retries=0)
    engine = RubricEvaluationEngine(progress=False, concurrency=1, retry=retry)
    results = await engine.run(suite.get("a"), load_records(path, "a"), 1)
    assert [r.runs[0].outcome for r in results] == [
        Outcome.INFRA_ERROR,  # the key was refused
        Outcome.INFRA_ERROR,  # the model does not exist
        Outcome.MODEL_ERROR,  # this request was refused
        Outcome.COMPLETED,
    ]


async def test_sync_rubric_functions_run_off_the_event_loop_and_cannot_end_the_run(tmp_path: Path) -> None:
    import threading

    suite = suite_from(tmp_path, f"rubrics:\n  - {{id: a, rubric: A, {MODEL}}}\n")
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps({"rubric_id": "a", "solution_str": str(n)}) + "\n" for n in range(6)))
    threads: list[threading.Thread] = []

    def rubric_fn(solution_str: str) -> float:
        threads.append(threading.current_thread())
        if solution_str == "2":
            raise SystemExit(3)  # would end the event loop, and every other run with it
        return int(solution_str) / 10

    results = await RubricEvaluationEngine(rubric_fn, progress=False, concurrency=3).run(
        suite.get("a"), load_records(path, "a"), 1
    )
    assert [r.runs[0].score for r in results] == [0.0, 0.1, None, 0.3, 0.4, 0.5]  # input order
    assert results[2].runs[0].status == "error" and "SystemExit" in (results[2].runs[0].error or "")
    assert threading.main_thread() not in threads
