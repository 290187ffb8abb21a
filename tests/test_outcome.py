"""The outcome model and the one exit-status rule."""

from __future__ import annotations

import pytest

from osmosis_ai.outcome import Outcome, OutcomeCounts, verdict

C, A, M, INF, T, N, R, RT, RC = (
    Outcome.COMPLETED,
    Outcome.AGENT_ERROR,
    Outcome.MODEL_ERROR,
    Outcome.INFRA_ERROR,
    Outcome.TIMEOUT,
    Outcome.NO_MODEL_CALLS,
    Outcome.REWARD_ERROR,
    Outcome.REWARD_TIMEOUT,
    Outcome.REWARD_CRASH,
)


def test_the_nine_outcomes_and_their_names() -> None:
    assert [o.value for o in Outcome] == [
        "completed", "agent_error", "model_error", "infra_error", "timeout", "no_model_calls", "reward_error",
        "reward_timeout", "reward_crash",
    ]  # fmt: skip
    assert {o for o in Outcome if o.is_infrastructure} == {INF, T}
    assert str(Outcome.NO_MODEL_CALLS) == "no_model_calls" and Outcome("timeout") is T


def test_counts_describe_failures_beside_the_pass_rate() -> None:
    counts = OutcomeCounts.of([C] * 8 + [T, A])
    assert (counts.total, counts.completed, counts.failed, counts.infrastructure) == (10, 8, 2, 1)
    assert counts.describe("rollout") == "10 rollouts: 8 completed (80.0%), agent_error 1, timeout 1"
    assert OutcomeCounts.of([C]).describe("row") == "1 row: 1 completed (100.0%)"
    assert counts.to_dict()["no_model_calls"] == 0 and counts.to_dict()["completed"] == 8


@pytest.mark.parametrize(
    ("outcomes", "limit", "expected"),
    [
        ([C, C], 0.0, None),
        ([], 0.0, None),
        ([C, INF], 1.0, "1 of 2 rows ended in an infrastructure failure (infra_error 1)"),
        ([C, T], 1.0, "1 of 2 rows ended in an infrastructure failure (timeout 1)"),
        ([A, M], 1.0, "all 2 rows failed (agent_error 1, model_error 1)"),
        ([N], 1.0, "the row failed (no_model_calls 1)"),
        (
            [C, R],
            0.0,
            "1 of 2 rows failed (reward_error 1): failure rate 50.0% is above the allowed failure rate 0.0%",
        ),
        ([C, R], 0.5, None),
        # a hung or crashing reward is the scored code failing, not the machinery: the failure rate decides
        (
            [C, RT, RC, C],
            0.25,
            "2 of 4 rows failed (reward_timeout 1, reward_crash 1): failure rate 50.0% is above",
        ),
        ([C, RT, RC, C], 0.5, None),
        ([RT, RC], 1.0, "all 2 rows failed (reward_timeout 1, reward_crash 1)"),
        (
            [C, C, C, A],
            0.2,
            "1 of 4 rows failed (agent_error 1): failure rate 25.0% is above the allowed failure rate 20.0%",
        ),
    ],
)
def test_verdict(outcomes: list[Outcome], limit: float, expected: str | None) -> None:
    reason = verdict(OutcomeCounts.of(outcomes), max_failure_rate=limit)
    if expected is None:
        assert reason is None
    else:
        assert reason is not None and reason.startswith(expected)


def test_verdict_names_the_unit_and_the_limit() -> None:
    reason = verdict(OutcomeCounts.of([C, A]), unit="judgment", limit_name="--max-failure-rate")
    assert (
        reason
        == "1 of 2 judgments failed (agent_error 1): failure rate 50.0% is above --max-failure-rate 0.0%"
    )
    with pytest.raises(ValueError, match="between 0 and 1"):
        verdict(OutcomeCounts.of([C]), max_failure_rate=1.5)
