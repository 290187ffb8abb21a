"""The ``eval-rubric`` flow: check everything cheap first, then judge, then report.

Order: rubric id and ``-n``, dataset path, config file (explicit or discovered), rubric lookup, API
key (before any paid call), dataset records, baseline, output path (it must be writable: checked
before any paid call); then the judged runs — on the run engine like every run (:func:`plan_of`: the
records as stored answers, the rubric's judge as the scorer), so with ``--journal`` a stopped run
resumes where it stopped and an edited input is refused by name, and ``--backend ray`` judges on Ray
workers — then the text report, the JSON report file and one line
counting the runs' outcomes. A report file that cannot be written after all is an error naming the
path, but the text report is already printed. The report is written whatever the outcomes; then the
run fails (``CLIError`` with one line saying why) by the shared rule of
:func:`osmosis_ai.outcome.verdict`: any judgment lost to the provider or the network,
no successful judgment at all, or more failed judgments than ``--max-failure-rate`` allows.

Where the report goes: ``-o file.json`` writes that file; ``-o DIR`` writes
``DIR/rubric_eval_result_<unix time>.json``; without ``-o`` the report goes to
``~/.cache/osmosis/rubric/<rubric id>/rubric_eval_result_<unix time>.json``, where scripts look for
it. Directories are created only when the report is written, after the runs, and the file is
written atomically, so a failed or cancelled run leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from osmosis_ai._litellm import import_litellm
from osmosis_ai.cli.errors import CLIError
from osmosis_ai.cli.eval_rubric.config import RubricConfig, load_rubric_suite
from osmosis_ai.cli.eval_rubric.dataset import load_records
from osmosis_ai.cli.eval_rubric.report import (
    ReportContext,
    build_json_report,
    check_report_location,
    load_baseline,
    outcome_counts,
    render_text_report,
    results_of,
    write_json_atomic,
)
from osmosis_ai.cli.output_file import OutputPathError
from osmosis_ai.judge.keys import ensure_api_key_available
from osmosis_ai.models.complete import SCRIPTED
from osmosis_ai.outcome import verdict
from osmosis_ai.runs.judging import JUDGE_CONCURRENCY

if TYPE_CHECKING:
    from osmosis_ai.runs.plan import RunPlan, Scoring

logger = logging.getLogger(__name__)

CONFIG_FILENAME = "rubric_configs.yaml"


@dataclass(frozen=True)
class EvalRubricOptions:
    """The ``eval-rubric`` command line, parsed."""

    rubric_id: str
    data_path: Path
    number: int = 1
    config_path: Path | None = None
    output_path: Path | None = None
    baseline_path: Path | None = None
    concurrency: int = JUDGE_CONCURRENCY
    cache: bool = False
    requests_per_minute: float | None = None
    progress: bool | None = None
    max_failure_rate: float = 0.0
    model: str | None = None
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    pass_threshold: float | None = None
    quiet: bool = False
    journal: Path | None = None
    fresh: bool = False
    retry_failed: bool = False
    backend: Literal["local", "processes", "ray"] = "local"
    ray_address: str | None = None


def with_overrides(config: RubricConfig, options: EvalRubricOptions) -> RubricConfig:
    """The rubric's judge as the command line names it: ``--model [provider/]name``, ``--base-url``
    and ``--api-key`` take the place of the YAML's ``model_info`` values, which stay otherwise."""
    info = dict(config.model_info)
    if options.model == SCRIPTED:
        raise CLIError(
            "--model scripted is the offline calculator solver of rollout run, test and eval; it cannot "
            "judge. Give a judge model (provider/model), or --base-url for a local OpenAI-compatible server"
        )
    if options.model:
        provider, slash, name = options.model.partition("/")
        if slash and name:
            info["provider"], info["model"] = provider, name
        else:
            info["model"] = options.model
    if options.base_url:
        info["api_base"] = options.base_url
    if options.api_key:
        info["api_key"] = options.api_key
    return replace(config, model_info=info)


def cache_root() -> Path:
    """``~/.cache/osmosis``, the home of default reports."""
    return Path.home() / ".cache" / "osmosis"


def migrate_legacy_reports(root: Path) -> None:
    """Move reports from the folder older releases used, ``eval_result``, to ``rubric`` once."""
    old, new = root / "eval_result", root / "rubric"
    if not old.exists():
        return
    if new.exists():
        logger.warning("Both %s and %s exist; leaving the old report folder in place", old, new)
        return
    try:
        old.rename(new)
    except OSError as exc:
        logger.warning("Could not move old reports from %s to %s: %s", old, new, exc)


