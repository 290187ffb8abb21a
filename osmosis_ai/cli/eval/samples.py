"""The progress lines of ``osmosis eval``'s samples.

A sample is one run of the agent on one row with one model (``primary``, or ``baseline`` when
``--baseline-model`` is given: the same rows and run indices, its own client and journal tag),
scored by every eval function (an eval function that raises makes the sample a ``reward_error``,
never a 0) and committed to the journal before it counts. A sample that stopped the run (a systemic
provider failure) is not journalled, so the rerun after the fix runs it, and is not counted here.
"""

from __future__ import annotations

from typing import Any

from osmosis_ai.cli import output
from osmosis_ai.cli.progress import RunProgress
from osmosis_ai.outcome import Outcome
from osmosis_ai.runs.result import Result


def describe_sample(result: Result, tagged: bool) -> str:
    """The progress line's text for one finished sample."""
    attempt = result.attempt
    tag = f"[{result.item.model_tag}] " if tagged else ""
    status = "OK" if result.outcome is Outcome.COMPLETED else f"FAILED [{result.outcome.value}]"
    where = f"row {result.item.row_index} run {result.item.sample_index}"
    line = (
        f"{tag}{where}: {status} ({output.format_duration(attempt.duration_ms)}, {attempt.tokens:,} tokens)"
    )
    if result.scores:
        line += " [" + ", ".join(f"{name}={score:.3f}" for name, score in result.scores.items()) + "]"
    error = attempt.error or "; ".join(f"{k}: {v}" for k, v in result.score_errors.items())
    if error and result.outcome is not Outcome.COMPLETED:
        line += " - " + output.one_line(str(error))
    return line


class SampleProgress(RunProgress):
    """What ``osmosis eval`` shows as its samples are committed: :class:`RunProgress`'s lines, then
    on a terminal the bar moving with each sample's first score; piped, one plain line a sample
    (``tagged`` with its model's). The models are named as they are checked, and how every eval
    function scores before the backend's header. A sample that stopped the run was not committed
    and is not counted."""

    def __init__(self, *, tagged: bool, **progress: Any) -> None:
        super().__init__(**progress)
        self.tagged, self.count, self.total = tagged, 0, 0

    def on_event(self, event: Any) -> None:
        from osmosis_ai.runs.events import ModelChecked, Opened, Ready
        from osmosis_ai.runs.journal import BASELINE

        if isinstance(event, Result):
            if event.attempt.systemic is not None:
                return
            self.count += 1
            if self.shown:
                completed = event.outcome is Outcome.COMPLETED
                first = next(iter(event.scores.values()), None) if completed else None
                self.advance(score=first, failed=not completed)
            elif not self.quiet:
                output.say(f"[{self.count}/{self.total}] {describe_sample(event, self.tagged)}", quiet=False)
        elif isinstance(event, ModelChecked):
            output.say(
                f"{'Baseline' if event.tag == BASELINE else 'Model'}: {event.display_name}", quiet=self.quiet
            )
        elif isinstance(event, Ready):
            for line in event.scoring:
                output.say(f"Scoring: {line}", quiet=self.quiet)
            if event.backend:
                output.say(event.backend, quiet=self.quiet)
        else:
            super().on_event(event)
            if isinstance(event, Opened):
                self.count, self.total = event.planned - event.remaining, event.planned
