"""``osmosis rollout run/bench`` through the command line's ``main()`` in this process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import (
    CALCULATOR,
    CALCULATOR_DATASET,
    REPO,
    Ran,
    assert_summary_table_matches,
    cli,
    cli_async,
)
from tests.support.openai_server import OpenAIServer, Reply
from tests.support.rollout_server import StandInRolloutServer

AGENT = CALCULATOR


def rollout(*args: str, cwd: Path = REPO) -> Ran:
    """``osmosis rollout *args`` in ``cwd``, whose modules (agents written by a test) are importable."""
    return cli("rollout", *args, cwd=cwd, env={"COLUMNS": "120"})


def test_run_calculator_writes_records(tmp_path: Path) -> None:
    out = tmp_path / "records.jsonl"
    result = cli(
        "rollout",
        "run",
        "-m",
        AGENT,
        "-d",
        str(CALCULATOR_DATASET),
        "--model",
        "scripted",
        "--n",
        "2",
        "--reward",
        "tests.support.rewards:answer_length",
        "--output",
        str(out),
        env={"COLUMNS": "120"},
    )
    assert result.returncode == 0, result.stderr
    rows = len(CALCULATOR_DATASET.read_text().splitlines())
    assert f"{2 * rows} (COMPLETED {2 * rows})" in result.stdout
    assert "append-only violations" in result.stdout and "Traceback" not in result.stderr
    # Built from the run's counts, the closing table says what reading the records file says.
    assert_summary_table_matches(result.stdout, out, f"{2 * rows} rollouts: {2 * rows} completed")
    assert "pass@2" in result.stdout and "tokens" in result.stdout
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == 2 * rows
    assert {(r["row_index"], r["sample_index"]) for r in records} == {
        (i, s) for i in range(rows) for s in (0, 1)
    }
    for record in records:
        assert record["status"] == "COMPLETED" and record["finish_reason"] == "stop"
        answer = record["final_messages"][-1]["content"]
        assert record["reward"] == float(len(answer)) and record["agent_reward"] == 1.0
        assert record["append_only_violations"] == []
        assert all(t["token_ids"] and t["prompt_token_ids"] and t["logprobs"] for t in record["turns"])
        assert record["metrics"]["num_llm_calls"] == 2
    # At most 20 rollouts: one table row per rollout with the counts of the token ids just checked.
    first = next(r for r in records if (r["row_index"], r["sample_index"]) == (0, 0))
    generated = sum(len(t["token_ids"]) for t in first["turns"])
    trajectory = len(first["turns"][-1]["prompt_token_ids"]) + len(first["turns"][-1]["token_ids"])
    assert f"{generated}/{trajectory}" in result.stdout
    assert "Rollouts (tokens: generated / whole trajectory)" in result.stdout
    table = result.stdout.splitlines()
    assert any(line.startswith("┃ row ┃ sample ┃ status") for line in table)  # --n 2: which sample is which
    assert any(line.startswith("│   0 │      1 │ COMPLETED") for line in table)


def test_bad_dataset_is_a_clear_error(tmp_path: Path) -> None:
    data = tmp_path / "bad.jsonl"
    data.write_text(
        json.dumps({"system_prompt": "s", "user_prompt": "What is 1 + 1?", "ground_truth": 2}) + "\n"
    )
    result = rollout("run", "-m", AGENT, "-d", str(data), "--model", "scripted")
    assert result.returncode == 1
    assert result.stderr.strip() == (
        f"Error: {data}: row 0, column 'ground_truth' is a int (2); write it as a string, e.g. \"2\""
    )


async def _osmosis_async(*args: str) -> tuple[int, str, str]:
    """``osmosis rollout *args`` while the test's event loop serves the stand-in rollout server."""
    result = await cli_async("rollout", *args, env={"COLUMNS": "120"})
    return result.returncode, result.stdout, result.stderr


async def test_init_rejected_exits_non_zero_with_status_and_body() -> None:
    async with StandInRolloutServer(mode="reject", status=500, body="get_tools exploded") as server:
        code, _stdout, stderr = await _osmosis_async(
            "run", "--url", server.url, "-d", str(CALCULATOR_DATASET), "--model", "scripted", "--quiet"
        )
    assert code == 1
    assert "Traceback" not in stderr
    rows = len(CALCULATOR_DATASET.read_text().splitlines())
    assert stderr.startswith(
        f"Error: {rows} of {rows} rollout(s) did not finish: {rows} x init rejected by "
        f"{server.url}/v1/rollout/init: HTTP 500: get_tools exploded"
    )


