"""``osmosis serve``: its option and setting checks in this process, the server it runs as a subprocess
(served rollouts, registration, signals)."""

from __future__ import annotations

import logging
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from osmosis_ai.cli.commands.serve import print_registration_result
from osmosis_ai.cli.commands.validate import validate_and_report
from osmosis_ai.rollout.server.registration import RegistrationResult
from tests.support.cli import ASYNC_TOOLS_AGENT, CALCULATOR, REPO, cli, osmosis, subprocess_env
from tests.support.platform import StandInPlatform, assert_no_token, osmosis_on
from tests.support.serve import ServeProcess
from tests.support.server import PlatformStandIn, init_body
from tests.support.sockets import free_port
from tests.support.trainer import TrainerStandIn
from tests.support.waiting import wait_until

# -- serve: refusals -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--local", "--api-key", "k"], "--api-key cannot be combined with --local"),
        ([], "run 'osmosis login'"),  # not logged in, no token in the environment
        (["--skip-register", "--api-key", " "], "--api-key must not be empty"),
    ],
)
def test_serve_refuses_bad_combinations(args: list[str], message: str):
    result = cli("serve", "-m", CALCULATOR, "-p", "1", *args)
    assert result.returncode == 1
    assert result.stderr.startswith("Error: ")
    assert message in result.stderr


def test_serve_rejects_a_bad_port():
    result = cli("serve", "-m", CALCULATOR, "-p", "70000")
    assert result.returncode == 1  # a value out of range, as 0.2's value errors
    assert result.stderr.strip() == "Error: -p/--port: invalid port 70000: expected 1-65535"


# -- serve: running --------------------------------------------------------------------------------


@pytest.fixture
def launch() -> Iterator[type[ServeProcess]]:
    started: list[ServeProcess] = []

    class Tracked(ServeProcess):
        def __init__(self, *args: str, cwd: Path = REPO, port: int | None = None, **env: str) -> None:
            super().__init__(*args, cwd=cwd, port=port, **env)
            started.append(self)

    yield Tracked
    for process in started:
        process.stop()


def test_serve_local_runs_a_calculator_rollout(launch, trainer: TrainerStandIn, tmp_path: Path):
    trainer.tool_turns = 1
    logs = tmp_path / "logs"
    server = launch(
        "--local", "-m", CALCULATOR, "--queue-limit", "3", "--shutdown-grace", "0", "--log", str(logs)
    )
    server.wait_ready()
    assert httpx.get(f"{server.url}/health", timeout=5).json()["max_queued_rollouts"] == 3
    response = httpx.post(f"{server.url}/v1/rollout/init", json=init_body("cli-1", trainer.url), timeout=5)
    assert response.status_code == 202
    assert [t["function"]["name"] for t in response.json()["tools"]] == [
        "add",
        "subtract",
        "multiply",
        "divide",
    ]
    done = trainer.wait_completed("cli-1", timeout=10)
    assert (done["status"], done["reward"]) == ("COMPLETED", 1.0)
    assert httpx.get(f"{server.url}/platform/health", timeout=5).status_code == 404  # no key in local mode
    code, out, err = server.stop()
    assert code == 0, err
    assert "disabled (local debug mode" in out
    assert "127.0.0.1" in out  # --local binds loopback by default
    sessions = list(logs.iterdir())
    assert len(sessions) == 1 and sessions[0].name.isdigit()  # DIR/<unix time>/
    assert sessions[0].name in out  # the panel names the session directory


def test_serve_skip_register_prints_the_generated_key_and_enforces_it(launch, trainer: TrainerStandIn):
    server = launch("--skip-register", "--no-validate", "-H", "127.0.0.1", "-m", CALCULATOR)
    server.wait_ready()
    body = init_body("cli-key", trainer.url)
    assert httpx.post(f"{server.url}/v1/rollout/init", json=body, timeout=5).status_code == 401
    _, out, err = server.stop()
    keys = re.findall(r"osm_rollout_[A-Za-z0-9_-]{43}", out)
    assert len(keys) == 1  # printed once, in the panel
    assert keys[0] not in err  # never logged


def test_serve_on_a_busy_port_is_one_error_line_before_any_panel():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = cli("serve", "-m", CALCULATOR, "--local", "--no-validate", "-p", str(port))
    assert result.returncode == 1
    assert result.stderr.startswith("Error: cannot listen on 127.0.0.1:") and result.stderr.count("\n") == 1
    assert "pick another with --port" in result.stderr
    assert "Listening on" not in result.stdout


