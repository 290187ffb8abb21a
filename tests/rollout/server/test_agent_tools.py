"""GetToolsCaller: always off the event loop and under the deadline; whatever it raises stays an init error."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from pydantic import ValidationError

from osmosis_ai.rollout.server.agent_tools import GetToolsCaller, ToolsCache
from osmosis_ai.rollout.server.isolation import AgentRaised
from tests.support.server import ADD_TOOL


class Recorder:
    def __init__(self) -> None:
        self.delay = 0.0
        self.threads: list[str] = []

    def __call__(self, request: Any) -> list[dict[str, Any]]:
        self.threads.append(threading.current_thread().name)
        time.sleep(self.delay)
        return [ADD_TOOL]


async def _loop_stalls_while(work: Any) -> float:
    """The longest time the event loop went without running a 10 ms ticker while ``work`` ran."""
    worst = 0.0
    stop = False

    async def ticker() -> None:
        nonlocal worst
        last = time.perf_counter()
        while not stop:
            await asyncio.sleep(0.01)
            now = time.perf_counter()
            worst = max(worst, now - last)
            last = now

    tick = asyncio.ensure_future(ticker())
    await asyncio.sleep(0)
    try:
        with pytest.raises(TimeoutError):
            await work
    finally:
        stop = True
        await tick
    return worst


async def test_get_tools_turning_slow_after_many_fast_calls_neither_blocks_the_loop_nor_outlives_the_deadline():
    recorder = Recorder()
    caller = GetToolsCaller(recorder, timeout=0.3)
    main = threading.current_thread().name
    for _ in range(50):
        await caller(None)
    assert main not in recorder.threads
    recorder.delay = 3.0
    started = time.perf_counter()
    stall = await _loop_stalls_while(caller(None))
    assert time.perf_counter() - started < 2.5  # the deadline (0.3 s), not the 3 s call
    assert stall < 0.25  # the loop kept ticking (a blocked loop would stall for the whole call)


@pytest.mark.parametrize(
    "raised", [SystemExit(2), KeyboardInterrupt(), type("Custom", (BaseException,), {})()]
)
async def test_get_tools_raising_any_base_exception_becomes_an_ordinary_error(raised: BaseException):
    def sync_tools(request: Any) -> Any:
        raise raised

    async def async_tools(request: Any) -> Any:
        raise raised

    for get_tools in (sync_tools, async_tools):
        with pytest.raises(AgentRaised, match=type(raised).__name__):
            await GetToolsCaller(get_tools, timeout=5)(None)


async def test_async_get_tools_is_bounded_by_the_deadline():
    async def slow_async(request: Any) -> list[Any]:
        await asyncio.sleep(1)
        return []

    with pytest.raises(TimeoutError, match=r"within 0\.05 s"):
        await GetToolsCaller(slow_async, timeout=0.05)(None)


def test_tools_cache_reuses_the_list_while_the_agent_returns_an_equal_one():
    validate = ToolsCache()
    tools = [ADD_TOOL]
    first = validate(tools)
    assert first[0].function.name == ADD_TOOL["function"]["name"]
    assert validate([dict(ADD_TOOL)]) is first
    tools.append({**ADD_TOOL, "function": {**ADD_TOOL["function"], "name": "other"}})
    assert [tool.function.name for tool in validate(tools)] == [ADD_TOOL["function"]["name"], "other"]
    with pytest.raises(ValidationError):
        validate([{"type": "function", "function": {"name": "no_description"}}])


def test_tools_cache_keeps_nested_keywords_the_agent_later_mutates_in_place():
    validate = ToolsCache()
    items = {"type": "number"}
    tool = {
        "type": "function",
        "function": {
            "name": "total",
            "description": "Sum a list",
            "parameters": {
                "type": "object",
                "properties": {"xs": {"type": "array", "items": items}},
                "required": ["xs"],
            },
        },
    }
    first = validate([tool])
    items["type"] = "string"
    assert first[0].model_dump()["function"]["parameters"]["properties"]["xs"]["items"] == {"type": "number"}
    again = validate([tool])
    assert again is not first
    assert again[0].model_dump()["function"]["parameters"]["properties"]["xs"]["items"] == {"type": "string"}
