"""Reading results files: which command wrote a file, and its rows in the shape of :mod:`.model`.

The format is told by content, not by the file name:

* JSON lines whose objects carry ``rollout_id`` or ``status`` with ``row_index`` — ``osmosis rollout run -o``;
* a JSON object with ``summary`` and ``results`` — ``osmosis test -o``;
* a JSON object with ``config`` and ``rows`` — ``osmosis eval -o`` (0.2's layout);
* a JSON object with ``records`` and ``overall_statistics`` — ``osmosis eval-rubric -o``;
* such JSON lines that also carry a ``regrade`` object — ``osmosis regrade -o``: read as the rollout
  records they are, with the earlier grading of the same answers as the run's ``previous``;
* JSON lines whose objects carry ``run_index`` and ``messages`` — the samples file of ``osmosis eval
  --log-samples``: final messages only, no outcome (``unknown``) and no score;
* JSON lines whose objects all carry ``row_index``, ``score``, ``outcome`` and ``error`` —
  ``osmosis reward score -o`` (told apart from a rollout run's records, which have no ``score``);
* an ATIF trajectory (``schema_version`` ``ATIF-...``), such as ``--trajectories DIR`` writes one per
  rollout, or a directory of them (:mod:`.atif`): a run of those rollouts;
* an SQLite file that is a run's journal, such as the one a run without ``-o`` leaves, through the
  ``journals`` reader the caller hands in (:mod:`osmosis_ai.runs.journal_report`).

Only the fields listed in docs/design/report.md ("The HTML report") are read. Others are ignored and
optional ones may be missing, so the writers can grow fields without breaking the report. Rows are
returned in dataset order (row, sample), whatever order they were written in.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from osmosis_ai.report.atif import is_trajectory, record_of
from osmosis_ai.report.errors import ReportInputError
from osmosis_ai.report.model import BaselineFigure, Message, PairedFigure, Row, Run, Trajectory
from osmosis_ai.statistics import WinLossTie

PREVIEW_KEYS = ("rollout_id", "status", "row_index")
SAMPLE_KEYS = frozenset({"row_index", "run_index", "messages"})
REWARD_SCORE_KEYS = ("row_index", "score", "outcome", "error")
KNOWN = (
    "the output of 'osmosis rollout run -o', 'osmosis test -o', 'osmosis eval -o' (or its --log-samples "
    "file), 'osmosis eval-rubric -o' or 'osmosis reward score -o', an ATIF trajectory (or a directory "
    "of them), or a run's journal"
)
SQLITE_HEADER = b"SQLite format 3\x00"


def read_results(path: str | Path, *, journals: Callable[[Path], Run] | None = None) -> Run:
    """Read the results file at ``path``; :class:`ReportInputError` says why one cannot be read.

    A run's journal (an SQLite file) is read by ``journals`` (the run engine's
    :func:`osmosis_ai.runs.journal_report.read_journal`, which the caller hands in: the journal is
    the engine's format, and the engine sits above this package)."""
    path = Path(path)
    if path.is_dir():
        return _read_trajectory_directory(path)
    try:
        with path.open("rb") as handle:
            if handle.read(len(SQLITE_HEADER)) == SQLITE_HEADER:
                if journals is None:
                    raise ReportInputError(
                        f"{path}: a run's journal, which this reader does not read; expected {KNOWN}"
                    )
                return journals(path)
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ReportInputError(f"{path}: no such file") from None
    except UnicodeDecodeError:
        raise ReportInputError(f"{path}: not a text file; expected {KNOWN}") from None
    except OSError as exc:
        raise ReportInputError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    return parse_results(text, str(path))


def _finite(text: str) -> float | None:
    number = float(text)
    return number if number - number == 0.0 else None  # 1e999 reads as inf: no figure can use it


def _no_constant(text: str) -> None:
    return None  # NaN, Infinity, -Infinity (Python's JSON extensions): not numbers a figure can use


