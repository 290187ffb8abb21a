"""The Modal adapter, through Modal's own client (``modal``), against a stand-in serving the gRPC subset
that client calls (tests/sandbox/modal_standin.py; no account): the sandbox lives the sum of the run's
deadlines and is named by the run's key, a lost create answer makes no second sandbox and a lost exec
answer no second run, failures are ``infra_error``, and the sandbox is terminated at our deadline."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator

import pytest

pytest.importorskip(
    "modal", reason="Modal's client is not installed: pip install 'osmosis-ai[sandbox-modal]'"
)

from grpclib.const import Status
from modal_proto import api_pb2

from osmosis_ai.errors import SandboxSettingError
from osmosis_ai.sandbox import SandboxOutcome, code_tests_reward, run
from osmosis_ai.sandbox.api import _job
from osmosis_ai.sandbox.local import HARNESS, INPUT
from osmosis_ai.sandbox.modal import ModalProvider
from osmosis_ai.sandbox.remote import provider, run_remote, ttl_for
from tests.sandbox.modal_standin import TOKEN_ID, TOKEN_SECRET, ModalStandIn

CODE = "def double(x):\n    return 2 * x\n"
TESTS = ["assert double(1) == 2", "assert double(2) == 5"]
BLOCKED, OPEN = api_pb2.NetworkAccess.BLOCKED, api_pb2.NetworkAccess.OPEN


@pytest.fixture
async def modal(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[ModalStandIn]:
    standin = await ModalStandIn().start()
    monkeypatch.setenv("MODAL_SERVER_URL", standin.url)
    monkeypatch.setenv("MODAL_TOKEN_ID", TOKEN_ID)
    monkeypatch.setenv("MODAL_TOKEN_SECRET", TOKEN_SECRET)
    yield standin
    await standin.close()
    assert standin.unimplemented == []  # the stand-in served every call the client made


async def test_code_and_tests_run_in_a_modal_sandbox_terminated_after(modal: ModalStandIn) -> None:
    result = await run(CODE + "print('hi')", tests=TESTS, provider="modal", timeout=20)
    assert result.outcome is SandboxOutcome.FAILED and result.tier == "modal"
    assert (result.tests_passed, result.tests_total, result.stdout) == (1, 2, "hi\n")
    assert "test 1 failed" in result.stderr
    assert modal.created == 1 and len(modal.terminated) == 1 and modal.boxes == {}
    assert (await run(command=["/bin/sh", "-c", "exit 3"], provider="modal")).exit_code == 3
    killed = await run("import os; os.kill(os.getpid(), 9)", provider="modal")
    assert killed.outcome is SandboxOutcome.CRASHED
    said = await run(command="echo $GREETING; echo oops >&2", env={"GREETING": "hello"}, provider="modal")
    assert (said.stdout, said.stderr, said.outcome) == ("hello\n", "oops\n", SandboxOutcome.PASSED)


async def test_the_sandbox_lives_the_sum_of_the_runs_deadlines_and_is_named_by_its_key(
    modal: ModalStandIn,
) -> None:
    await run("pass", tests=["assert True"], timeout=7, provider="modal")
    await run("pass", tests=["assert True"], timeout=7.5, network=True, provider="modal")
    job = _job("pass", None, None, ["assert True"], 7, 512, 1, False, None)
    (first, ttl, network), (second, longer, opened) = modal.made
    assert ttl == ttl_for(job, len({"main.py", HARNESS, INPUT})) and longer == ttl + 1  # whole seconds, up
    assert (network, opened) == (BLOCKED, OPEN)
    assert first.startswith("osmosis-") and second.startswith("osmosis-") and first != second  # one per run


async def test_a_lost_create_answer_makes_no_second_sandbox(modal: ModalStandIn) -> None:
    modal.lose_create_answers = 1  # made; the client asks again and is told the name is taken
    result = await run(CODE, tests=TESTS[:1], provider="modal")
    assert result.outcome is SandboxOutcome.PASSED, result
    assert modal.create_requests == 2 and modal.created == 1
    assert len(modal.terminated) == 1 and modal.boxes == {}


async def test_a_lost_exec_answer_does_not_run_the_code_twice(modal: ModalStandIn) -> None:
    modal.lose_exec_answers = 1  # started; the client asks again under the same exec id
    result = await run(command="echo once", provider="modal")
    assert (result.outcome, result.stdout) == (SandboxOutcome.PASSED, "once\n")
    assert modal.exec_requests == modal.processes + 1


async def test_a_refusing_control_plane_is_infra_error_never_a_verdict(modal: ModalStandIn) -> None:
    modal.refuse_with = Status.UNAVAILABLE
    result = await run(CODE, tests=TESTS, provider="modal")
    assert result.outcome is SandboxOutcome.INFRA_ERROR and result.tests_passed is None
    assert "the modal sandbox failed: create a sandbox" in (result.error or "")
    assert modal.created == 0 and modal.create_requests > 3  # asked again: it may pass
    asked = modal.create_requests
    modal.refuse_with = Status.PERMISSION_DENIED  # not worth asking again
    result = await run(CODE, provider="modal")
    assert result.outcome is SandboxOutcome.INFRA_ERROR and modal.create_requests == asked + 1


async def test_a_run_past_its_timeout_is_a_timeout_and_its_sandbox_terminated(modal: ModalStandIn) -> None:
    result = await run("import time\ntime.sleep(60)", provider="modal", timeout=1)
    assert result.outcome is SandboxOutcome.TIMEOUT
    assert len(modal.terminated) == 1 and modal.boxes == {}  # its process killed with it


async def test_code_tests_reward_scores_in_modal_from_another_thread(modal: ModalStandIn) -> None:
    answer = f"```python\n{CODE}```"  # scored in a thread with its own loop, as a reward worker would
    score = await asyncio.to_thread(code_tests_reward, answer, "\n".join(TESTS), {}, provider="modal")
    assert score == 0.5
    assert modal.created == 1 and modal.boxes == {}


async def test_an_unreachable_control_plane_is_infra_error(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    monkeypatch.setenv("MODAL_SERVER_URL", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("MODAL_TOKEN_ID", TOKEN_ID)
    monkeypatch.setenv("MODAL_TOKEN_SECRET", TOKEN_SECRET)
    job = _job(CODE, None, None, TESTS, 5, 512, 1, False, None)
    result = await run_remote(job, ModalProvider(connect_timeout=0.5))
    assert result.outcome is SandboxOutcome.INFRA_ERROR
    assert "the modal sandbox failed: connect to Modal: no answer in 0.5 s" in (result.error or "")


def test_the_modal_provider_needs_a_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MODAL_TOKEN_ID", "")  # set, so no ~/.modal.toml profile is read instead
    monkeypatch.setenv("MODAL_TOKEN_SECRET", "")
    with pytest.raises(SandboxSettingError, match="MODAL_TOKEN_ID and MODAL_TOKEN_SECRET"):
        provider("modal")
