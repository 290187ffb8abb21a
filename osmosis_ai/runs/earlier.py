"""The answers of earlier runs, to score again (``osmosis regrade``): read from their results files
(what ``rollout run -o``, ``test -o``, ``eval -o`` with its ``--log-samples`` file and
``eval-rubric -o`` write, told by content: :mod:`osmosis_ai.report.readers`), joined by
``(row, sample)``, each turned into the attempt its new scoring starts from (:func:`attempt_of`).

The ground truth and the other columns the grader sees as ``extra_info`` come from the record
itself (its ``input_record``: the dataset row the run was given), or from the run's dataset by row
index (``-d``, for files written before records kept their row). When the inputs lack what the
grader needs (final messages, ground truth), the regrade is refused once, before any scoring, saying
which flag gives it (:func:`check_answers`); an answer with messages but no assistant reply is
refused with the reason; an answer whose run failed before it was scored keeps its outcome.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from osmosis_ai.errors import OsmosisError
from osmosis_ai.outcome import Outcome

if TYPE_CHECKING:
    from osmosis_ai.report.model import Row
    from osmosis_ai.report.regrade import Pair
    from osmosis_ai.runs.journal import SampleRecord
    from osmosis_ai.runs.result import Attempt

# Earlier outcomes whose answer exists: the run finished and only its scoring failed (or, for an
# eval --log-samples file alone, was not recorded). Any other outcome has no answer to score.
SCOREABLE = ("completed", "reward_error", "reward_timeout", "reward_crash", "unknown")
SCORING_FAILED = ("reward_error", "reward_timeout", "reward_crash")
# Why a results file has no final messages, and what gives them.
NO_MESSAGES = {
    "eval": "eval -o keeps its final messages in the --log-samples file: give that file too (or run eval "
    "again with --log-samples)",
    "test": "a test -o file without final messages (written by an earlier release): run osmosis test -o "
    "again to regrade it",
}
REFUSED = "refused: "


class AnswersError(OsmosisError, ValueError):
    """The earlier runs' files give no answers to score, or give one answer twice."""


@dataclass
class Stored:
    """One answer as the earlier run left it."""

    row: Row
    source: str
    kind: str
    """The command that wrote the source (the report's run kind)."""
    messages: list[dict[str, Any]]
    columns: dict[str, Any] = field(default_factory=dict)
    """What the grader sees as ``extra_info`` (``ground_truth`` among them, when known)."""


@dataclass
class Answers:
    """The answers of the inputs, in ``(row, sample)`` order, and the pass threshold they were scored at."""

    stored: dict[tuple[int, int], Stored]
    pass_threshold: float


def read_answers(inputs: Sequence[str | Path], dataset: str | Path | None = None) -> Answers:
    """The answers of every input, joined by ``(row, sample)`` (a samples file adds final messages),
    with their columns from ``dataset`` when given."""
    from osmosis_ai.report.readers import read_results
    from osmosis_ai.runs.journal_report import read_journal

    scored: dict[tuple[int, int], Stored] = {}
    messages: dict[tuple[int, int], list[dict[str, Any]]] = {}
    sample_rows: dict[tuple[int, int], Stored] = {}
    threshold: float | None = None
    for path in inputs:
        results = read_results(path, journals=read_journal)
        for row in results.rows:
            if results.kind == "eval samples":
                messages[row.key] = row.trajectory.messages
                sample_rows[row.key] = Stored(row, str(path), results.kind, row.trajectory.messages)
                continue
            if row.key in scored:
                raise AnswersError(
                    f"row {row.row} sample {row.sample} is in both {scored[row.key].source} and {path}; "
                    "regrade one run at a time"
                )
            record = row.trajectory.extra.get("input_record")
            columns = {k: v for k, v in record.items() if k != "messages"} if isinstance(record, dict) else {}
            scored[row.key] = Stored(row, str(path), results.kind, row.trajectory.messages, columns)
        if results.kind != "eval samples" and threshold is None:
            threshold = results.pass_threshold
    if not scored:
        scored = sample_rows
    for key, stored in scored.items():
        if not stored.messages and key in messages:
            stored.messages = messages[key]
    if not scored:
        raise AnswersError(f"{', '.join(map(str, inputs))}: no answers to regrade")
    answers = dict(sorted(scored.items()))
    if dataset is not None:
        _join_dataset(answers, dataset)
    return Answers(answers, 1.0 if threshold is None else threshold)


