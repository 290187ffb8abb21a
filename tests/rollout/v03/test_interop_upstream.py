"""Interop with upstream osmosis-ai 0.3.8, run from its own Python 3.12 virtualenv as a subprocess
on loopback (``tests/support/upstream03.py``; ``make upstream03``): upstream's own ``RolloutClient``
drives this package's server running an unchanged 0.3 ``main.py`` (``python main.py``, uvicorn on
``$_OSMOSIS_ROLLOUT_PORT``) whose workflow calls the OpenAI-compatible stand-in once.

Skipped, with the reason, only on a machine without a Python 3.12.
"""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.rollout.v03.served import KEY, Served, without_this_repo
from tests.support import upstream03
from tests.support.openai_server import OpenAIServer, Reply
from tests.support.waiting import wait_until

HERE = Path(__file__).resolve().parent
DRIVER = HERE / "upstream_driver.py"


def _driver(python: Path, scenario: str, server: Served, chat: str, key: str | None) -> list[str]:
    return [str(python), str(DRIVER), scenario, server.url, chat, *([key] if key else [])]


def _seen(returncode: int, stdout: str, stderr: str, server: Served) -> dict[str, Any]:
    assert returncode == 0, f"{stderr[-3000:]}\nserver log:\n{server.log.read_text()[-3000:]}"
    seen: dict[str, Any] = json.loads(stdout.strip().splitlines()[-1])
    assert Path(seen.pop("client_package")).is_relative_to(upstream03.VENV)  # upstream's client, not ours
    return seen


def drive(python: Path, scenario: str, server: Served, chat: str, key: str | None = KEY) -> dict[str, Any]:
    """Run the driver's ``scenario`` with upstream's client; what it saw."""
    done = subprocess.run(
        _driver(python, scenario, server, chat, key),
        cwd=HERE.parent, env=without_this_repo(), capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    return _seen(done.returncode, done.stdout, done.stderr, server)


def expected_rollouts() -> list[dict[str, Any]]:
    return [
        {"id": f"row-{i}", "status": "success", "reward": 1.0 if i % 2 == 0 else 0.0, "error": None}
        for i in range(20)
    ]


def test_upstreams_client_runs_rollouts_on_this_packages_server(
    upstream_python: Path, serve_main: Callable[..., Served], arithmetic: OpenAIServer
) -> None:
    server = serve_main()
    seen = drive(upstream_python, "rollouts", server, arithmetic.url)
    assert seen["results"] == expected_rollouts()
    assert "RolloutServer starting: agent loop 'OneCallWorkflow'" in server.log.read_text()  # this package's
    chats = [request for request in arithmetic.requests if request.path == "/v1/chat/completions"]
    assert len(chats) == 20 and {request.headers["authorization"] for request in chats} == {
        "Bearer sk-policy"
    }


def test_the_project_is_a_real_0_3_program_upstreams_own_server_serves_it(
    upstream_python: Path, serve_main: Callable[..., Served], arithmetic: OpenAIServer, tmp_path: Path
) -> None:
    # upstream writes a directory per rollout; under tmp_path, not the home directory
    server = serve_main(upstream_python, without_this_repo(), _OSMOSIS_ROLLOUT_ARTIFACT_ROOT=str(tmp_path))
    assert drive(upstream_python, "rollouts", server, arithmetic.url)["results"] == expected_rollouts()


def test_a_duplicate_id_is_refused_with_409_as_upstreams_client_expects(
    upstream_python: Path, serve_main: Callable[..., Served], arithmetic: OpenAIServer
) -> None:
    seen = drive(upstream_python, "duplicate", serve_main(), arithmetic.url)
    assert seen == {"second": 409, "first": "success", "reward": 1.0}


def test_upstreams_client_cancels_a_running_rollout(
    upstream_python: Path, serve_main: Callable[..., Served], openai_server: OpenAIServer
) -> None:
    held = threading.Event()
    openai_server.default = Reply(content="6", gate=held)
    try:
        seen = drive(upstream_python, "cancel", serve_main(), openai_server.url)
    finally:
        held.set()
    assert seen == {
        "first": {"to-cancel": "cancelled_running"},
        "again": {"to-cancel": "cancelled_running"},
        "status": "cancelled",
    }


def test_upstreams_client_reads_health_and_waits_for_idle(
    upstream_python: Path, serve_main: Callable[..., Served], arithmetic: OpenAIServer
) -> None:
    seen = drive(upstream_python, "health", serve_main(), arithmetic.url)
    health = seen["health"]
    assert health["status"] == "ok" and health["process_id"] == seen["idle_process"]
    assert health["lifecycle"] == {"accepting_rollouts": True, "active_rollouts": 0}
    assert health["concurrency"]["max_concurrent"] == 4


def test_a_wrong_key_gets_401_as_upstreams_client_sees_it(
    upstream_python: Path, serve_main: Callable[..., Served], arithmetic: OpenAIServer
) -> None:
    seen = drive(upstream_python, "unauthorized", serve_main(), arithmetic.url, key="not-the-key")
    assert seen == {"codes": {"health": 401, "rollout": 401}}
    assert arithmetic.requests == []


def test_at_the_queue_limit_upstreams_client_waits_out_429_and_every_rollout_succeeds(
    upstream_python: Path, serve_main: Callable[..., Served], arithmetic: OpenAIServer
) -> None:
    held = threading.Event()
    answer = arithmetic.handler
    assert answer is not None
    arithmetic.handler = lambda payload: Reply(content=str(answer(payload)), gate=held)
    server = serve_main(OSMOSIS_ROLLOUT_SERVER_MAX_QUEUED_ROLLOUTS="0")  # 4 slots, no queue
    driver = subprocess.Popen(
        _driver(upstream_python, "rollouts", server, arithmetic.url, KEY),
        cwd=HERE.parent, env=without_this_repo(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        wait_until(lambda: arithmetic.in_flight.now == 4, 60, "the 4 slots taken by held chat calls")
        wait_until(
            lambda: '"POST /rollout HTTP/1.1" 429' in server.log.read_text(), 60, "a submit refused with 429"
        )
    finally:
        held.set()
    stdout, stderr = driver.communicate(timeout=180)
    assert _seen(driver.returncode, stdout, stderr, server)["results"] == expected_rollouts()
    assert arithmetic.in_flight.peak == 4
