"""The short form of the sandbox's chaos (``make chaos`` runs 200 rows and 1,000 killed runs): every
answer scored right, no attack reaching out, a sandbox that cannot start typed ``infra_error``, and
no sandbox process outliving a SIGKILLed scorer."""

from __future__ import annotations

from benchmarks import chaos_sandbox


def test_osmosis_reward_score_scores_hostile_answers_right_and_contains_them() -> None:
    results = chaos_sandbox.score_answers(rows=24, seed=3)
    assert results["exit_status"] == 0, results["stderr"]
    assert results["rows"] == 24 and set(results["kinds"]) == set(chaos_sandbox.KINDS)
    assert results["wrong"] == []
    assert results["connections"] == 0 and results["escaped_files"] == []
    assert results["processes_left"] == 0
    infra = results["infra"]
    assert infra["exit_status"] == 1 and infra["outcomes"] == {"infra_error": infra["rows"]}
    assert infra["scores"] == ["None"] and infra["named_the_setting"]


def test_no_sandbox_process_outlives_its_sigkilled_scorer() -> None:
    results = chaos_sandbox.killed_scorers(runs=20, seed=5, timeout=1.0)
    assert results["runs"] >= 20 and results["kills"] >= 1
    assert results["seen_during"] > 0  # the count finds sandbox processes while they run
    assert results["processes_left"] == 0
