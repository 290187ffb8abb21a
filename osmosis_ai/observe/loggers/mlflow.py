"""MLflow: one run in ``MLFLOW_EXPERIMENT_NAME`` (default ``osmosis``) of the tracking store
``MLFLOW_TRACKING_URI`` names (a ``file:`` directory works offline, with MLflow's
``MLFLOW_ALLOW_FILE_STORE=true``): the config as parameters, the
figures as metrics, the histogram (bin edges and counts) and the sample table as JSON artifacts."""

from __future__ import annotations

import json
import os

from osmosis_ai.observe.loggers import SAMPLE_COLUMNS, RunLog, histogram

_PARAM_LIMIT = 6000  # characters of a parameter value MLflow stores


def log(run: RunLog) -> str:
    import mlflow

    mlflow.set_experiment(os.environ.get("MLFLOW_EXPERIMENT_NAME") or "osmosis")
    with mlflow.start_run(run_name=run.name, tags={"osmosis.kind": run.kind}) as active:
        params = {k: v if isinstance(v, str) else json.dumps(v, default=str) for k, v in run.config.items()}
        mlflow.log_params({k: v[:_PARAM_LIMIT] for k, v in params.items()})
        mlflow.log_metrics({name.replace("@", "_at_"): value for name, value in run.figures().items()})
        edges, counts = histogram(run.scores)
        mlflow.log_dict({"edges": edges, "counts": counts}, "score_histogram.json")
        mlflow.log_dict(
            {"columns": list(SAMPLE_COLUMNS), "data": [list(r) for r in run.samples]}, "samples.json"
        )
        return str(active.info.artifact_uri)