def _loads(text: str, where: str) -> Any:
    """JSON with every non-finite number read as null; too deep a nesting is a ReportInputError."""
    try:
        return json.loads(text, parse_float=_finite, parse_constant=_no_constant)
    except RecursionError:
        raise ReportInputError(f"{where}: arrays/objects nest too deeply to read; expected {KNOWN}") from None


def parse_results(text: str, source: str) -> Run:
    """Parse the content of a results file named ``source`` (used in messages and on the page)."""
    if not text.strip():
        raise ReportInputError(f"{source}: the file is empty; expected {KNOWN}")
    try:
        document = _loads(text, source)
    except json.JSONDecodeError:
        return read_document(_json_lines(text, source), source)
    return read_document(document, source)


def read_document(document: Any, source: str) -> Run:
    """A results document already parsed: a JSON object, or the list of objects of a JSON lines file."""
    if is_trajectory(document) or (
        isinstance(document, list) and document and all(is_trajectory(item) for item in document)
    ):
        return _read_trajectories(document if isinstance(document, list) else [document], source)
    if isinstance(document, dict):
        for keys, reader in _DOCUMENT_READERS:
            if all(key in document for key in keys):
                return reader(document, source)
        if _is_reward_score(document):
            return _read_reward_scores([document], source)
        if any(key in document for key in PREVIEW_KEYS):
            return _read_rollouts([document], source)
        found = ", ".join(sorted(document)[:8]) or "none"
        raise ReportInputError(f"{source}: a JSON object with keys {found} is not {KNOWN}")
    if isinstance(document, list):
        if document and all(isinstance(item, dict) and item.keys() >= SAMPLE_KEYS for item in document):
            return _read_samples(document, source)
        if document and all(_is_reward_score(item) for item in document):
            return _read_reward_scores(document, source)
        for number, item in enumerate(document, 1):
            if not isinstance(item, dict) or not any(key in item for key in PREVIEW_KEYS):
                raise ReportInputError(
                    f"{source} line {number}: not a rollout record (a JSON object with rollout_id, "
                    f"row_index and status); expected {KNOWN}"
                )
        return _read_rollouts(document, source)
    raise ReportInputError(f"{source}: a JSON {type(document).__name__} is not {KNOWN}")


def _json_lines(text: str, source: str) -> list[Any]:
    records = []
    # Only "\n" ends a JSON line: str.splitlines() would also cut at U+2028, U+2029, U+0085 and the
    # other separators that JSON strings may hold unescaped (the writers keep non-ASCII text as is).
    for number, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            records.append(_loads(line, f"{source} line {number}"))
        except json.JSONDecodeError as exc:
            raise ReportInputError(
                f"{source} line {number}: not JSON ({exc.msg} at column {exc.colno}); expected {KNOWN}"
            ) from None
    return records


# -- small tolerant accessors ---------------------------------------------------------------------


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _whole(value: Any) -> int | None:
    number = _number(value)
    return int(number) if number is not None else None


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _messages(value: Any) -> list[Message]:
    return [m if isinstance(m, dict) else {"role": "unknown", "content": m} for m in _list(value)]


def _runs_of(mask: Iterable[Any]) -> list[list[int]]:
    """Run-length encoding of a 0/1 mask: ``[[flag, length], ...]``."""
    runs: list[list[int]] = []
    for value in mask:
        flag = 1 if value else 0
        if runs and runs[-1][0] == flag:
            runs[-1][1] += 1
        else:
            runs.append([flag, 1])
    return runs


def _ordered(rows: list[Row]) -> list[Row]:
    return sorted(rows, key=lambda r: r.key)


# -- osmosis rollout run --------------------------------------------------------------------------

_STATUS_OUTCOMES = {"COMPLETED": "completed", "ERROR": "agent_error", "TIMEOUT": "timeout"}


def _read_rollouts(records: list[dict[str, Any]], source: str) -> Run:
    rows = [_rollout_row(record) for record in records]
    if records and all(isinstance(record.get("regrade"), dict) for record in records):
        return _read_regrade(records, rows, source)
    return Run(source=source, kind="rollout run", rows=_ordered(rows), model=_text(_first(records, "model")))


