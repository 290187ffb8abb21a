"""What a run is, as plain data: :class:`RunPlan`.

A command fills in a plan from its flags and hands it to :func:`osmosis_ai.runs.run.run`; the plan
is all the library needs to run (here, or on each Ray worker, which builds its pipeline from the
same plan: :func:`osmosis_ai.runs.run.on_worker`). What runs each item is the plan's executor spec,
one kind per executor (:class:`ExecutorSpec`; the in-process agent is
:class:`osmosis_ai.runs.executors.local.InProcessAgent`). Every part is frozen and picklable, and names user code
by reference (``MODULE:ATTR``), never as a function object. :meth:`RunPlan.task_id` hashes what
names a journal; an API key is never part of a hash or a ``repr``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

if TYPE_CHECKING:
    from osmosis_ai.runs.engine import Pipeline
    from osmosis_ai.runs.items import WorkItem
    from osmosis_ai.runs.judging import RubricJudge

__all__ = [
    "ExecutorSpec",
    "JournalSpec",
    "KeyedSource",
    "ModelRef",
    "Prepared",
    "RowSource",
    "Rows",
    "RunPlan",
    "Scoring",
    "Session",
]


@dataclass(frozen=True)
class Rows:
    """The dataset file and the rows of it a run takes: ``limit`` rows after the first ``offset``."""

    dataset: str
    offset: int = 0
    limit: int | None = None


@dataclass(frozen=True)
class ModelRef:
    """A model an agent's calls go to: a LiteLLM name (or ``scripted``), at ``base_url`` when given."""

    name: str
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False, compare=False)


class Session(Protocol):
    """An executor opened for a run in one process (the driver's, or a Ray worker's): its model
    clients or servers up, ready to check and to build pipelines."""

    async def preflight(self, on_event: Callable[[Any], Any]) -> None:
        """Prove the run can start (one request per model), telling ``on_event`` what is checked."""

    def pipeline(self, in_flight: int) -> AbstractAsyncContextManager[Pipeline]:
        """The pipeline running items here, ``in_flight`` at once, closed with the context."""


class Prepared(Protocol):
    """An executor's user code, loaded in this process."""

    def fingerprint(self, rows: int) -> dict[str, Any]:
        """What the journal checks a resumed run against: the configuration and digests of the code
        and inputs (``rows``: how many the run selects)."""

    def session(self, plan: RunPlan, tags: list[str], observer: Any) -> AbstractAsyncContextManager[Session]:
        """The executor opened for ``tags``; model calls reported to ``observer`` (an adaptive limit)."""


class ExecutorSpec(Protocol):
    """What runs each item, as plain data: each kind lives beside its executor
    (:mod:`osmosis_ai.runs.executors`)."""

    task_prefix: str
    """What the task id of this kind's journals starts with (a listing tells the kinds apart by it)."""

    @property
    def tags(self) -> list[str]:
        """The model tags every row runs under (``primary``, and ``baseline`` for a comparison)."""

    def task_id_parts(self, plan: RunPlan) -> list[Any]:
        """What names the journal, as JSON values."""

    def journal_name(self) -> str:
        """The first part of the default journal's path (the model, or the command)."""

    @property
    def base_url(self) -> str | None:
        """The model server whose metrics ``concurrency="auto"`` follows (``None``: none to read)."""

    def read_rows(self, rows: Rows) -> RowSource:
        """The rows this executor runs, checked as it needs them."""

    def prepare(self, plan: RunPlan) -> Prepared:
        """Load the user code the executor runs (in this process)."""


class RowSource(Protocol):
    """A dataset opened for a run: where it is, how many rows it has, and its rows as a stream."""

    file_path: Path

    def __len__(self) -> int: ...

    def iter_indexed(
        self, limit: int | None = None, offset: int = 0
    ) -> Iterator[tuple[int, Mapping[str, Any]]]:
        """``(row index, row)`` of the rows after the first ``offset``, at most ``limit`` of them."""


@runtime_checkable
class KeyedSource(RowSource, Protocol):
    """A row source whose items are its own rather than its rows × ``n``: stored answers, each keyed
    by the ``(row, sample)`` of the run that gave it."""

    def keys(self) -> list[tuple[int, int]]:
        """Every item's key, in order."""

    def items(self, tags: list[str], skip: Callable[[WorkItem], bool] | None) -> Iterator[WorkItem]:
        """The items of ``tags`` in key order (then tag), lazily, without the skipped ones."""


@dataclass(frozen=True)
class Scoring:
    """How each finished item is scored: by ``functions`` (``MODULE:FN``, eval functions) in the reward
    runtime's worker processes, each score named by its spec or by ``names``, and by a rubric's
    ``judge`` (its score named ``score``), and by the agent's own reward under the name ``agent_score``
    (a 0.3 grader's). The item's reward is the score named ``reward``, or with ``"agent"`` the
    agent's own."""

    functions: tuple[str, ...] = ()
    kind: str = "eval function"
    timeout: float | None = 60.0
    workers: int | None = None
    memory_limit_mb: int | None = None
    names: tuple[str, ...] = ()
    reward: str = "agent"
    judge: RubricJudge | None = None
    agent_score: str | None = None

    @property
    def score_names(self) -> tuple[str, ...]:
        """The functions' score names."""
        return self.names or self.functions


@dataclass(frozen=True)
class JournalSpec:
    """Where the run keeps what it finished, and what a rerun runs again. ``path`` ``None``: the
    default location, named by the model, the dataset and the plan's task id."""

    path: str | None = None
    fresh: bool = False
    retry_failed: bool = False
    keep_messages: bool = False


@dataclass(frozen=True)
class RunPlan:
    """A whole run: ``rows`` × ``n`` samples × the executor's models, each run by ``executor`` and
    scored by ``scoring`` within ``timeout`` seconds, ``concurrency`` at once (or ``"auto"``,
    following the model server, up to ``max_concurrency``), journalled when ``journal`` is given, on
    ``backend``."""

    rows: Rows
    executor: ExecutorSpec
    scoring: Scoring = Scoring()
    n: int = 1
    concurrency: int | Literal["auto"] = 1
    max_concurrency: int | None = None
    timeout: float | None = None
    journal: JournalSpec | None = None
    backend: Literal["local", "processes", "ray"] = "local"
    ray_address: str | None = None

    def task_id(self) -> str:
        """What names the run's journal: the configuration as given (the executor's parts), so
        another configuration is another journal and shards run side by side. The contents
        (files, sources) are checked against the journal's fingerprint instead."""
        named = self.executor.task_id_parts(self)
        return self.executor.task_prefix + hashlib.sha256(json.dumps(named).encode()).hexdigest()[:12]
