"""Rubric config and dataset parsing, the engine's argument mapping, and baselines (no network)."""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path
from typing import Any

import pytest

from osmosis_ai.errors import CLIError
from osmosis_ai.judge.config import load_rubric_suite
from osmosis_ai.judge.dataset import load_records
from osmosis_ai.judge.engine import RubricEvaluationEngine
from osmosis_ai.judge.report import load_baseline, write_json_atomic
from osmosis_ai.judge.session import migrate_legacy_reports, resolve_output

MODEL = "model_info: {provider: openai, model: m}"


def suite_from(tmp_path: Path, text: str, *, strict: bool = True) -> Any:
    path = tmp_path / "rubric_configs.yaml"
    path.write_text(text, encoding="utf-8")
    return load_rubric_suite(path, strict=strict)


def test_entries_are_discovered_anywhere_with_defaults(tmp_path: Path) -> None:
    suite = suite_from(
        tmp_path,
        "version: 1\ndefault_score_max: 5\ndefault_model_info: {provider: openai, model: d}\n"
        "default_ground_truth: ref\n"
        "groups:\n  easy:\n    - {id: a, rubric: A}\n    - {id: b, rubric: B, score_max: 2, ground_truth: 7}\n"
        "---\n{id: c, rubric: C, " + MODEL + "}\n",
    )
    assert suite.available_ids() == ["a", "b", "c"]
    a, b, c = suite.get("a"), suite.get("b"), suite.get("c")
    assert a.source_label.endswith(":easy[0]") and c.source_label.endswith(":document[1]")
    assert (a.score_max, b.score_max, a.model_info["model"], a.ground_truth, b.ground_truth) == (
        5.0,
        2.0,
        "d",
        "ref",
        "ref",
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("version: 2\nrubrics: []", "unsupported config version 2"),
        ("version: '1'\n", "must be an integer"),
        ("version: 1\n---\nversion: 0\n", "unsupported"),
        ("default_score_min: low\n", "must be a number"),
        ("default_score_max: .inf\n", "'default_score_max' must be a finite number, got inf"),
        (
            f"rubrics:\n  - {{id: a, rubric: A, score_min: .nan, {MODEL}}}\n",
            "'score_min' must be a finite number",
        ),
        ("default_extra_info: {}\n", "default_extra_info"),
        (
            f"rubrics:\n  - {{id: a, rubric: A, {MODEL}}}\n  - {{id: a, rubric: B, {MODEL}}}\n",
            "Duplicate rubric id 'a'",
        ),
        ("rubrics:\n  - {id: a, rubric: A}\n", "needs a 'model_info' mapping"),
        (f"rubrics:\n  - {{id: a, rubric: A, score_min: x, {MODEL}}}\n", "'score_min' must be a number"),
        ("title: nothing here\n", "No rubric entries"),
        (f"rubrics:\n  - {{id: a, rubric: A, extra_info: {{}}, {MODEL}}}\n", "'extra_info' is not supported"),
    ],
)
def test_strict_config_errors(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(CLIError, match=message):
        suite_from(tmp_path, text)


def test_lenient_mode_skips_but_lists_invalid_entries(tmp_path: Path) -> None:
    suite = suite_from(
        tmp_path,
        f"rubrics:\n  - {{rubric: no id}}\n  - {{id: ok, rubric: A, {MODEL}}}\n"
        f"  - {{id: xi, rubric: B, extra_info: {{x: 1}}, {MODEL}}}\n",
        strict=False,
    )
    assert [entry.label for entry in suite.entries] == ["rubrics[0]", "rubrics[1]", "rubrics[2]"]
    assert suite.entries[2].raw["extra_info"] == {"x": 1}
    assert suite.available_ids() == ["ok"]
    with pytest.raises(CLIError, match="'default_extra_info' is not supported"):
        suite_from(
            tmp_path,
            f"default_extra_info: {{}}\nrubrics:\n  - {{id: ok, rubric: A, {MODEL}}}\n",
            strict=False,
        )


def test_dataset_validation_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text('{"rubric_id": "A", "solution_str": "x"}\n\n{"rubric_id": "b", "solution_str": " "}\n')
    with pytest.raises(CLIError, match=r"d.jsonl:3: 'solution_str'"):
        load_records(path, "a")
    path.write_text('{"rubric_id": "A", "solution_str": "x", "score_min": "0"}\n')
    with pytest.raises(CLIError, match=r"d\.jsonl:1: 'score_min' must be a number"):
        load_records(path, "a")
    path.write_text('{"rubric_id": "A", "solution_str": "x", "score_max": Infinity}\n')
    with pytest.raises(CLIError, match=r"d\.jsonl:1: 'score_max' must be a finite number"):
        load_records(path, "a")
    path.write_text('{"rubric_id": "A", "solution_str": "x"}\n{"rubric_id": 3, "solution_str": "y"}\n')
    assert [record.line_number for record in load_records(path, "a")] == [1]


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


def test_baseline_sources(tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    report.write_text(json.dumps({"overall_statistics": {"average": "0.5", "note": "x", "total_runs": 3}}))
    assert load_baseline(report).statistics == {"average": 0.5, "total_runs": 3.0}
    report.write_text(json.dumps({"records": []}))
    with pytest.raises(CLIError, match="overall_statistics"):
        load_baseline(report)
    with pytest.raises(CLIError, match="directory"):
        load_baseline(tmp_path)


def test_output_paths_and_legacy_migration(tmp_path: Path) -> None:
    assert resolve_output(tmp_path / "x.json", "Tone!", 12.7) == (tmp_path / "x.json", None)
    assert resolve_output(tmp_path / "dir", "t", 12.7) == (
        tmp_path / "dir" / "rubric_eval_result_12.json",
        "12",
    )
    path, identifier = resolve_output(None, " Tone Check! ", 5)
    assert path.parts[-2:] == ("tone_check", "rubric_eval_result_5.json") and identifier == "5"
    (tmp_path / "eval_result" / "a").mkdir(parents=True)
    migrate_legacy_reports(tmp_path)
    assert (tmp_path / "rubric" / "a").is_dir() and not (tmp_path / "eval_result").exists()


def test_report_file_gets_normal_permissions(tmp_path: Path) -> None:
    previous = os.umask(0o027)
    try:
        write_json_atomic(tmp_path / "r.json", {"a": 1})
    finally:
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / "r.json").stat().st_mode) == 0o640
    assert json.loads((tmp_path / "r.json").read_text(encoding="utf-8")) == {"a": 1}
    assert [path.name for path in tmp_path.iterdir()] == ["r.json"]