def test_serve_names_a_bad_setting_in_one_line():
    # A process of its own: the rollout settings are read once per process, maybe by an earlier in-process run.
    result = osmosis(
        "serve", "-m", CALCULATOR, "--local", "--no-validate", "-p", "1",
        env={"OSMOSIS_ROLLOUT_SERVER_REQUEST_TIMEOUT_SECONDS": "5"},
    )  # fmt: skip
    assert result.returncode == 1
    assert result.stderr == (
        "Error: OSMOSIS_ROLLOUT_SERVER_REQUEST_TIMEOUT_SECONDS='5': Value error, must be 0 (no deadline) or "
        "between 10 and 3600 seconds; allowed: float from 0.0 to 3600.0\n"
    )


@pytest.mark.parametrize("source", ["file", "environment"])
def test_serve_takes_its_key_from_a_file_or_the_environment(
    launch, trainer: TrainerStandIn, tmp_path: Path, source: str
):
    secret = f"osm_rollout_from-{source}"
    if source == "file":
        key_file = tmp_path / "key"
        key_file.write_text(secret + "\n")
        key_file.chmod(0o600)
        server = launch("--skip-register", "--no-validate", "-H", "127.0.0.1", "-m", CALCULATOR,
                        "--api-key-file", str(key_file))  # fmt: skip
    else:  # an agent that reports whether it, or a process it starts, can see the key
        (tmp_path / "probe_agent.py").write_text(SERVE_KEY_PROBE_AGENT)
        server = launch("--skip-register", "--no-validate", "-H", "127.0.0.1", "-m", "probe_agent:agent_loop",
                        cwd=tmp_path, OSMOSIS_SERVE_API_KEY=secret)  # fmt: skip
    server.wait_ready()
    health = f"{server.url}/platform/health"
    assert httpx.get(health, headers={"Authorization": f"Bearer {secret}"}, timeout=5).status_code == 200
    assert httpx.get(health, headers={"Authorization": "Bearer other"}, timeout=5).status_code == 401
    if source == "environment":  # read, then taken out of the environment before the agent runs
        body, headers = init_body("key-env-1", trainer.url), {"Authorization": f"Bearer {secret}"}
        response = httpx.post(f"{server.url}/v1/rollout/init", json=body, headers=headers, timeout=10)
        assert response.json()["tools"][0]["function"]["description"] == "absent|absent"
    _, out, err = server.stop()
    assert secret not in out + err


def test_serve_api_key_file_errors_are_one_line(tmp_path: Path):
    empty = tmp_path / "empty"
    empty.write_text("\n")
    empty.chmod(0o600)
    for path, message in ((tmp_path / "missing", "cannot read the API key file"), (empty, "is empty")):
        result = cli("serve", "-m", CALCULATOR, "--skip-register", "-p", "1", "--api-key-file", str(path))
        assert result.returncode == 1
        assert result.stderr.startswith("Error: ") and message in result.stderr


def test_serve_closes_connections_that_never_finish_their_headers(launch):
    server = launch("--local", "--no-validate", "-m", CALCULATOR,
                    OSMOSIS_ROLLOUT_SERVER_HEADER_TIMEOUT_SECONDS="0.5")  # fmt: skip
    server.wait_ready()
    idle = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(10)]
    partial = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(10)]
    for sock in partial:
        sock.sendall(b"POST /v1/rollout/init HTTP/1.1\r\nHost: x\r\nContent-")
    try:
        for sock in idle + partial:
            sock.settimeout(10)  # a bound on a hang; without the header timeout they stay open
            assert sock.recv(1) == b""
    finally:
        for sock in idle + partial:
            sock.close()
    assert httpx.get(f"{server.url}/health", timeout=5).status_code == 200  # complete requests still work


KILLED_MID_DELIVERY_AGENT = """
from osmosis_ai.rollout import RolloutAgentLoop


class Quick(RolloutAgentLoop):
    name = "quick"

    def get_tools(self, request):
        return []

    async def run(self, ctx):
        return ctx.complete([{"role": "assistant", "content": "done"}], reward=0.75)


agent_loop = Quick()
"""