def _read_regrade(records: list[dict[str, Any]], rows: list[Row], source: str) -> Run:
    """``osmosis regrade -o``: the new grading, its earlier one as ``previous``, and with ``-r`` the
    variance of the new grader's repeated scores as a note."""
    from osmosis_ai.report.regrade import Pair, variance

    provenance = [record["regrade"] for record in records]
    earlier = []
    for row, regrade in zip(rows, provenance, strict=True):
        earlier.append(Row(row=row.row, sample=row.sample, label=row.label, score=_number(regrade.get("previous_reward")),
                           outcome=str(regrade.get("previous_outcome") or "unknown")))  # fmt: skip
    sources = sorted({str(p.get("source")) for p in provenance})
    graders = sorted({str(p.get("grader")) for p in provenance})
    run = Run(source=source, kind="regrade", rows=_ordered(rows))
    run.previous = Run(source=", ".join(sources), kind="earlier grading", rows=_ordered(earlier))
    run.notes.append(f"regraded with {', '.join(graders)} from {', '.join(sources)}")
    pairs = [
        Pair(row.row, row.sample, None, row.scored_value, tuple(v for v in _list(p.get("repeats")) if _number(v) is not None))
        for row, p in zip(rows, provenance, strict=True)
    ]  # fmt: skip
    spread = variance(pairs)
    if spread is not None:
        mean, flips = spread["mean_std"], spread["flips"]
        run.notes.append(
            f"scored {spread['repeats']} times: mean within-answer standard deviation {mean['value']:.3f} "
            f"[{mean['low']:.3f}, {mean['high']:.3f}], largest {spread['max_std']:.3f}; pass/fail flips on "
            f"{flips['count']} of {spread['answers']} answers ({flips['share']['value']:.1%})"
        )
    return run


def _first(records: list[dict[str, Any]], key: str) -> Any:
    return next((r[key] for r in records if r.get(key) is not None), None)


def _rollout_row(record: dict[str, Any]) -> Row:
    turns = [t for t in _list(record.get("turns")) if isinstance(t, dict)]
    metrics = _mapping(record.get("metrics"))
    status = str(record.get("status") or "")
    outcome = record.get("outcome") or _STATUS_OUTCOMES.get(status, "infra_error")
    prompt: int | None
    completion: int | None
    if turns and any("usage" in t for t in turns):
        prompt = sum(_whole(_mapping(t.get("usage")).get("prompt_tokens")) or 0 for t in turns)
        completion = sum(_whole(_mapping(t.get("usage")).get("completion_tokens")) or 0 for t in turns)
    else:
        prompt = _whole(metrics.get("prompt_tokens"))
        completion = _whole(metrics.get("response_tokens", metrics.get("completion_tokens")))
    row = _whole(record.get("row_index")) or 0
    sample = _whole(record.get("sample_index")) or 0
    return Row(
        row=row,
        sample=sample,
        outcome=str(outcome),
        label=str(record.get("rollout_id") or f"row {row} sample {sample}"),
        score=_number(record.get("reward")),
        finish_reason=_text(record.get("finish_reason")),
        error=_text(record.get("error_message") or record.get("reward_error")),
        latency_ms=_number(record.get("latency_ms")),
        prompt_tokens=prompt,
        completion_tokens=completion,
        trajectory=_rollout_trajectory(record, turns),
    )


def _rollout_trajectory(record: dict[str, Any], turns: list[dict[str, Any]]) -> Trajectory:
    trajectory = Trajectory(messages=_messages(record.get("final_messages")))
    for turn in turns:
        position = _whole(turn.get("num_request_messages"))
        if position is None:
            continue
        usage = _mapping(turn.get("usage"))
        trajectory.turns[position] = {
            "turn": turn.get("index"),
            "latency_ms": _number(turn.get("latency_ms")),
            "prompt_tokens": len(_list(turn.get("prompt_token_ids"))) or _whole(usage.get("prompt_tokens")),
            "generated_tokens": len(_list(turn.get("token_ids"))) or _whole(usage.get("completion_tokens")),
            "finish_reason": turn.get("finish_reason"),
        }
    trajectory.violations = [v for v in _list(record.get("append_only_violations")) if isinstance(v, dict)]
    drift = record.get("drift_events", record.get("template_drift"))
    trajectory.drift = [d for d in _list(drift) if isinstance(d, dict)]
    trajectory.token_runs = _token_runs(record, turns)
    for key in ("rejected_calls", "gateway_errors"):
        if _list(record.get(key)):
            trajectory.extra[key] = record[key]
    if record.get("reward_error"):
        trajectory.extra["reward_error"] = record["reward_error"]
    _keep_input(trajectory, record.get("input_record"))
    return trajectory


