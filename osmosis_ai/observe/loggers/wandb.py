"""Weights & Biases: one run per osmosis run, in ``WANDB_PROJECT`` (default ``osmosis``).

``WANDB_MODE=offline`` writes it under ``WANDB_DIR`` for a later ``wandb sync``. The config is the
run's config, the figures go to the run summary, the histogram and the sample table are logged once.
"""

from __future__ import annotations

import os
import sys

from osmosis_ai._http import redact_command
from osmosis_ai.observe.loggers import SAMPLE_COLUMNS, RunLog


def check() -> str | None:
    """Why W&B could not take a run now: online (``WANDB_MODE`` not ``offline``/``disabled``) with no
    API key in ``WANDB_API_KEY`` or the netrc file ``wandb login`` writes; ``None`` when it can."""
    import netrc
    import urllib.parse

    if os.environ.get("WANDB_MODE", "").lower() in ("offline", "disabled", "dryrun") or os.environ.get(
        "WANDB_API_KEY"
    ):
        return None
    host = urllib.parse.urlsplit(os.environ.get("WANDB_BASE_URL") or "https://api.wandb.ai").hostname or ""
    try:
        if netrc.netrc(os.environ.get("NETRC")).authenticators(host):
            return None
    except (OSError, netrc.NetrcParseError):
        pass
    return "no W&B API key: set WANDB_API_KEY or run `wandb login`, or WANDB_MODE=offline to log locally"


def log(run: RunLog) -> str:
    import wandb

    project = os.environ.get("WANDB_PROJECT") or "osmosis"
    argv = sys.argv
    sys.argv = redact_command(argv)  # W&B keeps the command line in the run's metadata, read at init
    try:
        logged = wandb.init(
            project=project,
            name=run.name,
            job_type=run.kind,
            config=dict(run.config),
            settings=wandb.Settings(silent=True),
        )
    finally:
        sys.argv = argv
    try:
        logged.summary.update(run.figures())
        data: dict[str, object] = {
            "samples": wandb.Table(columns=list(SAMPLE_COLUMNS), data=[list(r) for r in run.samples])
        }
        if run.scores:
            data["score_histogram"] = wandb.Histogram(list(run.scores))
        logged.log(data)
        where = logged.dir if getattr(logged, "offline", False) else (logged.url or logged.dir)
    finally:
        logged.finish()
    return str(where)
