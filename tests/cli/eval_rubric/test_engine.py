"""The evaluation engine: argument mapping for custom rubric functions, failures recorded per run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from osmosis_ai.cli.eval_rubric.dataset import load_records
from osmosis_ai.cli.eval_rubric.engine import RubricEvaluationEngine
from tests.support.eval_rubric import MODEL, suite_from


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