def _keep_input(trajectory: Trajectory, record: Any) -> None:
    """The dataset row a run was given, when its record keeps it (what a regrade scores it against)."""
    if isinstance(record, dict):
        trajectory.extra["input_record"] = dict(record)


def _token_runs(record: dict[str, Any], turns: list[dict[str, Any]]) -> list[list[int]]:
    """Which tokens of the final sequence the model generated: from a loss mask when the record has
    one, else from the turns (turn k generated the ids right after its prompt ids)."""
    nested = _mapping(record.get("trajectory"))
    mask = _list(record.get("loss_mask")) or _list(nested.get("loss_mask"))
    if mask:
        return _runs_of(mask)
    with_ids = [t for t in turns if _list(t.get("token_ids")) or _list(t.get("prompt_token_ids"))]
    if not with_ids:
        return []
    last = with_ids[-1]
    total = len(_list(last.get("prompt_token_ids"))) + len(_list(last.get("token_ids")))
    mask_bits = [0] * total
    for turn in with_ids:
        start = len(_list(turn.get("prompt_token_ids")))
        for position in range(start, min(total, start + len(_list(turn.get("token_ids"))))):
            mask_bits[position] = 1
    return _runs_of(mask_bits)


# -- ATIF trajectories ---------------------------------------------------------------------------


def _read_trajectory_directory(path: Path) -> Run:
    """Every ATIF document among the ``.json`` files of a directory (not its subdirectories); other
    JSON files are left out, and said so in a note."""
    documents: list[dict[str, Any]] = []
    others: list[str] = []
    try:
        names = sorted(entry for entry in path.iterdir() if entry.suffix == ".json" and entry.is_file())
    except OSError as exc:
        raise ReportInputError(f"{path}: the directory cannot be read ({exc.strerror or exc})") from None
    for name in names:
        try:
            document = _loads(name.read_text(encoding="utf-8"), str(name))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            document = None
        if is_trajectory(document):
            documents.append(document)
        else:
            others.append(name.name)
    if not documents:
        raise ReportInputError(
            f"{path}: a directory with no ATIF trajectory (*.json) in it; give a results file or a directory "
            "of trajectories (osmosis rollout run/test/eval --trajectories DIR)"
        )
    run = _read_trajectories(documents, str(path))
    if others:
        run.notes.append(
            f"not ATIF trajectories, left out: {', '.join(others[:5])}" + (" ..." if len(others) > 5 else "")
        )
    return run


def _read_trajectories(documents: list[dict[str, Any]], source: str) -> Run:
    """ATIF documents as the rollouts they record; an eval baseline's runs are left out (their keys
    are the primary model's), as ``eval -o``'s reader leaves them out."""
    records = [record_of(document) for document in documents]
    primary = [r for r in records if r.get("model_tag") in (None, "primary")]
    commands = {str(r["command"]) for r in primary if r.get("command")}
    rows = [_rollout_row(r) for r in primary]
    # An eval's figure is its first eval function's score, as in its -o file.
    named = next((list(_mapping(r.get("scores"))) for r in primary if _mapping(r.get("scores"))), [])
    for row, record in zip(rows, primary, strict=True):
        row.scores = {
            k: float(v) for k, v in _mapping(record.get("scores")).items() if _number(v) is not None
        }
        if named:
            row.score = row.scores.get(named[0])
    run = Run(source=source, kind=commands.pop() if len(commands) == 1 else "trajectories", rows=_ordered(rows),
              model=_text(_first(primary, "model")), score_name=named[0] if named else "reward")  # fmt: skip
    if len(primary) < len(records):
        run.notes.append(f"{len(records) - len(primary)} baseline trajectories left out")
    return run


