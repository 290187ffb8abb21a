"""GetToolsCaller: always off the event loop and under the deadline; whatever it raises stays an init error;
a call still blocked after its deadline neither holds up other calls nor keeps the server from stopping."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from osmosis_ai._usercode import UserCodeRaised
from osmosis_ai.rollout.server.agent_tools import GetToolsCaller, ToolsCache
from tests.support.server import ADD_TOOL, init_body
from tests.support.sockets import free_port
from tests.support.waiting import probe, wait_until

REPO = Path(__file__).resolve().parents[3]


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
        with pytest.raises(UserCodeRaised, match=type(raised).__name__):
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


async def test_a_blocked_call_holds_only_its_own_thread():
    release = threading.Event()

    def tools(request: Any) -> list[Any]:
        if request == "blocked":
            release.wait(10)
        return [request]

    caller = GetToolsCaller(tools, timeout=20)
    for first in range(2):  # the blocked call submitted with the others (one wake-up), then alone first
        blocked = asyncio.ensure_future(caller("blocked"))
        if first:
            await asyncio.sleep(0.1)
        try:
            answers = await asyncio.gather(*(caller(f"r-{i}") for i in range(20)))
            assert answers == [[f"r-{i}"] for i in range(20)]
            assert not blocked.done()
        finally:
            release.set()
        assert await blocked == ["blocked"]
        release.clear()


SERVER_WITH_HUNG_GET_TOOLS = """
import sys, time
from osmosis_ai.rollout.server.app import create_app
from osmosis_ai.rollout.server.runner import run_app
from tests.support.server import ScriptedAgent, fast_settings

def hung(request):
    time.sleep(120)

app = create_app(ScriptedAgent(tools=hung), settings=fast_settings(request_timeout_seconds=0.3))
run_app(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="critical")
"""


def test_a_server_stops_promptly_although_a_get_tools_is_still_blocked_in_its_thread(trainer):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    server = subprocess.Popen([sys.executable, "-c", SERVER_WITH_HUNG_GET_TOOLS, str(port)], env=env)
    try:
        wait_until(lambda: _answers(url), timeout=30, what="the server to start")
        response = httpx.post(f"{url}/v1/rollout/init", json=init_body("hung", trainer.url), timeout=10)
        assert response.status_code == 500  # the deadline, while the call sleeps on in its thread
        server.send_signal(signal.SIGINT)
        assert server.wait(timeout=30) == 0  # not the 120 s the call still has to sleep
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()


def _answers(url: str) -> bool:
    try:
        return probe().get(f"{url}/health", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False
