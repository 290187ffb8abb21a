"""The journal of ``osmosis rollout run``: the same crash-safe SQLite journal as ``osmosis eval``
(:mod:`osmosis_ai.evaluation.journal`), one per configuration under the same root, so an interrupted
run resumes and ``osmosis eval cache ls|rm`` lists and removes it.

Each finished rollout is committed with its outcome and its whole record (the ``--output`` line)
before it counts. A resumed run counts the journaled rollouts from their records, skips them in the
dataset stream, and writes their records back into ``--output`` in their place.

The fingerprint covers what decides a rollout's result: the agent's source (``-m``) or tools
(``--mcp``), the policy model and base URL (never its key), ``--n``, ``--max-turns``, the
completion parameters, the reward function's source, the tokenizer and chat template files and the
dataset's content. A ``--url`` server's code cannot be read, so only its URL is; a resumed run says so.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from osmosis_ai.cli.output import say

if TYPE_CHECKING:
    from osmosis_ai.evaluation.dataset import DatasetReader
    from osmosis_ai.evaluation.journal import Journal
    from osmosis_ai.traingate.report import RunTally

COMMAND = "rollout run"
TASK_PREFIX = "rollout-"  # how `osmosis eval cache ls` tells a rollout run's journal from an eval's


def agent_identity(args: argparse.Namespace, agent_loop: Any) -> str:
    """``--url`` as given (its code is out of reach), else the agent's name and a digest of its code."""
    from osmosis_ai.cli.loading import agent_digest, agent_spec, source_digest

    if args.url:
        return f"url:{args.url}"
    return f"{agent_spec(args)}@{agent_digest(args, agent_loop) or source_digest(agent_loop)}"


def _files_digest(files: list[Path]) -> str:
    digest = hashlib.sha256()
    for file in sorted(files):
        digest.update(file.name.encode() + b"\0" + file.read_bytes())
    return digest.hexdigest()


def tokenizer_identity(args: argparse.Namespace) -> dict[str, str | None]:
    """Digests of the files the tokenizer and chat template come from (a directory's JSON and
    template files; its weights are not read)."""
    from osmosis_ai.evaluation.journal import file_digest

    identity: dict[str, str | None] = {"tokenizer": args.tokenizer, "chat_template": None}
    if args.tokenizer and args.tokenizer != "bytes":
        path = Path(args.tokenizer)
        if path.is_dir():
            identity["tokenizer"] = _files_digest([*path.glob("*.json"), *path.glob("*.jinja")])
        else:
            beside = path.parent / "tokenizer_config.json"
            identity["tokenizer"] = _files_digest([path, *([beside] if beside.is_file() else [])])
    if args.chat_template:
        identity["chat_template"] = file_digest(args.chat_template)
    return identity


def description(
    args: argparse.Namespace, reader: DatasetReader, reward_fn: Any, agent_loop: Any
) -> dict[str, Any]:
    """What the journal's fingerprint is made of (see the module docstring)."""
    from osmosis_ai.cli.loading import source_digest
    from osmosis_ai.evaluation.journal import file_digest

    return {
        "command": COMMAND,
        "agent": agent_identity(args, agent_loop),
        "model": args.model,
        "base_url": args.base_url,
        "n": args.n,
        "max_turns": args.max_turns,
        "completion_params": {"temperature": args.temperature, "max_tokens": args.max_tokens},
        "reward": f"{args.reward}@{source_digest(reward_fn)}" if reward_fn is not None else None,
        **tokenizer_identity(args),
        "dataset": file_digest(reader.file_path),
    }


def journal_file(args: argparse.Namespace, reader: DatasetReader) -> Path:
    """``--journal``, else one file per configuration as the command line names it (agent, policy,
    flags, the dataset's path) under eval's journal root: another flag is another journal, while the
    same command over an edited file finds its journal and is refused with what changed."""
    from osmosis_ai.cli.loading import agent_spec
    from osmosis_ai.evaluation.journal_store import journal_path, journal_root

    if args.journal:
        return Path(args.journal)
    agent = f"url:{args.url}" if args.url else agent_spec(args)
    named = [COMMAND, agent, args.model, args.base_url, str(reader.file_path.resolve()), args.n, args.max_turns,
             args.temperature, args.max_tokens, args.reward, args.tokenizer, args.chat_template]  # fmt: skip
    task_id = TASK_PREFIX + hashlib.sha256(json.dumps(named).encode()).hexdigest()[:12]
    return journal_path(journal_root(), args.model, args.dataset, task_id)


def open_journal(args: argparse.Namespace, reader: DatasetReader, reward_fn: Any, agent_loop: Any) -> Journal:
    """The run's journal (a changed configuration is refused with what changed; ``--fresh`` starts over)."""
    from osmosis_ai.cli.journals import open_journal
    from osmosis_ai.cli.loading import agent_spec

    labels = {"command": COMMAND, "model": args.model, "dataset": args.dataset,
              "module": args.url or agent_spec(args)}  # fmt: skip
    return open_journal(
        journal_file(args, reader),
        description(args, reader, reward_fn, agent_loop),
        fresh=args.fresh,
        labels=labels,
    )


def replay(journal: Journal, tally: RunTally, *, retry_failed: bool) -> int:
    """Count every finished rollout of the journal into ``tally`` (read a page at a time); return how many."""
    from osmosis_ai.evaluation.journal import runs_again

    replayed = 0
    for record in journal.iter_records():
        if not runs_again(record.outcome, retry_failed=retry_failed):
            tally.add_record(record.data, replayed=True)
            replayed += 1
    return replayed


def premade_records(journal: Journal, n: int) -> Callable[[int, int], Iterator[dict[str, Any]]]:
    """The journaled records of sequence numbers ``start <= seq < stop`` (``seq = row * n + sample``)."""

    def records(start: int, stop: int) -> Iterator[dict[str, Any]]:
        for record in journal.iter_records(start=divmod(start, n), stop=divmod(stop, n)):
            yield record.data

    return records


def say_resuming(args: argparse.Namespace, journal: Journal, replayed: int, total: int) -> None:
    """The resume line (and, for ``--url``, that the server's code is not in the fingerprint)."""
    from osmosis_ai.cli.journals import resuming_line
    from osmosis_ai.evaluation.outcome import Outcome

    if not replayed:
        return
    failed = 0 if args.retry_failed else sum(o is Outcome.MODEL_ERROR for _, o in journal.outcomes())
    line = resuming_line(replayed, total, "rollout", failed=failed, retry_failed=args.retry_failed)
    say(f"{line} (journal {journal.path})", quiet=args.quiet)
    if args.url:
        say(f"Note: the code behind --url {args.url} cannot be fingerprinted; if it changed since, "
            "rerun with --fresh", quiet=args.quiet)  # fmt: skip
