"""``osmosis eval-rubric``: score a dataset (JSONL, CSV or Parquet) with a rubric judge and report the statistics.

Exit status 1, with the reason on stderr, when the judgments do not pass the shared rule (see
:mod:`osmosis_ai.cli.eval_rubric.session`); the report is written either way. With ``--journal`` a
stopped run resumes where it stopped (``--fresh``, ``--retry-failed`` as for ``osmosis eval``).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from osmosis_ai.cli import output
from osmosis_ai.cli.arguments import (
    add_backend_arguments,
    add_journal_arguments,
    check_backend_arguments,
    finite_number,
    fraction,
)
from osmosis_ai.cli.errors import CLIError
from osmosis_ai.cli.eval_rubric.session import EvalRubricOptions, run_eval_rubric
from osmosis_ai.cli.output_file import declare_files
from osmosis_ai.cli.summary import Figures, Outputs, add_summary_arguments, finish_run, show_summary
from osmosis_ai.runs.judging import JUDGE_CONCURRENCY


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-r", "--rubric", required=True, help="rubric id declared in the config")
    parser.add_argument(
        "-d",
        "--data",
        "--dataset",
        dest="data",
        required=True,
        type=Path,
        help="dataset of records to score (.jsonl, .csv or .parquet)",
    )
    parser.add_argument("-n", "--number", "--n", dest="number", type=int, default=1,
                        help="evaluations per record (default: 1)")  # fmt: skip
    parser.add_argument(
        "-c",
        "--config",
        type=Path,
        help="rubric config YAML (default: rubric_configs.yaml next to the data, "
        "in the current directory, or in ./examples)",
    )
    parser.add_argument(
        "-o",
        "--output",
        type=Path,
        help="JSON report file, or directory for it (default: ~/.cache/osmosis/rubric/<id>/)",
    )
    parser.add_argument(
        "-b", "--baseline", type=Path, help="earlier JSON report (or statistics JSON) to compare with"
    )
    declare_files(parser, read=["data", "config", "baseline"], written=["output"])
    parser.add_argument(
        "--concurrency",
        type=int,
        default=JUDGE_CONCURRENCY,
        help=f"judge calls in flight at once (default: {JUDGE_CONCURRENCY})",
    )
    parser.add_argument(
        "--cache",
        action="store_true",
        help="reuse identical earlier judgments from the on-disk judgment cache",
    )
    parser.add_argument(
        "--requests-per-minute", type=float, help="space judge requests to stay under this rate"
    )
    parser.add_argument(
        "--max-failure-rate",
        type=fraction,
        default=0.0,
        metavar="FRACTION",
        help="share of judgments (0-1) that may fail without failing the command (default 0); "
        "judgments lost to the provider or the network always fail it",
    )
    parser.add_argument("--model", metavar="[PROVIDER/]MODEL",
                        help="judge with this model instead of the config's model_info (e.g. openai/gpt-5-mini)")  # fmt: skip
    parser.add_argument("--base-url", help="OpenAI-compatible base URL of the judge (the config's api_base)")
    parser.add_argument("--api-key", help="API key of the judge (default: the provider's key variable)")
    parser.add_argument("--pass-threshold", type=finite_number(), metavar="SCORE",
                        help="a judgment passes (pass@k) when its score is at least this "
                        "(default: the rubric's score_max, else 1.0)")  # fmt: skip
    parser.add_argument("-q", "--quiet", action="store_true", help="print only the outcome line")
    add_journal_arguments(parser, unit="judgment", failed="the judge failed",
                          default="none: the run is not resumable, only the report is written")  # fmt: skip
    add_backend_arguments(parser)
    add_summary_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from osmosis_ai.cli.running import run_command

    if (args.fresh or args.retry_failed) and not args.journal:
        raise CLIError("--fresh and --retry-failed go with --journal, the run they start over or resume")
    check_backend_arguments(args)
    if args.backend != "local" and args.requests_per_minute is not None:
        raise CLIError(
            f"--requests-per-minute paces one process's judge requests; drop it with --backend {args.backend}"
        )
    options = EvalRubricOptions(
        rubric_id=args.rubric,
        data_path=args.data,
        number=args.number,
        config_path=args.config,
        output_path=args.output,
        baseline_path=args.baseline,
        concurrency=args.concurrency,
        cache=args.cache,
        requests_per_minute=args.requests_per_minute,
        max_failure_rate=args.max_failure_rate,
        model=args.model,
        base_url=args.base_url,
        api_key=args.api_key,
        pass_threshold=args.pass_threshold,
        quiet=args.quiet or args.json,
        journal=Path(args.journal) if args.journal else None,
        fresh=args.fresh,
        retry_failed=args.retry_failed,
        backend=args.backend,
        ray_address=args.ray_address,
    )
    ended: list[tuple[Path, dict[str, Any], Figures | None]] = []
    outputs = Outputs.of(args)

    def written(path: Path, document: dict[str, Any]) -> None:
        # The table goes before the outcome line; --report/--json wait for the verdict's line too.
        ended.append((path, document, show_summary(outputs, document, str(path))))

    def cancelled() -> int:
        kept = "; the finished judgments are kept in the journal" if args.journal else ""
        output.console.print_error(f"Evaluation cancelled; no report was written{kept}.")
        return 1

    emit = (lambda line: None) if args.json else print  # --json: the summary object is all of stdout

    async def main() -> int:
        await run_eval_rubric(options, emit=emit, on_report=written)
        return 0

    try:
        return run_command(main, on_interrupt=cancelled)
    finally:
        for path, document, figures in ended:
            finish_run(outputs, document, str(path), figures)
