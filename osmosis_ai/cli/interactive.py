"""``osmosis test -i``: step through rows one model answer at a time.

For each row the session shows the initial messages and the agent's tools, then every model answer
(its text, its tool calls with their arguments as indented JSON, and its finish reason) and the
tool results the agent appended before the next call. After each answer it waits for a command:

* ``n``/``next``/Enter — the next step; ``c``/``continue`` — run the row to its end without stopping;
* ``m``/``messages`` — the conversation so far; ``t``/``tools`` — the row's tools;
* ``r N``/``row N`` — leave this row and run row N; ``q``/``quit``/``exit`` (or end of input) —
  abort the row; ``?``/``help`` — the command list (also shown for anything unknown).

A row ends with a result block (outcome and error, reward, finish reason, duration, tokens and model
calls) and a prompt: ``m`` shows the final messages, Enter runs the next row, ``r N`` another row,
``q`` ends the session. Ctrl-C ends the session at once.

The console is read by a daemon thread, so the event loop (the model call of another task, a
timer) keeps running while a person thinks, and a pending read never holds the process open.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from osmosis_ai.cli.errors import CLIError
from osmosis_ai.cli.output import console, say
from osmosis_ai.models.errors import SystemicProviderError
from osmosis_ai.outcome import OutcomeCounts
from osmosis_ai.runs.dataset import DatasetReader
from osmosis_ai.runs.engine import ProcessItem
from osmosis_ai.runs.executors.interactive import InteractiveLLMClient, InteractiveStep, parse_arguments
from osmosis_ai.runs.items import WorkItem
from osmosis_ai.runs.result import Result

if TYPE_CHECKING:
    from osmosis_ai.cli.summary import Outputs
    from osmosis_ai.runs.plan import RunPlan

Message = dict[str, Any]

ROLE_STYLES = {"system": "magenta", "user": "green", "assistant": "cyan", "tool": "yellow"}
COMMANDS = {
    "": "next", "n": "next", "next": "next", "c": "continue", "continue": "continue",
    "m": "messages", "messages": "messages", "t": "tools", "tools": "tools",
    "r": "row", "row": "row", "q": "quit", "quit": "quit", "exit": "quit", "?": "help", "help": "help",
}  # fmt: skip
STEP_HELP = """Commands:
  n, next, Enter   run to the next model answer
  c, continue      run this row to its end without stopping
  m, messages      show the conversation so far
  t, tools         show the row's tools
  r N, row N       leave this row and run row N
  q, quit, exit    abort this row
  ?, help          this list"""


async def read_line(prompt: str) -> str | None:
    """One line from stdin without blocking the event loop; ``None`` at end of input."""
    loop = asyncio.get_running_loop()
    answer: asyncio.Future[str] = loop.create_future()

    def deliver(line: str) -> None:
        if not answer.done():
            answer.set_result(line)

    def read() -> None:
        try:
            line = sys.stdin.readline()
        except (OSError, ValueError):  # stdin closed or unreadable: as good as end of input
            line = ""
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody is waiting any more
            loop.call_soon_threadsafe(deliver, line)

    print(prompt, end="", flush=True)
    threading.Thread(target=read, name="osmosis-console", daemon=True).start()
    line = await answer
    if not line:
        print()
        return None
    return line.strip()


@dataclass(frozen=True)
class Command:
    name: str
    row: int | None = None
    problem: str | None = None


def parse_command(text: str) -> Command:
    """A typed command; ``help`` with a ``problem`` for anything not understood."""
    words = text.split()
    head = words[0].lower() if words else ""
    if head.isdigit() and len(words) == 1:
        return Command("row", int(head))
    name = COMMANDS.get(head)
    if name is None:
        return Command("help", problem=f"unknown command {text!r}")
    if name == "row":
        if len(words) != 2 or not words[1].isdigit():
            return Command("help", problem="r/row needs a row number, e.g. 'r 3'")
        return Command("row", int(words[1]))
    if len(words) > 1:
        return Command("help", problem=f"{head!r} takes no argument")
    return Command(name)


def _styled(text: str, style: str) -> str:
    return console.format_styled(text, style)


def _content(message: Message) -> str:
    content = message.get("content")
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return json.dumps(content, ensure_ascii=False, indent=2)


def _pretty(arguments: Any) -> str:
    value = parse_arguments(arguments)
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, indent=2)


def _indent(text: str, prefix: str = "    ") -> str:
    return "\n".join(prefix + line for line in text.splitlines() or [""])


def tool_names(messages: Sequence[Message]) -> dict[str, str]:
    """tool_call_id -> function name, from the assistant messages' tool calls."""
    names: dict[str, str] = {}
    for message in messages:
        for call in message.get("tool_calls") or []:
            if isinstance(call, dict) and isinstance(call.get("function"), dict):
                names[str(call.get("id", ""))] = str(call["function"].get("name", "?"))
    return names


