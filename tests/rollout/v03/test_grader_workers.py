"""The 0.3 grader in the reward runtime's worker processes (``LocalBackend(grader_workers=N)``), over
real sockets with real worker processes: a grader that blocks, exits or crashes fails its own rollout
typed, the server and the other rollouts go on, and a grader that behaves grades as in-process."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from osmosis_ai.rollout.backend.local import LocalBackend
from osmosis_ai.rollout.context import GraderContext
from osmosis_ai.rollout.grader import Grader
from tests.rollout.v03.graders import Answers, Misbehaving
from tests.rollout.v03.test_wire import finished, submit
from tests.support.server import RunningServer
from tests.support.waiting import wait_until


def graded(http: httpx.Client, server: RunningServer, rollout_id: str, **fields: Any) -> dict[str, Any]:
    return finished(http, server, rollout_id, submit(http, server, rollout_id, **fields))


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_graders_reward_and_its_changes_to_the_sample_come_back_from_its_worker(
    serve03: Callable[..., RunningServer], http: httpx.Client
) -> None:
    in_process = serve03(LocalBackend(workflow=Answers, grader=Misbehaving))
    isolated = serve03(LocalBackend(workflow=Answers, grader=Misbehaving, grader_workers=1))
    here = graded(http, in_process, "here", metadata={})
    there = graded(http, isolated, "there", metadata={})
    assert here["status"] == there["status"] == "success"
    assert here["sample"].pop("metrics") == {"graded_in": os.getpid()}
    assert there["sample"].pop("metrics")["graded_in"] != os.getpid()
    assert here["sample"] == there["sample"] and there["sample"]["reward"] == 1.0
    # a sample that cannot travel is reduced as the wire reduces a sample that is not JSON
    here = graded(http, in_process, "here-2", metadata={"grader": "unpicklable"})
    there = graded(http, isolated, "there-2", metadata={"grader": "unpicklable"})
    assert here == {**there, "rollout_id": "here-2"} and here["sample"]["reward"] == 1.0
    wrong = graded(http, isolated, "wrong", metadata={}, label="5")
    assert wrong["status"] == "success" and wrong["sample"]["reward"] == 0.0
    for how, category, message in [
        ("raise", "validation_error", "grader: the grader did not like the answer"),
        (
            "none",
            "validation_error",
            "grader: the grader set no reward: call ctx.set_reward(value) in Grader.grade",
        ),
        ("infra", "internal_error", "grader: the sandbox could not run the code: bwrap is missing"),
    ]:
        for where, server in (("there", isolated), ("here", in_process)):
            failed = graded(http, server, f"{how}-{where}", metadata={"grader": how})
            assert (failed["status"], failed["err_category"], failed["err_message"]) == (
                "failure",
                category,
                message,
            )
            assert failed["sample"]["reward"] is None


def test_a_grader_blocking_its_process_fails_typed_at_its_deadline_and_others_succeed(
    serve03: Callable[..., RunningServer], http: httpx.Client, tmp_path: Path
) -> None:
    server = serve03(LocalBackend(workflow=Answers, grader=Misbehaving, grader_workers=2))
    pid_file = tmp_path / "sleeper.pid"
    token = submit(
        http,
        server,
        "sleeps",
        metadata={"grader": "sleep", "pid_file": str(pid_file)},
        grader_timeout_sec=1.0,
    )
    others = {
        f"o-{i}": submit(http, server, f"o-{i}", metadata={}, grader_timeout_sec=30.0) for i in range(4)
    }
    result = finished(http, server, "sleeps", token)
    assert result["status"] == "failure" and result["err_category"] == "timeout"
    assert result["err_message"] == "the grader exceeded its 1 s deadline"
    assert result["sample"]["reward"] is None
    for rollout_id, other in others.items():
        done = finished(http, server, rollout_id, other)
        assert done["status"] == "success" and done["sample"]["reward"] == 1.0, done
    sleeper = int(pid_file.read_text())
    wait_until(lambda: not alive(sleeper), 10, "the worker blocked in time.sleep to be killed")
    assert graded(http, server, "after", metadata={})["sample"]["reward"] == 1.0


@pytest.mark.parametrize(
    ("how", "message"),
    [
        ("exit", "grader: SystemExit: 3"),
        ("os_exit", "grader: its worker process exited with status 7 while running it"),
        ("segfault", "grader: its worker process died of SIGSEGV"),
    ],
)
def test_a_grader_that_exits_or_crashes_fails_typed_and_the_server_keeps_serving(
    serve03: Callable[..., RunningServer], http: httpx.Client, how: str, message: str
) -> None:
    server = serve03(LocalBackend(workflow=Answers, grader=Misbehaving, grader_workers=1))
    result = graded(http, server, how, metadata={"grader": how})
    assert result["status"] == "failure" and result["err_category"] == "agent_error"
    assert result["err_message"].startswith(message), result["err_message"]
    assert result["sample"]["reward"] is None
    for i in range(2):  # the one worker was replaced (or lived on, after sys.exit)
        assert graded(http, server, f"after-{i}", metadata={})["sample"]["reward"] == 1.0


def test_a_grader_that_cannot_be_imported_by_name_grades_in_the_servers_process(
    serve03: Callable[..., RunningServer], http: httpx.Client, caplog: pytest.LogCaptureFixture
) -> None:
    class Local(Grader):
        async def grade(self, ctx: GraderContext) -> None:
            ctx.set_reward(0.5 if os.getpid() == here else -1.0)

    here = os.getpid()
    with caplog.at_level(logging.WARNING, logger="osmosis_ai.rollout.backend.local.grading"):
        server = serve03(LocalBackend(workflow=Answers, grader=Local, grader_workers=2))
    assert "the grader runs in the server's process" in caplog.text
    assert "cannot be imported by name" in caplog.text
    assert graded(http, server, "local", metadata={})["sample"]["reward"] == 0.5


def test_grader_workers_must_be_a_whole_number() -> None:
    with pytest.raises(ValueError, match=r"grader_workers=\.\.\.\) must be a whole number >= 0, got -1"):
        LocalBackend(workflow=Answers, grader=Misbehaving, grader_workers=-1)


def test_a_module_that_builds_its_app_on_import_grades_in_its_workers(http: httpx.Client) -> None:
    from tests.rollout.v03.app_with_grader import app

    server = RunningServer(app).start()
    try:
        result = graded(http, server, "app", metadata={})
    finally:
        server.stop()
    assert result["status"] == "success" and result["sample"]["reward"] == 1.0
    assert result["sample"]["metrics"]["graded_in"] != os.getpid()
