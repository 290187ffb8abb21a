"""``osmosis eval`` through its ``main()`` against the local OpenAI-compatible stand-in: scores, pass@k, the
journal (as a subprocess for the run killed with SIGKILL)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import Ran, assert_summary_table_matches, cli
from tests.support.openai_server import OpenAIServer, Reply

AGENT = "tests.support.agents:agent_loop"


def _data(tmp_path: Path, truths: list[str], mode: str = "ok") -> Path:
    path = tmp_path / "data.jsonl"
    rows = [
        {"system_prompt": "s", "user_prompt": f"q{i}", "ground_truth": t, "mode": mode}
        for i, t in enumerate(truths)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _command(url: str, data: Path, tmp_path: Path, *args: str) -> list[str]:
    return [
        "eval", "-m", AGENT, "-d", str(data), "--eval-fn", "tests.support.evals:exact", "--model", "m",
        "--base-url", url, "--journal", str(tmp_path / "journal.sqlite"), *args,
    ]  # fmt: skip


def _eval(url: str, data: Path, tmp_path: Path, *args: str) -> Ran:
    return cli(*_command(url, data, tmp_path, *args))


def test_scores_pass_at_k_and_resume(openai_server: OpenAIServer, tmp_path: Path) -> None:
    openai_server.default = Reply(content="2")
    data = _data(tmp_path, ["2", "3", "2", "5"])
    out = tmp_path / "report.json"
    result = _eval(openai_server.url, data, tmp_path, "--n", "3", "--batch-size", "4",
                   "--eval-fn", "tests.support.evals:turns", "-o", str(out))  # fmt: skip
    assert result.returncode == 0, result.stderr
    table = result.stdout.split("Summary (eval: ", 1)[1]  # one summary, every eval function in it
    assert "samples                           12 (4 rows x 3): completed 12" in table
    assert "mean tests.support.evals:exact    0.500 [" in table
    assert "pass@3 tests.support.evals:exact  0.500 [" in table
    assert "mean tests.support.evals:turns    3.000 [" in table
    assert "Results (" not in result.stdout
    assert result.stdout.endswith(f"Results written to: {out}\n12 runs: 12 completed (100.0%)\n")
    document = json.loads(out.read_text())
    summary = document["summary"]["eval_fns"]["tests.support.evals:exact"]
    assert summary["pass_at_1"] == 0.5 and summary["rows"] == 4 and summary["runs"] == 12
    assert document["summary"]["eval_fns"]["tests.support.evals:turns"]["mean"] == 3.0
    assert sum(len(row["runs"]) for row in document["rows"]) == 12
    assert len(openai_server.requests) == 13  # preflight + 12 runs
    again = _eval(
        openai_server.url, data, tmp_path, "--n", "3", "--eval-fn", "tests.support.evals:turns", "-q"
    )
    assert again.returncode == 0, again.stderr
    assert again.stdout == "12 runs: 12 completed (100.0%)\n"
    assert len(openai_server.requests) == 13  # everything was in the journal: nothing ran again


def test_a_changed_dataset_is_refused_and_fresh_starts_over(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    openai_server.default = Reply(content="2")
    data = _data(tmp_path, ["2"])
    assert _eval(openai_server.url, data, tmp_path, "-q").returncode == 0
    data.write_text(data.read_text().replace('"2"', '"3"'))
    result = _eval(openai_server.url, data, tmp_path, "-q")
    assert result.returncode == 1 and "dataset changed since it was written" in result.stderr
    before = len(openai_server.requests)
    result = _eval(openai_server.url, data, tmp_path, "--fresh")
    assert result.returncode == 0, result.stderr  # a score of 0 is a score: the run completed
    assert "mean tests.support.evals:exact  0.000 [" in result.stdout
    assert len(openai_server.requests) == before + 2  # preflight and the run, again
    assert len(list(tmp_path.glob("journal.sqlite.*.bak"))) == 1


def test_a_systemic_failure_stops_the_run_and_a_rerun_finishes_it(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    data = _data(tmp_path, ["2", "2", "2"])
    openai_server.queue("preflight ok", "2")
    openai_server.default = Reply(status=401)
    result = _eval(openai_server.url, data, tmp_path, "-q")
    assert result.returncode == 1
    assert result.stdout == "1 run: 1 completed (100.0%); 2 of 3 not run\n"
    assert result.stderr.startswith(
        "Error: the run stopped: model 'openai/m' cannot be used: the provider refused the API key"
    )
    openai_server.reset()
    openai_server.default = Reply(content="2")
    result = _eval(openai_server.url, data, tmp_path, "-q")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "3 runs: 3 completed (100.0%)\n"
    assert len(openai_server.requests) == 3  # preflight + the two runs that were missing


@pytest.mark.parametrize(("mode", "outcome"), [("break-eval", "reward_error"), ("skip", "no_model_calls")])
def test_failed_runs_are_counted_not_scored(
    openai_server: OpenAIServer, tmp_path: Path, mode: str, outcome: str
) -> None:
    openai_server.default = Reply(content="2")
    data = _data(tmp_path, ["2", "2"], mode=mode)
    out = tmp_path / "r.json"
    result = cli(
        "eval", "-m", AGENT, "-d", str(data), "--eval-fn", "tests.support.evals:broken", "--model", "m",
        "--base-url", openai_server.url, "--journal", str(tmp_path / "j.sqlite"), "-q", "-o", str(out),
    )  # fmt: skip
    assert result.returncode == 1
    assert result.stdout == f"2 runs: 0 completed (0.0%), {outcome} 2\n"
    assert result.stderr == f"Error: all 2 runs failed ({outcome} 2)\n"
    document = json.loads(out.read_text())
    assert document["summary"]["eval_fns"]["tests.support.evals:broken"] is None  # no score at all, not 0


@pytest.mark.parametrize("baseline", [False, True], ids=["primary", "with-baseline"])
def test_killed_with_sigkill_and_resumed_gives_the_uninterrupted_result(
    openai_server: OpenAIServer, tmp_path: Path, baseline: bool
) -> None:
    import random
    import signal
    import subprocess
    import sys

    from tests.support.cli import REPO, subprocess_env
    from tests.support.waiting import wait_until

    truths = [str(i % 3) for i in range(10)]
    data = _data(tmp_path, truths)

    def answer(payload: dict[str, Any]) -> Reply:
        shift = payload["model"] == "b"  # the baseline answers differently, so a mix-up would show
        return Reply(content=str((len(payload["messages"][1]["content"]) + shift) % 3), delay=0.02)

    openai_server.handler = answer
    extra = ["--baseline-model", "b", "--baseline-base-url", openai_server.url] if baseline else []

    def command(journal: str, report: str) -> list[str]:
        return [
            "eval", "-m", AGENT, "-d", str(data), "--eval-fn", "tests.support.evals:exact", "--model", "m",
            "--base-url", openai_server.url, "--n", "2", "--batch-size", "3", "--journal", str(tmp_path / journal),
            "-q", "-o", str(tmp_path / report), *extra,
        ]  # fmt: skip

    whole = cli(*command("whole.sqlite", "whole.json"))
    assert whole.returncode == 0, whole.stderr
    openai_server.reset()
    openai_server.handler = answer
    kill_at = random.Random(7).randrange(3, 36 if baseline else 18)
    # The run to kill needs a process of its own: SIGKILL leaves it no chance to tidy up.
    victim = subprocess.Popen([sys.executable, "-m", "osmosis_ai", *command("resumed.sqlite", "resumed.json")],
                              cwd=REPO, env=subprocess_env(), stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)  # fmt: skip
    wait_until(
        lambda: len(openai_server.requests) >= kill_at or victim.poll() is not None,
        timeout=60,
        what=f"{kill_at} model calls",
    )
    victim.send_signal(signal.SIGKILL)
    victim.wait(timeout=30)
    assert not (tmp_path / "resumed.json").exists()  # it really died mid-run
    resumed = cli(*command("resumed.sqlite", "resumed.json"))
    assert resumed.returncode == 0, resumed.stderr

    def essentials(name: str) -> list[tuple[int, int, str, str, dict[str, float]]]:
        rows = json.loads((tmp_path / name).read_text())["rows"]
        return sorted(
            (row["row_index"], r["run_index"], r.get("model_tag", ""), r["outcome"], r["scores"])
            for row in rows
            for r in row["runs"]
        )

    assert essentials("resumed.json") == essentials("whole.json")
    assert len(essentials("whole.json")) == (40 if baseline else 20)
    whole_report = json.loads((tmp_path / "whole.json").read_text())
    resumed_report = json.loads((tmp_path / "resumed.json").read_text())
    for key in ("baseline_summary", "comparison") if baseline else ():
        assert (
            resumed_report[key]["eval_fns" if key == "baseline_summary" else "tests.support.evals:exact"]
            == (whole_report[key]["eval_fns" if key == "baseline_summary" else "tests.support.evals:exact"])
        )
    assert resumed_report["summary"]["eval_fns"] == whole_report["summary"]["eval_fns"]


def _by_model(right: str = "2", wrong: str = "3", *, refuse: str | None = None) -> Any:
    """A provider where model ``m`` answers ``right`` and model ``b`` (the baseline) ``wrong``."""

    def answer(payload: dict[str, Any]) -> Reply:
        if payload["model"] == refuse:
            return Reply(status=401)
        return Reply(content=right if payload["model"] == "m" else wrong)

    return answer


def test_a_baseline_gets_its_own_summary_and_a_paired_comparison(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    openai_server.handler = _by_model()
    data = _data(tmp_path, ["2", "2", "2"])
    out = tmp_path / "r.json"
    result = _eval(openai_server.url, data, tmp_path, "--n", "2", "--batch-size", "3", "--baseline-model", "b",
                   "--baseline-base-url", openai_server.url, "-o", str(out))  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "Results (m):\n  tests.support.evals:exact: mean 1.000 [1.000, 1.000] over 3 rows" in result.stdout
    assert (
        "Baseline (b):\n  tests.support.evals:exact: mean 0.000 [0.000, 0.000] over 3 rows" in result.stdout
    )
    assert "  tests.support.evals:exact: +1.000 [+1.000, +1.000] over 3 rows" in result.stdout
    assert result.stdout.endswith(
        f"Results written to: {out}\n6 runs: 6 completed (100.0%); baseline 6 runs: 6 completed (100.0%)\n"
    )
    assert (
        "[12/12] " in result.stdout and "] [baseline] row 2 run 1: OK (" in result.stdout
    )  # piped: a line per run
    models = [r.json["model"] for r in openai_server.requests]
    assert models.count("m") == models.count("b") == 7  # a preflight each, then 3 rows x 2 runs each
    document = json.loads(out.read_text())
    assert document["config"]["baseline_model"] == "b"
    assert document["summary"]["eval_fns"]["tests.support.evals:exact"]["mean"] == 1.0  # never blended
    assert document["baseline_summary"]["eval_fns"]["tests.support.evals:exact"]["mean"] == 0.0
    assert document["comparison"]["tests.support.evals:exact"]["difference"] == 1.0
    runs = document["rows"][0]["runs"]
    assert [(r["run_index"], r.get("model_tag")) for r in runs] == [(0, None), (0, "baseline"), (1, None),
                                                                    (1, "baseline")]  # fmt: skip


def test_a_refused_baseline_stops_at_its_preflight_and_says_it_was_the_baseline(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    openai_server.handler = _by_model(refuse="b")
    data = _data(tmp_path, ["2"])
    result = _eval(openai_server.url, data, tmp_path, "--baseline-model", "b", "--baseline-base-url",
                   openai_server.url, "-q")  # fmt: skip
    assert result.returncode == 1
    assert result.stderr.startswith("Error: (baseline) model 'openai/b' cannot be used")
    assert len(openai_server.requests) == 2  # the two preflights, no run


@pytest.mark.parametrize(
    ("flags", "status", "message"),
    [
        (
            ["--baseline-base-url", "http://x"],
            1,
            "--baseline-base-url and --baseline-api-key need --baseline-model",
        ),
        (["--baseline-api-key", "k"], 1, "need --baseline-model"),
        (["--fresh", "--retry-failed"], 1, "--fresh and --retry-failed cannot be combined"),
    ],
)
def test_flags_that_need_or_exclude_others(
    tmp_path: Path, flags: list[str], status: int, message: str
) -> None:
    result = _eval("http://127.0.0.1:9/v1", _data(tmp_path, ["2"]), tmp_path, *flags)
    assert result.returncode == status and message in result.stderr


def test_the_output_file_has_the_0_2_layout(openai_server: OpenAIServer, tmp_path: Path) -> None:
    openai_server.default = Reply(content="2")
    out = tmp_path / "r.json"
    result = cli(
        *_command(openai_server.url, _data(tmp_path, ["2", "3"]), tmp_path, "--n", "2", "-o", str(out),
                  "--max-failure-rate", "1")
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert_summary_table_matches(result.stdout, out, "4 runs: 4 completed")
    assert f"\nResults written to: {out}\n" in result.stdout
    document = json.loads(out.read_text())
    assert list(document) == ["config", "summary", "rows", "run"]  # 0.2's three, then what names the shard
    assert document["config"] == {"model": "m", "n_runs": 2, "pass_threshold": 1.0,
                                  "eval_fns": ["tests.support.evals:exact"]}  # fmt: skip
    summary = document["summary"]
    assert {"eval_fns", "total_runs", "total_tokens", "total_duration_ms"} <= set(summary)
    figures = summary["eval_fns"]["tests.support.evals:exact"]
    assert (figures["mean"], figures["std"], figures["min"], figures["max"]) == (0.5, 0.5, 0.0, 1.0)
    assert (figures["pass_at_1"], figures["pass_at_2"]) == (0.5, 0.5)
    assert [row["row_index"] for row in document["rows"]] == [0, 1]
    run = document["rows"][1]["runs"][0]
    assert {"run_index", "success", "scores", "duration_ms", "tokens"} <= set(run) and "model_tag" not in run
    assert run["scores"] == {"tests.support.evals:exact": 0.0} and run["success"] is True


def test_output_path_and_log_samples_lay_out_the_results(openai_server: OpenAIServer, tmp_path: Path) -> None:
    openai_server.default = Reply(content="2")
    data = _data(tmp_path, ["2", "2"])
    cache = tmp_path / "cache"
    results = tmp_path / "results"
    command = ["eval", "-m", AGENT, "-d", str(data), "--eval-fn", "tests.support.evals:exact", "--model", "Org/M 1",
               "--base-url", openai_server.url, "--n", "2", "--log-samples", "--output-path", str(results), "-q"]  # fmt: skip
    result = cli(*command, env={"OSMOSIS_CACHE_DIR": str(cache)})
    assert result.returncode == 0, result.stderr
    (journal,) = (cache / "eval" / "org-m-1" / "data").glob("*.sqlite")
    task_id = journal.stem
    (written,) = (results / "org-m-1" / "data").glob(f"results_*_{task_id}.json")
    document = json.loads(written.read_text())
    assert document["task_id"] == task_id and document["status"] == "completed"
    assert (
        len(document["runs"]) == 4
        and document["summary"]["eval_fns"]["tests.support.evals:exact"]["mean"] == 1.0
    )
    (samples,) = (results / "org-m-1" / "data").glob(f"samples_*_{task_id}.jsonl")
    lines = [json.loads(line) for line in samples.read_text().splitlines()]
    assert [(s["row_index"], s["run_index"], s["model_tag"]) for s in lines] == [
        (0, 0, "primary"), (0, 1, "primary"), (1, 0, "primary"), (1, 1, "primary")
    ]  # fmt: skip
    assert lines[0]["messages"][-1] == {"role": "assistant", "content": "2"}
    assert (journal.parent / f"{task_id}.samples.jsonl").exists()  # kept beside the journal
    earlier = written.rename(written.with_name(f"results_1_{task_id}.json"))  # as if written a while ago
    again = cli(*command[:-1], env={"OSMOSIS_CACHE_DIR": str(cache)})  # nothing left to run: no second copy
    assert again.returncode == 0, again.stderr
    assert list((results / "org-m-1" / "data").glob("results_*")) == [earlier]
    assert f"Nothing was left to run: the results are already in {earlier}\n" in again.stdout
    inside = cli(
        *command[:-4], "--output-path", str(cache / "eval" / "x"), env={"OSMOSIS_CACHE_DIR": str(cache)}
    )
    assert inside.returncode == 1 and "is inside the journal directory" in inside.stderr


@pytest.mark.parametrize("command", ["eval", "test"])
def test_a_malformed_line_fails_before_any_request(
    openai_server: OpenAIServer, tmp_path: Path, command: str
) -> None:
    data = _data(tmp_path, ["2", "3", "2", "5"])
    lines = data.read_text().splitlines(keepends=True)
    lines[2] = lines[2][:-3] + "\n"  # the third line's JSON cut short
    data.write_text("".join(lines))
    args = _command(openai_server.url, data, tmp_path)
    if command == "test":
        args = ["test", *args[1:5], *args[7:11]]  # no eval function, no journal
    result = cli(*args)
    assert result.returncode == 1
    assert result.stderr.splitlines()[-1].startswith(f"Error: {data}: row 2: line 3 is not valid JSON")
    assert "row 0" not in result.stdout and openai_server.requests == []  # not even the preflight


def test_one_row_is_one_row_in_the_header_and_the_summary(tmp_path: Path) -> None:
    result = cli("eval", "-m", "examples.calculator.agent:agent_loop", "-d", "examples/calculator/dataset.jsonl",
                 "--model", "scripted", "--eval-fn", "examples.calculator.reward:calculator_reward", "--n", "2",
                 "--limit", "1", "--journal", str(tmp_path / "j.sqlite"))  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "(1 row x 2 runs); journal" in result.stdout
    assert "2 (1 row x 2): completed 2" in result.stdout


def test_the_scripted_model_s_tokens_are_counted_as_rollout_run_counts_them(tmp_path: Path) -> None:
    common = ("-m", "examples.calculator.agent:agent_loop", "-d", "examples/calculator/dataset.jsonl",
              "--model", "scripted")  # fmt: skip
    evaluated = cli("eval", *common, "--eval-fn", "examples.calculator.reward:calculator_reward", "--limit", "1",
                    "--journal", str(tmp_path / "e.sqlite"), "-o", str(tmp_path / "e.json"), "-q")  # fmt: skip
    assert evaluated.returncode == 0, evaluated.stderr
    rolled = cli("rollout", "run", *common, "--journal", str(tmp_path / "r.sqlite"), "-o", str(tmp_path / "r.jsonl"),
                 "-q")  # fmt: skip
    assert rolled.returncode == 0, rolled.stderr
    usage = json.loads((tmp_path / "e.json").read_text())["rows"][0]["runs"][0]["token_usage"]
    first = json.loads((tmp_path / "r.jsonl").read_text().splitlines()[0])["token_usage"]
    assert usage["prompt_tokens"] > 0 and usage["completion_tokens"] > 0
    assert usage == first


def test_every_pass_at_k_up_to_n_is_shown_and_those_without_support_say_why(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    calls: dict[str, int] = {}

    def answer(payload: dict[str, Any]) -> Reply:
        prompt = payload["messages"][-1]["content"]
        calls[prompt] = calls.get(prompt, 0) + 1
        return Reply(content="refuse" if prompt == "q0" and calls[prompt] > 2 else "2")  # row 0: 2 of 4 fail

    openai_server.handler = answer
    data = _data(tmp_path, ["2", "2", "3"])
    out, page = tmp_path / "e.json", tmp_path / "e.html"
    common = ("--n", "4", "--eval-fn", "tests.support.evals:refusing", "--max-failure-rate", "1")
    ran = cli(*_command(openai_server.url, data, tmp_path, *common, "-o", str(out), "--report", str(page)))
    assert ran.returncode == 0, ran.stderr
    table = ran.stdout.split("Summary (eval: ", 1)[1]
    named = "tests.support.evals:refusing"
    assert re.search(rf"pass@2 {named} +0.667 \[", table)
    assert re.search(rf"pass@3 {named} +– \(needs 3 completed samples of a row; 1 row has fewer\)", table)
    assert re.search(rf"pass@4 {named} +– \(needs 4 completed samples of a row; 1 row has fewer\)", table)
    figures = json.loads(out.read_text())["summary"]["eval_fns"]["tests.support.evals:refusing"]
    assert "pass_at_2" in figures and "pass_at_3" not in figures  # 0.2's keys: numbers only
    assert figures["pass_at_k_missing"] == {
        "3": "needs 3 completed samples of a row; 1 row has fewer",
        "4": "needs 4 completed samples of a row; 1 row has fewer",
    }
    assert (
        'class="missing"><td>pass@4</td><td class="num">–</td><td>needs 4 completed samples'
        in page.read_text()
    )
    as_json = cli(*_command(openai_server.url, data, tmp_path, *common, "--json"))
    summary = json.loads(as_json.stdout)
    assert list(summary["pass_at_k"]) == ["1", "2", "3", "4"]
    assert summary["pass_at_k"]["3"] is None and summary["pass_at_k"]["4"] is None
    assert summary["pass_at_k_missing"]["3"] == "needs 3 completed samples of a row; 1 row has fewer"


def test_a_baseline_comparison_counts_rows_won_lost_and_tied_everywhere(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    right = {("m", "q0"), ("m", "q1"), ("b", "q1"), ("b", "q2")}  # m wins row 0, ties row 1, loses row 2

    def answer(payload: dict[str, Any]) -> Reply:
        key = (payload["model"], payload["messages"][-1]["content"])
        return Reply(content="2" if key in right else "3")

    openai_server.handler = answer
    data = _data(tmp_path, ["2", "2", "2"])
    out, page = tmp_path / "e.json", tmp_path / "e.html"
    baseline = ("--baseline-model", "b", "--baseline-base-url", openai_server.url)
    ran = _eval(openai_server.url, data, tmp_path, *baseline, "-o", str(out), "--report", str(page))
    assert ran.returncode == 0, ran.stderr
    assert (
        "  tests.support.evals:exact: +0.000 [" in ran.stdout and " over 3 rows; W/L/T 1/1/1\n" in ran.stdout
    )
    paired = json.loads(out.read_text())["comparison"]["tests.support.evals:exact"]
    assert (paired["wins"], paired["losses"], paired["ties"], paired["rows"]) == (1, 1, 1, 3)
    html = page.read_text()
    assert '<td class="num" data-count="w">1</td><td class="num" data-count="l">1</td>' in html
    as_json = json.loads(_eval(openai_server.url, data, tmp_path, *baseline, "--json").stdout)
    assert as_json["baseline_model"] == "b"
    assert {k: as_json["comparison"]["tests.support.evals:exact"][k] for k in ("wins", "losses", "ties")} == {
        "wins": 1, "losses": 1, "ties": 1
    }  # fmt: skip
    shown = cli("report", str(out), "-o", str(tmp_path / "again.html"))
    assert shown.returncode == 0, shown.stderr
    assert "Paired with the baseline b" in shown.stdout
    assert re.search(
        r"vs baseline tests.support.evals:exact +\+0.000 \[.*\] over 3 rows; W/L/T 1/1/1", shown.stdout
    )