def _existing_file(path: Path, what: str) -> Path:
    path = path.expanduser()
    if not path.exists():
        raise CLIError(f"{what} {path} does not exist")
    if path.is_dir():
        raise CLIError(f"{what} {path} is a directory; expected a file")
    return path


def locate_config(explicit: Path | None, data_path: Path) -> Path:
    """The explicit config, else the first ``rubric_configs.yaml`` next to the data, in the cwd, or in ``examples/``."""
    if explicit is not None:
        return _existing_file(explicit, "Rubric config")
    candidates = list(
        dict.fromkeys(
            [
                (data_path.parent / CONFIG_FILENAME).resolve(),
                (Path.cwd() / CONFIG_FILENAME).resolve(),
                (Path.cwd() / "examples" / CONFIG_FILENAME).resolve(),
            ]
        )
    )
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    checked = ", ".join(str(path) for path in candidates)
    raise CLIError(f"No rubric config found; checked {checked}. Pass one with --config.")


def _sanitised(rubric_id: str) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9_-]", "_", rubric_id).strip("_")
    return (cleaned or "rubric").lower()


def resolve_output(output: Path | None, rubric_id: str, now: float) -> tuple[Path, str | None]:
    """The report file and the output identifier (the Unix time) when the name was generated."""
    identifier = str(int(now))
    if output is None:
        return cache_root() / "rubric" / _sanitised(
            rubric_id
        ) / f"rubric_eval_result_{identifier}.json", identifier
    output = output.expanduser()
    if output.suffix:
        if output.is_dir():
            raise CLIError(
                f"Output path {output} is a directory; give a file name or a directory without a suffix"
            )
        return output, None
    if output.exists() and not output.is_dir():
        raise CLIError(f"Output path {output} exists and is not a directory")
    return output / f"rubric_eval_result_{identifier}.json", identifier


def lookup_rubric(config_path: Path, rubric_id: str) -> RubricConfig:
    """The rubric ``rubric_id`` of the config at ``config_path``; one line naming the ids it has if none."""
    suite = load_rubric_suite(config_path, strict=True)
    config = suite.get(rubric_id)
    if config is None:
        available = ", ".join(suite.available_ids()) or "none"
        raise CLIError(f"Rubric '{rubric_id}' is not defined in {config_path}. Available ids: {available}")
    return config


def judging_rubric(config_path: Path, rubric_id: str) -> RubricConfig:
    """:func:`lookup_rubric` for a command that judges with the rubric as configured, its judge's key
    checked before any row is read (``MissingAPIKeyError`` naming the variable to set)."""
    config = lookup_rubric(config_path, rubric_id)
    ensure_api_key_available(config.model_info)
    return config


def rubric_scoring(
    rubric_id: str, config: Path | None, near: Path, *, cache: bool
) -> tuple[Scoring, str, str | None]:
    """The scoring by the judge of ``rubric_id`` as configured (in ``config``, else found near
    ``near``), its key checked: the plan's scoring, the grader as a journal names it, and the judge's server."""
    from osmosis_ai.judge.keys import configured_api_base
    from osmosis_ai.runs.journal import file_digest
    from osmosis_ai.runs.judging import JUDGE, RubricJudge
    from osmosis_ai.runs.plan import Scoring

    config_path = locate_config(config, near)
    rubric = judging_rubric(config_path, rubric_id)
    judge = RubricJudge(rubric, f"{rubric_id}@{file_digest(config_path)}", cache=cache)
    grader = f"--rubric {rubric_id} -c {config_path}"
    return Scoring(judge=judge, reward=JUDGE), grader, configured_api_base(rubric.model_info)


def plan_of(options: EvalRubricOptions, config: RubricConfig, config_path: Path, data_path: Path) -> RunPlan:
    """The run: the dataset's records of the rubric, each judged ``number`` times by its judge."""
    from osmosis_ai.cli.eval_rubric.dataset import rubric_format
    from osmosis_ai.runs.executors.stored import RubricDataset, StoredAnswers
    from osmosis_ai.runs.journal import file_digest
    from osmosis_ai.runs.judging import JUDGE, RubricJudge
    from osmosis_ai.runs.plan import JournalSpec, Rows, RunPlan, Scoring

    rubric_id = config.rubric_id
    judge = RubricJudge(config, f"{rubric_id}@{file_digest(config_path)}", cache=options.cache,
                        requests_per_minute=options.requests_per_minute, details=True)  # fmt: skip
    source = RubricDataset(str(data_path), rubric_id, rubric_format(data_path))
    executor = StoredAnswers(source, "eval-rubric", f"-r {rubric_id} -c {config_path}")
    journal = None
    if options.journal is not None:
        journal = JournalSpec(str(options.journal), fresh=options.fresh, retry_failed=options.retry_failed)
    return RunPlan(Rows(str(data_path)), executor, Scoring(judge=judge, reward=JUDGE), n=options.number,
                   concurrency=options.concurrency, journal=journal, backend=options.backend,
                   ray_address=options.ray_address)  # fmt: skip