async def test_silent_server_times_out_with_a_clear_error() -> None:
    async with StandInRolloutServer(mode="silent") as server:
        code, stdout, stderr = await _osmosis_async(
            "run",
            "--url",
            server.url,
            "-d",
            str(CALCULATOR_DATASET),
            "--model",
            "scripted",
            "--timeout",
            "0.5",
        )
    assert code == 1
    assert "no /v1/rollout/completed callback within 0.5s" in stderr
    assert "TIMEOUT" in stdout  # the summary table is still printed


def test_bench_prints_figures() -> None:
    result = rollout("bench", "-m", AGENT, "--rollouts", "30", "--concurrency", "4", "--json")
    assert result.returncode == 0, result.stderr
    figures = json.loads(result.stdout)
    assert figures["statuses"] == {"COMPLETED": 30} and figures["rollouts_per_s"] > 0
    assert figures["append_only_violations"] == 0


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_non_finite_temperature_is_refused_by_argparse(value: str) -> None:
    result = rollout(
        "run", "-m", AGENT, "-d", str(CALCULATOR_DATASET), "--model", "scripted", f"--temperature={value}"
    )
    # A number, but not a usable one: a value error (exit 1), as 0.2's range checks.
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.strip() == f"Error: --temperature: must be a finite number, got '{value}'"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            "score",
            "invalid reward function 'score': expected 'module.path:attribute' (e.g. 'my_rewards:score')",
        ),
        (
            "tests.support.rewards:nope",
            "module 'tests.support.rewards' has no attribute 'nope'; its public attributes are: "
            "annotations, answer_length",
        ),
        ("surely_missing_module_xyz:score", "cannot import module 'surely_missing_module_xyz'"),
    ],
)
def test_bad_reward_reference_is_a_clear_error(spec: str, message: str) -> None:
    result = rollout(
        "run", "-m", AGENT, "-d", str(CALCULATOR_DATASET), "--model", "scripted", "--reward", spec
    )
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.startswith(f"Error: {message}")


# -- outcomes and exit status -------------------------------------------------------------------------

OUTCOME_AGENT = "tests.support.agents:agent_loop"


