"""Answers that already exist: an executor that runs no agent and calls no model.

``osmosis reward score`` (a dataset of answers), ``osmosis regrade`` (the records of an earlier run)
and ``osmosis eval-rubric`` (a rubric dataset) only score. Each item's
:class:`~osmosis_ai.runs.result.Attempt` is built from its row by the source's ``attempt_of`` — the
stored final messages and whatever the record kept — so the rest of the engine (the scorer, the
journal, the outcomes and the summaries) is the same as for a run.

An answer that is not in the item's row (a regrade's, read from an earlier run's records) travels
in the item itself: a :class:`StoredItem` carries the attempt its record becomes, as plain data, so
the item runs the same wherever it is sent (a Ray worker on another node has none of the files
the records came from), and :func:`carried` is its ``attempt_of``.

:class:`StoredAnswers` is the plan's executor spec; where the answers come from is its ``source``:
:class:`AnswerDataset`, :class:`EarlierRuns` or :class:`RubricDataset`.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from osmosis_ai._deadline import Deadline
from osmosis_ai.outcome import Outcome
from osmosis_ai.runs.answers import Columns
from osmosis_ai.runs.items import WorkItem
from osmosis_ai.runs.journal import PRIMARY
from osmosis_ai.runs.plan import Rows, RowSource, RunPlan
from osmosis_ai.runs.result import Attempt

if TYPE_CHECKING:
    from osmosis_ai.runs.engine import Pipeline

AttemptOf = Callable[[WorkItem], Attempt]


@dataclass(frozen=True)
class StoredItem(WorkItem):
    """A work item with its stored answer: ``answer`` is the attempt it becomes (built when the
    item is taken, so only the items in flight hold one)."""

    answer: Attempt = field(kw_only=True)


def carried(item: WorkItem) -> Attempt:
    """The ``attempt_of`` of :class:`StoredItem` items: the answer each carries."""
    if not isinstance(item, StoredItem):
        raise TypeError(f"carried() takes a StoredItem, got {type(item).__name__}")
    return item.answer


class StoredExecutor:
    """Turns each item's row into its attempt with ``attempt_of``; nothing runs, so no deadline applies."""

    def __init__(self, attempt_of: AttemptOf) -> None:
        self.attempt_of = attempt_of

    async def run(self, item: WorkItem, *, deadline: Deadline | None = None) -> Attempt:
        return self.attempt_of(item)


class AnswerSource(Protocol):
    """Where the answers of a :class:`StoredAnswers` run come from, as plain data."""

    @property
    def tags(self) -> tuple[str, ...]:
        """The model tags each answer is scored under (``primary``; and each repeat's)."""

    def task_id_parts(self, grader: str, plan: RunPlan) -> list[Any]:
        """What names the journal (JSON values): ``grader`` as the command line named it, the inputs."""

    def fingerprint(self, graders: list[str], plan: RunPlan) -> dict[str, Any]:
        """What a resumed run is checked against: the graders' digests, the inputs' digests."""

    def read(self, rows: Rows, grader: str) -> RowSource:
        """The answers, checked as they are read."""

    def attempt_of(self, item: WorkItem) -> Attempt:
        """The stored executor's ``attempt_of``: the attempt item's answer becomes."""


class RawRows:
    """A dataset's rows as written (not as prompts), ``keep`` choosing which (all by default), numbered
    in the order kept; ``format`` as the dataset reader takes it (default: by the file's name)."""

    def __init__(
        self, dataset: str, keep: Callable[[Any], bool] | None = None, format: str | None = None
    ) -> None:
        from osmosis_ai.runs.dataset import count_rows

        self.file_path = Path(dataset)
        self.keep, self.format = keep, format
        self.count = count_rows(self.file_path) if keep is None else sum(1 for _ in self._kept())

    def _kept(self) -> Iterator[Any]:
        from osmosis_ai.runs.dataset import iter_raw

        for raw in iter_raw(self.file_path, format=self.format):
            if self.keep is None or self.keep(raw.value):
                yield raw.value

    def __len__(self) -> int:
        return self.count

    def iter_indexed(self, limit: int | None = None, offset: int = 0) -> Iterator[tuple[int, Any]]:
        end = self.count if limit is None else offset + limit
        for index, value in enumerate(self._kept()):
            if index >= end:
                return
            if index >= offset:
                yield index, value