async def run_eval_rubric(
    options: EvalRubricOptions,
    emit: Callable[[str], Any] = print,
    on_report: Callable[[Path, dict[str, Any]], Any] | None = None,
) -> Path:
    """Run ``eval-rubric`` end to end; ``emit`` receives each output line, ``on_report`` the JSON
    report once written (before the closing outcome line). Returns the report path."""
    from osmosis_ai.cli.journals import journal_refusals
    from osmosis_ai.cli.progress import RunProgress
    from osmosis_ai.runs.journal import PRIMARY
    from osmosis_ai.runs.result import Result
    from osmosis_ai.runs.run import journal_file, run

    migrate_legacy_reports(cache_root())
    rubric_id = options.rubric_id.strip()
    if not rubric_id:
        raise CLIError("The rubric id (-r/--rubric) must not be empty")
    if options.number < 1:
        raise CLIError(f"-n/--number must be at least 1, got {options.number}")
    if options.concurrency < 1:
        raise CLIError(f"--concurrency must be at least 1, got {options.concurrency}")
    if not 0.0 <= options.max_failure_rate <= 1.0:
        raise CLIError(f"--max-failure-rate must be between 0 and 1, got {options.max_failure_rate}")
    if options.requests_per_minute is not None and not options.requests_per_minute > 0:
        raise CLIError(f"--requests-per-minute must be positive, got {options.requests_per_minute}")
    data_path = _existing_file(options.data_path, "Dataset")
    config_path = locate_config(options.config_path, data_path)
    config = with_overrides(lookup_rubric(config_path, rubric_id), options)
    ensure_api_key_available(config.model_info)
    records = load_records(data_path, rubric_id)
    baseline = load_baseline(options.baseline_path.expanduser()) if options.baseline_path else None
    report_path, identifier = resolve_output(options.output_path, rubric_id, time.time())
    check_report_location(report_path)

    import_litellm()  # seconds of import, paid before the clock of the first run starts
    plan = plan_of(options, config, config_path, data_path)
    judged: dict[tuple[int, int], dict[str, Any]] = {}
    progress = RunProgress(quiet=options.quiet, unit="judgment", label=f"Rubric '{config.rubric_id}'",
                           retry_failed=options.retry_failed, opening=lambda _: None, scoring=False,
                           bar=options.progress)  # fmt: skip

    def on_event(event: Any) -> None:
        if isinstance(event, Result):
            judged[event.item.key] = event.record()
        progress.on_event(event)

    refusals = journal_refusals(journal_file(plan)) if plan.journal else contextlib.nullcontext()
    with progress, refusals:
        end = await run(plan, on_event, labels={"model": "eval-rubric", "dataset": str(data_path),
                                                "module": f"-r {config.rubric_id}"})  # fmt: skip
    judged.update({r.key: r.data for r in end.records.get(PRIMARY, [])})
    results = results_of(records, judged, options.number)

    threshold = options.pass_threshold
    if threshold is None:  # a judgment passes at the rubric's full marks
        threshold = config.score_max if config.score_max is not None else 1.0
    context = ReportContext(config, config_path, data_path, options.number, identifier, baseline, threshold)
    for line in [] if options.quiet else render_text_report(results, context):
        emit(line)
    document = build_json_report(results, context)
    try:
        write_json_atomic(report_path, document)
    except OutputPathError as exc:
        raise CLIError(f"Cannot write report {report_path}: {exc.reason}") from exc
    if not options.quiet:
        emit(f"Wrote evaluation results to {report_path}")
    if on_report is not None:
        on_report(report_path, document)
    counts = outcome_counts(results)
    cached = sum(run.cached for result in results for run in result.runs)
    emit(counts.describe("judgment") + (f"; {cached} served from the judgment cache" if cached else ""))
    if end.stop is not None:
        raise CLIError(f"the run stopped: {end.stop}")
    reason = verdict(
        counts, max_failure_rate=options.max_failure_rate, unit="judgment", limit_name="--max-failure-rate"
    )
    if reason is not None:
        raise CLIError(reason)
    return report_path
