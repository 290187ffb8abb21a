"""A run's journal read as the results its command would have written, for ``osmosis report``.

An ``eval`` journal is read as the ``-o`` file the run would have written (the summary, the
comparison with a baseline, the samples file beside it); a ``rollout run``, ``reward score`` or
``regrade`` journal as those commands' records, which its samples hold. A journal records no pass
threshold: 1.0 unless the caller sets another. Handed to
:func:`osmosis_ai.report.readers.read_results` as its ``journals`` reader.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from osmosis_ai.report.errors import ReportInputError
from osmosis_ai.report.model import Run
from osmosis_ai.report.readers import KNOWN, read_document
from osmosis_ai.runs.journal import JournalContents

JOURNAL_KINDS = {"reward-score": "reward score", "regrade": "regrade"}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def read_journal(path: Path) -> Run:
    """The report's :class:`~osmosis_ai.report.model.Run` of a run's journal (see the module docstring)."""
    from osmosis_ai.runs.journal import Journal, JournalError

    try:
        contents = Journal.read(path)
    except JournalError as exc:
        raise ReportInputError(str(exc)) from None
    if contents is None:
        raise ReportInputError(f"{path}: an SQLite file that is not a run's journal; expected {KNOWN}")
    source = str(path)
    if not any(contents.records.values()):
        raise ReportInputError(f"{path}: the journal has no finished sample yet")
    if "eval_fns" in contents.description:
        run = read_document(_eval_document(contents), source)
    else:
        run = read_document(
            [record.data for records in contents.records.values() for record in records], source
        )
    labels = contents.labels
    if labels.get("command") == "rollout run":
        run.model = run.model or _text(labels.get("model"))
    elif str(labels.get("model")) in JOURNAL_KINDS:  # these commands label their journals in place of a model
        run.kind = JOURNAL_KINDS[str(labels.get("model"))]
    if contents.status != "completed":
        run.notes.append(f"read from the journal of a run that has not finished ({contents.status})")
    return run


def _eval_document(contents: JournalContents) -> dict[str, Any]:
    """The ``-o`` file an ``eval`` run would have written from these samples."""
    from osmosis_ai.runs.journal import BASELINE, PRIMARY
    from osmosis_ai.runs.journal_store import samples_path
    from osmosis_ai.runs.summary import compare, legacy_document, summarize

    # the description names each eval function with its source's digest: ``module:fn@digest``
    names = [str(name).rsplit("@", 1)[0] for name in _list(contents.description.get("eval_fns"))]
    labels = contents.labels
    primary, baseline = contents.records.get(PRIMARY, []), contents.records.get(BASELINE, [])
    config = {"model": labels.get("model"), "n_runs": contents.description.get("n"), "eval_fns": names}
    summary = summarize(primary, names, model=str(labels.get("model")))
    others: dict[str, Any] = {}
    if baseline:
        config["baseline_model"] = labels.get("baseline_model")
        others["baseline"] = summarize(
            baseline, names, model=str(labels.get("baseline_model")), model_tag=BASELINE
        )
        others["comparison"] = compare(primary, baseline, names)
    document = legacy_document(config, summary, primary + baseline, **others)
    samples = samples_path(contents.path)
    document["run"] = {"dataset": labels.get("dataset"), "agent": labels.get("module")}
    if samples.is_file():
        document["run"]["samples"] = str(samples)
    return document
