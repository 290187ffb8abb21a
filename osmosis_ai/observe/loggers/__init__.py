"""Experiment loggers for runs: a finished run's config, summary figures, pass@k, score histogram and
a sample table, sent to Weights & Biases, TensorBoard (tensorboardX event files) or MLflow.

:class:`RunLog` is what every tool gets; :func:`log_run` sends it to each tool named, importing only
that tool's module (:mod:`.wandb`, :mod:`.tensorboard`, :mod:`.mlflow`, each an optional extra). A
job that has figures as it goes (``osmosis train``'s steps) opens its run in each tool first
(:func:`open_runs`), sends each step's figures as the step ends (:meth:`OpenRuns.step`) and the
finished run at the end (:meth:`OpenRuns.finish`). Each tool module has ``start(name, kind, config)``
returning its open run (:class:`ToolRun`).
Settings named as secrets are left out and secrets inside the others masked before any tool sees
them (``osmosis_ai._http.redact_config``); W&B, which records the command line itself, gets it masked
(``redact_command``). Where each one writes is the tool's own setting: ``WANDB_PROJECT``/``WANDB_MODE``/``WANDB_DIR``;
``TENSORBOARD_LOGDIR`` (default ``runs/<name>``); ``MLFLOW_TRACKING_URI``/``MLFLOW_EXPERIMENT_NAME``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import importlib.util
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from osmosis_ai.errors import OsmosisError

# tool -> (the module it needs, the extra that installs it)
TOOLS: dict[str, tuple[str, str]] = {
    "wandb": ("wandb", "wandb"),
    "tensorboard": ("tensorboardX", "tensorboard"),
    "mlflow": ("mlflow", "mlflow"),
}
MAX_SAMPLES = 1000  # rows of the sample table: a preview, the results file has them all
SAMPLE_COLUMNS = ("row", "sample", "outcome", "score", "latency_ms", "tokens", "error")


class ExperimentLogError(OsmosisError):
    """A run's figures could not be sent to an experiment logger (``tool`` names it)."""

    def __init__(self, tool: str, message: str) -> None:
        super().__init__(f"--log-to {tool}: {message}")
        self.tool = tool


@dataclass(frozen=True)
class RunLog:
    """One finished run as the loggers record it.

    ``config`` holds the run's settings (plain values), ``summary`` its figures by name, ``pass_at_k``
    pass@k by k, ``scores`` every scored sample's value (the histogram), ``samples`` the first
    :data:`MAX_SAMPLES` rows of the sample table (:data:`SAMPLE_COLUMNS`).
    """

    name: str
    kind: str
    config: Mapping[str, Any]
    summary: Mapping[str, float]
    pass_at_k: Mapping[int, float] = field(default_factory=dict)
    scores: Sequence[float] = ()
    samples: Sequence[Sequence[Any]] = ()

    def figures(self) -> dict[str, float]:
        """The summary and pass@k as one flat ``{name: value}``."""
        return {**self.summary, **{f"pass@{k}": v for k, v in self.pass_at_k.items()}}


def install_line(tool: str) -> str | None:
    """The pip line for ``tool``'s extra when its package is missing, else ``None``."""
    module, extra = TOOLS[tool]
    if importlib.util.find_spec(module) is not None:
        return None
    return f"{tool} needs the {module} package: pip install 'osmosis-ai[{extra}]'"


def histogram(scores: Sequence[float], bins: int = 10) -> tuple[list[float], list[int]]:
    """``bins`` equal bins over the scores' range: the edges (``bins + 1``) and the counts."""
    if not scores:
        return [], []
    low, high = min(scores), max(scores)
    width = (high - low) / bins or 1.0
    counts = [0] * bins
    for value in scores:
        counts[min(int((value - low) / width), bins - 1)] += 1
    return [low + width * i for i in range(bins + 1)], counts


def check_tools(tools: Iterable[str]) -> None:
    """Prove each of ``tools`` can take a run before any paid work starts: its package is installed
    and its own check passes (a tracking server that answers, a key, a writable directory).

    Raises:
        ExperimentLogError: what is missing, and how to fix it.
    """
    for tool in dict.fromkeys(tools):
        line = install_line(tool)
        if line is not None:
            raise ExperimentLogError(tool, line)
        problem = importlib.import_module(f"osmosis_ai.observe.loggers.{tool}").check()
        if problem is not None:
            raise ExperimentLogError(tool, problem)