@dataclass(frozen=True)
class AnswerDataset:
    """A dataset of answers (``osmosis reward score``): each row's answer, ground truth and extra
    information in ``columns``; every row is checked as it is read, the first before the run starts
    (:class:`~osmosis_ai.runs.answers.RowRefused`)."""

    dataset: str
    columns: Columns

    tags = (PRIMARY,)

    def task_id_parts(self, grader: str, plan: RunPlan) -> list[Any]:
        names = [self.columns.solution, self.columns.ground_truth, self.columns.extra_info]
        return [grader, str(Path(self.dataset).resolve()), names]

    def fingerprint(self, graders: list[str], plan: RunPlan) -> dict[str, Any]:
        from osmosis_ai.runs.journal import file_digest

        names = [self.columns.solution, self.columns.ground_truth, self.columns.extra_info]
        return {"reward": graders[0], "dataset": file_digest(self.dataset), "columns": names}

    def read(self, rows: Rows, grader: str) -> RawRows:
        reader = RawRows(self.dataset)
        first = next(reader.iter_indexed(1), None)
        if first is not None:
            self.columns.sample_of_row(*first)
        return reader

    def attempt_of(self, item: WorkItem) -> Attempt:
        return self.columns.attempt(item)


@dataclass(frozen=True)
class EarlierRuns:
    """The answers of earlier runs (``osmosis regrade``; :mod:`osmosis_ai.runs.earlier`): their
    results files, the run's ``dataset`` for the columns, each answer scored ``repeats`` times
    (model tags ``primary``, ``repeat-1``...), only the ones whose scoring failed with ``only_failed``.
    ``needs_ground_truth``: the regrade is refused when an answer to score has none."""

    inputs: tuple[str, ...]
    dataset: str | None = None
    repeats: int = 1
    only_failed: bool = False
    needs_ground_truth: bool = True

    @property
    def tags(self) -> tuple[str, ...]:
        return (PRIMARY, *(f"repeat-{i}" for i in range(1, self.repeats)))

    def task_id_parts(self, grader: str, plan: RunPlan) -> list[Any]:
        inputs = [str(Path(p).resolve()) for p in self.inputs]
        return [grader, inputs, self.dataset, self.repeats, self.only_failed]

    def fingerprint(self, graders: list[str], plan: RunPlan) -> dict[str, Any]:
        from osmosis_ai.runs.journal import file_digest

        return {
            "grader": graders,
            "inputs": [file_digest(p) for p in self.inputs],
            "dataset": file_digest(self.dataset) if self.dataset else None,
            "repeats": self.repeats,
            "only_failed": self.only_failed,
        }

    def read(self, rows: Rows, grader: str) -> EarlierAnswers:
        return EarlierAnswers(self, grader)

    def attempt_of(self, item: WorkItem) -> Attempt:
        return carried(item)


class EarlierAnswers:
    """The answers :class:`EarlierRuns` selects, as the run's keyed source: each item carries its answer."""

    def __init__(self, source: EarlierRuns, grader: str) -> None:
        from osmosis_ai.runs.earlier import check_answers, read_answers, selected

        self.source, self.grader = source, grader
        self.file_path = Path(source.inputs[0])
        self.answers = read_answers(source.inputs, source.dataset).stored
        self.selected = selected(self.answers, source.only_failed)
        check_answers(self.answers, self.selected, needs_ground_truth=source.needs_ground_truth)

    def __len__(self) -> int:
        return len(self.selected)

    def keys(self) -> list[tuple[int, int]]:
        return list(self.selected)

    def iter_indexed(
        self, limit: int | None = None, offset: int = 0
    ) -> Iterator[tuple[int, Mapping[str, Any]]]:
        chosen = self.selected[offset:] if limit is None else self.selected[offset : offset + limit]
        for row, sample in chosen:
            yield row, self.answers[(row, sample)].columns

    def items(self, tags: list[str], skip: Callable[[WorkItem], bool] | None) -> Iterator[WorkItem]:
        from osmosis_ai.runs.earlier import attempt_of

        for key in self.selected:
            stored = self.answers[key]
            for tag in tags:
                item = WorkItem(key[0], key[1], stored.columns, tag)
                if skip is None or not skip(item):
                    answer = attempt_of(stored, self.grader)
                    yield StoredItem(key[0], key[1], stored.columns, tag, answer=answer)


