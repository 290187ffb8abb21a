"""osmosis_ai.rollout.testing: the mock trainer app, the callback routing seam (no blocking, headers kept),
and the install hints when the ``server`` extra or httpx is missing."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from typing import Any

from fastapi import Request
from fastapi.testclient import TestClient

from examples.calculator.agent import agent_loop as calculator
from osmosis_ai.rollout import OsmosisLLMClient
from osmosis_ai.rollout.testing import (
    RolloutCompletionTracker,
    create_mock_trainer_app,
    fake_prompt_token_ids,
    fake_token_ids,
    patch_httpx_for_mock_trainer,
)
from tests.support.server import init_body


def _mock_with_header_log(tracker: RolloutCompletionTracker) -> tuple[Any, list[str | None]]:
    app = create_mock_trainer_app(tracker)
    seen: list[str | None] = []

    @app.middleware("http")
    async def record_auth(request: Request, call_next: Any) -> Any:
        seen.append(request.headers.get("authorization"))
        return await call_next(request)

    return app, seen


async def test_client_callbacks_reach_the_mock_trainer_with_their_headers(monkeypatch):
    tracker = RolloutCompletionTracker()
    app, seen = _mock_with_header_log(tracker)
    patch_httpx_for_mock_trainer(TestClient(app), monkeypatch)
    client = OsmosisLLMClient("http://trainer.test/prefix", "r-1", api_key="callback-key")
    question = [{"role": "user", "content": "Please add 5 and 3"}]
    first = await client.chat_completions(question)
    assert first.tool_calls[0]["function"] == {"name": "add", "arguments": '{"a": 5, "b": 3}'}
    assert first.token_ids == fake_token_ids("I'll help you with that calculation.")
    after_tool = [*question, first.message, {"role": "tool", "tool_call_id": "call_mock_add", "content": "8"}]
    assert (await client.chat_completions(after_tool)).content == "The calculation is complete."
    address = [{"role": "user", "content": "What is your address?"}]  # "add" inside a word is no tool call
    assert (await client.chat_completions(address)).content == "OK."
    await client.complete_rollout("COMPLETED", after_tool, reward=1.0)
    assert tracker.wait(1.0)
    assert tracker.responses[0]["reward"] == 1.0
    assert seen == ["Bearer callback-key"] * 4


def test_fake_token_helpers():
    assert fake_token_ids("abc") == [0, 1, 2]
    assert fake_prompt_token_ids([]) == list(range(10))
    assert fake_prompt_token_ids([{}, {}]) == list(range(20))


def test_a_served_agent_reports_to_the_in_process_mock_trainer(serve, http, monkeypatch):
    tracker = RolloutCompletionTracker()
    mock = create_mock_trainer_app(tracker)
    patch_httpx_for_mock_trainer(mock, monkeypatch)
    server = serve(calculator)
    body = init_body(
        "mocked", "http://mock-trainer.invalid", messages=[{"role": "user", "content": "add 5 and 3"}]
    )
    assert http.post(f"{server.url}/v1/rollout/init", json=body).status_code == 202
    assert tracker.wait(5.0)
    done = tracker.responses[0]
    assert done["status"] == "COMPLETED"
    assert [m["role"] for m in done["final_messages"]] == ["user", "assistant", "tool", "assistant"]
    assert done["final_messages"][2]["content"] == "8"
    assert TestClient(mock).get("/v1/rollout/completed/mocked").json()["status"] == "COMPLETED"


# Runs in a fresh interpreter in which every import of fastapi fails, as on an install without the
# ``server`` extra.
WITHOUT_FASTAPI = textwrap.dedent(
    """
    import sys

    class RefuseFastAPI:
        def find_spec(self, name, path=None, target=None):
            if name == "fastapi" or name.startswith("fastapi."):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, RefuseFastAPI())

    from osmosis_ai.rollout.testing import RolloutCompletionTracker, create_mock_trainer_app

    tracker = RolloutCompletionTracker()
    tracker.record(response={"status": "COMPLETED"})
    assert tracker.wait(0) and tracker.responses == [{"status": "COMPLETED"}]
    try:
        create_mock_trainer_app(tracker)
    except ImportError as exc:
        print(type(exc).__name__)
        print(exc)
    else:
        raise SystemExit("create_mock_trainer_app() worked without fastapi")
    """
)


def test_mock_trainer_without_fastapi_names_the_extra_to_install() -> None:
    result = subprocess.run(
        [sys.executable, "-c", WITHOUT_FASTAPI],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
        check=False,
    )
    assert result.returncode == 0, result.stderr
    kind, message = result.stdout.splitlines()[:2]
    assert kind == "ImportError"
    assert "pip install 'osmosis-ai[server]'" in message
    assert "create_mock_trainer_app()" in message


def test_routing_without_httpx_names_what_to_install(monkeypatch) -> None:
    """httpx is a test dependency, not one of the SDK's: its absence is a pip line, not a traceback."""
    monkeypatch.setitem(sys.modules, "httpx", None)  # what an installation without it imports
    tracker = RolloutCompletionTracker()
    try:
        patch_httpx_for_mock_trainer(create_mock_trainer_app(tracker), monkeypatch)
    except ImportError as exc:
        message = str(exc)
    else:
        raise AssertionError("patch_httpx_for_mock_trainer worked without httpx")
    assert "'httpx' is required for patch_httpx_for_mock_trainer" in message
    assert "pip install 'osmosis-ai[dev]'" in message
