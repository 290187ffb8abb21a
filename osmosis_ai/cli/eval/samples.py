"""Running the samples ``osmosis eval`` still needs: ``--batch-size`` in flight, each committed to the
journal before it counts.

A sample is one run of the agent on one row with one model (``primary``, or ``baseline`` when
``--baseline-model`` is given: the same rows and run indices, its own client and journal tag). A
completed run is scored by every eval function; an eval function that raises makes the sample a
``reward_error``, never a 0. A systemic provider failure stops the run: the failed sample is not
journalled, so the rerun after the fix runs it. Any other failure (the journal's disk, the
progress display) cancels the samples in flight and is raised: unjournalled, they run again on resume.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from osmosis_ai._pool import run_bounded
from osmosis_ai.cli import output
from osmosis_ai.evaluation.errors import SystemicProviderError
from osmosis_ai.evaluation.journal import PRIMARY, Journal, SampleRecord
from osmosis_ai.evaluation.outcome import Outcome
from osmosis_ai.evaluation.runner import LocalRunner, RowResult


@dataclass(frozen=True)
class Contender:
    """One model under evaluation: its journal tag, client and runner."""

    tag: str
    client: Any
    runner: LocalRunner


def describe_sample(record: SampleRecord, tagged: bool) -> str:
    """The progress line's text for one finished sample."""
    from osmosis_ai.cli.commands.test import format_duration

    data = record.data
    tag = f"[{record.model_tag}] " if tagged else ""
    status = "OK" if record.outcome is Outcome.COMPLETED else f"FAILED [{record.outcome.value}]"
    line = (
        f"{tag}{status} ({format_duration(float(data.get('duration_ms', 0.0)))}, "
        f"{int(data.get('token_usage', {}).get('total_tokens', 0)):,} tokens)"
    )
    if data.get("scores"):
        line += " [" + ", ".join(f"{name}={score:.3f}" for name, score in data["scores"].items()) + "]"
    error = data.get("error") or "; ".join(f"{k}: {v}" for k, v in (data.get("eval_errors") or {}).items())
    if error and record.outcome is not Outcome.COMPLETED:
        line += " - " + output.one_line(str(error))
    return line


async def score(
    result: RowResult, row: Mapping[str, Any], eval_fns: Sequence[Any]
) -> tuple[Outcome, dict[str, Any]]:
    """The sample's outcome and journal data: the run's figures, each eval function's score or error."""
    data: dict[str, Any] = result.to_dict()
    data["scores"], data["eval_errors"] = {}, {}
    if result.outcome is not Outcome.COMPLETED:
        return result.outcome, data
    for fn in eval_fns:
        try:
            data["scores"][fn.name] = await fn(result.final_messages, row["ground_truth"], row)
        except Exception as exc:  # the user's scorer: this sample's reward_error, not a 0
            data["eval_errors"][fn.name] = f"{type(exc).__name__}: {exc}"
    return (Outcome.REWARD_ERROR if data["eval_errors"] else Outcome.COMPLETED), data


async def run_samples(
    *,
    contenders: Sequence[Contender],
    eval_fns: Sequence[Any],
    rows: Iterable[tuple[int, dict[str, Any]]],
    todo: Mapping[int, list[tuple[int, str]]],
    journal: Journal,
    batch_size: int,
    log_samples: bool,
    on_sample: Callable[[SampleRecord], None],
) -> str | None:
    """Run the ``todo`` samples (row index -> ``(run index, tag)``) of ``rows``, ``batch_size`` at a
    time; returns why the run stopped early, if it did."""
    by_tag = {c.tag: c for c in contenders}
    stopped: list[str] = []

    def samples() -> Iterator[tuple[int, dict[str, Any], int, str]]:
        for row_index, row in rows:
            for sample, tag in todo.get(row_index, []):
                yield row_index, row, sample, tag

    async def one(item: tuple[int, dict[str, Any], int, str]) -> None:
        row_index, row, sample, tag = item
        try:
            result = await by_tag[tag].runner.run_row(row, row_index)
        except SystemicProviderError as exc:
            stopped.append(str(exc) if tag == PRIMARY else f"{tag}: {exc}")
            return
        outcome, data = await score(result, row, eval_fns)
        messages = result.final_messages if log_samples else None
        record = SampleRecord(row_index, sample, outcome, data, tag, messages)
        await journal.arecord(record)
        on_sample(record)

    await run_bounded(samples(), one, concurrency=batch_size, stop=lambda: bool(stopped))
    return stopped[0] if stopped else None


def progress_reporter(
    *, total: int, done: int, quiet: bool, tagged: bool, advance: Callable[[], None], bar: bool
) -> Callable[[SampleRecord], None]:
    """What happens as each sample is committed: the bar moves on a terminal; piped, one plain line."""
    count = done

    def report(record: SampleRecord) -> None:
        nonlocal count
        count += 1
        if bar:
            advance()
        elif not quiet:
            output.say(f"[{count}/{total}] {describe_sample(record, tagged)}", quiet=False)

    return report
