"""``osmosis test`` through its ``main()`` in this process (and as a subprocess on a terminal, with
``tests/cli/test_interactive.py``'s Ctrl-C), the agent's model calls answered by the local
OpenAI-compatible stand-in."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.cli import (
    CALCULATOR,
    CALCULATOR_DATASET,
    Ran,
    assert_summary_table_matches,
    cli,
)
from tests.support.openai_server import OpenAIServer, Reply

OUTCOME_AGENT = "tests.support.agents:agent_loop"
ROWS = len(CALCULATOR_DATASET.read_text().splitlines())


def _test(url: str, *args: str, agent: str = CALCULATOR, dataset: Path = CALCULATOR_DATASET) -> Ran:
    return cli("test", "-m", agent, "-d", str(dataset), "--model", "local-model", "--base-url", url, *args)


def _modes(tmp_path: Path, *modes: str) -> Path:
    path = tmp_path / "modes.csv"
    lines = ["system_prompt,user_prompt,ground_truth,mode"] + [
        f"s,What is {i} + 1?,{i + 1},{m}" for i, m in enumerate(modes)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_the_calculator_example_runs_unchanged(openai_server: OpenAIServer, tmp_path: Path) -> None:
    openai_server.default = Reply(content="The answer is 42")
    out = tmp_path / "results" / "out.json"
    result = _test(openai_server.url, "--offset", "2", "--limit", "3", "--temperature", "0.5", "-o", str(out))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("osmosis-rollout-test v")
    assert [line.split(":")[0] for line in lines if line.startswith("[")] == [
        "[1/3] Row 2", "[2/3] Row 3", "[3/3] Row 4",
    ]  # fmt: skip
    assert "3 rows: 3 completed (100.0%); mean reward" in result.stdout
    before_written = result.stdout.rsplit("\nResults written to:", 1)[0]
    assert_summary_table_matches(before_written, out, "3 rows: 3 completed (100.0%); mean reward")
    sent = openai_server.requests[1].json  # [0] is the preflight
    assert sent["temperature"] == 0.5 and [t["function"]["name"] for t in sent["tools"]][:1] == ["add"]
    document = json.loads(out.read_text())
    assert document["summary"]["total"] == 3 and document["summary"]["passed"] == 3
    assert document["summary"]["outcomes"]["completed"] == 3
    first = document["results"][0]
    assert (first["row_index"], first["success"], first["outcome"], first["error"]) == (
        2,
        True,
        "completed",
        None,
    )
    assert first["token_usage"] == {
        "prompt_tokens": 10,
        "completion_tokens": 5,
        "total_tokens": 15,
        "num_llm_calls": 1,
    }


def test_server_error_bursts_are_retried_and_counted(openai_server: OpenAIServer, tmp_path: Path) -> None:
    openai_server.queue("preflight ok", Reply(status=502), Reply(status=503, headers={"retry-after": "0"}))
    openai_server.default = Reply(content="The answer is 42")
    out = tmp_path / "out.json"
    result = _test(openai_server.url, "--limit", "2", "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert "Retried model calls: 2 (transient provider failures)" in result.stdout
    document = json.loads(out.read_text())
    assert document["summary"]["retried_calls"] == 2
    assert [r["retried_calls"] for r in document["results"]] == [2, 0]


TRACING_AGENT = """
from osmosis_ai.rollout import RolloutAgentLoop


class Traced(RolloutAgentLoop):
    name = "traced"

    def get_tools(self, request):
        return []

    async def run(self, ctx):
        result = await ctx.chat(list(ctx.request.messages))
        await ctx.log_event("answer", content=result.message.get("content"))
        return ctx.complete([*ctx.request.messages, result.message])