@dataclass(frozen=True)
class RubricDataset:
    """A rubric dataset (``osmosis eval-rubric``), read as ``format``: its records whose ``rubric_id``
    is ``rubric_id`` (ignoring case), numbered in file order from 0, each judged ``n`` times (the
    plan's ``n``)."""

    dataset: str
    rubric_id: str
    format: str | None = None

    tags = (PRIMARY,)

    def task_id_parts(self, grader: str, plan: RunPlan) -> list[Any]:
        return [grader, str(Path(self.dataset).resolve()), self.rubric_id.casefold(), plan.n, _model(plan)]

    def fingerprint(self, graders: list[str], plan: RunPlan) -> dict[str, Any]:
        from osmosis_ai.runs.journal import file_digest

        return {"judge": graders, "model": _model(plan), "dataset": file_digest(self.dataset), "n": plan.n}

    def read(self, rows: Rows, grader: str) -> RawRows:
        wanted = self.rubric_id.casefold()

        def chosen(value: Any) -> bool:
            rubric = value.get("rubric_id") if isinstance(value, Mapping) else None
            return isinstance(rubric, str) and rubric.casefold() == wanted

        return RawRows(self.dataset, chosen, self.format)

    def attempt_of(self, item: WorkItem) -> Attempt:
        from osmosis_ai.judge.rubric import RecordRefused, record_of

        try:
            record = record_of(item.row_index + 1, dict(item.row))
        except RecordRefused as exc:
            return Attempt(Outcome.REWARD_ERROR, error=f"record {item.row_index + 1}: {exc}")
        answer = {"role": "assistant", "content": record.solution_str}
        return Attempt(Outcome.COMPLETED, final_messages=[answer], source=record)


def _model(plan: RunPlan) -> dict[str, Any]:
    """The judge's model as configured or overridden, without its key."""
    judge = plan.scoring.judge
    return {} if judge is None else {k: v for k, v in judge.config.model_info.items() if k != "api_key"}


@dataclass(frozen=True)
class StoredAnswers:
    """The plan's executor spec for answers that exist (see the module docstring): scored as the plan's
    scoring says, named ``grader`` (as the command line named it) in the journal's task id, the
    journal named ``name``; ``base_url`` is the judge's server, whose metrics ``auto`` follows."""

    source: AnswerSource
    name: str
    grader: str
    base_url: str | None = None
    task_prefix = ""

    @property
    def tags(self) -> list[str]:
        return list(self.source.tags)

    def journal_name(self) -> str:
        return self.name

    def task_id_parts(self, plan: RunPlan) -> list[Any]:
        return self.source.task_id_parts(self.grader, plan)

    def read_rows(self, rows: Rows) -> RowSource:
        return self.source.read(rows, self.grader)

    def prepare(self, plan: RunPlan) -> PreparedAnswers:
        from osmosis_ai.runs.pipeline import load_scorers

        return PreparedAnswers(plan, self, load_scorers(plan.scoring))


class PreparedAnswers:
    """The scoring functions, loaded: what the journal's fingerprint names."""

    def __init__(self, plan: RunPlan, spec: StoredAnswers, scorers: list[Any]) -> None:
        self.plan, self.spec, self.scorers = plan, spec, scorers

    def fingerprint(self, rows: int) -> dict[str, Any]:
        from osmosis_ai.rollout.loading import source_digest

        graders = [f"{fn.name}@{source_digest(fn.fn)}" for fn in self.scorers]
        if self.plan.scoring.judge is not None:
            graders.append(self.plan.scoring.judge.digest)
        return self.spec.source.fingerprint(graders, self.plan)

    @contextlib.asynccontextmanager
    async def session(self, plan: RunPlan, tags: list[str], observer: Any) -> AsyncIterator[AnswersSession]:
        yield AnswersSession(plan, self.spec, observer)


class AnswersSession:
    """Nothing to open and no model to check: the pipeline scores the stored answers."""

    def __init__(self, plan: RunPlan, spec: StoredAnswers, observer: Any) -> None:
        self.plan, self.spec, self.observer = plan, spec, observer

    async def preflight(self, on_event: Callable[[Any], None]) -> None:
        return None

    def pipeline(self, in_flight: int) -> contextlib.AbstractAsyncContextManager[Pipeline]:
        from osmosis_ai.runs.pipeline import scored

        return scored(self.plan, StoredExecutor(self.spec.source.attempt_of), self.observer)


def grader_of(plan: RunPlan) -> str:
    """The grader of a plan of stored answers, as the command line named it."""
    assert isinstance(plan.executor, StoredAnswers)
    return plan.executor.grader
