"""Remote providers behind ``run``: the E2B adapter against a stand-in speaking E2B's HTTP subset (no
account), retries that never make a second sandbox, failures typed ``infra_error``, every sandbox
deleted, and a third-party provider found by entry point."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from osmosis_ai.errors import SandboxSettingError
from osmosis_ai.sandbox import SandboxOutcome, code_tests_reward, run
from osmosis_ai.sandbox.api import _job
from osmosis_ai.sandbox.e2b import E2BProvider
from osmosis_ai.sandbox.local import HARNESS, INPUT
from osmosis_ai.sandbox.remote import ENTRY_POINT_GROUP, provider, ttl_for
from tests.sandbox.e2b_standin import API_KEY, E2BStandIn

CODE = "def double(x):\n    return 2 * x\n"
TESTS = ["assert double(1) == 2", "assert double(2) == 5"]


@pytest.fixture
async def e2b(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[E2BStandIn]:
    standin = await E2BStandIn().start()
    monkeypatch.setenv("E2B_API_KEY", API_KEY)
    monkeypatch.setenv("E2B_API_URL", standin.url)
    monkeypatch.setenv("E2B_SANDBOX_URL", standin.url)
    yield standin
    await standin.close()


async def test_code_and_tests_run_in_an_e2b_sandbox_that_is_deleted_after(e2b: E2BStandIn) -> None:
    result = await run(CODE + "print('hi')", tests=TESTS, provider="e2b", timeout=20)
    assert result.outcome is SandboxOutcome.FAILED and result.tier == "e2b"
    assert (result.tests_passed, result.tests_total, result.stdout) == (1, 2, "hi\n")
    assert "test 1 failed" in result.stderr
    assert e2b.created == 1 and len(e2b.deleted) == 1 and e2b.boxes == {}
    assert (await run(command=["/bin/sh", "-c", "exit 3"], provider="e2b")).exit_code == 3
    assert (await run("import os; os.kill(os.getpid(), 9)", provider="e2b")).outcome is SandboxOutcome.CRASHED


async def test_the_sandbox_lives_the_sum_of_the_runs_deadlines_and_carries_its_key(e2b: E2BStandIn) -> None:
    await run("pass", tests=["assert True"], timeout=7, provider="e2b")
    await run("pass", tests=["assert True"], timeout=7, provider="e2b")
    job = _job("pass", None, None, ["assert True"], 7, 512, 1, False, None)
    (first, ttl), (second, _) = e2b.made
    assert ttl == int(ttl_for(job, len({"main.py", HARNESS, INPUT})))
    assert first is not None and second is not None and first != second  # one key per run


async def test_code_tests_reward_scores_in_the_provider_it_is_given(e2b: E2BStandIn) -> None:
    answer = f"```python\n{CODE}```"  # scored in a thread, as a reward worker would, beside the stand-in
    score = await asyncio.to_thread(code_tests_reward, answer, "\n".join(TESTS), {}, provider="e2b")
    assert score == 0.5
    assert e2b.created == 1 and e2b.boxes == {}


async def test_a_lost_create_answer_is_retried_without_a_second_sandbox(e2b: E2BStandIn) -> None:
    e2b.lose_create_answers = 1
    result = await run(CODE, tests=TESTS[:1], provider="e2b")
    assert result.outcome is SandboxOutcome.PASSED, result
    assert e2b.create_requests == 1 and e2b.created == 1  # found by its key, not made again
    assert len(e2b.deleted) == 1 and e2b.boxes == {}


async def test_a_provider_that_keeps_failing_is_infra_error_never_a_verdict(e2b: E2BStandIn) -> None:
    e2b.refuse_with = 503
    result = await run(CODE, tests=TESTS, provider="e2b")
    assert result.outcome is SandboxOutcome.INFRA_ERROR and result.tests_passed is None
    assert "the e2b sandbox failed" in (result.error or "") and "503" in (result.error or "")
    assert e2b.create_requests == 3 and e2b.created == 0
    e2b.refuse_with = 401  # not worth asking again
    result = await run(CODE, provider="e2b")
    assert result.outcome is SandboxOutcome.INFRA_ERROR and e2b.create_requests == 4


async def test_a_run_past_its_timeout_is_a_timeout_and_its_sandbox_deleted(e2b: E2BStandIn) -> None:
    result = await run("import time\ntime.sleep(60)", provider="e2b", timeout=1)
    assert result.outcome is SandboxOutcome.TIMEOUT
    assert len(e2b.deleted) == 1 and e2b.boxes == {}


def test_providers_are_found_by_name_and_by_entry_point(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("E2B_API_KEY", raising=False)
    with pytest.raises(SandboxSettingError, match="E2B_API_KEY"):
        provider("e2b")
    with pytest.raises(SandboxSettingError, match=r"no sandbox provider 'nowhere'.*e2b, local"):
        provider("nowhere")
    info = tmp_path / "osmosis_standin_provider-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: osmosis-standin-provider\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        f"[{ENTRY_POINT_GROUP}]\nstandin = tests.sandbox.test_remote:StandInProvider\n"
        "broken = tests.sandbox.test_remote:not_a_provider\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("E2B_API_KEY", API_KEY)
    found = provider("standin")
    assert type(found).__name__ == "StandInProvider" and found.name == "standin"
    with pytest.raises(SandboxSettingError, match="not a RemoteProvider"):
        provider("broken")


class StandInProvider(E2BProvider):
    """A third-party provider as a plug-in would register it (here: E2B's wire under another name)."""

    name = "standin"


def not_a_provider() -> object:
    return object()


async def test_a_third_party_provider_runs_code_through_run(
    e2b: E2BStandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    info = tmp_path / "osmosis_standin_provider-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: osmosis-standin-provider\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        f"[{ENTRY_POINT_GROUP}]\nstandin = tests.sandbox.test_remote:StandInProvider\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    result = await run(CODE, tests=TESTS[:1], provider="standin")
    assert result.outcome is SandboxOutcome.PASSED and result.tier == "standin"
