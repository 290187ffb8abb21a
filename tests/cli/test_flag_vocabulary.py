"""One flag vocabulary (docs/guides/cli.md, "Shared options"): every command that has a concept takes
its shared spelling, and the other spellings, 0.2's among them, are aliases of the same option."""

from __future__ import annotations

from pathlib import Path

import pytest

from osmosis_ai.cli.main import build_parser
from tests.support.cli import cli

EVAL = ["eval", "-m", "a:b", "-d", "d.jsonl", "--eval-fn", "f:g"]
REWARD = ["reward", "score", "-d", "d.jsonl"]
REGRADE = ["regrade", "r.jsonl", "--eval-fn", "f:g"]
ROLLOUT = ["rollout", "run", "-m", "a:b", "-d", "d.jsonl", "--model", "scripted"]
RUBRIC = ["eval-rubric", "-r", "tone", "-d", "d.jsonl"]


@pytest.mark.parametrize(
    ("command", "spellings", "value", "dest", "parsed"),
    [
        (EVAL, ["--concurrency", "--batch-size"], "4", "batch_size", 4),
        (EVAL, ["--concurrency", "--batch-size"], "auto", "batch_size", "auto"),
        ([*REWARD, "--rubric", "r"], ["--concurrency"], "3", "concurrency", 3),
        (REWARD, ["--reward", "-f", "--function"], "m:f", "function", "m:f"),
        ([*REWARD, "-f", "m:f"], ["--timeout", "--reward-timeout"], "5", "reward_timeout", 5.0),
        ([*REWARD, "-f", "m:f"], ["--workers", "--reward-workers"], "2", "reward_workers", 2),
        ([*REWARD, "-f", "m:f"], ["--memory-limit", "--reward-memory-limit"], "64", "reward_memory_limit", 64),
        (REGRADE, ["--reward-timeout", "--timeout"], "5", "reward_timeout", 5.0),
        (REGRADE, ["--reward-workers", "--workers"], "2", "reward_workers", 2),
        (EVAL, ["--reward-timeout"], "5", "reward_timeout", 5.0),
        (ROLLOUT, ["--reward-timeout"], "5", "reward_timeout", 5.0),
        (ROLLOUT, ["--limit"], "3", "limit", 3),
        (ROLLOUT, ["--offset"], "2", "offset", 2),
        (["rollout", "check", "-m", "a:b", "-d", "d.jsonl", "--tokenizer", "t"], ["--limit", "--rows"], "2",
         "rows", 2),
        (["eval-rubric", "-r", "tone"], ["--dataset", "--data", "-d"], "d.jsonl", "data", Path("d.jsonl")),
        (RUBRIC, ["--n", "-n", "--number"], "3", "number", 3),
    ],
)  # fmt: skip
def test_every_spelling_sets_the_same_option(
    command: list[str], spellings: list[str], value: str, dest: str, parsed: object
) -> None:
    for spelling in spellings:
        args = build_parser(command[0]).parse_args([*command, spelling, value])
        assert getattr(args, dest) == parsed, spelling


def test_the_shared_spelling_is_shown_first_in_the_help() -> None:
    help_text = " ".join(cli("eval", "--help").stdout.split())
    assert "--concurrency N|auto, --batch-size N|auto" in help_text
