"""MLflow: one run in ``MLFLOW_EXPERIMENT_NAME`` (default ``osmosis``) of the tracking store
``MLFLOW_TRACKING_URI`` names (a ``file:`` directory works offline, with MLflow's
``MLFLOW_ALLOW_FILE_STORE=true``): the config as parameters, the
figures as metrics (each step's at its step), the histogram (bin edges and counts) and the sample
table as JSON artifacts."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from osmosis_ai.observe.loggers import SAMPLE_COLUMNS, RunLog, histogram, writable_directory

_PARAM_LIMIT = 6000  # characters of a parameter value MLflow stores


def check() -> str | None:
    """Why MLflow could not take a run now: a tracking server that does not answer its ``/health``,
    or a file store that cannot be written; ``None`` when it can."""
    import urllib.error
    import urllib.parse
    import urllib.request

    import mlflow

    uri = mlflow.get_tracking_uri()
    scheme = urllib.parse.urlsplit(uri).scheme
    if scheme in ("http", "https"):
        try:  # before any event loop runs: a short blocking look is harmless here
            with urllib.request.urlopen(f"{uri.rstrip('/')}/health", timeout=5):
                return None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            return f"the tracking server MLFLOW_TRACKING_URI={uri} does not answer ({reason}); start it or fix the URI"
    if scheme in ("", "file"):
        return writable_directory(urllib.parse.urlsplit(uri).path if scheme else uri)
    return None  # another store (a database, Databricks): MLflow's own errors say what is wrong


def _metrics(figures: Mapping[str, float]) -> dict[str, float]:
    return {name.replace("@", "_at_"): value for name, value in figures.items()}


class MlflowRun:
    """An open MLflow run (the active one of this process): step figures as metrics at their step."""

    def __init__(self, name: str, kind: str, config: Mapping[str, Any]) -> None:
        import mlflow

        mlflow.set_experiment(os.environ.get("MLFLOW_EXPERIMENT_NAME") or "osmosis")
        self.active = mlflow.start_run(run_name=name, tags={"osmosis.kind": kind})
        try:
            params = {k: v if isinstance(v, str) else json.dumps(v, default=str) for k, v in config.items()}
            mlflow.log_params({k: v[:_PARAM_LIMIT] for k, v in params.items()})
        except BaseException:
            self.abort()
            raise

    def step(self, step: int, figures: Mapping[str, float]) -> None:
        import mlflow

        mlflow.log_metrics(_metrics(figures), step=step)

    def finish(self, run: RunLog) -> str:
        import mlflow

        mlflow.log_metrics(_metrics(run.figures()))
        edges, counts = histogram(run.scores)
        mlflow.log_dict({"edges": edges, "counts": counts}, "score_histogram.json")
        mlflow.log_dict(
            {"columns": list(SAMPLE_COLUMNS), "data": [list(r) for r in run.samples]}, "samples.json"
        )
        mlflow.end_run()
        return str(self.active.info.artifact_uri)

    def abort(self) -> None:
        import mlflow

        mlflow.end_run(status="FAILED")


def start(name: str, kind: str, config: Mapping[str, Any]) -> MlflowRun:
    return MlflowRun(name, kind, config)