# -- osmosis reward score ------------------------------------------------------------------------


def _is_reward_score(item: Any) -> bool:
    return isinstance(item, dict) and all(key in item for key in REWARD_SCORE_KEYS)


def _read_reward_scores(lines: list[dict[str, Any]], source: str) -> Run:
    """One row per scored answer; the viewer shows the answer (``solution_str``, when the dataset
    used that name) and the row's own fields."""
    rows = []
    for line in lines:
        index = _whole(line.get("row_index")) or 0
        fields = {key: value for key, value in line.items() if key not in REWARD_SCORE_KEYS}
        answer = fields.get("solution_str")
        messages = [{"role": "assistant", "content": answer}] if isinstance(answer, str) else []
        rows.append(
            Row(
                row=index,
                sample=0,
                outcome=str(line.get("outcome") or "infra_error"),
                label=f"row {index}",
                score=_number(line.get("score")),
                error=_text(line.get("error")),
                trajectory=Trajectory(messages=messages, extra={"fields": fields}),
            )
        )
    return Run(source=source, kind="reward score", rows=_ordered(rows), score_name="score")


# -- osmosis test ---------------------------------------------------------------------------------


def _read_test(document: dict[str, Any], source: str) -> Run:
    rows = []
    for result in _list(document.get("results")):
        if not isinstance(result, dict):
            continue
        row = _row_from_local(result, sample=0)
        row.label = f"row {row.row}"
        rows.append(row)
    run = Run(source=source, kind="test", rows=_ordered(rows), model=_text(document.get("model")),
              identity=_identity(document))  # fmt: skip
    summary = _mapping(document.get("summary"))
    if summary.get("stopped_early"):
        run.notes.append(f"stopped early: {summary.get('stop_reason')}")
    return run


def _identity(document: Mapping[str, Any]) -> dict[str, Any]:
    """The dataset and agent a ``test``/``eval`` file's ``run`` member names (older files have none)."""
    run = _mapping(document.get("run"))
    return {key: run[key] for key in ("dataset", "agent") if isinstance(run.get(key), str)}


def _row_from_local(result: Mapping[str, Any], *, sample: int) -> Row:
    """A row of ``test`` or a run of ``eval``: both come from the in-process runner."""
    usage = _mapping(result.get("token_usage"))
    success = result.get("success")
    outcome = result.get("outcome") or ("completed" if success else "agent_error")
    messages = result.get("final_messages", result.get("messages"))
    trajectory = Trajectory(messages=_messages(messages))
    for key in ("append_only_violations", "violations"):
        trajectory.violations += [v for v in _list(result.get(key)) if isinstance(v, dict)]
    _keep_input(trajectory, result.get("input_record"))
    return Row(
        row=_whole(result.get("row_index")) or 0,
        sample=sample,
        outcome=str(outcome),
        score=_number(result.get("reward")),
        finish_reason=_text(result.get("finish_reason")),
        error=_text(result.get("error")),
        latency_ms=_number(result.get("duration_ms")),
        prompt_tokens=_whole(usage.get("prompt_tokens")),
        completion_tokens=_whole(usage.get("completion_tokens")),
        trajectory=trajectory,
    )


# -- osmosis eval ---------------------------------------------------------------------------------