@pytest.mark.parametrize("strict", [True, False])
@pytest.mark.parametrize("text", ["a: &x [*x]\n", "a: &x {b: [1, *x]}\n"])
def test_recursive_yaml_aliases_are_an_error(tmp_path: Path, text: str, strict: bool) -> None:
    with pytest.raises(CLIError, match=r"\(document 1\): '.+' refers back to a node that contains it"):
        suite_from(tmp_path, f"rubrics:\n  - {{id: ok, rubric: A, {MODEL}}}\n{text}", strict=strict)


@pytest.mark.timeout(10)
def test_alias_fan_out_is_walked_once_per_node(tmp_path: Path) -> None:
    # 2**60 paths through the aliases, 61 distinct nodes: each node is walked once
    levels = ["l0: &l0 [plain, {no_rubric: here}]"]
    levels += [f"l{level}: &l{level} [*l{level - 1}, *l{level - 1}]" for level in range(1, 61)]
    entry = f"base: &e {{id: a, rubric: A, {MODEL}}}\nrubrics: [*e, {{group: [*e]}}]\n"
    started = time.perf_counter()
    suite = suite_from(tmp_path, "\n".join(levels) + "\n" + entry, strict=False)
    assert time.perf_counter() - started < 2
    assert [entry.label for entry in suite.entries] == ["base"]  # aliases of an entry list it once
    assert suite.available_ids() == ["a"]


def test_too_deeply_nested_config_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(CLIError, match="nested too deeply"):
        suite_from(tmp_path, "a: " + "[" * 5000 + "]" * 5000 + "\n", strict=False)