def _modes(tmp_path: Path, *modes: str) -> Path:
    path = tmp_path / "modes.jsonl"
    rows = [
        {"system_prompt": "s", "user_prompt": f"What is {i} + 1?", "ground_truth": str(i + 1), "mode": mode}
        for i, mode in enumerate(modes)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_failed_rollouts_fail_the_run_with_one_line_even_quiet(tmp_path: Path) -> None:
    data = _modes(tmp_path, "ok", "fail", "ok", "ok")
    out = tmp_path / "records.jsonl"
    result = rollout("run", "-m", OUTCOME_AGENT, "-d", str(data), "--model", "scripted", "-q", "-o", str(out))
    assert result.returncode == 1, result.stderr
    assert (
        result.stdout
        == "4 rollouts: 3 completed (75.0%), agent_error 1; mean reward 1.000 over 3 completed\n"
    )
    assert result.stderr.startswith(
        "Error: 1 of 4 rollouts failed (agent_error 1): failure rate 25.0% is above --max-failure-rate 0.0%; "
        "first: "
    )
    assert "(agent_error): " in result.stderr and "the agent broke on purpose" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    outcomes = sorted(json.loads(line)["outcome"] for line in out.read_text().splitlines())
    assert outcomes == ["agent_error", "completed", "completed", "completed"]
    allowed = rollout(
        "run", "-m", OUTCOME_AGENT, "-d", str(data), "--model", "scripted", "-q", "--max-failure-rate", "0.25"
    )
    assert allowed.returncode == 0, allowed.stderr
    assert allowed.stdout.startswith("4 rollouts: 3 completed (75.0%), agent_error 1")


def test_an_agent_that_never_calls_the_model_is_not_a_score(tmp_path: Path) -> None:
    data = _modes(tmp_path, "skip", "skip")
    result = rollout(
        "run", "-m", OUTCOME_AGENT, "-d", str(data), "--model", "scripted", "--max-failure-rate", "1"
    )
    assert result.returncode == 1
    assert result.stdout.splitlines()[-1] == "2 rollouts: 0 completed (0.0%), no_model_calls 2"
    assert "┃ row ┃ status" in result.stdout  # one sample per row: no sample column
    assert result.stderr.startswith("Error: all 2 rollouts failed (no_model_calls 2); first: ")
    assert "the agent finished without calling the model" in result.stderr


def test_bad_max_failure_rate_is_a_usage_error() -> None:
    result = rollout(
        "run",
        "-m",
        OUTCOME_AGENT,
        "-d",
        str(CALCULATOR_DATASET),
        "--model",
        "scripted",
        "--max-failure-rate",
        "2",
    )
    assert result.returncode == 1 and "must be between 0 and 1" in result.stderr


# -- a LiteLLM policy against the OpenAI-compatible stand-in, through LiteLLM's real code path ---------


def _litellm_run(server_url: str, *extra: str) -> Ran:
    return rollout(
        "run", "-m", OUTCOME_AGENT, "-d", str(CALCULATOR_DATASET), "--model", "openai/gpt-4o-mini",
        "--base-url", server_url, "--api-key", "sk-test", "--concurrency", "2", *extra,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("status", "message"),
    [
        (401, "the provider refused the API key; check the key (or the provider's key variable) (HTTP 401: "),
        (
            404,
            "the provider does not know this model (or this endpoint has no such route); check the name (HTTP 404: ",
        ),
    ],
)
def test_preflight_stops_a_run_that_cannot_work(
    openai_server: OpenAIServer, tmp_path: Path, status: int, message: str
) -> None:
    openai_server.default = Reply(status=status)
    out = tmp_path / "records.jsonl"
    result = _litellm_run(openai_server.url, "-q", "-o", str(out))
    assert result.returncode == 1
    assert result.stderr.startswith(f"Error: model 'openai/gpt-4o-mini' cannot be used: {message}")
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
    assert result.stdout == "" and not out.exists()
    assert len(openai_server.requests) == 1  # the preflight, nothing else
    assert openai_server.requests[0].json["max_tokens"] == 1


def test_preflight_names_an_endpoint_that_does_not_answer() -> None:
    from tests.support.sockets import free_port

    result = _litellm_run(f"http://127.0.0.1:{free_port()}/v1", "-q")  # nothing listens there
    assert result.returncode == 1
    assert result.stderr.startswith(
        "Error: model 'openai/gpt-4o-mini' cannot be used: the provider's endpoint does not answer"
    )


def test_model_errors_and_retried_server_errors(openai_server: OpenAIServer) -> None:
    rows = len(CALCULATOR_DATASET.read_text().splitlines())
    # Two 500s are retried by the agent's client (the gateway answers 502) and the rollouts complete.
    openai_server.queue(Reply(content="ok"), Reply(status=500), Reply(status=500))
    openai_server.default = Reply(content="fine")
    result = _litellm_run(openai_server.url, "-q")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"{rows} rollouts: {rows} completed (100.0%)")
    # A provider that refuses every request (after a preflight it does not refuse) is a model error.
    openai_server.reset()
    openai_server.queue(Reply(content="ok"))
    openai_server.default = Reply(status=400)
    result = _litellm_run(openai_server.url, "-q", "--fresh")  # not the journal of the run above
    assert result.returncode == 1
    assert result.stdout.startswith(f"{rows} rollouts: 0 completed (0.0%), model_error {rows}")
    assert result.stderr.startswith(f"Error: all {rows} rollouts failed (model_error {rows}); first: ")
    # The journal keeps model errors as finished; --retry-failed runs them again.
    openai_server.reset()
    openai_server.default = Reply(content="fine")
    result = _litellm_run(openai_server.url, "-q", "--retry-failed")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"{rows} rollouts: {rows} completed (100.0%)")
    assert len(openai_server.requests) == 1 + rows  # the preflight and each rollout's one call


# -- records in dataset order, and the rough edges -------------------------------------------------

SLOW_FIRST_AGENT = """
import asyncio

from osmosis_ai.rollout import RolloutAgentLoop


class SlowFirst(RolloutAgentLoop):
    name = "slow_first"

    def get_tools(self, request):
        return []

    async def run(self, ctx):
        # Earlier rows take longer, so rollouts end in the reverse of the dataset order.
        await asyncio.sleep(0.05 * (8 - ctx.request.metadata["row_index"]))
        result = await ctx.chat(list(ctx.request.messages))
        return ctx.complete([*ctx.request.messages, result.message], reward=1.0)


agent_loop = SlowFirst()
"""


