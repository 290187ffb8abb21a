"""``osmosis eval run CONFIG.toml``: 0.3's local evaluation of a workspace rollout.

The config (:mod:`osmosis_ai.cli.eval.run_config`) names the rollout; its entrypoint is started as a
server of its own on a free loopback port and every selected dataset row is sent to it ``n`` times
through the local TrainGate, the policy ``model_path`` (at ``--base-url`` when given) answering the
workflow's chat calls (:class:`~osmosis_ai.runs.executors.workspace03.WorkspaceServer`). From there it
is ``osmosis rollout run``'s run and report: the journal (the same command resumes; a changed rollout,
dataset or setting is refused by name; ``--fresh``, ``--retry-failed``), pass@k over ``n`` with the
config's ``pass_threshold``, ``-o``, ``--trajectories``, ``--report``, ``--json``, ``--backend ray``
(each Ray worker serves the entrypoint for its own rollouts) and the exit status. The server is
stopped when the run ends, Ctrl-C included; its output is kept in ``.osmosis/logs/NAME-server.log``
of the workspace. Where it runs (``uv``'s environment of the rollout, ``--python``'s interpreter or
this one) is chosen here, as 0.3 chooses it, and named in the header line.
"""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path
from typing import Any

from osmosis_ai.cli import output
from osmosis_ai.cli.errors import CLIError

ROWS = re.compile(r"\d+(-\d+)?(,\d+(-\d+)?)*")


def add_parser(subparsers: Any) -> None:
    """Add ``run`` to ``osmosis eval``'s sub-commands."""
    from osmosis_ai.cli.arguments import (
        absolute_path,
        add_backend_arguments,
        add_journal_arguments,
        fraction,
        whole_number,
    )
    from osmosis_ai.cli.output_file import declare_files
    from osmosis_ai.cli.summary import add_summary_arguments
    from osmosis_ai.cli.trajectories import add_trajectories_argument

    run = subparsers.add_parser(
        "run",
        help="evaluate a workspace rollout (0.3's configs/eval/NAME.toml) on this machine",
        description="Evaluate a workspace rollout locally: its entrypoint served on a free loopback port, "
        "every dataset row sent n times through a local TrainGate, pass@k reported.",
    )
    run.add_argument("config", metavar="CONFIG.toml", help="the eval config, e.g. configs/eval/NAME.toml")
    run.add_argument("--dataset-file", metavar="FILE", type=absolute_path,
                     help="local dataset (.jsonl, .csv, .parquet) instead of the config's dataset")  # fmt: skip
    run.add_argument("--rows", metavar="LIST",
                     help="dataset rows to run, 0-based, e.g. '3,7,10-20' (instead of evaluation.limit)")  # fmt: skip
    run.add_argument(
        "--base-url", help="OpenAI-compatible base URL serving model_path (vLLM, SGLang, Ollama)"
    )
    run.add_argument("--api-key", help="API key of the policy backend (default: the provider's env variable)")
    run.add_argument("--python", metavar="PATH",
                     help="the interpreter that runs the entrypoint, e.g. the rollout's own virtualenv's "
                     "(default: the rollout's uv environment from its pyproject.toml when uv is on PATH, "
                     "else the one running osmosis)")  # fmt: skip
    run.add_argument("--max-in-flight", type=whole_number(1), metavar="N",
                     help="rollouts in flight (default: evaluation.batch_size, else 1)")  # fmt: skip
    run.add_argument("--max-failure-rate", type=fraction, default=0.0, metavar="FRACTION",
                     help="share of rollouts (0-1) that may fail without failing the run (default 0)")  # fmt: skip
    run.add_argument("-o", "--output", metavar="FILE.jsonl", type=absolute_path,
                     help="write one JSON record per rollout")  # fmt: skip
    declare_files(run, read=["dataset_file"], written=["output"])
    add_trajectories_argument(run, unit="rollout")
    add_journal_arguments(run, unit="rollout")
    add_backend_arguments(run)
    add_summary_arguments(run, log_to=True)
    run.add_argument(
        "--progress", action="store_true", help="show the progress bar even when not on a terminal"
    )
    run.add_argument(
        "-q", "--quiet", action="store_true", help="no progress bar and no tables: only the outcome line"
    )
    run.add_argument("-v", "--verbose", action="store_true", help="show library log messages")


