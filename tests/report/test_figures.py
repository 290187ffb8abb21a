"""The summary figures of real runs, and two runs compared row by row."""

from __future__ import annotations

import json
from pathlib import Path

from osmosis_ai.report.figures import compare, compare_rows, summarize
from osmosis_ai.report.model import Row, Run
from osmosis_ai.report.readers import read_results
from osmosis_ai.statistics import bootstrap_interval, paired_difference, pass_at_k_table
from osmosis_ai.traingate.report import percentile
from tests.support.results import write_rollout_results


def test_summary_of_a_rollout_run_equals_its_records(rollouts: Path) -> None:
    records = [json.loads(line) for line in rollouts.read_text().splitlines()]
    summary = summarize(read_results(rollouts))
    assert summary.rows == 8 and summary.completed == 6 and summary.outcomes["agent_error"] == 2
    # Failed rollouts have no score: the mean is over the completed ones, per row first.
    rewards = {r["row_index"]: r["reward"] for r in records if r["outcome"] == "completed"}
    assert summary.scored == 6 and summary.mean_score == bootstrap_interval(
        [rewards[i] for i in sorted(rewards)]
    )
    assert summary.mean_score.value == (1.0 + 0.5 + 0.25) / 3
    assert summary.pass_at_k == pass_at_k_table([[r == 1.0] * 2 for _, r in sorted(rewards.items())])
    latencies = [r["latency_ms"] for r in records]
    assert summary.latency_ms == {"p50": percentile(latencies, 0.5), "p90": percentile(latencies, 0.9),
                                  "p99": percentile(latencies, 0.99)}  # fmt: skip
    assert summary.completion_tokens == sum(len(t["token_ids"]) for r in records for t in r["turns"])
    assert summary.violations == 2 and summary.drift_events == 0
    assert summary.cost_usd is None  # the scripted policy has no price


def test_a_single_sample_per_row_has_no_pass_at_k() -> None:
    run = Run("one.json", "test", [Row(i, 0, "completed", score=float(i % 2)) for i in range(4)])
    summary = summarize(run)
    assert summary.pass_at_k == {} and summary.mean_score is not None and summary.mean_score.value == 0.5


def test_two_runs_are_compared_row_by_row(results_dir: Path, rollouts: Path) -> None:
    after_path = write_rollout_results(results_dir, "after.jsonl", rewards=(0.0, 0.5, 1.0, 1.0))
    before, after = read_results(rollouts), read_results(after_path)
    comparison = compare_rows(before, after)
    deltas = {c.key: c.delta for c in comparison.changes}
    assert deltas == {0: -1.0, 1: 0.0, 2: None, 3: 0.75}  # row against row
    assert (comparison.improved, comparison.worse, comparison.outcome_changes) == (1, 1, 0)
    assert comparison.mean_difference == paired_difference([0.0, 0.5, 1.0], [1.0, 0.5, 0.25])


def test_rows_present_in_one_run_only_count_as_outcome_changes() -> None:
    before = Run("a", "test", [Row(0, 0, "completed", score=1.0), Row(1, 0, "timeout")])
    after = Run(
        "b",
        "test",
        [Row(0, 0, "completed", score=1.0), Row(1, 0, "completed", score=0.0), Row(2, 0, "completed")],
    )
    comparison = compare_rows(before, after)
    assert [(c.key, c.outcome_changed) for c in comparison.changes] == [(0, False), (1, True), (2, True)]
    samples = compare(before, after)  # a regrade's pairing: the same answers, sample by sample
    assert [(c.key, c.outcome_changed) for c in samples.changes] == [
        ((0, 0), False),
        ((1, 0), True),
        ((2, 0), True),
    ]
    assert comparison.mean_difference is not None and comparison.mean_difference.value == 0.0


def test_rows_are_paired_as_rows_not_sample_by_sample_and_pass_at_k_is_compared() -> None:
    before = Run("a", "eval", [Row(0, 0, "completed", score=1.0), Row(0, 1, "completed", score=0.0),
                               Row(1, 0, "completed", score=0.0), Row(1, 1, "completed", score=0.0)])  # fmt: skip
    after = Run("b", "eval", [Row(0, 0, "completed", score=0.0), Row(0, 1, "completed", score=1.0),
                              Row(1, 0, "completed", score=1.0), Row(1, 1, "model_error")])  # fmt: skip
    comparison = compare_rows(before, after)
    first, second = comparison.changes
    assert first.delta == 0.0 and not first.outcome_changed  # the same row, its draws in another order
    assert (first.before.passed, first.after.passed) == (1, 1)  # type: ignore[union-attr]
    assert second.delta == 1.0 and second.outcome_changed and second.after.samples == 2  # type: ignore[union-attr]
    a, b = comparison.pass_at_k[1]
    assert (a.value, b.value) == (0.25, 0.75)
    document = comparison.to_dict()
    assert document["rows_better"] == 1 and document["pass_at_k"]["1"]["difference"] == 0.5
    assert [row["row"] for row in document["changed_rows"]] == [1]


def test_a_k_some_row_has_too_few_completed_samples_for_is_named_with_why() -> None:
    from osmosis_ai.cli.summary import comparison_rows

    def run(failed: set[tuple[int, int]]) -> Run:
        rows = [
            Row(
                row=r,
                sample=s,
                outcome="agent_error" if (r, s) in failed else "completed",
                score=float(s % 2),
            )
            for r in range(3)
            for s in range(3)
        ]
        return Run(source=f"{len(failed)}.jsonl", kind="rollout run", rows=rows)

    whole, short = run(set()), run({(0, 1), (1, 2)})
    summary = summarize(short, price=False)
    assert list(summary.pass_at_k) == [1, 2] and summary.pass_at_k_gaps == {3: 2}
    figures = summary.to_dict()
    assert figures["pass_at_k"]["3"] is None and list(figures["pass_at_k"]) == ["1", "2", "3"]
    assert figures["pass_at_k_missing"] == {"3": "needs 3 completed samples of a row; 2 rows have fewer"}
    comparison = compare_rows(whole, short)
    assert list(comparison.pass_at_k) == [1, 2]
    assert comparison.pass_at_k_missing == {3: "B: needs 3 completed samples of a row; 2 rows have fewer"}
    assert comparison.to_dict()["pass_at_k"]["3"] is None
    assert (
        "pass@3 A / B",
        "– (B: needs 3 completed samples of a row; 2 rows have fewer)",
    ) in comparison_rows(comparison)
