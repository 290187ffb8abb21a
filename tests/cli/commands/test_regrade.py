"""``osmosis regrade`` through ``main()``: a real ``rollout run -o`` file (scripted model) and a real ``eval
-o`` + ``--log-samples`` pair (the OpenAI-compatible stand-in) scored again with another reward — no
model request during the regrade, the new scores and the comparison against hand-computed values;
refusals by row and of an input as ``-o``; ``--only-failed``; ``-r``; a regrade SIGKILLed mid-way (a
subprocess) resumes to the output of an uninterrupted one."""

from __future__ import annotations

import json
import math
import random
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from osmosis_ai.runs.journal import Journal
from tests.support.cli import CALCULATOR_DATASET, REPO, cli, subprocess_env
from tests.support.openai_server import OpenAIServer, Reply
from tests.support.results import write_rollout_results, write_test_results
from tests.support.waiting import wait_until

CONTAINS = "tests.support.rewards:contains"
IN_PROCESS = ("--reward-workers", "0")


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def rollouts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real ``rollout run -o`` file: rows 0, 1, 3 (x2 samples) completed with agent rewards 1, 0.5,
    0.25, every answer "The answer is #### 19" (the ground truth); row 2's agent failed."""
    return write_rollout_results(tmp_path_factory.mktemp("rollouts"))


def test_rollout_run_output_regraded_with_another_reward(rollouts: Path, tmp_path: Path) -> None:
    dataset = rollouts.with_name("rollouts.jsonl.dataset.jsonl")
    out = tmp_path / "regraded.jsonl"
    result = cli("regrade", str(rollouts), "--reward", CONTAINS, "-d", str(dataset), "-o", str(out), *IN_PROCESS,
                 "--journal", str(tmp_path / "j.sqlite"))  # fmt: skip
    assert result.returncode == 0, result.stderr
    records = _lines(out)
    assert [(r["row_index"], r["sample_index"]) for r in records] == [
        (r, s) for r in range(4) for s in (0, 1)
    ]
    by_row = {r["row_index"]: r for r in records}
    assert [by_row[row]["reward"] for row in (0, 1, 3)] == [1.0, 1.0, 1.0]  # every answer holds "19"
    assert (
        by_row[2]["outcome"] == "agent_error" and by_row[2]["reward"] is None
    )  # no answer: kept as it ended
    assert by_row[1]["regrade"] == {"source": str(rollouts), "grader": f"--reward {CONTAINS}",
                                    "previous_outcome": "completed", "previous_reward": 0.5,
                                    "previous_scores": {}}  # fmt: skip
    assert by_row[1]["final_messages"][-1]["content"] == "The answer is #### 19"
    assert "Changed: 4 of 6 answers scored by both (66.7%)" in result.stdout
    assert "  row 3 sample 0: 0.25 -> 1 (+0.75)" in result.stdout
    assert result.stdout.endswith(
        "8 answers regraded: 6 scored, 2 kept as the earlier run ended (no answer to score)\n"
    )
    # the output is itself a results file: the report reads it, and a regrade never writes over an input
    again = cli("regrade", str(out), "--reward", CONTAINS, "-o", str(out), *IN_PROCESS)
    assert again.returncode == 1 and again.stderr.count("\n") == 1
    assert f"-o/--output names the same file as RESULTS ({out})" in again.stderr
    page = tmp_path / "r.html"
    report = cli("report", str(out), "-o", str(page), "-q")
    assert report.returncode == 0, report.stderr
    html = page.read_text()
    regrade = html[html.index('id="regrade-0"') : html.index('id="run-0"')]
    assert f"against the earlier grading of {rollouts}" in regrade
    keys = [part.split('"')[0] for part in regrade.split('data-key="')[1:]]
    assert keys[:4] == ["1:0", "1:1", "3:0", "3:1"] and set(keys[4:]) == {"0:0", "0:1", "2:0", "2:1"}
    assert f"regraded with --reward {CONTAINS} from {rollouts}" in html