def selected(answers: Mapping[tuple[int, int], Stored], only_failed: bool) -> list[tuple[int, int]]:
    """The answers scored again: all of them, or with ``only_failed`` those whose scoring failed."""
    return [key for key, stored in answers.items() if not only_failed or stored.row.outcome in SCORING_FAILED]


def check_answers(
    answers: Mapping[tuple[int, int], Stored], chosen: Sequence[tuple[int, int]], *, needs_ground_truth: bool
) -> None:
    """Refuse the regrade, in one line, when an answer to score lacks what the grader needs: its
    final messages, or (``needs_ground_truth``) its row's ground truth."""
    scored = [answers[key] for key in chosen if answers[key].row.outcome in SCOREABLE]
    silent = [stored for stored in scored if not stored.messages]
    if silent:
        first = silent[0]
        reason = NO_MESSAGES.get(first.kind, "no final messages stored")
        raise AnswersError(f"{first.source}: no final messages stored for {_count(silent, scored)}; {reason}")
    if needs_ground_truth:
        missing = [stored for stored in scored if "ground_truth" not in stored.columns]
        if missing:
            sources = ", ".join(sorted({stored.source for stored in missing}))
            raise AnswersError(
                f"{sources}: no ground_truth stored for {_count(missing, scored)}; give the run's dataset with -d"
            )


def _count(some: Sequence[Stored], of: Sequence[Stored]) -> str:
    if len(some) == len(of):
        return f"the {len(of)} answer{'' if len(of) == 1 else 's'} to score"
    return f"{len(some)} of the {len(of)} answers to score"


def _join_dataset(answers: Mapping[tuple[int, int], Stored], dataset: str | Path) -> None:
    """Each answer's columns from ``dataset``'s row of its index."""
    from osmosis_ai.runs.dataset import DatasetReader

    wanted = {row for row, _ in answers}
    columns = {
        index: dict(values) for index, values in DatasetReader(dataset).iter_indexed() if index in wanted
    }
    for (row, _), stored in answers.items():
        if row in columns:
            stored.columns = {**stored.columns, **columns[row]}


def earlier_outcome(text: str) -> Outcome:
    """The earlier run's outcome (one this release does not know: ``infra_error``)."""
    try:
        return Outcome(text)
    except ValueError:
        return Outcome.INFRA_ERROR


def attempt_of(stored: Stored, grader: str) -> Attempt:
    """The attempt of a stored answer: completed with its final messages when there is an answer to
    score; refused (``reward_error``, with the reason) when no assistant message is stored; the
    earlier failure, kept, when the run never produced an answer."""
    from osmosis_ai.runs.result import Attempt

    row = stored.row
    provenance = {"source": stored.source, "grader": grader, "previous_outcome": row.outcome,
                  "previous_reward": row.scored_value, "previous_scores": dict(row.scores)}  # fmt: skip
    extra = {"final_messages": stored.messages, "regrade": provenance}
    if row.outcome not in SCOREABLE:
        return Attempt(earlier_outcome(row.outcome), error=row.error or f"the earlier run ended in {row.outcome}",
                       finish_reason=row.finish_reason, extra=extra)  # fmt: skip
    if not any(m.get("role") == "assistant" for m in stored.messages):
        return Attempt(Outcome.REWARD_ERROR, error=REFUSED + "no final assistant message stored", extra=extra)
    return Attempt(Outcome.COMPLETED, final_messages=stored.messages, finish_reason=row.finish_reason,
                   extra=extra)  # fmt: skip