def show_message(message: Message, names: dict[str, str], index: int | None = None) -> None:
    role = str(message.get("role", "?"))
    label = role.capitalize()
    if role == "tool":
        label = f"Tool ({names.get(str(message.get('tool_call_id', '')), 'unknown')})"
    prefix = f"[{index}] " if index is not None else ""
    print(f"{prefix}{_styled(label + ':', 'bold ' + ROLE_STYLES.get(role, 'white'))} {_content(message)}")
    for call in message.get("tool_calls") or []:
        function = call.get("function") if isinstance(call, dict) else None
        function = function if isinstance(function, dict) else {}
        print(f"  {_styled('Tool call', 'bold')} {function.get('name', '?')} (id {call.get('id', '?')}):")
        print(_indent(_pretty(function.get("arguments"))))


def show_messages(messages: Sequence[Message]) -> None:
    names = tool_names(messages)
    for index, message in enumerate(messages):
        show_message(message, names, index)


def show_tools(tools: Sequence[Message]) -> None:
    if not tools:
        print(_styled("Tools: none", "dim"))
        return
    print(_styled(f"Tools ({len(tools)}):", "bold"))
    for tool in tools:
        function = tool.get("function") or {}
        parameters = (function.get("parameters") or {}).get("properties") or {}
        description = function.get("description")
        line = f"  {function.get('name', '?')}({', '.join(parameters)})"
        print(line + (f" - {description}" if description else ""))


def _separator(title: str) -> None:
    print(_styled(f" {title} ".center(60, "─"), "dim"))


class InteractiveSession:
    """The console side of an interactive run over rows ``first``..``last`` of ``reader``."""

    def __init__(self, client: Any, reader: DatasetReader, first: int, last: int) -> None:
        self.client = InteractiveLLMClient(
            client, self.on_step, on_messages_updated=self.on_messages, on_tools=show_tools
        )
        self.reader = reader
        self.first, self.last = first, last
        self.results: list[Result] = []
        self.aborted_rows = 0
        self._messages: list[Message] = []  # the conversation as of the latest model answer
        self._shown = 0  # messages of the conversation already printed
        self._continue = False
        self._jump: int | None = None

    @property
    def rows(self) -> str:
        return f"{self.first}-{self.last}" if self.last > self.first else str(self.first)

    def check_row(self, row: int) -> str | None:
        if self.first <= row <= self.last:
            return None
        return f"row {row} is out of range; valid rows are {self.rows}"

    def _jump_to(self, row: int) -> bool:
        """Make ``row`` the next one to run if it is in range; else say why not."""
        problem = self.check_row(row)
        if problem is not None:
            print(problem)
            return False
        self._jump = row
        return True

    # -- callbacks of the model client ---------------------------------------------------------------

    def on_messages(self, messages: list[Message]) -> None:
        names = tool_names(messages)
        for message in messages[self._shown :]:
            show_message(message, names)
        self._messages, self._shown = list(messages), len(messages)

    async def on_step(self, step: InteractiveStep) -> bool:
        message = step.message or {}
        self._messages = [*self._messages, message]
        self._shown = len(self._messages)
        _separator(f"Turn {step.turn}: LLM Response")
        show_message(message, tool_names(self._messages))
        if step.finish_reason and step.finish_reason != "tool_calls":
            print(f"{_styled('Finish reason:', 'bold')} {step.finish_reason}")
        while not self._continue:
            line = await read_line("[n]ext, [c]ontinue, [m]essages, [t]ools, [r]ow N, [q]uit, [?]help > ")
            if line is None:
                return False
            command = parse_command(line)
            if command.name == "next":
                return True
            if command.name == "continue":
                self._continue = True
            elif command.name == "messages":
                show_messages(self._messages)
            elif command.name == "tools":
                show_tools(self.client.tools)
            elif command.name == "quit":
                return False
            elif command.name == "row" and command.row is not None:
                if self._jump_to(command.row):
                    return False
            else:
                if command.problem:
                    print(command.problem)
                print(STEP_HELP)
        return True

    # -- the session ---------------------------------------------------------------------------------

    async def run(self, process: ProcessItem, start: int | None) -> list[Result]:
        """Run ``start`` first (if given), then whatever rows the person asks for, until they quit."""
        following = self.first
        row: int | None = start
        while True:
            if row is None:
                row = await self._choose(following)
                if row is None:
                    return self.results
            following = row + 1
            self._jump = None
            after = await self._run_row(process, row)
            row = self._jump
            if row is None and not after:
                return self.results

    async def _choose(self, following: int) -> int | None:
        default = f"Enter for {following}, " if following <= self.last else ""
        while True:
            line = await read_line(f"Row to run ({self.rows}; {default}q to quit) > ")
            if line is None:
                return None
            command = parse_command(line)
            if command.name == "quit":
                return None
            if command.name in ("next", "continue"):
                if following <= self.last:
                    return following
                print(f"row {following - 1} was the last one; give a row number ({self.rows}) or q")
                continue
            if command.name == "row" and command.row is not None:
                problem = self.check_row(command.row)
                if problem is None:
                    return command.row
                print(problem)
                continue
            print(command.problem or "give a row number, Enter for the next row, or q to quit")

    async def _run_row(self, process: ProcessItem, index: int) -> bool:
        """Run row ``index``; whether the session goes on afterwards."""
        row = self.reader.read(limit=1, offset=index)[0]
        self._continue = False
        print()
        _separator(f"Row {index}")
        initial = [
            {"role": "system", "content": row["system_prompt"]},
            {"role": "user", "content": row["user_prompt"]},
        ]
        show_messages(initial)
        self._messages, self._shown = initial, len(initial)
        result = await process(WorkItem(index, 0, row))
        if result.attempt.systemic is not None:
            raise SystemicProviderError(result.attempt.systemic)
        if self.client.aborted:
            self.aborted_rows += 1
            print(_styled("Aborted by user", "yellow"))
            return True
        self.results.append(result)
        self._show_result(result)
        return await self._after(result)

    def _show_result(self, result: Result) -> None:
        attempt = result.attempt
        _separator(f"Result: row {result.item.row_index}")
        if result.success:
            print(f"{_styled('Status:', 'bold')} {_styled(result.outcome.value, 'green')}")
        else:
            error = f": {result.error}" if result.error else ""
            print(f"{_styled('ERROR', 'bold red')} [{result.outcome.value}]{error}")
        reward = "-" if result.reward is None else f"{result.reward:g}"
        print(f"{_styled('Reward:', 'bold')} {reward}")
        print(f"{_styled('Finish reason:', 'bold')} {attempt.finish_reason or '-'}")
        print(f"{_styled('Duration:', 'bold')} {attempt.duration_ms / 1000:.2f}s")
        calls = f"{attempt.num_llm_calls} LLM call" + ("" if attempt.num_llm_calls == 1 else "s")
        print(f"{_styled('Tokens:', 'bold')} {attempt.tokens:,} ({calls})")

    async def _after(self, result: Result) -> bool:
        while True:
            line = await read_line("[m]essages, Enter for the next row, [r]ow N, [q]uit > ")
            if line is None:
                return False
            command = parse_command(line)
            if command.name == "messages":
                show_messages(result.attempt.final_messages or self._messages)
            elif command.name == "quit":
                return False
            elif command.name == "row" and command.row is not None:
                if self._jump_to(command.row):
                    return True
            elif command.name in ("next", "continue"):
                return True
            else:
                print(command.problem or "m shows the final messages; Enter goes on; q quits")


