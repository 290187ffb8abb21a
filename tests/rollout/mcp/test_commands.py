"""``--mcp DIR`` / ``--mcp-url URL`` end to end, through the command line's ``main()``: ``osmosis test`` and
``osmosis eval`` against the local OpenAI-compatible stand-in, ``osmosis rollout run`` (in-process, and
against ``osmosis serve --mcp`` in a subprocess) with the scripted policy, and the one-line errors (the
one without fastmcp in a subprocess)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from osmosis_ai.traingate.policy.scripted import find_expression
from tests.rollout.mcp.conftest import CALCULATOR_MCP, SCHEMAS_MCP
from tests.rollout.mcp.test_agent_loop import calls
from tests.support.cli import CALCULATOR_DATASET, Ran, cli, osmosis, subprocess_env
from tests.support.openai_server import OpenAIServer, Reply
from tests.support.sockets import free_port
from tests.support.waiting import probe, wait_until

REWARD = "examples.calculator.reward:calculator_reward"
ROWS = len(CALCULATOR_DATASET.read_text().splitlines())


def calculator_model(payload: Any) -> Reply | str:
    """A model for the stand-in: calls the tool for the row's ``A op B``, then answers with its result."""
    messages = payload["messages"]
    if messages[-1]["role"] == "tool":
        return f"The answer is #### {messages[-1]['content']}"
    found = find_expression(str(messages[-1].get("content", "")))
    if found is None:
        return "ok"  # the preflight
    tool, a, b = found
    return calls((tool, {"a": a, "b": b}))


