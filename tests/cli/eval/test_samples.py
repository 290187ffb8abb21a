"""The progress line of one finished sample."""

from __future__ import annotations

from osmosis_ai.cli.eval.samples import describe_sample
from osmosis_ai.outcome import Outcome
from osmosis_ai.runs.items import WorkItem
from osmosis_ai.runs.result import Attempt, Result

ROW = {"system_prompt": "s", "user_prompt": "u", "ground_truth": "g"}


def test_a_sample_line_shows_scores_or_the_error_on_one_line() -> None:
    ok = Result(WorkItem(0, 0, ROW), Attempt(Outcome.COMPLETED, duration_ms=1500.0, prompt_tokens=1000,
                                             completion_tokens=234), Outcome.COMPLETED, scores={"f": 0.5})  # fmt: skip
    assert describe_sample(ok, tagged=False) == "row 0 run 0: OK (1.5s, 1,234 tokens) [f=0.500]"
    error = "bad\nrequest " + "x" * 300
    failed = Result(WorkItem(3, 1, ROW, "baseline"), Attempt(Outcome.MODEL_ERROR, error=error, duration_ms=20.0),
                    Outcome.MODEL_ERROR)  # fmt: skip
    line = describe_sample(failed, tagged=True)
    assert line.startswith("[baseline] row 3 run 1: FAILED [model_error] (20ms, 0 tokens) - bad request xxx")
    assert "\n" not in line and line.endswith("...") and len(line.split(" - ", 1)[1]) == 200
    scored = Result(WorkItem(1, 0, ROW), Attempt(Outcome.COMPLETED), Outcome.REWARD_ERROR,
                    score_errors={"f": "ValueError: no"})  # fmt: skip
    assert describe_sample(scored, tagged=False).endswith("- f: ValueError: no")
