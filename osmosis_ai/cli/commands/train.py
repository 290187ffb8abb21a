"""``osmosis train CONFIG.toml``: a small GRPO job training a rollout server with TRL on this machine.

The config (:mod:`osmosis_ai.cli.train_config`) is read and checked first — every mistake one line
naming its key, before torch is imported — then the library runs the plan
(:func:`osmosis_ai.train.job.run_training`). Each step prints one line (loss, the trainer's mean
reward, the share of rollouts excluded as typed failures, rollouts trained on, tokens/s) and writes
its HTML report, ``OUTPUT/reports/step-NNNN.html``; every rollout is in the journal
``OUTPUT/journal.sqlite`` (``osmosis report`` reads it), the trained model in ``OUTPUT/model``.
``--log-to`` sends each step's figures to an experiment tracker as the step ends, and the finished
job (the last step's rollouts and the training figures) at the end. A job that cannot run exits 1 with one ``Error:`` line.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from osmosis_ai.cli import output


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from osmosis_ai.cli.arguments import absolute_path, add_log_to_argument
    from osmosis_ai.cli.output_file import declare_files

    parser.add_argument(
        "config", metavar="CONFIG.toml", help="the job: model, dataset, target and GRPO settings"
    )
    parser.add_argument("--output-dir", metavar="DIR", type=absolute_path,
                        help="where the journal, the step reports and the model go (default: job.output_dir)")  # fmt: skip
    declare_files(parser, read=["config"])
    add_log_to_argument(parser)
    parser.add_argument("-q", "--quiet", action="store_true", help="no step lines: only the final one")
    parser.add_argument("--json", action="store_true",
                        help="print the job's figures as one JSON object (steps, rollouts, where the model is)")  # fmt: skip
    parser.add_argument("-v", "--verbose", action="store_true", help="show library log messages")


def run(args: argparse.Namespace) -> int:
    import logging

    from osmosis_ai.cli import train_config
    from osmosis_ai.cli.summary import Outputs
    from osmosis_ai.train.job import run_training

    output.setup_logging(logging.INFO if args.verbose else None)
    config = train_config.load(
        Path(args.config), output_dir=Path(args.output_dir) if args.output_dir else None
    )
    plan = config.plan
    reports = Path(plan.output_dir) / "reports"
    outputs = Outputs.of(args)
    quiet = bool(args.quiet or args.json)
    output.say(f"Training {plan.model} on {plan.dataset} against {plan.target.describe()}: "
               f"{plan.steps} steps of {plan.batch_size} prompts x {plan.group_size}", quiet=quiet)  # fmt: skip
    if not args.verbose:
        _quiet_transformers()
    runs = _open_runs(outputs, plan)

    def on_step(step: Any) -> None:
        page = _write_step_report(reports, step, plan)
        output.say(_step_line(step, page), quiet=quiet)
        if runs is not None:  # a tracker's refusal costs its figures, never the training
            for refused in runs.step(step.step, _step_figures(step)):
                output.warn(f"{refused}; the training goes on without it")

    try:
        result = run_training(plan, on_step)
    except BaseException as exc:
        if runs is not None:
            runs.abort()
        if isinstance(exc, KeyboardInterrupt):
            print("Interrupted: the finished steps' rollouts are in the journal.", flush=True)
            return 130
        raise
    output.say(f"Trained {len(result.steps)} steps in {result.seconds:.1f}s: {result.trained} of "
               f"{result.rollouts} rollouts trained on; model {result.model_dir}; journal {result.journal}",
               quiet=bool(args.json))  # fmt: skip
    if runs is not None:
        _finish_runs(runs, outputs, result)
    if args.json:
        output.print_json(_document(result, reports))
    return 0


def _document(result: Any, reports: Path) -> dict[str, Any]:
    """``--json``'s object: the job's totals, where its files are, and each step's figures."""
    steps = [{"step": step.step, "loss": step.loss, "reward": step.reward, "excluded_frac": step.excluded_frac,
              "rollouts": len(step.records), "trained": step.trained, "tokens_per_s": step.tokens_per_s,
              "report": str(reports / f"step-{step.step:04d}.html")} for step in result.steps]  # fmt: skip
    return {"steps": steps, "rollouts": result.rollouts, "trained": result.trained,
            "seconds": round(result.seconds, 3), "model": str(result.model_dir), "journal": str(result.journal)}  # fmt: skip


def _quiet_transformers() -> None:
    """No progress bars or notices from transformers: the step lines say what happens (-v shows them)."""
    from transformers.utils import logging as transformers_logging

    transformers_logging.set_verbosity_error()
    transformers_logging.disable_progress_bar()


def _number(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _step_line(step: Any, page: Path) -> str:
    excluded = "-" if step.excluded_frac is None else f"{step.excluded_frac:.0%}"
    speed = "-" if step.tokens_per_s is None else f"{step.tokens_per_s:,.0f}"
    return (
        f"step {step.step}/{step.steps}  loss {_number(step.loss, 4)}  reward {_number(step.reward)}  "
        f"excluded {excluded}  trained {step.trained}/{len(step.records)}  tokens/s {speed}  report {page}"
    )


def _write_step_report(folder: Path, step: Any, plan: Any) -> Path:
    from osmosis_ai.cli.summary import write_report
    from osmosis_ai.report.readers import read_document

    run = read_document(step.records, f"step {step.step}")
    run.model = plan.model
    run.notes.append(
        f"osmosis train step {step.step} of {step.steps}: loss {_number(step.loss, 4)}, "
        f"{step.trained} of {len(step.records)} rollouts trained on"
    )
    folder.mkdir(parents=True, exist_ok=True)
    return write_report(folder / f"step-{step.step:04d}.html", [run],
                        title=f"osmosis train: step {step.step}", flag="the step report")  # fmt: skip


def _open_runs(outputs: Any, plan: Any) -> Any:
    """The job's run in each ``--log-to`` tool, open before training starts (``None`` without the flag)."""
    if not outputs.log_to:
        return None
    from osmosis_ai.cli.summary import experiment_name
    from osmosis_ai.observe.loggers import open_runs

    return open_runs(outputs.log_to, name=experiment_name("train"), kind="train",
                     config={**plan.description(), **outputs.settings})  # fmt: skip


def _step_figures(step: Any) -> dict[str, float]:
    """What each ``--log-to`` tool gets as a step ends: the trainer's log of the step (``loss``,
    ``reward``, ``osmosis/excluded_frac``...) and the step's rollouts, under ``train/``."""
    figures = {f"train/{name}": value for name, value in step.logs.items()}
    figures |= {"train/rollouts": float(len(step.records)), "train/trained": float(step.trained)}
    if step.tokens_per_s is not None:
        figures["train/tokens_per_s"] = step.tokens_per_s
    return figures


def _finish_runs(runs: Any, outputs: Any, result: Any) -> None:
    """The finished job to each ``--log-to`` tool: the last step's rollouts (their table and reward
    histogram), its trainer figures and the job's totals."""
    from osmosis_ai.cli.summary import experiment_log, say_logged
    from osmosis_ai.report.figures import summarize
    from osmosis_ai.report.readers import read_document

    step = result.steps[-1]
    run = read_document(step.records, f"step {step.step}")
    run.kind = "train"
    training = {f"train_{name.replace('/', '_')}": value for name, value in step.logs.items()}
    training |= {"train_steps": float(len(result.steps)), "train_rollouts": float(result.rollouts),
                 "train_trained": float(result.trained)}  # fmt: skip
    say_logged(outputs, runs.finish(experiment_log(outputs, (run, summarize(run)), more=training)))