def test_records_are_written_in_dataset_order_whatever_order_rollouts_end(tmp_path: Path) -> None:
    (tmp_path / "slow_first.py").write_text(SLOW_FIRST_AGENT)
    out = tmp_path / "records.jsonl"
    result = rollout(
        "run", "-m", "slow_first:agent_loop", "-d", str(CALCULATOR_DATASET), "--model", "scripted",
        "--n", "2", "--concurrency", "16", "-o", str(out), "-q", cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    order = [(r["row_index"], r["sample_index"]) for r in records]
    rows = len(CALCULATOR_DATASET.read_text().splitlines())
    assert order == [(row, sample) for row in range(rows) for sample in range(2)]


async def test_a_non_finite_agent_reward_is_a_reward_error_and_never_nan_in_the_records(
    tmp_path: Path,
) -> None:
    async def nan_reward(init: dict[str, object], callback: object) -> None:
        chat = {"messages": init["messages"], "rollout_id": init["rollout_id"]}
        _status, answer = await callback("/v1/chat/completions", chat)  # type: ignore[operator]
        final = [*init["messages"], answer["choices"][0]["message"]]  # type: ignore[misc]
        done = {
            "rollout_id": init["rollout_id"],
            "status": "COMPLETED",
            "final_messages": final,
            "reward": float("nan"),
        }
        await callback("/v1/rollout/completed", done)  # type: ignore[operator]

    out = tmp_path / "records.jsonl"
    data = tmp_path / "one.jsonl"
    data.write_text(CALCULATOR_DATASET.read_text().splitlines()[0] + "\n")
    async with StandInRolloutServer(script=nan_reward) as server:
        code, stdout, stderr = await _osmosis_async(
            "run", "--url", server.url, "-d", str(data), "--model", "scripted", "-o", str(out), "-q"
        )
    assert code == 1
    assert stdout == "1 rollout: 0 completed (0.0%), reward_error 1\n"
    assert stderr.startswith("Error: the rollout failed (reward_error 1); first: ")
    assert "the agent's reward must be a finite real number (a float, or an int), got nan" in stderr
    assert len(stderr.splitlines()) == 1
    text = out.read_text()
    assert "NaN" not in text
    record = json.loads(text)
    assert (record["outcome"], record["reward"], record["agent_reward"]) == ("reward_error", None, None)


def test_a_full_disk_is_one_line(tmp_path: Path) -> None:
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full on this system")
    result = rollout(
        "run", "-m", AGENT, "-d", str(CALCULATOR_DATASET), "--model", "scripted", "-o", "/dev/full"
    )
    assert result.returncode == 1
    assert result.stderr == "Error: cannot write --output /dev/full: No space left on device\n"


def test_a_deeply_nested_row_is_named(tmp_path: Path) -> None:
    data = tmp_path / "deep.jsonl"
    deep = "[" * 100_000 + "]" * 100_000
    data.write_text(CALCULATOR_DATASET.read_text().splitlines()[0] + "\n" + f'{{"system_prompt": {deep}}}\n')
    result = rollout("run", "-m", AGENT, "-d", str(data), "--model", "scripted")
    assert result.returncode == 1
    assert result.stderr == (
        f"Error: {data}: row 1: line 2 nests arrays/objects too deeply to decode; flatten that row\n"
    )


def test_a_hanging_init_ends_at_the_timeout_and_says_what_timed_out() -> None:
    from tests.support.sockets import listener

    with listener() as silent:  # accepts connections (the backlog) and never answers
        silent.listen(64)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        data_rows = len(CALCULATOR_DATASET.read_text().splitlines())
        # The HTTP client's own limit is 60 s per attempt: the run must end near --timeout instead.
        result = rollout(
            "run", "--url", url, "-d", str(CALCULATOR_DATASET), "--model", "scripted", "--timeout", "0.5",
            "-q",
        )  # fmt: skip
    assert result.returncode == 1 and data_rows > 1
    # The /health preflight, bounded by --timeout too, says so once instead of a failed rollout per row.
    assert result.stderr.startswith(
        f"Error: cannot reach the rollout server at {url} (is it running?): no answer from {url}/health "
        "within 0.5s"
    )
    assert result.stderr.count("\n") == 1


def test_a_url_nothing_answers_is_one_line_before_any_rollout() -> None:
    from tests.support.sockets import free_port

    url = f"http://127.0.0.1:{free_port()}"
    ran = rollout("run", "--url", url, "-d", str(CALCULATOR_DATASET), "--model", "scripted")
    assert ran.returncode == 1 and ran.stdout == ""
    assert ran.stderr.splitlines() == [ran.stderr.strip()]
    assert ran.stderr.startswith(f"Error: cannot reach the rollout server at {url} (is it running?)")


@pytest.mark.parametrize("key", [None, "wrong-key-of-enough-length-000000"])
def test_a_refused_server_key_names_the_flag_and_the_variable(key: str | None) -> None:
    from osmosis_ai.rollout.server.app import create_app
    from tests.support.server import RunningServer, ScriptedAgent, fast_config

    server = RunningServer(
        create_app(ScriptedAgent(), config=fast_config(api_key="right-key-" + "0" * 32))
    ).start()
    try:
        given = ["--server-api-key", key] if key else []
        ran = rollout(
            "run", "--url", server.url, *given, "-d", str(CALCULATOR_DATASET), "--model", "scripted"
        )
    finally:
        server.stop()
    assert ran.returncode == 1 and ran.stdout == ""
    assert ran.stderr.splitlines() == [ran.stderr.strip()]
    assert (
        "refused" in ran.stderr
        and "--server-api-key" in ran.stderr
        and "$OSMOSIS_SERVER_API_KEY" in ran.stderr
    )