def _read_eval(document: dict[str, Any], source: str) -> Run:
    """``osmosis eval -o``: 0.2's ``config``/``summary``/``rows`` layout. The primary model's runs are
    the rows; a baseline model's runs are summarised as baseline figures beside the primary's."""
    config = _mapping(document.get("config"))
    functions = [str(name) for name in _list(config.get("eval_fns"))]
    primary = functions[0] if functions else None
    rows = []
    for row in _list(document.get("rows")):
        if not isinstance(row, dict):
            continue
        for item in _list(row.get("runs")):
            if not isinstance(item, dict) or item.get("model_tag") == "baseline":
                continue
            entry = _eval_run(item, row_index=_whole(row.get("row_index")) or 0, primary=primary)
            _keep_input(entry.trajectory, row.get("input_record"))
            rows.append(entry)
    threshold = _number(config.get("pass_threshold"))
    run = Run(
        source=source,
        kind="eval",
        rows=_ordered(rows),
        score_name=primary or "reward",
        pass_threshold=1.0 if threshold is None else threshold,
        model=_text(config.get("model")),
        identity={
            **_identity(document),
            "eval functions": functions,
            "--n": config.get("n_runs"),
            "baseline model": config.get("baseline_model"),
        },
    )
    baseline = _mapping(_mapping(document.get("baseline_summary")).get("eval_fns"))
    candidate = _mapping(_mapping(document.get("summary")).get("eval_fns"))
    for name in functions:
        figure = _number(_mapping(baseline.get(name)).get("mean"))
        if figure is not None:
            run.baseline.append(
                BaselineFigure(f"{name} mean", figure, _number(_mapping(candidate.get(name)).get("mean")))
            )
    run.paired = _paired(document.get("comparison"))
    if run.baseline or run.paired:
        run.baseline_source = _text(config.get("baseline_model"))
    _join_samples(run, document, source)
    return run


def _paired(comparison: Any) -> list[PairedFigure]:
    """The ``comparison`` member of an ``eval --baseline-model`` file, per eval function."""
    figures = []
    for name, entry in _mapping(comparison).items():
        entry = _mapping(entry)
        difference = _number(entry.get("difference"))
        if difference is None:
            continue
        low, high = ([_number(v) for v in _list(entry.get("interval"))] + [None, None])[:2]
        wins, losses, ties = (_whole(entry.get(key)) for key in ("wins", "losses", "ties"))
        figures.append(
            PairedFigure(
                name=str(name),
                difference=difference,
                interval=(low, high) if low is not None and high is not None else None,
                rows=_whole(entry.get("rows")) or 0,
                record=None
                if wins is None or losses is None or ties is None
                else WinLossTie(wins, losses, ties),
            )
        )
    return figures


def _samples_file(document: Mapping[str, Any], source: str) -> Path | None:
    """The ``--log-samples`` file of an eval results file: the one its ``run`` member names, else
    ``samples_<stamp>_<task>.jsonl`` beside an ``--output-path`` file ``results_<stamp>_<task>.json``."""
    named = _text(_mapping(document.get("run")).get("samples"))
    if named:
        return Path(named)
    path = Path(source)
    if path.name.startswith("results_") and path.suffix == ".json":
        return path.with_name("samples_" + path.name[len("results_") :]).with_suffix(".jsonl")
    return None


def _join_samples(run: Run, document: Mapping[str, Any], source: str) -> None:
    """Each primary run's final messages from the samples file, when there is one to read."""
    path = _samples_file(document, source)
    if path is None or not path.is_file():
        return
    messages: dict[tuple[int, int], list[Message]] = {}
    try:
        with path.open(encoding="utf-8") as handle:
            for line in handle:
                try:
                    sample = _loads(line, str(path)) if line.strip() else None
                except json.JSONDecodeError:  # a line cut short by a crash: that run has no trajectory
                    continue
                if isinstance(sample, dict) and sample.get("model_tag", "primary") == "primary":
                    key = (_whole(sample.get("row_index")) or 0, _whole(sample.get("run_index")) or 0)
                    messages[key] = _messages(sample.get("messages"))
    except (OSError, UnicodeDecodeError) as exc:
        run.notes.append(f"trajectories not shown: {path} cannot be read ({exc})")
        return
    for row in run.rows:
        if row.key in messages:
            row.trajectory.messages = messages[row.key]