def writable_directory(path: str) -> str | None:
    """Why a logger could not write under ``path`` (it, or the nearest folder above it that
    exists, must be a writable directory), or ``None``."""
    import os

    here = os.path.abspath(path)
    while not os.path.exists(here):
        here = os.path.dirname(here)
    if not os.path.isdir(here) or not os.access(here, os.W_OK):
        return f"cannot write under {path} ({here} is not a writable directory)"
    return None


class ToolRun(Protocol):
    """One tool's run, open while a job runs: ``step`` sends a step's figures, ``finish`` the finished
    run's (its summary, pass@k, histogram and sample table; the name, kind and config were given at
    the start) and says where the tool wrote it, ``abort`` ends a run that will not finish."""

    def step(self, step: int, figures: Mapping[str, float]) -> None: ...

    def finish(self, run: RunLog) -> str: ...

    def abort(self) -> None: ...


@contextlib.contextmanager
def _reported(tool: str) -> Iterator[None]:
    """A tool's own failure (a refused key, an unwritable directory) as :class:`ExperimentLogError`."""
    try:
        yield
    except ExperimentLogError:
        raise
    except Exception as exc:
        raise ExperimentLogError(tool, f"{type(exc).__name__}: {exc}") from exc


class OpenRuns:
    """A run open in each of several tools (:func:`open_runs`); after :meth:`finish` or :meth:`abort`
    nothing more is sent."""

    def __init__(self, runs: Sequence[tuple[str, ToolRun]]) -> None:
        self.runs = list(runs)

    def step(self, step: int, figures: Mapping[str, float]) -> list[ExperimentLogError]:
        """Send one step's figures to every tool; the refusals, one per tool that refused them. A
        tool that refused gets nothing more (its run is ended as failed): the job goes on without it,
        its figures still reaching the others."""
        refused = []
        for tool, run in list(self.runs):
            try:
                with _reported(tool):
                    run.step(step, dict(figures))
            except ExperimentLogError as exc:
                refused.append(exc)
                self.runs.remove((tool, run))
                with contextlib.suppress(Exception):
                    run.abort()
        return refused

    def finish(self, run: RunLog) -> list[str]:
        """Send the finished ``run`` (see :class:`ToolRun`) and end every tool's run; where each wrote it.

        Raises:
            ExperimentLogError: a tool refused it (the runs not yet finished are aborted).
        """
        where = []
        try:
            while self.runs:
                tool, open_run = self.runs[0]
                with _reported(tool):
                    where.append(open_run.finish(run))
                self.runs.pop(0)
        finally:
            self.abort()
        return where

    def abort(self) -> None:
        """End every run not finished, as failed where the tool has the notion (the job did not end)."""
        runs, self.runs = self.runs, []
        for _, run in runs:
            with contextlib.suppress(Exception):
                run.abort()


def open_runs(tools: Iterable[str], *, name: str, kind: str, config: Mapping[str, Any]) -> OpenRuns:
    """Start a run named ``name`` in each of ``tools`` with ``config`` (secrets left out or masked
    first, as for :func:`log_run`).

    Raises:
        ExperimentLogError: a tool's package is missing or it refused the run (none is left open).
    """
    from osmosis_ai._http import redact_config

    config = redact_config(config)  # no tool ever gets a secret
    runs = OpenRuns([])
    try:
        for tool in dict.fromkeys(tools):
            line = install_line(tool)
            if line is not None:
                raise ExperimentLogError(tool, line)
            module = importlib.import_module(f"osmosis_ai.observe.loggers.{tool}")
            with _reported(tool):
                runs.runs.append((tool, module.start(name, kind, config)))
    except BaseException:
        runs.abort()
        raise
    return runs


def log_run(tools: Iterable[str], run: RunLog) -> list[str]:
    """Send ``run`` to each of ``tools``; where each one wrote it (a directory or a URL), in order.

    Raises:
        ExperimentLogError: a tool's package is missing or it refused the run.
    """
    return open_runs(tools, name=run.name, kind=run.kind, config=run.config).finish(run)