def test_only_failed_with_none_failed_scores_nothing_and_keeps_every_answer(
    rollouts: Path, tmp_path: Path
) -> None:
    dataset = rollouts.with_name("rollouts.jsonl.dataset.jsonl")
    out, journal = tmp_path / "kept.jsonl", tmp_path / "j.sqlite"
    result = cli("regrade", str(rollouts), "--reward", CONTAINS, "-d", str(dataset), "--only-failed",
                 "-o", str(out), "--journal", str(journal), *IN_PROCESS)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"Regrading 0 answers from {rollouts} with --reward {CONTAINS}; journal ")
    assert result.stdout.endswith("0 answers regraded: 0 scored\n")
    records = _lines(out)
    assert len(records) == 8 and all(r["regrade"]["kept"] for r in records)
    assert not journal.exists()  # nothing was run: no journal is left to list


def test_a_rollout_run_output_regrades_alone_and_an_older_one_is_refused_once(
    rollouts: Path, tmp_path: Path
) -> None:
    out = tmp_path / "alone.jsonl"
    result = cli("regrade", str(rollouts), "--reward", CONTAINS, "-o", str(out), *IN_PROCESS,
                 "--journal", str(tmp_path / "j.sqlite"))  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.endswith(
        "8 answers regraded: 6 scored, 2 kept as the earlier run ended (no answer to score)\n"
    )
    records = _lines(out)
    assert records[0]["input_record"]["ground_truth"] == "19" and records[0]["input_record"]["mode"] == "ok"
    again = cli(
        "regrade", str(out), "--reward", CONTAINS, *IN_PROCESS, "--journal", str(tmp_path / "j2.sqlite")
    )
    assert again.returncode == 0, again.stderr  # a regrade's output keeps the rows too
    older = tmp_path / "older.jsonl"  # a file written before records kept their row
    older.write_text("".join(
        json.dumps({k: v for k, v in r.items() if k != "input_record"}) + "\n" for r in _lines(rollouts)
    ))  # fmt: skip
    refused = cli(
        "regrade", str(older), "--reward", CONTAINS, *IN_PROCESS, "--journal", str(tmp_path / "j3.sqlite")
    )
    assert refused.returncode == 1 and "row 0" not in refused.stdout
    assert refused.stderr == (
        f"Error: {older}: no ground_truth stored for the 6 answers to score; give the run's dataset with -d\n"
    )


def test_a_test_output_keeps_its_answers_and_regrades(openai_server: OpenAIServer, tmp_path: Path) -> None:
    results = write_test_results(tmp_path, openai_server.url)
    result = cli("regrade", str(results), "--reward", CONTAINS, *IN_PROCESS,
                 "--journal", str(tmp_path / "j.sqlite"))  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.endswith("4 answers regraded: 4 scored\n")
    document = json.loads(results.read_text())
    for entry in document["results"]:  # what is scored is what the file holds
        del entry["final_messages"]
    results.write_text(json.dumps(document))
    result = cli("regrade", str(results), "--reward", CONTAINS, "-d", str(CALCULATOR_DATASET), *IN_PROCESS,
                 "--journal", str(tmp_path / "j2.sqlite"))  # fmt: skip
    assert result.returncode == 1 and "row 0" not in result.stdout
    assert result.stderr == (
        f"Error: {results}: no final messages stored for the 4 answers to score; a test -o file without final "
        "messages (written by an earlier release): run osmosis test -o again to regrade it\n"
    )


def _eval_files(tmp_path: Path, server: OpenAIServer) -> tuple[Path, Path, Path]:
    server.default = Reply(content="12")
    data = tmp_path / "data.jsonl"
    data.write_text("".join(
        json.dumps({"system_prompt": "s", "user_prompt": f"q{i}", "ground_truth": truth}) + "\n"
        for i, truth in enumerate(["12", "2", "5"])
    ))  # fmt: skip
    journal = tmp_path / "eval.sqlite"
    out = tmp_path / "eval.json"
    result = cli("eval", "-m", "tests.support.agents:agent_loop", "-d", str(data), "--eval-fn",
                 "tests.support.evals:exact", "--model", "m", "--base-url", server.url, "--n", "2",
                 "--journal", str(journal), "--log-samples", "-o", str(out), "-q")  # fmt: skip
    assert result.returncode == 0, result.stderr
    return out, journal.with_name("eval.samples.jsonl"), data


