"""``osmosis eval-rubric`` through the command line's ``main()`` in this process, judging against the loopback
OpenAI-compatible server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import assert_summary_table_matches, cli
from tests.support.openai_server import OpenAIServer, Reply


def write_config(path: Path, api_base: str) -> Path:
    path.write_text(
        "version: 1\n"
        "default_score_min: 0\n"
        "default_score_max: 1\n"
        "rubrics:\n"
        "  - id: tone\n"
        "    rubric: Is the reply polite?\n"
        "    model_info:\n"
        "      provider: openai\n"
        "      model: local-judge\n"
        f"      api_base: {api_base}\n"
        "      timeout: 5\n"
        "  - id: strict\n"
        "    rubric: Is it correct?\n"
        "    score_max: 10\n"
        "    model_info: {provider: anthropic, model: claude-x}\n",
        encoding="utf-8",
    )
    return path


def write_data(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def test_eval_rubric_end_to_end(openai_server: OpenAIServer, tmp_path: Path, home: Path) -> None:
    scores = iter([0.5, 1.0, 0.25])

    def handler(_payload: Any) -> Reply:
        return Reply(content=json.dumps({"score": next(scores, 0.0), "explanation": "line one\nline two"}))

    openai_server.handler = handler
    write_config(tmp_path / "rubric_configs.yaml", openai_server.url)
    write_data(
        tmp_path / "data.jsonl",
        [
            {
                "conversation_id": "c1",
                "rubric_id": "TONE",
                "solution_str": "Thanks!",
                "metadata": {"lang": "en"},
            },
            {"rubric_id": "strict", "solution_str": "other rubric"},
            {"rubric_id": "tone", "solution_str": "Go away.", "id": 7},
        ],
    )
    (tmp_path / "base.json").write_text(
        json.dumps({"average": 0.5, "variance": 0.1, "stdev": 0.3, "total_runs": 3, "failure_count": 1})
    )
    report = tmp_path / "out" / "report.json"
    result = cli(
        "eval-rubric", "-r", "tone", "-d", "data.jsonl", "-n", "2", "-o", str(report), "-b", "base.json",
        "--concurrency", "1", cwd=tmp_path, home=home,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert (
        out.startswith("Rubric 'tone' (")
        and "-> provider 'openai' model 'local-judge'" in out.splitlines()[0]
    )
    assert "Loaded 2 matching record(s) from data.jsonl; 2 evaluation(s) per record" in out
    assert "\n[c1] run 01: 0.5000 (" in out and "s) - line one line two\n" in out  # a judgment a line
    assert "\n[c1] 2 of 2 judged: mean 0.7500 (stdev " in out
    assert "[record[2]] run 02: " in out
    # header 2, judgments 4 and a mean per record 2, baseline 6, the file written 1
    assert len(out.split("Summary (eval-rubric: ")[0].splitlines()) == 15
    assert "Baseline comparison (source: base.json):" in out
    assert f"Wrote evaluation results to {report}" in out
    assert out.endswith("4 judgments: 4 completed (100.0%)\n")
    assert_summary_table_matches(out, report, "4 judgments: 4 completed (100.0%)")
    assert out.index(f"Wrote evaluation results to {report}") < out.index("Summary (eval-rubric: ")

    document = json.loads(report.read_text(encoding="utf-8"))
    assert document["overall_statistics"]["total_runs"] == 4
    assert document["overall_statistics"]["success_count"] == 4
    assert document["overall_statistics"]["average"] == pytest.approx((0.5 + 1.0 + 0.25 + 0.0) / 4)
    assert [record["id"] for record in document["records"]] == ["c1", "7"]
    assert document["records"][0]["input_record"]["metadata"] == {"lang": "en"}
    comparison = document["baseline_comparison"]
    assert comparison["delta_statistics"]["average"] == pytest.approx(0.4375 - 0.5)
    assert comparison["baseline_statistics"]["total_runs"] == 3
    assert (
        comparison["delta_statistics"]["total_runs"],
        comparison["delta_statistics"]["failure_count"],
    ) == (1, -1)
    counts = [comparison[part][key] for part in ("baseline_statistics", "delta_statistics")
              for key in ("total_runs", "failure_count")]  # fmt: skip
    assert all(type(count) is int for count in counts)  # 3, not 3.0
    assert "output_identifier" not in document
    assert len(openai_server.requests) == 4
    quoted = openai_server.requests[0].json["messages"][1]["content"]
    assert '"dataset_metadata"' in quoted and '"lang": "en"' in quoted
    assert not (home / ".cache").exists()


def test_eval_rubric_default_report_location_and_failures(
    openai_server: OpenAIServer, tmp_path: Path, home: Path
) -> None:
    openai_server.default = Reply(status=400)
    write_config(tmp_path / "rubric_configs.yaml", openai_server.url)
    write_data(tmp_path / "data.jsonl", [{"rubric_id": "tone", "solution_str": "hi"}])
    result = cli("eval-rubric", "-r", "tone", "-d", "data.jsonl", cwd=tmp_path, home=home)
    # Nothing was judged: the report is written, and the command fails with the reason.
    assert result.returncode == 1
    assert result.stderr == "Error: the judgment failed (model_error 1)\n"
    assert "] run 01: FAILED [model_error] (" in result.stdout and "scripted error 400" in result.stdout
    assert result.stdout.endswith("1 judgment: 0 completed (0.0%), model_error 1\n")
    (report,) = (home / ".cache" / "osmosis" / "rubric" / "tone").glob("rubric_eval_result_*.json")
    document = json.loads(report.read_text(encoding="utf-8"))
    assert document["overall_statistics"]["failure_count"] == 1
    assert document["outcomes"]["model_error"] == 1
    assert document["records"][0]["runs"][0]["outcome"] == "model_error"
    assert document["output_identifier"] == report.stem.rsplit("_", 1)[1]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-r", "strict"], "ANTHROPIC_API_KEY"),
        (["-r", "nope"], "Available ids: strict, tone"),
        (["-r", "tone", "-n", "0"], "at least 1"),
        (["-r", "tone", "-b", "missing.json"], "does not exist"),
        (["-r", "tone", "-d", "nowhere.jsonl"], "does not exist"),
    ],
)
def test_eval_rubric_user_errors_fail_fast(
    openai_server: OpenAIServer, tmp_path: Path, home: Path, args: list[str], message: str
) -> None:
    write_config(tmp_path / "rubric_configs.yaml", openai_server.url)
    write_data(
        tmp_path / "data.jsonl",
        [{"rubric_id": "strict", "solution_str": "x"}, {"rubric_id": "tone", "solution_str": "y"}],
    )
    if "-d" not in args:
        args = [*args, "-d", "data.jsonl"]
    result = cli("eval-rubric", *args, cwd=tmp_path, home=home)
    assert result.returncode == 1
    assert result.stderr.startswith("Error: ") and message in result.stderr, result.stderr
    assert openai_server.requests == []


def test_eval_rubric_names_the_line_of_a_too_deeply_nested_record(
    openai_server: OpenAIServer, tmp_path: Path, home: Path
) -> None:
    write_config(tmp_path / "rubric_configs.yaml", openai_server.url)
    deep = '{"rubric_id": "tone", "solution_str": ' + '{"a":' * 100_000 + "1" + "}" * 100_000 + "}"
    (tmp_path / "data.jsonl").write_text('{"rubric_id": "tone", "solution_str": "y"}\n\n' + deep + "\n")
    result = cli("eval-rubric", "-r", "tone", "-d", "data.jsonl", cwd=tmp_path, home=home)
    assert result.returncode == 1
    assert result.stderr == "Error: data.jsonl:3: the JSON is nested too deeply to read; flatten the record\n"
    assert openai_server.requests == []


@pytest.mark.parametrize("where", ["under-a-file", "proc"])
def test_eval_rubric_unwritable_report_location_fails_before_any_call(
    openai_server: OpenAIServer, tmp_path: Path, home: Path, where: str
) -> None:
    if where == "proc":
        if not Path("/proc/self").is_dir():
            pytest.skip("needs Linux /proc")
        output, blocker = Path("/proc/report.json"), "/proc is not writable"
    else:
        (tmp_path / "afile").write_text("x", encoding="utf-8")
        output, blocker = tmp_path / "afile" / "report.json", f"{tmp_path / 'afile'} is not a directory"
    write_config(tmp_path / "rubric_configs.yaml", openai_server.url)
    write_data(tmp_path / "data.jsonl", [{"rubric_id": "tone", "solution_str": "hi"}])
    result = cli("eval-rubric", "-r", "tone", "-d", "data.jsonl", "-o", str(output), cwd=tmp_path, home=home)
    assert result.returncode == 1
    assert result.stderr.startswith(f"Error: Cannot write report {output}: {blocker}"), result.stderr
    assert "-o/--output" in result.stderr and "Traceback" not in result.stderr
    assert openai_server.requests == []


def test_eval_rubric_report_write_failure_keeps_the_text_report(
    openai_server: OpenAIServer, tmp_path: Path, home: Path
) -> None:
    out = tmp_path / "out"
    out.mkdir()

    def handler(_payload: Any) -> Reply:  # the folder becomes a file while the judge works
        if out.is_dir():
            out.rmdir()
            out.write_text("in the way", encoding="utf-8")
        return Reply(content=json.dumps({"score": 0.5, "explanation": "kept"}))

    openai_server.handler = handler
    write_config(tmp_path / "rubric_configs.yaml", openai_server.url)
    write_data(tmp_path / "data.jsonl", [{"rubric_id": "tone", "solution_str": "hi"}])
    report = out / "report.json"
    result = cli("eval-rubric", "-r", "tone", "-d", "data.jsonl", "-o", str(report), cwd=tmp_path, home=home)
    assert result.returncode == 1
    assert "[record[1]] run 01: 0.5000 (" in result.stdout and "s) - kept\n" in result.stdout
    assert "Wrote evaluation results" not in result.stdout
    assert result.stderr.startswith(f"Error: Cannot write report {report}: "), result.stderr
    assert "Traceback" not in result.stderr
    assert len(openai_server.requests) == 1


def test_eval_rubric_failure_rate_and_infrastructure_failures(
    openai_server: OpenAIServer, tmp_path: Path, home: Path
) -> None:
    write_config(tmp_path / "rubric_configs.yaml", openai_server.url)
    write_data(tmp_path / "data.jsonl", [{"rubric_id": "tone", "solution_str": s} for s in ("a", "b")])
    run = ("eval-rubric", "-r", "tone", "-d", "data.jsonl", "-o", "out.json", "--concurrency", "1")
    openai_server.queue(Reply(status=400))  # one judgment's reply is refused, the other is fine
    result = cli(*run, cwd=tmp_path, home=home)
    assert result.returncode == 1
    assert result.stderr == (
        "Error: 1 of 2 judgments failed (model_error 1): failure rate 50.0% is above --max-failure-rate 0.0%\n"
    )
    assert result.stdout.endswith("2 judgments: 1 completed (50.0%), model_error 1\n")
    openai_server.queue(Reply(status=400))
    result = cli(*run, "--max-failure-rate", "0.5", cwd=tmp_path, home=home)
    assert result.returncode == 0, result.stderr
    # A provider refusing the key is no judgment of the answer: it fails the run whatever the limit.
    openai_server.queue(Reply(status=401))
    result = cli(*run, "--max-failure-rate", "1", cwd=tmp_path, home=home)
    assert result.returncode == 1
    assert result.stderr.startswith(
        "Error: 1 of 2 judgments ended in an infrastructure failure (infra_error 1)"
    )
    result = cli(*run, "--max-failure-rate", "1.5", cwd=tmp_path, home=home)
    assert result.returncode == 1 and "must be between 0 and 1" in result.stderr


def test_eval_rubric_repeats_served_from_the_cache_are_marked(
    openai_server: OpenAIServer, tmp_path: Path, home: Path
) -> None:
    write_config(tmp_path / "rubric_configs.yaml", openai_server.url)
    write_data(tmp_path / "data.jsonl", [{"rubric_id": "tone", "solution_str": "hi"}])
    result = cli(
        "eval-rubric", "-r", "tone", "-d", "data.jsonl", "-n", "3", "--cache", "--concurrency", "1",
        "-o", "out.json", cwd=tmp_path, home=home,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert len(openai_server.requests) == 1
    assert result.stdout.count("s, cached) - ") == 2
    assert result.stdout.endswith("3 judgments: 3 completed (100.0%); 2 served from the judgment cache\n")
    runs = json.loads((tmp_path / "out.json").read_text(encoding="utf-8"))["records"][0]["runs"]
    assert [run["cached"] for run in runs] == [False, True, True]
