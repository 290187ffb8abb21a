"""The short form of the fault suite (``make chaos`` runs the full one): no rollout lost, no 5xx, no judge
score taken from the candidate's text, no output flag replacing the special file it writes onto, no
row failed or run twice by a hostile reward sample, and no process left after a signal."""

from __future__ import annotations

from benchmarks import chaos, chaos_runtime


def test_the_short_fault_suite_loses_nothing_and_answers_no_5xx():
    results = chaos.run(chaos.SHORT, seed=11)
    rollouts = results["rollouts"]
    assert rollouts["started"] == chaos.SHORT.rollouts
    assert rollouts["lost"] == 0, rollouts["lost_ids"]
    assert rollouts["completed"] == rollouts["started"]
    assert rollouts["faults"] > 0  # the trainer did inject faults
    assert rollouts["pending_at_end"] == 0
    assert rollouts["init_5xx"] == 0
    assert rollouts["health_failures"] == 0
    assert results["malformed"]["5xx"] == 0
    assert results["half_open"]["closed"] == results["half_open"]["opened"]
    assert results["judge"]["cases"] > 0
    assert results["judge"]["taken"] == 0  # no score came from the candidate's text
    for kind, outcome in results["outputs"].items():  # every output flag onto a device, a FIFO, a link
        assert outcome["failed"] == [], (kind, outcome["failed"])
        assert outcome["kept"] == outcome["flags"] or outcome["skipped"], kind
    runtime = results["runtime"]  # the reward runtime under hostile samples, and signals
    assert runtime["garbling"]["garblers"] == ["reward_crash"]
    assert runtime["garbling"]["others_scored_1"] == runtime["garbling"]["others"]
    assert runtime["breaking"]["others_scored_1"] == runtime["breaking"]["others"]
    assert runtime["breaking"]["ran_again"] == 0
    assert runtime["garbling"]["processes_left"] == runtime["breaking"]["processes_left"] == 0
    for case in runtime["signals"]:
        assert case["processes_left"] == 0, case
        assert case["exit_status"] == chaos_runtime.expected_status(case["signal"]), case