def test_eval_output_and_its_samples_regraded_without_a_model_request(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    results, samples, data = _eval_files(tmp_path, openai_server)
    before = len(openai_server.requests)
    out = tmp_path / "regraded.jsonl"
    result = cli("regrade", str(results), str(samples), "--reward", CONTAINS, "-d", str(data), "-o", str(out),
                 "--json", *IN_PROCESS, "--journal", str(tmp_path / "j.sqlite"))  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert len(openai_server.requests) == before  # not one chat request: the stored answers were scored
    # answer "12": exact gave (1, 0, 0) for truths 12, 2, 5; contains gives (1, 1, 0)
    assert [r["reward"] for r in _lines(out)] == [1.0, 1.0, 1.0, 1.0, 0.0, 0.0]
    document = json.loads(result.stdout)
    comparison = document["comparison"]
    assert comparison["compared"] == 6
    assert comparison["changed"]["count"] == 2 and comparison["changed"]["share"] == pytest.approx(1 / 3)
    assert comparison["mean"]["old"]["value"] == pytest.approx(1 / 3)
    assert comparison["mean"]["new"]["value"] == pytest.approx(2 / 3)
    assert comparison["mean"]["difference"]["value"] == pytest.approx(1 / 3)
    assert comparison["pass_at_k"]["old"]["2"]["value"] == pytest.approx(1 / 3)
    assert comparison["pass_at_k"]["new"]["2"]["value"] == pytest.approx(2 / 3)
    # passes (T,T,F,F,F,F) and (T,T,T,T,F,F): agree on 4 of 6; chance 4/9, kappa (2/3 - 4/9) / (5/9)
    assert comparison["agreement"]["pass_fail"] == {
        "share": pytest.approx(2 / 3),
        "kappa": pytest.approx(0.4),
    }
    assert comparison["agreement"]["spearman"] is None  # pass/fail scores
    assert document["variance"] is None

    out3 = tmp_path / "repeated.jsonl"
    repeated = cli("regrade", str(results), str(samples), "--reward", CONTAINS, "-d", str(data), "-r", "3",
                   "-o", str(out3), "--json", *IN_PROCESS, "--journal", str(tmp_path / "r.sqlite"))  # fmt: skip
    assert repeated.returncode == 0, repeated.stderr
    spread = json.loads(repeated.stdout)["variance"]
    assert spread["repeats"] == 3 and spread["max_std"] == 0.0 and spread["flips"]["count"] == 0
    assert [r["regrade"]["repeats"] for r in _lines(out3)] == [[1.0] * 3] * 4 + [[0.0] * 3] * 2
    page = tmp_path / "r.html"
    assert cli("report", str(out3), "-o", str(page), "-q").returncode == 0
    assert "scored 3 times: mean within-answer standard deviation 0.000 [0.000, 0.000]" in page.read_text()
    assert len(openai_server.requests) == before


def test_an_eval_output_regrades_alone_and_one_without_samples_is_refused_once(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    results, samples, data = _eval_files(tmp_path, openai_server)
    out = tmp_path / "regraded.jsonl"
    result = cli("regrade", str(results), "--reward", CONTAINS, "-o", str(out), *IN_PROCESS,
                 "--journal", str(tmp_path / "j.sqlite"))  # fmt: skip
    assert result.returncode == 0, result.stderr  # the samples file its run names, the rows it keeps
    assert [r["reward"] for r in _lines(out)] == [1.0, 1.0, 1.0, 1.0, 0.0, 0.0]
    samples.unlink()
    refused = cli("regrade", str(results), "--reward", CONTAINS, "-d", str(data), *IN_PROCESS,
                  "--journal", str(tmp_path / "j2.sqlite"))  # fmt: skip
    assert refused.returncode == 1 and "row 0" not in refused.stdout
    assert refused.stderr == (
        f"Error: {results}: no final messages stored for the 6 answers to score; eval -o keeps its final "
        "messages in the --log-samples file: give that file too (or run eval again with --log-samples)\n"
    )


def test_only_failed_scores_the_failed_answers_and_keeps_the_others(tmp_path: Path) -> None:
    records = [
        {"row_index": i, "sample_index": 0, "status": "COMPLETED", "outcome": outcome, "reward": reward,
         "final_messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "answer 7"}]}
        for i, (outcome, reward) in enumerate([("completed", 0.0), ("reward_crash", None)])
    ]  # fmt: skip
    source = tmp_path / "rollouts.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in records))
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps({"system_prompt": "s", "user_prompt": "q", "ground_truth": "7"}) + "\n"
                            for _ in range(2)))  # fmt: skip
    out = tmp_path / "out.jsonl"
    result = cli("regrade", str(source), "--reward", CONTAINS, "-d", str(data), "--only-failed", "-o", str(out),
                 *IN_PROCESS, "--journal", str(tmp_path / "j.sqlite"))  # fmt: skip
    assert result.returncode == 0, result.stderr
    kept, rescored = _lines(out)
    assert (kept["reward"], kept["regrade"].get("kept")) == (0.0, True)  # not scored again
    assert (rescored["outcome"], rescored["reward"]) == ("completed", 1.0)
    assert result.stdout.endswith("1 answer regraded: 1 scored\n")


def test_killed_regrade_resumes_to_the_output_of_an_uninterrupted_one(tmp_path: Path) -> None:
    rows = 6
    records = [
        {"row_index": i, "sample_index": 0, "status": "COMPLETED", "reward": 0.0,
         "final_messages": [{"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": f"it is {i}"}]}
        for i in range(rows)
    ]  # fmt: skip
    source = tmp_path / "rollouts.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in records))
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps({"system_prompt": "s", "user_prompt": f"q{i}", "ground_truth": str(i % 3),
                                        "row": i}) + "\n" for i in range(rows)))  # fmt: skip
    journal = tmp_path / "j.sqlite"

    def command(out: str, journal: Path) -> list[str]:
        return [sys.executable, "-m", "osmosis_ai", "regrade", str(source), "--reward", "tests.support.rewards:stalls",
                "-d", str(data), "-o", out, "--journal", str(journal), *IN_PROCESS, "-q"]  # fmt: skip

    env = {**subprocess_env(REGRADE_STALL="4"), "PYTHONPATH": str(REPO)}
    process = subprocess.Popen(command("killed.jsonl", journal), cwd=tmp_path, env=env, text=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        wait_until(lambda: (tmp_path / "stalled").exists(), timeout=30, what="the stalled reward")
        wait_until(lambda: _recorded(journal) == rows - 1, timeout=30, what="the other answers journalled")
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    assert not (tmp_path / "killed.jsonl").exists()
    env.pop("REGRADE_STALL")
    resumed = subprocess.run(command("killed.jsonl", journal)[:-1], cwd=tmp_path, env=env, text=True,
                             capture_output=True, timeout=60)  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    assert f"Resuming: {rows - 1} of {rows} answers already finished" in resumed.stdout
    whole = cli(*command("whole.jsonl", tmp_path / "other.sqlite")[3:], cwd=tmp_path)
    assert whole.returncode == 0, whole.stderr
    assert (tmp_path / "killed.jsonl").read_text() == (tmp_path / "whole.jsonl").read_text()


def _recorded(journal: Path) -> int:
    info = Journal.inspect(journal) if journal.exists() else None
    return -1 if info is None else info.runs


def _judge_setup(tmp_path: Path, server: OpenAIServer, answers: int) -> tuple[Path, Path]:
    """An ``eval-rubric -o`` file of ``answers`` records judged once each by the stand-in."""
    (tmp_path / "rubric_configs.yaml").write_text(
        "version: 1\ndefault_score_min: 0\ndefault_score_max: 1\nrubrics:\n  - id: tone\n"
        "    rubric: Is the reply polite?\n    model_info:\n      provider: openai\n"
        f"      model: local-judge\n      api_base: {server.url}\n      timeout: 5\n",
        encoding="utf-8",
    )
    records = [
        {"conversation_id": f"c{i}", "rubric_id": "tone", "solution_str": f"reply {i}"}
        for i in range(answers)
    ]
    (tmp_path / "judged.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    home = tmp_path / "home"
    home.mkdir()
    out = tmp_path / "rubric.json"
    result = cli("eval-rubric", "-r", "tone", "-d", "judged.jsonl", "-o", str(out), cwd=tmp_path, home=home)
    assert result.returncode == 0, result.stderr
    return out, home


def _simulated_range(
    answers: int, repeats: int, p: float, trials: int = 2000
) -> dict[str, tuple[float, float]]:
    """The central 99.9% of the mean within-answer deviation and of the flip share when every
    judgment passes with chance ``p``, independently: what a judge of that noise should report."""
    generator = random.Random(1234)
    # c passes of n 0/1 scores: sample standard deviation sqrt(c (n - c) / (n (n - 1)))
    deviation = [math.sqrt(c * (repeats - c) / (repeats * (repeats - 1))) for c in range(repeats + 1)]
    means, flips = [], []
    for _ in range(trials):
        passes = [sum(generator.random() < p for _ in range(repeats)) for _ in range(answers)]
        means.append(sum(deviation[c] for c in passes) / answers)
        flips.append(sum(0 < c < repeats for c in passes) / answers)
    return {
        name: (values[int(0.0005 * trials)], values[int(0.9995 * trials) - 1])
        for name, values in (("mean_std", sorted(means)), ("flip_share", sorted(flips)))
    }


def test_rubric_regrade_reports_judge_variance_within_the_simulated_range(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    answers, repeats, p = 8, 5, 0.5
    source, home = _judge_setup(tmp_path, openai_server, answers)
    noise = random.Random(7)  # the judge's verdicts: pass (1) or fail (0), each with chance p
    openai_server.handler = lambda payload: json.dumps(
        {"score": float(noise.random() < p), "explanation": "a noisy judge"}
    )
    before = len(openai_server.requests)
    out = tmp_path / "regraded.jsonl"
    result = cli("regrade", str(source), "--rubric", "tone", "-r", str(repeats), "-o", str(out), "--json",
                 "--journal", str(tmp_path / "j.sqlite"), cwd=tmp_path, home=home)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert len(openai_server.requests) - before == answers * repeats  # the judge's calls are the only ones
    spread = json.loads(result.stdout)["variance"]
    assert spread["answers"] == answers and spread["repeats"] == repeats
    expected = _simulated_range(answers, repeats, p)
    low, high = expected["mean_std"]
    assert low <= spread["mean_std"]["value"] <= high
    low, high = expected["flip_share"]
    assert low <= spread["flips"]["share"]["value"] <= high
    records = _lines(out)
    assert all(
        len(r["regrade"]["repeats"]) == repeats and set(r["regrade"]["repeats"]) <= {0.0, 1.0}
        for r in records
    )

    # --cache: the first scoring may come from the judgment cache, a repeat never does
    cached = [cli("regrade", str(source), "--rubric", "tone", "-r", "2", "--cache", "-q", "--fresh",
                  "--journal", str(tmp_path / "c.sqlite"), cwd=tmp_path, home=home) for _ in range(2)]  # fmt: skip
    assert [c.returncode for c in cached] == [0, 0], cached[-1].stderr
    assert len(openai_server.requests) - before == answers * repeats + answers * 2 + answers
