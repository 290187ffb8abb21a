"""What ``osmosis eval`` shows and writes once the samples are in: the summary of each model, the
paired comparison with a baseline, the one outcome line, the ``-o`` file and the ``--output-path``
files."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from osmosis_ai.cli.errors import CLIError
from osmosis_ai.cli.output import say
from osmosis_ai.cli.output_file import write_output
from osmosis_ai.cli.summary import pass_at_k_lines
from osmosis_ai.runs.journal_store import safe_path_part
from osmosis_ai.runs.summary import Comparison, ModelSummary


def print_summary(summary: ModelSummary, *, quiet: bool, title: str) -> None:
    """A model's figures: per eval function the mean with its interval, the spread and pass@k."""
    say(f"{title} ({summary.model}):", quiet=quiet)
    for name, fn in summary.eval_fns.items():
        if fn is None:
            say(f"  {name}: no completed runs to score", quiet=quiet)
            continue
        say(
            f"  {name}: mean {fn.mean.value:.3f} [{fn.mean.low:.3f}, {fn.mean.high:.3f}] over {fn.rows} rows"
            f" (std {fn.std:.3f}, min {fn.low:.3f}, max {fn.high:.3f})",
            quiet=quiet,
        )
        for k, text in pass_at_k_lines(fn.pass_at_k, fn.pass_at_k_gaps):
            say(f"    pass@{k}: {text}", quiet=quiet)
    say(f"  {summary.counts.describe('run')}", quiet=quiet)


def print_comparison(comparison: Comparison, *, quiet: bool) -> None:
    """Primary minus baseline, per eval function, over the rows both completed: the paired difference
    and the rows won, lost and tied."""
    say("Paired comparison (primary - baseline, same rows):", quiet=quiet)
    for name, e in comparison.differences.items():
        if e is None:
            say(f"  {name}: no row completed by both models", quiet=quiet)
        else:
            say(
                f"  {name}: {e.value:+.3f} [{e.low:+.3f}, {e.high:+.3f}] over {comparison.rows[name]} rows;"
                f" {comparison.records[name].describe()}",
                quiet=quiet,
            )


def outcome_line(primary: ModelSummary, baseline: ModelSummary | None, planned: int) -> str:
    """The line printed even with ``-q``: each model's outcome counts and what did not run."""
    line = primary.counts.describe("run")
    if baseline is not None:
        line += f"; baseline {baseline.counts.describe('run')}"
    done = primary.counts.total + (baseline.counts.total if baseline else 0)
    if done < planned:
        line += f"; {planned - done} of {planned} not run"
    return line


def run_member(args: Any) -> dict[str, Any]:
    """The ``run`` member of a ``test``/``eval`` ``-o`` file: the dataset and agent, and the rows
    selected, so ``osmosis report --merge`` can tell the shards of one run from other runs."""
    from osmosis_ai.cli.loading import agent_spec

    return {"dataset": str(Path(args.dataset).resolve()), "agent": agent_spec(args),
            "offset": args.offset, "limit": args.limit}  # fmt: skip


def write_json(path: Path, document: Any, *, flag: str) -> None:
    """``document`` as indented JSON at ``path``, by the output writer (parents created)."""
    write_output(path, json.dumps(document, indent=2, ensure_ascii=False) + "\n", flag=flag)


def check_output_path(directory: Path, journal_root: Path) -> Path:
    """``--output-path`` resolved; refused inside the journal root, where it would pass for journals."""
    resolved, root = directory.expanduser().resolve(), journal_root.resolve()
    if resolved == root or root in resolved.parents:
        raise CLIError(
            f"--output-path {directory} is inside the journal directory {root}; choose another directory"
        )
    if resolved.exists() and not resolved.is_dir():
        raise CLIError(f"--output-path {directory} is a file; give a directory")
    return resolved


def _folder(directory: Path, model: str, dataset: str) -> Path:
    return directory / safe_path_part(model) / safe_path_part(Path(dataset).stem)


def structured_results(directory: Path, *, model: str, dataset: str, task_id: str) -> list[Path]:
    """The results files :func:`write_structured` wrote for ``task_id`` (oldest first)."""
    return sorted(_folder(directory, model, dataset).glob(f"results_*_{task_id}.json"))


def write_structured(
    directory: Path,
    *,
    model: str,
    dataset: str,
    task_id: str,
    document: Mapping[str, Any],
    samples: list[dict[str, Any]] | None,
) -> list[Path]:
    """``<dir>/<model>/<dataset stem>/results_<unix>_<task id>.json`` and, with samples, the samples
    ``.jsonl`` beside it; returns the files written."""
    stamp = int(time.time())
    folder = _folder(directory, model, dataset)
    results = folder / f"results_{stamp}_{task_id}.json"
    write_json(results, document, flag="--output-path")
    if samples is None:
        return [results]
    lines = "".join(json.dumps(s, ensure_ascii=False, default=str) + "\n" for s in samples)
    return [results, write_output(folder / f"samples_{stamp}_{task_id}.jsonl", lines, flag="--output-path")]
