"""GET /metrics over real sockets: its figures match what the trainer stand-in saw, `promtool` accepts
the page, a real Prometheus scrapes it, and two server processes sharing PROMETHEUS_MULTIPROC_DIR
report their sum."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from osmosis_ai.rollout import RolloutContext, RolloutResult
from tests.support.processes import in_groups
from tests.support.server import ScriptedAgent, chat_then_fail, fast_config, init_body
from tests.support.sockets import free_port
from tests.support.trainer import Reply, TrainerStandIn
from tests.support.waiting import probe, wait_until

REPO = Path(__file__).resolve().parents[3]


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """``{(sample name, sorted labels): value}`` of a text exposition."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(page: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str) -> float:
    return page.get((name, tuple(sorted(labels.items()))), 0.0)


async def reports_error(ctx: RolloutContext) -> RolloutResult:
    await ctx.chat(list(ctx.request.messages))
    return ctx.error("the tool broke")


def _wait_idle(http: httpx.Client, url: str) -> None:
    wait_until(lambda: http.get(f"{url}/health").json()["active_rollouts"] == 0, what="idle server")


@pytest.fixture
def scraped(serve, http: httpx.Client, trainer: TrainerStandIn) -> tuple[str, dict[str, Any], Any]:
    """A server that ran 4 good rollouts, one that raised and one that reported ERROR, answered one
    unauthenticated init, and whose first callback got a 503: its /metrics page, and the server."""
    behaviours = {"r-raise": chat_then_fail, "r-report": reports_error}

    async def run(ctx: RolloutContext) -> RolloutResult:
        behaviour = behaviours.get(ctx.request.rollout_id)
        if behaviour is not None:
            return await behaviour(ctx)
        return await ScriptedAgent().run(ctx)

    agent = ScriptedAgent(run)
    server = serve(agent, config=fast_config(api_key="k", metrics=True))
    trainer.queue_completed(Reply(status=503, headers={"Retry-After": "0"}))
    ids = ["r-1", "r-2", "r-3", "r-4", "r-raise", "r-report"]
    auth = {"Authorization": "Bearer k"}
    for rollout_id in ids:
        assert http.post(
            f"{server.url}/v1/rollout/init", json=init_body(rollout_id, trainer.url), headers=auth
        )
    assert http.post(f"{server.url}/v1/rollout/init", json=init_body("r-x", trainer.url)).status_code == 401
    for rollout_id in ids:
        trainer.wait_completed(rollout_id)
    _wait_idle(http, server.url)
    wait_until(lambda: http.get(f"{server.url}/health").json()["pending_deliveries"] == 0, what="delivered")
    response = http.get(f"{server.url}/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=")
    return response.text, trainer.completed, server


def test_the_figures_match_what_the_trainer_saw(scraped, trainer: TrainerStandIn) -> None:
    text, completed, _ = scraped
    page = samples(text)
    statuses = [payload["status"] for payload in completed.values()]
    assert value(page, "osmosis_rollout_started_total") == len(completed) == 6
    for status in ("COMPLETED", "ERROR"):
        assert value(page, "osmosis_rollout_finished_total", status=status) == statuses.count(status)
    assert value(page, "osmosis_rollout_init_responses_total", code="202") == 6
    assert value(page, "osmosis_rollout_init_responses_total", code="401") == 1
    answered_chats = [r for r in trainer.chat_requests if r.status == 200]
    assert value(page, "osmosis_rollout_chat_call_duration_seconds_count") == len(answered_chats)
    assert value(page, "osmosis_rollout_duration_seconds_count") == 6
    posts = trainer.completed_requests
    assert value(page, "osmosis_rollout_callback_attempts_total") == len(posts) == 7
    assert value(page, "osmosis_rollout_callback_failures_total", reason="503") == 1
    assert value(page, "osmosis_rollout_agent_errors_total", kind="exception") == 1
    assert value(page, "osmosis_rollout_agent_errors_total", kind="reported") == 1
    assert value(page, "osmosis_rollout_in_flight") == value(page, "osmosis_rollout_queued") == 0
    assert value(page, "osmosis_rollout_pending_deliveries") == 0
    assert value(page, "osmosis_rollout_max_concurrent") == fast_config().server.max_concurrent_rollouts