def regraded(
    answers: Mapping[tuple[int, int], Stored],
    chosen: Sequence[tuple[int, int]],
    records: Mapping[str, Sequence[SampleRecord]],
    grader: str,
) -> list[dict[str, Any]]:
    """One record per answer in (row, sample) order: the first scoring's (``records``: the run's, by
    model tag, ``primary`` first), with every repeat's reward; an answer not ``chosen`` as the earlier
    run scored it; a chosen one the run did not reach, left out."""
    from osmosis_ai.runs.items import WorkItem
    from osmosis_ai.runs.result import Result

    by_tag = {tag: {r.key: r.data for r in tagged} for tag, tagged in records.items()}
    primary, *repeats = by_tag
    wanted = set(chosen)
    out = []
    for key, stored in answers.items():
        if key in wanted:
            record = by_tag[primary].get(key)
            if record is None:
                continue
            if repeats:
                found = [by_tag[tag].get(key) for tag in by_tag]
                record["regrade"]["repeats"] = [r.get("reward") if r else None for r in found]
        else:
            attempt = attempt_of(stored, grader)
            attempt.extra["regrade"]["kept"] = True
            item = WorkItem(key[0], key[1], stored.columns)
            kept = Result(item, attempt, earlier_outcome(stored.row.outcome), reward=stored.row.scored_value,
                          scores=dict(stored.row.scores))  # fmt: skip
            record = kept.record()
        out.append(record)
    return out


@dataclass
class Regraded:
    """A regrade's results: one record per answer (:func:`regraded`), the ``mine`` scored again, of
    them the ``failed`` ones (``refused`` of those refused outright) and the ``carried`` ones (no
    answer to score), the input files' ``sources``, and the comparison with the earlier scores (and
    the variance over repeats: :mod:`osmosis_ai.report.regrade`)."""

    records: list[dict[str, Any]]
    mine: list[dict[str, Any]]
    failed: list[dict[str, Any]]
    carried: list[dict[str, Any]]
    refused: int
    sources: list[str]
    comparison: dict[str, Any]
    variance: dict[str, Any] | None


def regrade_results(
    inputs: Sequence[str],
    dataset: str | None,
    only_failed: bool,
    records: Mapping[str, Sequence[SampleRecord]],
    grader: str,
    *,
    pass_threshold: float | None,
) -> Regraded:
    """The results of the regrade of ``inputs`` (``dataset`` joined) by ``grader`` whose run's
    ``records`` these are; ``pass_threshold`` by default the inputs'."""
    from osmosis_ai.report.regrade import compare, variance

    answers = read_answers(inputs, dataset)
    chosen = selected(answers.stored, only_failed)
    out = regraded(answers.stored, chosen, records, grader)
    threshold = answers.pass_threshold if pass_threshold is None else pass_threshold
    wanted = set(chosen)
    mine = [r for r in out if (r["row_index"], r["sample_index"]) in wanted]
    carried = [r for r in mine if r["regrade"]["previous_outcome"] not in SCOREABLE]
    refused = sum(str(r.get("error") or "").startswith(REFUSED) for r in mine)
    failed = [r for r in mine if r["outcome"] != "completed" and r not in carried]
    pairs = pairs_of(out)
    sources = sorted({stored.source for stored in answers.stored.values()})
    return Regraded(out, mine, failed, carried, refused, sources, compare(pairs, pass_threshold=threshold),
                    variance(pairs, pass_threshold=threshold))  # fmt: skip


def pairs_of(records: Sequence[Mapping[str, Any]]) -> list[Pair]:
    """Each regraded record's earlier and new reward (and its repeats'), for the comparison."""
    from osmosis_ai.report.regrade import Pair

    pairs = []
    for record in records:
        regrade = record["regrade"]
        new = record.get("reward") if record.get("outcome") == "completed" else None
        repeats = tuple(r for r in regrade.get("repeats") or () if r is not None)
        pairs.append(
            Pair(record["row_index"], record["sample_index"], regrade["previous_reward"], new, repeats)
        )
    return pairs
