"""One run from its shards: the ``--offset``/``--limit`` slices of one ``eval`` or ``test`` run.

Shards must be of one run — the same command, model, score, pass threshold and, where the files
record them, the same dataset, agent, eval functions and ``--n`` — and must not share a row; either
is refused with one line naming both files. The merged run's rows are the shards' rows in dataset
order, so its summary is the one an unsharded run would have had. Baseline figures (means of each
shard's own baseline) cannot be combined and are left out, with a note. The paired comparison with
an ``eval --baseline-model`` baseline is combined: the shards' rows are disjoint, so the rows won,
lost and tied add up and the mean difference is the shards' weighted by their paired rows; only its
interval, which needs every row, is left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from osmosis_ai.report.errors import ReportInputError
from osmosis_ai.report.model import PairedFigure, Run
from osmosis_ai.statistics import WinLossTie


def _signature(run: Run) -> dict[str, Any]:
    return {"kind": run.kind, "model": run.model, "score": run.score_name,
            "pass threshold": run.pass_threshold, **run.identity}  # fmt: skip


def merge_shards(shards: Sequence[Run]) -> Run:
    """The shards as one run; :class:`ReportInputError` when they are not disjoint slices of one run."""
    if len(shards) < 2:
        raise ReportInputError("merging needs at least two shard files")
    first = shards[0]
    expected = _signature(first)
    owner: dict[int, str] = {row.row: first.source for row in first.rows}
    for shard in shards[1:]:
        found = _signature(shard)
        for key in sorted(set(expected) | set(found)):
            if expected.get(key) != found.get(key):
                raise ReportInputError(
                    f"{shard.source} is not a shard of the run in {first.source}: {key} "
                    f"{found.get(key)!r}, not {expected.get(key)!r}"
                )
        for row in sorted({row.row for row in shard.rows}):
            if row in owner:
                raise ReportInputError(
                    f"{shard.source} and {owner[row]} both have row {row}: shards must not overlap "
                    "(give each its own --offset/--limit)"
                )
            owner[row] = shard.source
    rows = sorted((row for shard in shards for row in shard.rows), key=lambda row: row.key)
    notes = [note for shard in shards for note in shard.notes]
    if any(shard.baseline for shard in shards):
        notes.append(
            "the shards' baseline figures are not merged: compare the baseline runs as their own report"
        )
    paired = _merged_paired(shards)
    return Run(
        source=" + ".join(shard.source for shard in shards),
        kind=first.kind,
        rows=rows,
        score_name=first.score_name,
        pass_threshold=first.pass_threshold,
        model=first.model,
        baseline_source=first.baseline_source if paired else None,
        paired=paired,
        notes=notes,
        identity=dict(first.identity),
    )


def _merged_paired(shards: Sequence[Run]) -> list[PairedFigure]:
    """Each eval function's paired figures over every shard (only those every shard has)."""
    merged = []
    for name in dict.fromkeys(f.name for f in shards[0].paired):
        figures = [f for shard in shards for f in shard.paired if f.name == name]
        rows = sum(f.rows for f in figures)
        if len(figures) != len(shards) or not rows:
            continue
        records = [f.record for f in figures if f.record is not None]
        record = sum(records, WinLossTie()) if len(records) == len(figures) else None
        difference = sum(f.difference * f.rows for f in figures) / rows
        merged.append(PairedFigure(name, difference, None, rows, record))
    return merged
