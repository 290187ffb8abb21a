"""code_tests_reward: scores from the sandbox, and a sandbox that cannot run is infra_error, never 0."""

from __future__ import annotations

import pytest

from osmosis_ai import osmosis_reward
from osmosis_ai.errors import InfrastructureError
from osmosis_ai.outcome import Outcome
from osmosis_ai.rewards.runtime import RewardRuntime, Sample
from osmosis_ai.sandbox import code_tests_reward, extract_code
from osmosis_ai.sandbox.local import Job, run_local
from osmosis_ai.sandbox.machine import probe
from osmosis_ai.sandbox.result import SandboxOutcome

ANSWER = "Sure:\n```python\ndef add(a, b):\n    return a + b\n```\nDone."
TESTS = "assert add(1, 2) == 3\n# a comment\n\nassert add(2, 2) == 5\n"


def test_the_last_python_block_is_the_code() -> None:
    text = "```\nplain\n```\n```python\nfirst\n```\n```py\nsecond\n```"
    assert extract_code(text) == "second\n"
    assert extract_code("```\nonly plain\n```") == "only plain\n"
    assert extract_code("no code at all") is None


def test_a_decorated_reward_scores_the_share_of_tests_passed() -> None:
    reward = osmosis_reward(code_tests_reward)
    assert reward(ANSWER, TESTS, {}) == 0.5
    assert reward(ANSWER, "", {"tests": ["assert add(1, 1) == 2"]}) == 1.0
    assert code_tests_reward(ANSWER, TESTS, None, all_pass=True) == 0.0
    assert reward("I cannot do that.", TESTS, {}) == 0.0


def test_a_row_without_tests_is_an_error_not_a_zero() -> None:
    with pytest.raises(ValueError, match="no tests"):
        code_tests_reward(ANSWER, "# nothing\n", {})


def sandbox_down(solution_str: str, ground_truth: str, extra_info: dict | None = None) -> float:
    raise InfrastructureError("the sandbox could not run the code: bubblewrap is not installed")


@pytest.mark.parametrize("workers", [0, 1])
async def test_an_infrastructure_failure_is_an_infra_error_sample(workers: int) -> None:
    async with RewardRuntime(f"{__name__}:sandbox_down", workers=workers, timeout=10) as runtime:
        result = await runtime.score(Sample("assert True", solution_str=ANSWER))
    assert result.outcome is Outcome.INFRA_ERROR and result.score is None
    assert "bubblewrap is not installed" in (result.error or "")


async def test_a_machine_without_a_tier_gives_infra_error_with_its_reason() -> None:
    here = await probe()
    refused = type(here)(**{**here.__dict__, "tier": None, "refusal": "no user namespaces here"})
    job = Job({"main.py": b"print(1)"}, None, None, 5.0, 128, 1, False, {})
    result = await run_local(job, refused)
    assert result.outcome is SandboxOutcome.INFRA_ERROR and result.error == "no user namespaces here"


async def test_an_interpreter_that_cannot_start_is_the_sandboxs_failure() -> None:
    here = await probe()
    broken = type(here)(**{**here.__dict__, "python": "/nonexistent/python3"})
    job = Job({"main.py": b"print(1)"}, None, ("assert True",), 5.0, 128, 1, False, {})
    result = await run_local(job, broken)
    assert result.outcome is SandboxOutcome.INFRA_ERROR, result
    assert result.tests_passed is None
