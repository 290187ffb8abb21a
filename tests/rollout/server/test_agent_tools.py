"""GetToolsCaller: off the loop until proven fast, then inline; back to the thread when it turns slow."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from pydantic import ValidationError

from osmosis_ai.rollout.server.agent_tools import PROBE_CALLS, GetToolsCaller, ToolsCache
from tests.support.server import ADD_TOOL


class Recorder:
    def __init__(self) -> None:
        self.delay = 0.0
        self.threads: list[str] = []

    def __call__(self, request: Any) -> list[dict[str, Any]]:
        self.threads.append(threading.current_thread().name)
        time.sleep(self.delay)
        return [ADD_TOOL]


async def test_fast_get_tools_moves_inline_and_a_slow_call_sends_it_back_for_good(caplog):
    recorder = Recorder()
    caller = GetToolsCaller(recorder, timeout=5)
    main = threading.current_thread().name
    # PROBE_CALLS fast calls in a row move it inline; a loaded machine may make a probe look slow and
    # restart the count, so allow a bounded number of extra probes.
    for _ in range(PROBE_CALLS * 10):
        await caller(None)
        if caller.inline:
            break
    assert main not in recorder.threads  # probes ran in worker threads
    assert caller.inline
    assert len(recorder.threads) >= PROBE_CALLS
    await caller(None)
    assert recorder.threads[-1] == main
    recorder.delay = 0.02
    await caller(None)
    assert not caller.inline
    assert "running it in a worker thread from now on" in caplog.text
    recorder.delay = 0.0
    for _ in range(PROBE_CALLS + 2):
        await caller(None)
    assert not caller.inline
    assert recorder.threads[-1] != main


async def test_always_thread_and_async_get_tools():
    recorder = Recorder()
    pinned = GetToolsCaller(recorder, timeout=5, always_thread=True)
    for _ in range(PROBE_CALLS + 1):
        await pinned(None)
    assert not pinned.inline

    async def slow_async(request: Any) -> list[Any]:
        import asyncio

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