async def step_through(plan: RunPlan, outputs: Outputs, row: int | None, model: str, at: str) -> int:
    """``osmosis test -i``: the plan's rows in a session (``row`` first; ``model``, served ``at``),
    their trajectories written, the outcome line, and the exit status by the shared rule."""
    from osmosis_ai.cli.trajectories import trajectory_writer
    from osmosis_ai.runs.executors.local import InProcessAgent
    from osmosis_ai.runs.items import PRIMARY
    from osmosis_ai.runs.run import open_rows

    assert isinstance(plan.executor, InProcessAgent)
    _, total, selected = open_rows(plan)
    reader = plan.executor.read_rows(plan.rows)
    offset = plan.rows.offset
    last = offset + selected - 1
    if row is not None and not offset <= row <= last:
        valid = f"{offset}-{last}" if last > offset else str(last)
        raise CLIError(f"--row {row} is out of range; valid rows are {valid}")
    prepared = plan.executor.prepare(plan)
    say(quiet=outputs.quiet, line=f"Dataset: {reader.file_path} ({total} rows, running {selected})")
    async with prepared.session(plan, [PRIMARY], None) as opened:
        client = opened.clients[PRIMARY]
        say(quiet=outputs.quiet, line=f"Model: {client.display_name}{at}")
        await client.preflight_check()  # a bad key or model: one line, nothing run
        session = InteractiveSession(client, reader, offset, last)
        async with opened.replacing(PRIMARY, session.client).pipeline(1) as steps:
            results = await session.run(steps, row)
    trajectories = trajectory_writer(outputs, command="test")
    if trajectories is not None:
        for result in results:
            trajectories.write_result(result, model=model)
    counts = OutcomeCounts.of(r.outcome for r in results)
    line = counts.describe("row")
    if session.aborted_rows:
        line += f"; {session.aborted_rows} aborted"
    print(line, flush=True)
    if (reason := outputs.failure(counts, "row")) is not None:
        raise CLIError(reason)
    return 0