def test_a_result_not_acknowledged_before_sigkill_is_re_sent_by_the_restarted_server(
    launch, trainer: TrainerStandIn, tmp_path: Path
):
    from tests.support.trainer import Reply

    (tmp_path / "quick_agent.py").write_text(KILLED_MID_DELIVERY_AGENT)
    outbox = tmp_path / "outbox.sqlite3"
    args = ("--local", "--no-validate", "-m", "quick_agent:agent_loop", "--outbox", str(outbox))
    trainer.queue_completed(Reply(status=503, headers={"Retry-After": "600"}))  # down: come back later
    first = launch(*args, cwd=tmp_path)
    first.wait_ready()
    httpx.post(f"{first.url}/v1/rollout/init", json=init_body("killed-1", trainer.url), timeout=5)
    wait_until(lambda: len(trainer.completed_requests) == 1, timeout=10)
    assert httpx.get(f"{first.url}/health", timeout=5).json()["pending_deliveries"] == 1
    first.proc.kill()  # SIGKILL: no shutdown code runs
    first.proc.wait(timeout=10)
    second = launch(*args, cwd=tmp_path, port=first.port)
    second.wait_ready()
    done = trainer.wait_completed("killed-1", timeout=10)
    assert (done["status"], done["reward"]) == ("COMPLETED", 0.75)
    wait_until(lambda: httpx.get(f"{second.url}/health", timeout=5).json()["pending_deliveries"] == 0)
    code, out, _ = second.stop()
    assert code == 0
    assert str(outbox) in out  # the panel says where undelivered results are kept


RAISING_AGENT = """
import sys

from osmosis_ai.rollout import RolloutAgentLoop


class Raising(RolloutAgentLoop):
    name = "raising"

    def get_tools(self, request):
        return []

    async def run(self, ctx):
        if ctx.request.rollout_id.startswith("exit"):
            sys.exit(2)
        raise KeyboardInterrupt


agent_loop = Raising()
"""


def test_an_agent_raising_system_exit_or_keyboard_interrupt_does_not_stop_serve(
    launch, trainer: TrainerStandIn, tmp_path: Path
):
    (tmp_path / "raising_agent.py").write_text(RAISING_AGENT)
    server = launch("--local", "--no-validate", "-m", "raising_agent:agent_loop", "--outbox", ":memory:",
                    cwd=tmp_path)  # fmt: skip
    server.wait_ready()
    for rollout_id in ("exit-1", "interrupt-1"):
        httpx.post(f"{server.url}/v1/rollout/init", json=init_body(rollout_id, trainer.url), timeout=5)
        assert trainer.wait_completed(rollout_id, timeout=10)["status"] == "ERROR"
    time.sleep(0.2)
    assert server.proc.poll() is None  # still serving
    assert httpx.get(f"{server.url}/health", timeout=5).json()["status"] == "healthy"
    server.proc.send_signal(signal.SIGTERM)
    server.proc.wait(timeout=15)
    assert server.proc.returncode == -signal.SIGTERM  # a real stop request, reported as one


ENV_PROBE_AGENT = """
import os
import subprocess
import sys

from osmosis_ai.rollout import RolloutAgentLoop

VARIABLE = "OSMOSIS_SERVE_RELOAD_CONFIG"
CHILD = "import os; print(os.environ.get('OSMOSIS_SERVE_RELOAD_CONFIG', 'absent'))"


class EnvProbe(RolloutAgentLoop):
    name = "env_probe"

    def get_tools(self, request):
        child = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, check=True)
        seen = f"{os.environ.get(VARIABLE, 'absent')}|{child.stdout.strip()}"
        return [{"type": "function", "function": {"name": "probe", "description": seen, "parameters": {"type": "object", "properties": {}, "required": []}}}]

    async def run(self, ctx):
        return ctx.complete([], reward=1.0)


agent_loop = EnvProbe()
"""
SERVE_KEY_PROBE_AGENT = ENV_PROBE_AGENT.replace("OSMOSIS_SERVE_RELOAD_CONFIG", "OSMOSIS_SERVE_API_KEY")


def test_serve_reload_works_and_keeps_its_secrets_from_the_agent(
    launch, trainer: TrainerStandIn, tmp_path: Path
):
    (tmp_path / "probe_agent.py").write_text(ENV_PROBE_AGENT)
    secret = "osm_rollout_reload-secret-key"
    server = launch(
        "--reload", "--skip-register", "--api-key", secret, "-H", "127.0.0.1", "--no-validate",
        "-m", "probe_agent:agent_loop", cwd=tmp_path,
    )  # fmt: skip
    server.wait_ready()
    body = init_body("reload-1", trainer.url)
    assert httpx.post(f"{server.url}/v1/rollout/init", json=body, timeout=5).status_code == 401
    headers = {"Authorization": f"Bearer {secret}"}
    response = httpx.post(f"{server.url}/v1/rollout/init", json=body, headers=headers, timeout=10)
    assert response.status_code == 202  # the reloaded worker got the key through the environment...
    assert response.json()["tools"][0]["function"]["description"] == "absent|absent"  # ...and dropped it
    assert trainer.wait_completed("reload-1", timeout=10)["status"] == "COMPLETED"
    _, out, err = server.stop()
    assert secret not in out + err


