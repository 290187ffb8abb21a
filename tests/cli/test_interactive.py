"""``osmosis test -i`` through the command line's ``main()``, driven through its stdin (and on a terminal, as a
subprocess, for Ctrl-C), the model played by the OpenAI stand-in."""

from __future__ import annotations

from typing import Any

import pytest

from osmosis_ai.cli.interactive import Command, parse_command
from tests.support.cli import CALCULATOR, CALCULATOR_DATASET, Ran, cli
from tests.support.openai_server import OpenAIServer, Reply, completion_body


def _tool_call_then_answer(payload: Any) -> Reply:
    """First call of a row: call ``add``; once a tool result is in the conversation: answer."""
    if any(m.get("role") == "tool" for m in payload["messages"]):
        return Reply(content="The sum is #### 19")
    body = completion_body(None)
    body["choices"][0]["message"]["tool_calls"] = [
        {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": '{"a": 12, "b": 7}'}}
    ]
    body["choices"][0]["finish_reason"] = "tool_calls"
    return Reply(body=body)


def _interactive(url: str, stdin: str, *args: str) -> Ran:
    return cli(
        "test", "-m", CALCULATOR, "-d", str(CALCULATOR_DATASET), "--model", "m", "--base-url", url,
        "-i", *args, input=stdin,
    )  # fmt: skip


def _model_calls(server: OpenAIServer) -> int:
    return len(server.requests) - 1  # the first one is the preflight


def test_stepping_through_a_row_shows_every_step(openai_server: OpenAIServer) -> None:
    openai_server.handler = _tool_call_then_answer
    # Row 0 first; at the first answer look at the messages and tools, then step on; after the
    # result show the final messages and quit.
    result = _interactive(openai_server.url, "m\nt\nn\n\nm\nq\n", "--row", "0")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.splitlines()[0].endswith("(Interactive Mode)")
    assert "System: You are a careful calculator" in out and "User: What is 12 + 7?" in out
    assert "Tools (4):" in out and "  add(a, b) - " in out
    assert "Turn 1: LLM Response" in out and "Turn 2: LLM Response" in out
    assert 'Tool call add (id call_1):\n    {\n      "a": 12,\n      "b": 7\n    }' in out
    assert "Tool (add): 19" in out  # the tool result, named after the call it answers
    assert "Finish reason: stop" in out and "Finish reason: tool_calls" not in out
    assert "[0] System:" in out and "[4] Assistant: The sum is #### 19" in out
    assert "Status: completed" in out and "Reward: 1" in out and "Tokens: 30 (2 LLM calls)" in out
    assert out.rstrip().endswith("1 row: 1 completed (100.0%)")
    assert _model_calls(openai_server) == 2


def test_quit_aborts_the_row_before_its_next_model_call(openai_server: OpenAIServer) -> None:
    openai_server.handler = _tool_call_then_answer
    result = _interactive(openai_server.url, "x\nq\nq\n", "--row", "1")
    assert result.returncode == 0, result.stderr
    assert "unknown command 'x'" in result.stdout and "r N, row N" in result.stdout  # the help list
    assert "Aborted by user" in result.stdout and "Status:" not in result.stdout
    assert _model_calls(openai_server) == 1


def test_continue_runs_to_the_end_and_row_jumps(openai_server: OpenAIServer) -> None:
    openai_server.handler = _tool_call_then_answer
    # The session prompt picks row 2; 'c' runs it through; then 'r 4' jumps, EOF aborts it and ends.
    result = _interactive(openai_server.url, "2\nc\nr 4\n", "--offset", "1", "--limit", "4")
    out = result.stdout
    assert "Row to run (1-4; Enter for 1, q to quit)" in out
    assert "─ Row 2 ─" in out and "─ Row 4 ─" in out and "Aborted by user" in out
    assert out.count("[n]ext, [c]ontinue") == 2  # once in row 2 (then 'c'), once in row 4 (then EOF)
    assert "Row to run (1-4; q to quit)" in out  # row 4 was the last: no default any more
    assert result.returncode == 0, result.stderr  # an aborted row is the person's choice, not a failure
    assert out.rstrip().endswith("1 row: 1 completed (100.0%); 1 aborted")


def test_ctrl_c_at_a_prompt_ends_the_session_at_once(openai_server: OpenAIServer) -> None:
    from tests.support.terminal import Terminal

    openai_server.handler = _tool_call_then_answer
    command = ("test", "-m", CALCULATOR, "-d", str(CALCULATOR_DATASET), "--model", "m",
               "--base-url", openai_server.url, "-i", "--row", "0")  # fmt: skip
    with Terminal(*command) as terminal:
        terminal.wait_for("[?]help > ")
        terminal.interrupt()  # while the console thread is blocked reading the terminal
        status = terminal.finish(timeout=60)  # bounds a hang only; a loaded machine is slow to exit
    assert status == 130, terminal.screen
    assert terminal.screen.rstrip().endswith("Interrupted.")
    assert "Traceback" not in terminal.screen and "Fatal Python error" not in terminal.screen


def test_row_needs_interactive_and_a_row_in_range(openai_server: OpenAIServer) -> None:
    no_i = cli("test", "-m", CALCULATOR, "-d", str(CALCULATOR_DATASET), "--row", "1")
    assert no_i.returncode == 1 and no_i.stderr == "Error: --row needs --interactive\n"
    out_of_range = _interactive(openai_server.url, "", "--row", "9", "--offset", "2", "--limit", "3")
    assert out_of_range.returncode == 1
    assert out_of_range.stderr == "Error: --row 9 is out of range; valid rows are 2-4\n"
    assert len(openai_server.requests) == 0  # refused before any paid request


@pytest.mark.parametrize(
    ("text", "command"),
    [
        ("", Command("next")), ("N", Command("next")), ("continue", Command("continue")),
        ("r 3", Command("row", 3)), ("row 12", Command("row", 12)), ("7", Command("row", 7)),
        ("?", Command("help")), ("exit", Command("quit")),
    ],
)  # fmt: skip
def test_commands(text: str, command: Command) -> None:
    assert parse_command(text) == command


def test_commands_not_understood_get_the_reason() -> None:
    assert parse_command("r").problem == "r/row needs a row number, e.g. 'r 3'"
    assert parse_command("t 2").problem == "'t' takes no argument"
    assert parse_command("jump").problem == "unknown command 'jump'"


async def test_waiting_for_the_console_leaves_the_event_loop_running(monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio
    import os

    from osmosis_ai.cli.interactive import read_line

    read_end, write_end = os.pipe()
    with os.fdopen(read_end) as stdin, os.fdopen(write_end, "w") as typist:
        monkeypatch.setattr("sys.stdin", stdin)
        ticked = asyncio.Event()

        async def ticker() -> None:
            for _ in range(5):
                await asyncio.sleep(0)
            ticked.set()

        answer = asyncio.create_task(read_line("> "))
        ticking = asyncio.create_task(ticker())
        # Nobody has typed yet: the loop goes on running other tasks while the line is awaited (a read
        # that blocked the loop would hold the ticker back until the line came, which it never does).
        await asyncio.wait_for(ticked.wait(), 5)
        assert not answer.done()
        typist.write("r 3\n")
        typist.flush()
        assert await asyncio.wait_for(answer, 5) == "r 3"
        ticking.cancel()
