"""What a run is, as plain data: :class:`RunPlan`.

A command fills in a plan from its flags and hands it to :func:`osmosis_ai.runs.run.run`; the plan
is all the library needs to run (here, or on each Ray worker, which builds its pipeline from the
same plan: :mod:`osmosis_ai.runs.pipeline`). Every part is frozen and picklable, and names user code
by reference (``MODULE:ATTR``), never as a function object. :meth:`RunPlan.task_id` hashes what
names a journal; an API key is never part of a hash or a ``repr``.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from osmosis_ai.evaluation.journal import BASELINE, PRIMARY
from osmosis_ai.rollout.loading import AgentRef

__all__ = ["AgentRef", "InProcessAgent", "JournalSpec", "ModelRef", "Rows", "RunPlan", "Scoring"]


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


@dataclass(frozen=True)
class InProcessAgent:
    """The executor that runs the agent loop in the run's process (or in each Ray worker), its model
    calls answered by ``models`` (``primary``, and ``baseline`` for a comparison). ``label`` names the
    command in request ids and metadata (``test``, ``eval``)."""

    agent: AgentRef
    models: tuple[tuple[str, ModelRef], ...]
    label: str
    max_turns: int = 10
    completion_params: tuple[tuple[str, Any], ...] = ()
    debug_dir: str | None = None

    @property
    def tags(self) -> list[str]:
        return [tag for tag, _ in self.models]

    def model(self, tag: str = PRIMARY) -> ModelRef:
        return dict(self.models)[tag]


@dataclass(frozen=True)
class Scoring:
    """How each finished item is scored: by ``functions`` (``MODULE:FN``, eval functions) in the reward
    runtime's worker processes, or, with none, by the agent's own reward."""

    functions: tuple[str, ...] = ()
    kind: str = "eval function"
    timeout: float | None = 60.0
    workers: int | None = None
    memory_limit_mb: int | None = None


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
    executor: InProcessAgent
    scoring: Scoring = Scoring()
    n: int = 1
    concurrency: int | Literal["auto"] = 1
    max_concurrency: int | None = None
    timeout: float | None = None
    journal: JournalSpec | None = None
    backend: Literal["local", "ray"] = "local"
    ray_address: str | None = None

    def task_id(self) -> str:
        """What names the run's journal: the configuration as given (agent, scorers, models and their
        base URLs, dataset path, the rows selected, ``n``, ``max_turns``, sampling), so another
        configuration is another journal and shards run side by side. The contents (files,
        sources) are checked against the journal's fingerprint instead."""
        executor = self.executor
        primary = executor.model(PRIMARY)
        named: list[Any] = [
            executor.agent.spec,
            list(self.scoring.functions),
            primary.name,
            str(Path(self.rows.dataset).resolve()),
        ]
        if self.rows.offset or self.rows.limit is not None:
            named.append([self.rows.offset, self.rows.limit])
        if BASELINE in executor.tags:
            baseline = executor.model(BASELINE)
            named.append([baseline.name, baseline.base_url])
        named.append([primary.base_url, self.n, executor.max_turns, dict(executor.completion_params)])
        return hashlib.sha256(json.dumps(named).encode()).hexdigest()[:12]