def _serve_until_registered(port: int, **env_vars: str) -> tuple[str, str]:
    """Run ``osmosis serve`` on ``port`` until it reports its registration, then stop it: (out, err)."""
    env = subprocess_env(
        COLUMNS="200", PYTHONUNBUFFERED="1", **env_vars
    )  # the result is read while serve runs
    args = [sys.executable, "-m", "osmosis_ai", "serve", "-H", "127.0.0.1", "-p", str(port), "-m", CALCULATOR]
    proc = subprocess.Popen(
        args, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stderr is not None
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")), daemon=True)
    reader.start()
    wait_until(
        lambda: proc.poll() is not None or any("Registered" in line for line in lines),
        timeout=30,
        what="the registration result on stdout",
    )
    proc.send_signal(signal.SIGINT)
    err = proc.stderr.read()
    proc.wait(timeout=15)
    reader.join(timeout=5)
    return "".join(lines), err


def test_serve_registers_with_the_platform_when_a_token_is_given(trainer: TrainerStandIn):
    stand_in = PlatformStandIn()
    stand_in.server.start()
    port = free_port()
    try:
        out, err = _serve_until_registered(
            port, OSMOSIS_ACCESS_TOKEN="tok-cli", OSMOSIS_PLATFORM_URL=stand_in.server.url
        )
    finally:
        stand_in.server.stop()
    assert len(stand_in.calls) == 1, err
    call = stand_in.calls[0]
    assert call["headers"]["authorization"] == "Bearer tok-cli"
    assert call["json"]["port"] == port
    assert call["json"]["api_key"].startswith("osm_rollout_")
    assert "[OK] Registered 'calculator'" in out
    assert "tok-cli" not in out + err


def test_serve_registers_with_the_stored_login(trainer: TrainerStandIn, tmp_path: Path):
    platform = StandInPlatform().start()
    config = tmp_path / "config"
    try:
        assert osmosis_on(platform, config, "login", "--device").returncode == 0
        (token,) = platform.tokens
        out, err = _serve_until_registered(
            free_port(), OSMOSIS_PLATFORM_URL=platform.url, OSMOSIS_CONFIG_DIR=str(config)
        )
    finally:
        platform.stop()
    assert platform.authorizations("/api/cli/rollout-server/register") == [f"Bearer {token}"], err
    assert "[OK] Registered 'calculator'" in out
    assert_no_token(platform, out + err)


def test_serve_validates_and_serves_an_agent_with_an_async_get_tools(
    launch, trainer: TrainerStandIn, tmp_path: Path
):
    (tmp_path / "async_agent.py").write_text(ASYNC_TOOLS_AGENT)
    server = launch("--local", "-m", "async_agent:agent_loop", cwd=tmp_path)  # validation on (the default)
    server.wait_ready()
    response = httpx.post(f"{server.url}/v1/rollout/init", json=init_body("async-1", trainer.url), timeout=5)
    assert response.status_code == 202
    assert [tool["function"]["name"] for tool in response.json()["tools"]] == ["echo"]
    assert trainer.wait_completed("async-1", timeout=10)["status"] == "COMPLETED"
    code, out, err = server.stop()
    assert code == 0, err
    assert "'async_tools' validated successfully (1 tools)" in out


@pytest.mark.parametrize(
    ("result", "lines"),
    [
        (
            RegistrationResult(True, "srv-1", "healthy", server_info={"active_rollouts": 2}),
            ["[OK] Registered 'calc' with the Osmosis Platform at http://10.0.0.5:9000",
             "     server id: srv-1, status: healthy, active rollouts: 2"],
        ),
        (
            RegistrationResult(True, "srv-1", "unhealthy", error="connection refused"),
            ["[WARNING] Registered 'calc', but the Platform's health check failed: connection refused",
             "          Make sure the Platform can reach http://10.0.0.5:9000 (firewall, public address)."],
        ),
        (
            RegistrationResult(False, status="error", error="HTTP 500"),
            ["[WARNING] Registration with the Osmosis Platform failed: HTTP 500",
             "          The server keeps running; TrainGate can still reach it directly."],
        ),
    ],
)  # fmt: skip
def test_the_registration_report(capsys, result: RegistrationResult, lines: list[str]):
    print_registration_result(result, "10.0.0.5", 9000, "calc")
    assert capsys.readouterr().out.splitlines() == lines


def test_the_compatibility_paths_reach_the_library_and_the_command(capsys):
    from osmosis_ai.rollout import serve_agent_loop as from_rollout
    from osmosis_ai.rollout.server import registration, serve
    from osmosis_ai.rollout.server import serve_agent_loop as from_package

    assert serve.serve_agent_loop is from_package is from_rollout
    assert serve.serve_agent_loop.__module__ == "osmosis_ai.rollout.server.serve"  # a library function
    assert serve.validate_and_report is validate_and_report
    registration.print_registration_result(RegistrationResult(False, error="x"), "h", 1, "calc")
    assert capsys.readouterr().out.startswith("[WARNING] Registration with the Osmosis Platform failed: x")
    assert isinstance(serve.logger, logging.Logger) and serve.logger.name == "osmosis_ai.rollout.server.serve"


# -- serve: the server key's hygiene ---------------------------------------------------------------


@pytest.fixture
def busy_port() -> Iterator[str]:
    """A port taken: a command that gets as far as binding it fails instead of serving."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        yield str(taken.getsockname()[1])


def test_serve_refuses_a_short_key_naming_the_fix(tmp_path: Path, busy_port: str):
    for source in ("--api-key", "file", "environment"):
        env: dict[str, str] = {}
        args = ["serve", "-m", CALCULATOR, "--skip-register", "-H", "127.0.0.1", "-p", busy_port]
        if source == "--api-key":
            args += ["--api-key", "abcde"]
        elif source == "file":
            key_file = tmp_path / "short"
            key_file.write_text("abcde\n")
            key_file.chmod(0o600)
            args += ["--api-key-file", str(key_file)]
        else:
            env["OSMOSIS_SERVE_API_KEY"] = "abcde"
        result = cli(*args, env=env)
        assert result.returncode == 1, source
        assert result.stderr.count("\n") == 1 and "abcde" not in result.stderr
        assert "at least 16 characters" in result.stderr and "leave it out to generate one" in result.stderr


def test_serve_refuses_a_key_file_other_users_can_read(tmp_path: Path, busy_port: str):
    key_file = tmp_path / "key"
    key_file.write_text("osm_rollout_a-long-enough-key\n")
    key_file.chmod(0o644)
    result = cli("serve", "-m", CALCULATOR, "--skip-register", "-H", "127.0.0.1", "-p", busy_port,
                 "--api-key-file", str(key_file))  # fmt: skip
    assert result.returncode == 1
    assert result.stderr == (
        f"Error: the API key file {key_file} is open to other users (mode 0644); run 'chmod 600 {key_file}'\n"
    )


# -- serve: where the dedupe state lives -----------------------------------------------------------
# These commands get as far as listening (the port is bound before the state is checked, so a refused
# state leaves no file), on a free port: port 1 is bound for an instant by every other such run (root may).


@pytest.mark.parametrize("state", ["redis:/cache:6379/0", "rediss:cache:6380", "http://cache:6379/0"])
def test_serve_refuses_a_state_that_looks_like_a_mistyped_url(tmp_path: Path, state: str):
    result = cli(
        "serve", "-m", CALCULATOR, "--local", "--workers", "2", "--state", state, "-p", str(free_port()), cwd=tmp_path
    )  # fmt: skip
    assert result.returncode == 1
    assert result.stderr.startswith(
        f"Error: --state: the state {state!r} looks like a URL but is not a Redis one"
    )
    assert "redis://HOST:PORT/DB" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not list(tmp_path.iterdir())  # no SQLite file made of the typo, no directory either


def test_serve_refuses_a_state_file_in_a_directory_that_does_not_exist(tmp_path: Path):
    state = tmp_path / "no" / "such" / "state.sqlite3"
    result = cli(
        "serve", "-m", CALCULATOR, "--local", "--workers", "2", "--state", str(state), "-p", str(free_port()),
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 1
    assert f"the directory {state.parent} does not exist" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "no").exists()