def test_osmosis_test_runs_an_mcp_directory_against_a_model(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    openai_server.handler = calculator_model
    out = tmp_path / "results.json"
    result = cli(
        "test", "--mcp", str(CALCULATOR_MCP), "-d", str(CALCULATOR_DATASET), "--model", "local-model",
        "--base-url", openai_server.url, "-o", str(out),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert f"{ROWS} rows: {ROWS} completed (100.0%)" in result.stdout
    offered = [t["function"]["name"] for t in openai_server.requests[1].json["tools"]]
    assert offered == ["add", "subtract", "multiply", "divide"]
    answers = [r for r in json.loads(out.read_text())["results"]]
    assert len(answers) == ROWS and all(r["outcome"] == "completed" for r in answers)
    tool_replies = [
        m["content"] for r in openai_server.requests for m in r.json["messages"][-1:] if m["role"] == "tool"
    ]
    assert tool_replies[:2] == ["19", "27"]  # 12 + 7 and 45 - 18, computed by the MCP tools


def test_a_failing_tool_is_the_models_to_handle_and_prints_no_traceback(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    openai_server.handler = calculator_model
    data = tmp_path / "data.jsonl"
    data.write_text(
        json.dumps({"system_prompt": "s", "user_prompt": "What is 1 / 0?", "ground_truth": "0"}) + "\n"
    )
    result = cli(
        "test", "--mcp", str(CALCULATOR_MCP), "-d", str(data), "--model", "local-model", "--base-url", openai_server.url,
    )  # fmt: skip
    assert result.returncode == 0 and result.stderr == "", result.stderr
    answer = openai_server.requests[-1].json["messages"][-1]
    assert (
        answer["role"] == "tool"
        and answer["content"].startswith("Error: ")
        and "division by zero" in answer["content"]
    )


def test_osmosis_test_over_a_running_mcp_server_sends_the_nested_schemas(
    openai_server: OpenAIServer, mcp_url: str
) -> None:
    openai_server.queue("ok", "nothing to do")
    result = cli(
        "test", "--mcp-url", mcp_url, "-d", str(CALCULATOR_DATASET), "--limit", "1", "--model", "local-model",
        "--base-url", openai_server.url, "-q",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    tools = {t["function"]["name"]: t["function"] for t in openai_server.requests[1].json["tools"]}
    addresses = tools["register"]["parameters"]["properties"]["person"]["properties"]["addresses"]
    assert addresses["items"]["properties"]["street"] == {"type": "string"}


def test_osmosis_eval_scores_an_mcp_directory_and_notices_an_edited_tool(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    openai_server.handler = calculator_model
    tools = tmp_path / "mcp"
    shutil.copytree(CALCULATOR_MCP, tools, ignore=shutil.ignore_patterns("__pycache__"))

    def evaluate(*extra: str) -> Ran:
        return cli(
            "eval", "--mcp", str(tools), "-d", str(CALCULATOR_DATASET), "--eval-fn", REWARD, "--model", "m",
            "--base-url", openai_server.url, "--journal", str(tmp_path / "journal.sqlite"), "--limit", "3", "-q",
            *extra,
        )  # fmt: skip

    result = evaluate()
    assert result.returncode == 0, result.stderr
    assert result.stdout == "3 runs: 3 completed (100.0%)\n"
    (tools / "tools" / "numbers.py").write_text((tools / "tools" / "numbers.py").read_text() + "\n# edited\n")
    result = evaluate()
    assert result.returncode == 1 and "agent changed since it was written" in result.stderr


def test_osmosis_rollout_run_serves_an_mcp_directory_to_the_local_traingate() -> None:
    result = cli(
        "rollout", "run", "--mcp", str(CALCULATOR_MCP), "-d", str(CALCULATOR_DATASET), "--model", "scripted",
        "--reward", REWARD, "-q",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"{ROWS} rollouts: {ROWS} completed (100.0%); mean reward 1.000")


# Calculator tools whose parameters are not the calculator's a/b: renamed numbers, integers, an array
# of numbers, and a required string beside the numbers.
RENAMED_TOOLS = """
from fastmcp import FastMCP

mcp = FastMCP("renamed")


@mcp.tool()
def add(x: float, y: float) -> float:
    return x + y


@mcp.tool()
def subtract(first: int, second: int) -> int:
    return first - second


@mcp.tool()
def multiply(factors: list[float]) -> float:
    return factors[0] * factors[1]


@mcp.tool()
def divide(dividend: float, divisor: float, label: str) -> str:
    return f"{dividend / divisor:g}"
"""


def test_the_scripted_policy_fills_the_arguments_each_tool_names(tmp_path: Path) -> None:
    (tmp_path / "mcp").mkdir()
    (tmp_path / "mcp" / "main.py").write_text(RENAMED_TOOLS)
    out = tmp_path / "records.jsonl"
    result = cli(
        "rollout", "run", "--mcp", str(tmp_path / "mcp"), "-d", str(CALCULATOR_DATASET), "--model", "scripted",
        "--reward", REWARD, "-q", "-o", str(out),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"{ROWS} rollouts: {ROWS} completed (100.0%); mean reward 1.000")
    records = [json.loads(line) for line in out.read_text().splitlines()]
    sent = {
        call["function"]["name"]: json.loads(call["function"]["arguments"])
        for record in records[:4]
        for message in record["final_messages"]
        for call in message.get("tool_calls") or ()
    }
    assert sent == {
        "add": {"x": 12, "y": 7},
        "subtract": {"first": 45, "second": 18},
        "multiply": {"factors": [6, 7]},
        "divide": {"dividend": 81, "divisor": 9, "label": "81 / 9"},
    }


def test_arguments_a_tool_rejects_are_tool_errors_the_summary_counts(tmp_path: Path) -> None:
    (tmp_path / "mcp").mkdir()
    (tmp_path / "mcp" / "main.py").write_text(  # three numbers required: the question has two
        "from fastmcp import FastMCP\n\nmcp = FastMCP('strict')\n\n\n"
        "@mcp.tool()\ndef add(x: float, y: float, z: float) -> float:\n    return x + y + z\n"
    )
    data = tmp_path / "data.jsonl"
    row = {"system_prompt": "s", "user_prompt": "What is 12 + 7?", "ground_truth": "19"}
    data.write_text(json.dumps(row) + "\n")
    argv = ["rollout", "run", "--mcp", str(tmp_path / "mcp"), "-d", str(data), "--model", "scripted",
            "--reward", REWARD, "--n", "2"]  # fmt: skip
    shown = cli(*argv, "-q")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.endswith("; mean reward 0.000 over 2 completed; 2 tool errors\n")
    figures = cli(*argv, "--json")
    assert figures.returncode == 0, figures.stderr
    assert json.loads(figures.stdout)["tool_errors"] == 2
    table = cli(*argv).stdout  # the run's own table names the first error: argument z is missing
    assert any("tool errors" in line and "2 (first: Error: " in line for line in table.splitlines()), table
    assert "z" in table.partition("(first: Error: ")[2].split("Summary")[0]


def test_osmosis_rollout_run_offers_the_policy_the_nested_schemas_over_the_rollout_wire(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    openai_server.handler = lambda payload: "nothing to do"
    data = tmp_path / "one.jsonl"
    data.write_text(json.dumps({"system_prompt": "s", "user_prompt": "register", "ground_truth": "x"}) + "\n")
    result = cli(
        "rollout", "run", "--mcp", str(SCHEMAS_MCP), "-d", str(data), "--model", "local-model",
        "--base-url", openai_server.url, "-q",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    offered = [r.json["tools"] for r in openai_server.requests if r.json and r.json.get("tools")]
    assert offered, "the policy was never offered the tools"
    register = next(t["function"] for t in offered[-1] if t["function"]["name"] == "register")
    person = register["parameters"]["properties"]["person"]
    assert person["type"] == "object" and person["required"] == ["name", "addresses"]
    street = person["properties"]["addresses"]["items"]["properties"]["street"]
    assert street == {"type": "string"}
    assert register["parameters"]["properties"]["tags"]["items"] == {"type": "string"}


def test_osmosis_serve_serves_an_mcp_directory(tmp_path: Path) -> None:
    port = free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "osmosis_ai",
            "serve",
            "--mcp",
            str(CALCULATOR_MCP),
            "--local",
            "-p",
            str(port),
        ],
        env=subprocess_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until(lambda: server.poll() is not None or _healthy(url), timeout=60, what="osmosis serve")
        assert server.poll() is None, "osmosis serve --mcp exited at start-up"
        result = cli(
            "rollout", "run", "--url", url, "-d", str(CALCULATOR_DATASET), "--model", "scripted",
            "--reward", REWARD, "-q",
        )  # fmt: skip
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert result.returncode == 0, result.stderr
    assert "mean reward 1.000" in result.stdout


def _healthy(url: str) -> bool:
    import httpx

    try:
        return probe().get(f"{url}/health", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def _error_line(result: Ran) -> str:
    assert result.returncode == 1, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_the_agent_is_named_exactly_once() -> None:
    both = cli("test", "-m", "a:b", "--mcp", str(CALCULATOR_MCP), "-d", "x.jsonl")
    assert both.returncode == 1 and "-m/--module and --mcp cannot be combined" in both.stderr
    neither = cli("test", "-d", "x.jsonl")
    assert neither.returncode == 1 and "needs one of -m/--module, --mcp, --mcp-url" in neither.stderr
    # eval has sub-commands, so it checks the choice itself
    no_agent = cli("eval", "-d", "x.jsonl", "--eval-fn", REWARD)
    assert "needs -m/--module (or --mcp/--mcp-url)" in _error_line(no_agent)


def test_a_bad_mcp_directory_or_unreachable_server_is_one_error_line(tmp_path: Path) -> None:
    line = _error_line(cli("test", "--mcp", str(tmp_path), "-d", str(CALCULATOR_DATASET)))
    assert line.startswith(f"Error: {tmp_path} has no main.py;") and "FastMCP" in line
    url = f"http://127.0.0.1:{free_port()}/mcp"
    line = _error_line(
        cli("rollout", "run", "--mcp-url", url, "-d", str(CALCULATOR_DATASET), "--model", "scripted")
    )
    assert line.startswith(f"Error: cannot list the tools of MCP server '{url}'")
    line = _error_line(cli("serve", "--mcp", str(CALCULATOR_MCP), "--reload", "--local"))
    assert (
        line
        == "Error: --reload re-imports an agent module, so it works with -m only, not with --mcp/--mcp-url"
    )


def test_without_fastmcp_the_error_names_the_extra_to_install(tmp_path: Path) -> None:
    (tmp_path / "sitecustomize.py").write_text(
        "import sys\n"
        "class NoFastMCP:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.partition('.')[0] == 'fastmcp':\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, NoFastMCP())\n"
    )
    # A subprocess: the import hook must be in place before anything imports fastmcp.
    env = {"PYTHONPATH": f"{tmp_path}:{subprocess_env()['PYTHONPATH']}"}
    line = _error_line(osmosis("test", "--mcp", str(CALCULATOR_MCP), "-d", str(CALCULATOR_DATASET), env=env))
    assert (
        line
        == "Error: MCP tools need fastmcp, which is not installed; install it with: pip install 'osmosis-ai[mcp]'"
    )
