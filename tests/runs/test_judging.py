"""A rubric's judge as a run's score function: argument mapping for custom rubric functions, failures
typed per judgment, every value through the one score rule."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from osmosis_ai.cli.eval_rubric.dataset import load_records
from osmosis_ai.judge.retry import RetryPolicy
from osmosis_ai.judge.rubric import RubricConfig
from osmosis_ai.outcome import Outcome
from osmosis_ai.runs.items import WorkItem
from osmosis_ai.runs.judging import JUDGE, JUDGMENT, RubricJudge, judge_function
from osmosis_ai.runs.result import Attempt, Result
from osmosis_ai.runs.scorer import Scorer
from tests.support.eval_rubric import MODEL, suite_from
from tests.support.openai_server import OpenAIServer, Reply


async def judged(
    config: RubricConfig | None,
    path: Path,
    number: int = 1,
    *,
    evaluate_fn: Callable[..., Any] | None = None,
    retry: RetryPolicy | None = None,
    at_once: int = 1,
) -> list[list[Result]]:
    """Each record of ``path`` judged ``number`` times, ``at_once`` judgments in flight, by the scorer runs use."""
    assert config is not None
    judge = judge_function(RubricJudge(config, "digest", details=True), evaluate_fn=evaluate_fn, retry=retry)
    scorer = Scorer([judge], reward=JUDGE)
    gate = asyncio.Semaphore(at_once)

    async def one(index: int, sample: int, record: Any) -> Result:
        answer = {"role": "assistant", "content": record.solution_str}
        attempt = Attempt(Outcome.COMPLETED, final_messages=[answer], source=record)
        async with gate:
            return await scorer.score(WorkItem(index, sample, record.payload), attempt)

    records = load_records(path, config.rubric_id)
    results = await asyncio.gather(*(one(i, s, r) for i, r in enumerate(records) for s in range(number)))
    return [list(results[i * number : (i + 1) * number]) for i in range(len(records))]


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

    (runs,) = await judged(suite.get("a"), path, 2, evaluate_fn=rubric_fn)
    assert [run.reward for run in runs] == [0.5, 0.5]
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

    ((run,),) = await judged(suite.get("a"), path, evaluate_fn=broken)
    assert (run.attempt.extra[JUDGMENT]["status"], run.error) == ("error", "ZeroDivisionError: boom")
    assert run.outcome is Outcome.REWARD_ERROR  # the user's scoring function failed


async def test_a_custom_rubric_function_s_value_goes_through_the_one_score_rule(tmp_path: Path) -> None:
    suite = suite_from(tmp_path, f"rubrics:\n  - {{id: a, rubric: A, {MODEL}}}\n")
    path = tmp_path / "d.jsonl"
    values: list[Any] = [float("nan"), float("inf"), True, "0.5", {"score": float("nan")}, 1, {"score": 0.25}]
    path.write_text(
        "".join(json.dumps({"rubric_id": "a", "solution_str": str(n)}) + "\n" for n in range(len(values)))
    )

    def rubric_fn(solution_str: str) -> Any:
        return values[int(solution_str)]

    runs = [run for (run,) in await judged(suite.get("a"), path, evaluate_fn=rubric_fn)]
    assert [run.outcome for run in runs] == [Outcome.REWARD_ERROR] * 5 + [Outcome.COMPLETED] * 2
    assert [run.reward for run in runs] == [None] * 5 + [1.0, 0.25]
    assert "must return a finite real number" in (runs[0].error or "") and "nan" in (runs[0].error or "")
    assert "a bool is not a score" in (runs[2].error or "")


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
    results = await judged(suite.get("a"), path, retry=retry)
    assert [r[0].outcome for r in results] == [
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

    results = await judged(suite.get("a"), path, evaluate_fn=rubric_fn, at_once=3)
    assert [r[0].reward for r in results] == [0.0, 0.1, None, 0.3, 0.4, 0.5]  # input order
    assert results[2][0].attempt.extra[JUDGMENT]["status"] == "error" and "SystemExit" in (
        results[2][0].error or ""
    )
    assert threading.main_thread() not in threads
