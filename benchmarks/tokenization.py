"""What token-in-token-out costs per turn, and what the drift check costs on top.

Run: ``.venv/bin/python -m benchmarks.tokenization [--turns 50] [--repeats 5]``.

One rollout of ``--turns`` tool-calling turns (an assistant tool call, then its result) is served
through a :class:`~osmosis_ai.traingate.tito.TokenTrace` on a local model directory built by
:mod:`benchmarks.chat_model`. For every turn two costs are timed, in alternating rollouts of the same run:

* the incremental path (the next prompt's ids from the trajectory + the appended messages, and the
  completion's ids): it must stay flat, O(new tokens) per turn, whatever the conversation's length;
* the drift check (render and encode the whole conversation afresh, compare): O(conversation) per
  turn, so it grows with the turn number; reported separately because it is a check, not the path.

The figures are medians over ``--repeats`` rollouts, as ratios: the last ten turns against turns
2-11 (the first turn renders the initial prompt whole; 1.0x = flat), and the whole rollout's check
time against its incremental time.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.chat_model import WELL_BEHAVED, write_model
from osmosis_ai.traingate.tito import TokenTrace
from osmosis_ai.traingate.tokenizer import ChatTokenizer

TOOLS = [
    {"type": "function", "function": {"name": "add", "description": "Add two numbers", "parameters": {}}}
]
BUCKET = 10


def conversation(turns: int) -> list[dict[str, Any]]:
    """System + user, then ``turns`` assistant tool calls each followed by its result, then the answer."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a careful calculator. Use the tools for arithmetic."},
        {"role": "user", "content": "Add one to 0, then keep adding one to each result."},
    ]
    for turn in range(turns - 1):
        call = {
            "id": f"call_{turn}",
            "type": "function",
            "function": {"name": "add", "arguments": json.dumps({"a": turn, "b": 1})},
        }
        messages.append({"role": "assistant", "content": f"Step {turn}.", "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"call_{turn}", "content": str(turn + 1)})
    messages.append({"role": "assistant", "content": f"The answer is #### {turns - 1}"})
    return messages


def one_rollout(
    tokenizer: ChatTokenizer, messages: list[dict[str, Any]], *, check: bool
) -> tuple[list[float], int]:
    """Per-turn seconds of the incremental path (``check=False``) or of the check, and the trajectory's length.

    The two are timed in separate rollouts: interleaved, the check's long renders evict the caches
    the incremental path uses and it looks 1.3-1.7x slower by the fiftieth turn than it is.
    """
    trace = TokenTrace(tokenizer, tools=TOOLS)
    seconds = []
    turn = 0
    for index, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        history = messages[:index]
        started = time.perf_counter()
        prompt = trace.extend(history)
        trace.add_completion(message)
        if check:
            started = time.perf_counter()
            if trace.check(history, prompt, turn=turn) is not None:
                raise SystemExit(f"unexpected drift at turn {turn}: {trace.events[-1].describe()}")
        seconds.append(time.perf_counter() - started)
        turn += 1
    return seconds, len(trace.ids)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        tokenizer = ChatTokenizer.from_directory(write_model(Path(folder) / "model", WELL_BEHAVED))
        messages = conversation(args.turns)
        one_rollout(tokenizer, messages, check=True)  # warm up: template compilation, tokenizer caches
        runs = [
            (one_rollout(tokenizer, messages, check=False), one_rollout(tokenizer, messages, check=True))
            for _ in range(args.repeats)
        ]
    incremental = [statistics.median(path[0][t] for path, _ in runs) for t in range(args.turns)]
    check = [statistics.median(checked[0][t] for _, checked in runs) for t in range(args.turns)]
    tokens = runs[0][0][1]
    bucket = min(BUCKET, args.turns // 2)

    def mean(values: list[float]) -> float:
        return sum(values) / len(values)

    print(f"{args.turns}-turn rollout, {tokens} trajectory tokens, medians of {args.repeats} rollouts")
    print(f"{'turns':>9} {'incremental us/turn':>20} {'check us/turn':>14}")
    for start in range(0, args.turns, bucket):
        end = min(start + bucket, args.turns)
        inc, chk = mean(incremental[start:end]) * 1e6, mean(check[start:end]) * 1e6
        print(f"{start + 1:>4}-{end:<4} {inc:>20.1f} {chk:>14.1f}")
    flat = mean(incremental[-bucket:]) / mean(incremental[1 : bucket + 1])
    growth = mean(check[-bucket:]) / mean(check[1 : bucket + 1])
    total_inc, total_chk = sum(incremental), sum(check)
    print(
        f"incremental per turn, last {bucket} / turns 2-{bucket + 1}: {flat:.2f}x (flat = O(new tokens)); "
        f"check per turn: {growth:.2f}x (grows with the conversation)"
    )
    print(
        f"whole rollout: incremental {total_inc * 1e3:.2f} ms, check {total_chk * 1e3:.2f} ms "
        f"({total_chk / total_inc:.1f}x the incremental path)"
    )


if __name__ == "__main__":
    main()