agent_loop = Traced()
"""


def test_debug_writes_the_agents_traces(openai_server: OpenAIServer, tmp_path: Path) -> None:
    (tmp_path / "traced_agent.py").write_text(TRACING_AGENT)
    openai_server.default = Reply(content="seven")
    result = cli(
        "test", "-m", "traced_agent:agent_loop", "-d", str(CALCULATOR_DATASET), "--limit", "1",
        "--model", "m", "--base-url", openai_server.url, "--debug", cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    (trace,) = (tmp_path / "test_debug").iterdir()
    assert trace.name == "test-0.jsonl"
    event = json.loads(trace.read_text().splitlines()[0])
    assert (event["event"], event["rollout_id"], event["content"]) == ("answer", "test-0", "seven")


def test_a_refused_key_stops_the_run_at_preflight(openai_server: OpenAIServer) -> None:
    openai_server.default = Reply(status=401)
    result = _test(openai_server.url, "-q")
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.startswith(
        "Error: model 'openai/local-model' cannot be used: the provider refused the API key"
    )
    assert len(result.stderr.strip().splitlines()) == 1 and len(openai_server.requests) == 1


def test_a_key_refused_mid_run_stops_it_at_once(openai_server: OpenAIServer) -> None:
    openai_server.queue("preflight ok")
    openai_server.default = Reply(status=401)
    result = _test(openai_server.url, "-q")
    assert result.returncode == 1
    assert result.stdout == f"1 row: 0 completed (0.0%), infra_error 1; stopped after 1 of {ROWS} rows\n"
    assert result.stderr.startswith("Error: the run stopped: model 'openai/local-model' cannot be used")
    assert len(openai_server.requests) == 2


def test_outcomes_per_row_and_the_failure_rate(openai_server: OpenAIServer, tmp_path: Path) -> None:
    openai_server.default = Reply(content="2")
    data = _modes(tmp_path, "ok", "skip", "fail", "ok")
    result = _test(openai_server.url, agent=OUTCOME_AGENT, dataset=data)
    assert result.returncode == 1
    assert (
        "Row 1: FAILED [no_model_calls]" in result.stdout
        and "the agent finished without calling the model" in result.stdout
    )
    assert (
        "Row 2: FAILED [agent_error]" in result.stdout
        and "RuntimeError: the agent broke on purpose" in result.stdout
    )
    assert "4 rows: 2 completed (50.0%), agent_error 1, no_model_calls 1" in result.stdout
    assert result.stderr == (
        "Error: 2 of 4 rows failed (agent_error 1, no_model_calls 1): failure rate 50.0% is above "
        "--max-failure-rate 0.0%\n"
    )
    result = _test(openai_server.url, "-q", "--max-failure-rate", "0.5", agent=OUTCOME_AGENT, dataset=data)
    assert result.returncode == 0, result.stderr
    assert (
        result.stdout
        == "4 rows: 2 completed (50.0%), agent_error 1, no_model_calls 1; mean reward 1.000 over 2 completed\n"
    )


def test_usage_errors(openai_server: OpenAIServer, tmp_path: Path) -> None:
    result = _test(openai_server.url, "--offset", "100")
    assert result.returncode == 1 and "no rows to run" in result.stderr
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"system_prompt": "s", "user_prompt": "u", "ground_truth": 1}\n')
    result = _test(openai_server.url, dataset=bad)
    assert result.returncode == 1
    assert result.stderr.startswith(f"Error: {bad}: row 0, column 'ground_truth' is a int (1)")
    assert openai_server.requests == []  # local checks come before the preflight


def test_a_terminal_gets_a_progress_bar_and_only_the_failed_rows(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    from tests.support.terminal import Terminal

    openai_server.default = Reply(content="2")
    data = _modes(tmp_path, "ok", "fail", "ok")
    command = ("test", "-m", OUTCOME_AGENT, "-d", str(data), "--model", "m", "--base-url", openai_server.url)
    with Terminal(*command) as terminal:
        status = terminal.finish()
    text = terminal.screen
    assert status == 1, text
    assert "rows" in text and "3/3" in text  # the bar, counting rows
    assert "Row 1: FAILED [agent_error]" in text and "Row 0: OK" not in text
    assert "3 rows: 2 completed" in text
