"""``serve_agent_loop`` as a library: a program serves an agent, is told what started, and nothing is
printed on its behalf. Each server runs in its own Python process (uvicorn owns the signals there)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from osmosis_ai.rollout.server import ServeError, ServerStartError, serve_agent_loop
from osmosis_ai.rollout.validator import AgentLoopValidationError
from tests.support.cli import REPO, subprocess_env
from tests.support.server import ScriptedAgent, init_body
from tests.support.sockets import free_port
from tests.support.trainer import TrainerStandIn
from tests.support.waiting import probe, wait_until

PROGRAM = """
import json, sys
from examples.calculator.agent import agent_loop
from osmosis_ai.rollout.server import ServerConfig, serve_agent_loop

port, mode, outbox = int(sys.argv[1]), sys.argv[2], sys.argv[3]
if mode == "callback":
    def started(info):
        fields = {"host": info.host, "port": info.port, "generated": info.api_key_generated,
                  "key": info.api_key, "outbox": info.outbox, "tools": info.validation.tool_count}
        with open(outbox + ".started", "w") as file:
            json.dump(fields, file)
    serve_agent_loop(agent_loop, host="127.0.0.1", port=port, skip_register=True, on_started=started)
else:
    serve_agent_loop(agent_loop, host="127.0.0.1", port=port, skip_register=True)
"""


def _serve(tmp_path: Path, mode: str) -> tuple[subprocess.Popen[str], str, Path]:
    port = free_port()
    outbox = tmp_path / "outbox.sqlite3"
    env = subprocess_env(OSMOSIS_ROLLOUT_SERVER_OUTBOX_PATH=str(outbox))
    proc = subprocess.Popen(
        [sys.executable, "-c", PROGRAM, str(port), mode, str(outbox)],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"the program exited early: {proc.communicate()}")
        try:
            return probe().get(f"{url}/health", timeout=0.5).status_code == 200
        except httpx.HTTPError:
            return False

    wait_until(ready, timeout=30, what="the server to answer /health")
    return proc, url, outbox


def _stop(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=20)
    return proc.returncode, out, err


def test_on_started_receives_what_is_served_and_nothing_is_printed(tmp_path: Path, trainer: TrainerStandIn):
    proc, url, outbox = _serve(tmp_path, "callback")
    try:
        started = json.loads(Path(f"{outbox}.started").read_text())
        headers = {"Authorization": f"Bearer {started['key']}"}
        response = httpx.post(f"{url}/v1/rollout/init", json=init_body("lib-1", trainer.url), headers=headers)
        assert response.status_code == 202
        assert trainer.wait_completed("lib-1")["status"] == "COMPLETED"
    finally:
        code, out, err = _stop(proc)
    assert code == 0, err
    assert started["generated"] and started["key"].startswith("osm_rollout_")
    assert (started["host"], started["outbox"], started["tools"]) == ("127.0.0.1", str(outbox), 4)
    assert out == ""  # a library prints nothing
    assert started["key"] not in err  # told to the callback, never logged


def test_without_a_callback_the_generated_key_still_reaches_the_caller(tmp_path: Path):
    proc, _, _ = _serve(tmp_path, "log")
    code, out, err = _stop(proc)
    assert code == 0, err
    assert out == ""
    (line,) = [line for line in err.splitlines() if "generated the server API key" in line]
    assert "osm_rollout_" in line


def test_an_invalid_agent_is_one_error_listing_what_is_wrong():
    broken = ScriptedAgent(tools=[{"type": "function"}])
    with pytest.raises(
        AgentLoopValidationError, match=r"failed with 1 error\(s\):\n  - \[MISSING_FUNCTION\]"
    ):
        serve_agent_loop(broken, local_debug=True, port=free_port())


def test_a_busy_port_is_refused_before_anything_starts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    import socket

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))  # where the default outbox is checked
    started: list[object] = []
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(ServeError, match=f"cannot listen on 127.0.0.1:{port}"):
            serve_agent_loop(
                ScriptedAgent(),
                local_debug=True,
                port=port,
                validate=False,
                on_started=started.append,
                debug_dir=str(tmp_path),
            )
    assert started == []
    assert not (tmp_path / "osmosis").exists()  # no outbox file, no trace directory left behind


def test_reload_cannot_carry_lifespan_hooks():
    from tests.support.server import fast_config

    async def hook() -> None:
        pass

    with pytest.raises(ServeError, match="on_startup and on_shutdown cannot follow"):
        serve_agent_loop(ScriptedAgent(), reload=True, config=fast_config(on_startup=hook), local_debug=True)


def test_a_failed_start_up_is_an_error_not_the_end_of_the_process(capfd: pytest.CaptureFixture[str]):
    from tests.support.server import fast_config

    async def broken() -> None:
        raise RuntimeError("the database is down")

    config = fast_config(host="127.0.0.1", port=free_port(), on_startup=broken)
    with pytest.raises(ServerStartError, match="did not start; the reason is logged above"):
        serve_agent_loop(ScriptedAgent(), config=config, local_debug=True, validate=False)
    assert "the database is down" in capfd.readouterr().err  # uvicorn logged why