def _eval_run(item: Mapping[str, Any], *, row_index: int, primary: str | None) -> Row:
    sample = _whole(item.get("run_index")) or 0
    scores = {k: float(v) for k, v in _mapping(item.get("scores")).items() if _number(v) is not None}
    errors = _mapping(item.get("eval_errors"))
    error = _text(item.get("error")) or (
        "; ".join(f"{name}: {message}" for name, message in errors.items()) if errors else None
    )
    success = item.get("success")
    usage = _mapping(item.get("token_usage"))
    return Row(
        row=row_index,
        sample=sample,
        label=f"row {row_index} run {sample}",
        outcome=str(item.get("outcome") or ("completed" if success else "agent_error")),
        score=scores.get(primary) if primary else None,
        scores=scores,
        error=error,
        latency_ms=_number(item.get("duration_ms")),
        prompt_tokens=_whole(usage.get("prompt_tokens")),
        completion_tokens=_whole(usage.get("completion_tokens")),
    )


def _read_samples(lines: list[dict[str, Any]], source: str) -> Run:
    """``osmosis eval --log-samples``: the primary model's final messages; a key written twice (a
    sample run again after a crash) is the last line's."""
    rows: dict[tuple[int, int], Row] = {}
    for line in lines:
        if line.get("model_tag") == "baseline":
            continue
        row, sample = _whole(line.get("row_index")) or 0, _whole(line.get("run_index")) or 0
        rows[(row, sample)] = Row(
            row=row,
            sample=sample,
            outcome="unknown",
            label=f"row {row} run {sample}",
            trajectory=Trajectory(messages=_messages(line.get("messages"))),
        )
    return Run(source=source, kind="eval samples", rows=_ordered(list(rows.values())))


# -- osmosis eval-rubric --------------------------------------------------------------------------


def _read_rubric(document: dict[str, Any], source: str) -> Run:
    rows = []
    for position, record in enumerate(_list(document.get("records"))):
        if not isinstance(record, dict):
            continue
        index = _whole(record.get("record_index"))
        index = position if index is None else index
        label = str(record.get("conversation_id") or record.get("id") or f"record {index}")
        for run in _list(record.get("runs")):
            if isinstance(run, dict):
                rows.append(_judgment_row(record, run, index, label))
    provider, model = document.get("provider"), document.get("model")
    run = Run(
        source=source,
        kind="eval-rubric",
        rows=_ordered(rows),
        score_name=f"score ({document.get('rubric_id')})" if document.get("rubric_id") else "score",
        model=f"{provider}/{model}" if provider and model else _text(model),
        pass_threshold=_number(document.get("pass_threshold")) or 1.0,
    )
    comparison = _mapping(document.get("baseline_comparison"))
    if comparison:
        current = _mapping(document.get("overall_statistics"))
        for name, value in _mapping(comparison.get("baseline_statistics")).items():
            if _number(value) is not None:
                run.baseline.append(BaselineFigure(name, float(value), _number(current.get(name))))
        run.baseline_source = _text(comparison.get("source_path"))
    return run


def _judgment_row(record: Mapping[str, Any], run: Mapping[str, Any], index: int, label: str) -> Row:
    usage = _mapping(_mapping(run.get("raw")).get("usage"))
    payload = _mapping(record.get("input_record"))
    messages = _messages(payload.get("messages"))
    if not messages and payload.get("solution_str") is not None:
        messages = [{"role": "assistant", "content": str(payload["solution_str"])}]
    trajectory = Trajectory(messages=messages, extra={"input_record": dict(payload)})
    if run.get("explanation"):
        trajectory.extra["explanation"] = run["explanation"]
    sample = _whole(run.get("run_index")) or 0
    seconds = _number(run.get("duration_seconds"))
    outcome = run.get("outcome") or ("completed" if run.get("status") == "success" else "model_error")
    return Row(
        row=index,
        sample=sample,
        outcome=str(outcome),
        label=f"{label} run {sample}",
        score=_number(run.get("score")),
        error=_text(run.get("error")),
        latency_ms=None if seconds is None else seconds * 1000,
        prompt_tokens=_whole(usage.get("prompt_tokens")),
        completion_tokens=_whole(usage.get("completion_tokens")),
        trajectory=trajectory,
    )


_DOCUMENT_READERS: tuple[tuple[tuple[str, ...], Callable[[dict[str, Any], str], Run]], ...] = (
    (("records", "overall_statistics"), _read_rubric),
    (("config", "rows"), _read_eval),
    (("summary", "results"), _read_test),
)