def test_promtool_accepts_the_page(scraped) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (Debian's prometheus package; `make programs` installs it)")
    text, _, _ = scraped
    checked = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_a_real_prometheus_scrapes_it(scraped, tmp_path: Path, http: httpx.Client) -> None:
    prometheus = shutil.which("prometheus")
    if prometheus is None:
        pytest.skip("prometheus is not installed (Debian's package; `make programs` installs it)")
    _, completed, server = scraped
    target = urllib.parse.urlsplit(server.url).netloc
    config = tmp_path / "prometheus.yml"
    config.write_text(
        textwrap.dedent(f"""
        global: {{scrape_interval: 250ms}}
        scrape_configs:
          - job_name: rollout
            static_configs: [{{targets: ["{target}"]}}]
        """)
    )
    port = free_port()
    argv = [
        prometheus, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
    ]  # fmt: skip
    with subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) as proc:
        try:

            def started() -> float | None:
                try:
                    answer = http.get(
                        f"http://127.0.0.1:{port}/api/v1/query",
                        params={"query": 'osmosis_rollout_finished_total{status="COMPLETED"}'},
                    ).json()
                except (httpx.HTTPError, json.JSONDecodeError):
                    return None
                result = answer.get("data", {}).get("result") or []
                return float(result[0]["value"][1]) if result else None

            seen = wait_until(started, timeout=30, what="Prometheus's first scrape")
            assert seen == [p["status"] for p in completed.values()].count("COMPLETED")
        finally:
            proc.terminate()
            proc.wait(timeout=10)


# Two workers as `serve --workers` has them: one start-up, then a fork, each serving its own port.
WORKERS = """
import os
import sys

import uvicorn

from osmosis_ai.rollout.server import ServerConfig, create_app
from tests.support.processes import in_groups
from tests.support.server import ScriptedAgent

ports = [int(port) for port in sys.argv[1:]]
port = ports[0] if os.fork() else ports[1]
config = ServerConfig(max_concurrent_inits=8, metrics=True)
uvicorn.run(create_app(ScriptedAgent(), config=config), host="127.0.0.1", port=port, log_level="warning")
"""


@pytest.fixture
def two_workers(tmp_path: Path) -> Iterator[list[str]]:
    """Two server processes writing their figures to one PROMETHEUS_MULTIPROC_DIR (as serve --workers)."""
    shared = tmp_path / "prometheus"
    shared.mkdir()
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(shared), "PYTHONPATH": str(REPO)}
    ports = [free_port(), free_port()]
    argv = [sys.executable, "-c", WORKERS, *map(str, ports)]
    proc = subprocess.Popen(argv, env=env, cwd=REPO, stderr=subprocess.PIPE, start_new_session=True)
    urls = [f"http://127.0.0.1:{port}" for port in ports]
    try:
        for url in urls:

            def up(url: str = url) -> bool:
                assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
                try:
                    return probe().get(f"{url}/health").status_code == 200
                except httpx.HTTPError:
                    return False

            wait_until(up, timeout=30, what="a worker answering")
        yield urls
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
        wait_until(lambda: not in_groups([proc.pid]), timeout=10, what="both workers gone")


def test_workers_sharing_a_multiprocess_directory_report_their_sum(
    two_workers: list[str], http: httpx.Client, trainer: TrainerStandIn
) -> None:
    first, second = two_workers
    ids = {first: ["m-1", "m-2", "m-3"], second: ["m-4", "m-5"]}
    for url, rollout_ids in ids.items():
        for rollout_id in rollout_ids:
            assert (
                http.post(f"{url}/v1/rollout/init", json=init_body(rollout_id, trainer.url)).status_code
                == 202
            )
    for rollout_ids in ids.values():
        for rollout_id in rollout_ids:
            trainer.wait_completed(rollout_id)
    for url in two_workers:
        _wait_idle(http, url)

    def summed() -> dict[tuple[str, tuple[tuple[str, str], ...]], float] | None:
        page = samples(http.get(f"{second}/metrics").text)
        return page if value(page, "osmosis_rollout_finished_total", status="COMPLETED") == 5 else None

    page = wait_until(summed, what="both workers' rollouts in one page")
    assert value(page, "osmosis_rollout_started_total") == 5
    assert value(page, "osmosis_rollout_init_responses_total", code="202") == 5
    assert value(page, "osmosis_rollout_callback_attempts_total") == 5
    # the concurrency limit of both live workers, refreshed by each once a second
    limit = wait_until(
        lambda: value(samples(http.get(f"{first}/metrics").text), "osmosis_rollout_max_concurrent") or None
    )
    assert limit == 2 * fast_config().server.max_concurrent_rollouts


def test_a_killed_supervisors_prometheus_directory_is_swept_at_the_next_start(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys
    import tempfile

    from osmosis_ai.rollout.server.workers import PROMETHEUS_PREFIX, prometheus_multiprocess

    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    dead_pid = int(gone.stdout)  # a process that has ended: its directory is stale
    stale = tempfile.mkdtemp(prefix=f"{PROMETHEUS_PREFIX}{dead_pid}-")
    live = tempfile.mkdtemp(prefix=f"{PROMETHEUS_PREFIX}{os.getppid()}-")  # a live process's: kept
    try:
        with prometheus_multiprocess():
            assert not os.path.exists(stale) and os.path.isdir(live)
            assert os.path.basename(os.environ["PROMETHEUS_MULTIPROC_DIR"]).startswith(
                f"{PROMETHEUS_PREFIX}{os.getpid()}-"
            )
    finally:
        for path in (stale, live):
            if os.path.isdir(path):
                os.rmdir(path)
