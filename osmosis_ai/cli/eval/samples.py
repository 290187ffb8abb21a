"""The progress lines of ``osmosis eval``'s samples.

A sample is one run of the agent on one row with one model (``primary``, or ``baseline`` when
``--baseline-model`` is given: the same rows and run indices, its own client and journal tag),
scored by every eval function (an eval function that raises makes the sample a ``reward_error``,
never a 0) and committed to the journal before it counts. A sample that stopped the run (a systemic
provider failure) is not journalled, so the rerun after the fix runs it, and is not counted here.
"""

from __future__ import annotations

from collections.abc import Callable

from osmosis_ai.cli import output
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


def progress_reporter(
    *, total: int, done: int, quiet: bool, tagged: bool, advance: output.ProgressStep, bar: bool
) -> Callable[[Result], None]:
    """What happens as each sample is committed: the bar moves on a terminal; piped, one plain line.

    A sample that stopped the run was not committed and is not counted."""
    count = done

    def report(result: Result) -> None:
        nonlocal count
        if result.attempt.systemic is not None:
            return
        count += 1
        if bar:
            completed = result.outcome is Outcome.COMPLETED
            first = next(iter(result.scores.values()), None) if completed else None
            advance(score=first, failed=not completed)
        elif not quiet:
            output.say(f"[{count}/{total}] {describe_sample(result, tagged)}", quiet=False)

    return report
