"""The progress line of one finished sample."""

from __future__ import annotations

from osmosis_ai.cli.eval.samples import describe_sample
from osmosis_ai.evaluation.journal import SampleRecord
from osmosis_ai.evaluation.outcome import Outcome


def test_a_sample_line_shows_scores_or_the_error_on_one_line() -> None:
    ok = SampleRecord(0, 0, Outcome.COMPLETED, {"duration_ms": 1500.0, "token_usage": {"total_tokens": 1234},
                                                "scores": {"f": 0.5}})  # fmt: skip
    assert describe_sample(ok, tagged=False) == "OK (1.5s, 1,234 tokens) [f=0.500]"
    failed = SampleRecord(3, 1, Outcome.MODEL_ERROR, {"duration_ms": 20.0, "error": "bad\nrequest " + "x" * 300},
                          "baseline")  # fmt: skip
    line = describe_sample(failed, tagged=True)
    assert line.startswith("[baseline] FAILED [model_error] (20ms, 0 tokens) - bad request xxx")
    assert "\n" not in line and line.endswith("...") and len(line.split(" - ", 1)[1]) == 200
