"""Weights & Biases: one run per osmosis run, in ``WANDB_PROJECT`` (default ``osmosis``).

``WANDB_MODE=offline`` writes it under ``WANDB_DIR`` for a later ``wandb sync``. The config is the
run's config, each step's figures are logged at their step, the finished run's figures go to the run
summary, the histogram and the sample table are logged once.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

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


class WandbRun:
    """An open W&B run: step figures logged at their step, the finished run's in its summary."""

    def __init__(self, name: str, kind: str, config: Mapping[str, Any]) -> None:
        import wandb

        project = os.environ.get("WANDB_PROJECT") or "osmosis"
        argv = sys.argv
        sys.argv = redact_command(argv)  # W&B keeps the command line in the run's metadata, read at init
        try:
            self.logged = wandb.init(
                project=project,
                name=name,
                job_type=kind,
                config=dict(config),
                settings=wandb.Settings(silent=True),
            )
        finally:
            sys.argv = argv

    def step(self, step: int, figures: Mapping[str, float]) -> None:
        self.logged.log(dict(figures), step=step)

    def finish(self, run: RunLog) -> str:
        import wandb

        try:
            self.logged.summary.update(run.figures())
            data: dict[str, object] = {
                "samples": wandb.Table(columns=list(SAMPLE_COLUMNS), data=[list(r) for r in run.samples])
            }
            if run.scores:
                data["score_histogram"] = wandb.Histogram(list(run.scores))
            self.logged.log(data)
            where = (
                self.logged.dir
                if getattr(self.logged, "offline", False)
                else (self.logged.url or self.logged.dir)
            )
        finally:
            self.logged.finish()
        return str(where)

    def abort(self) -> None:
        self.logged.finish(exit_code=1)


def start(name: str, kind: str, config: Mapping[str, Any]) -> WandbRun:
    return WandbRun(name, kind, config)