def parse_rows(text: str) -> tuple[int, ...]:
    """``--rows``: ``"3,7,10-20"`` as the ascending file indices it names."""
    spaced = text.replace(" ", "")
    if not ROWS.fullmatch(spaced):
        raise CLIError(f"--rows {text!r}: give 0-based row numbers and ranges, e.g. '3,7,10-20'")
    chosen: set[int] = set()
    for part in spaced.split(","):
        first, _, last = part.partition("-")
        start, stop = int(first), int(last or first)
        if start > stop:
            raise CLIError(f"--rows: the range {part!r} runs backwards; write {stop}-{start}")
        chosen.update(range(start, stop + 1))
    return tuple(sorted(chosen))


def run(args: argparse.Namespace) -> int:
    import logging

    from osmosis_ai.cli.arguments import check_backend_arguments, journal_spec
    from osmosis_ai.cli.eval import run_config
    from osmosis_ai.cli.rollout_report import Report, drive
    from osmosis_ai.cli.running import run_command
    from osmosis_ai.cli.summary import Outputs, check_run_outputs
    from osmosis_ai.runs.executors.workspace03 import WorkspaceServer
    from osmosis_ai.runs.plan import ModelRef, Rows, RunPlan, Scoring

    output.setup_logging(logging.INFO if args.verbose else None)
    check_backend_arguments(args)
    selection = parse_rows(args.rows) if args.rows else None
    config = run_config.load(Path(args.config), dataset_given=args.dataset_file is not None)
    python, uv, where = _environment(args.python, config.rollout_dir)
    dataset = config.dataset_file(args.dataset_file)
    missing = [name for name in config.secrets if not os.environ.get(name)]
    if missing:
        raise CLIError(f"{config.path}: secrets.required names {', '.join(missing)}, not set in this environment "
                       "(the rollout server's): export it, or put it in .env")  # fmt: skip
    outputs = Outputs.of(args)
    check_run_outputs(outputs)
    if config.advanced and not outputs.quiet:
        output.warn(f"[advanced] is the platform's; eval run ignores {', '.join(config.advanced)}")
    log = config.workspace / ".osmosis" / "logs" / f"{config.rollout}-server.log"
    server = WorkspaceServer(ModelRef(config.model_path, args.base_url, args.api_key), str(config.rollout_dir),
                             config.entrypoint, selection=selection, env=tuple(sorted(config.env.items())),
                             log_path=str(log), python=python, uv=uv)  # fmt: skip
    rows = Rows(str(dataset), 0, None if selection is not None else config.limit)
    plan = RunPlan(rows, server, Scoring(kind="reward function", timeout=None), n=config.n,
                   concurrency=args.max_in_flight or config.batch_size or 1,
                   timeout=config.agent_timeout + config.grader_timeout,
                   journal=journal_spec(args), backend=args.backend, ray_address=args.ray_address)  # fmt: skip
    labels = {
        "command": "eval run",
        "model": config.model_path,
        "dataset": str(dataset),
        "module": server.target(),
    }
    report = Report(outputs, args.progress, False, config.pass_threshold)
    output.say(f"Rollout server: {server.target()} {where} (log: {log})", quiet=outputs.quiet)
    return run_command(
        lambda: drive(plan, report, labels), on_interrupt=lambda: output.interrupted("rollout")
    )


def _environment(given: str | None, rollout_dir: Path) -> tuple[str, str | None, str]:
    """Where the entrypoint runs, as 0.3 chooses it: ``(python, uv, how the header says it)``.

    ``--python`` names the interpreter (a bare name is looked up on ``PATH``); without it, a rollout
    with a ``pyproject.toml`` runs in its uv-managed environment when ``uv`` is on ``PATH``, and
    otherwise on the interpreter running osmosis."""
    import shutil
    import sys

    if given is not None:
        found = shutil.which(os.path.abspath(given) if os.sep in given else given)
        if found is None:
            raise CLIError(f"--python {given}: no such interpreter (give a path or a name on PATH)")
        return found, None, f"under {found} (--python)"
    uv = shutil.which("uv")
    if uv is not None and (rollout_dir / "pyproject.toml").is_file():
        return (
            sys.executable,
            uv,
            f"in its uv environment (uv run --project {rollout_dir}; --python PATH for another)",
        )
    return sys.executable, None, f"in this environment ({sys.executable})"
