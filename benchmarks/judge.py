"""Rubric judging: a loop of ``evaluate_rubric`` vs ``evaluate_rubric_batch``, and our CPU overhead.

Run: ``.venv/bin/python -m benchmarks.judge [--judgments 64] [--concurrency 32] [--calls 200]``

The judge is ``benchmarks/openai_stub.py`` running in a child process (so its CPU is not counted
against the client), answering each request with a score derived from the candidate text, once
with 100 ms of simulated latency and once with none.

1. Throughput: the same judgments through a plain loop of ``evaluate_rubric`` and through
   ``evaluate_rubric_batch(concurrency=32)`` (goal: >= 10x faster, identical scores).
2. Overhead: client-process CPU time per call (``time.process_time``) of ``aevaluate_rubric``
   versus a bare ``litellm.acompletion`` sending the same messages and response format, at zero
   latency, interleaved in rounds on one event loop after a warm-up (goal: within 25%). Both run
   on the judge's background loop, the one synchronous ``evaluate_rubric`` calls use.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from benchmarks.openai_stub import StubProcess
from osmosis_ai.judge.portal import run_sync

RUBRIC = "Score 1 when the reply answers the question correctly and politely, 0 otherwise."
MODEL = "gpt-4o-mini"


def _items(count: int, api_base: str) -> list[dict[str, Any]]:
    model_info = {"provider": "openai", "model": MODEL, "api_key": "sk-bench", "api_base": api_base}
    return [
        {
            "rubric": RUBRIC,
            "solution_str": f"Answer number {index}: it is {index * 7}.",
            "model_info": model_info,
        }
        for index in range(count)
    ]


def throughput(judgments: int, concurrency: int) -> dict[str, Any]:
    from osmosis_ai import evaluate_rubric, evaluate_rubric_batch

    with StubProcess(delay=0.1) as api_base:
        items = _items(judgments, api_base)
        evaluate_rubric(**items[0])  # warm-up: imports, client pool
        started = time.perf_counter()
        looped = [evaluate_rubric(**item) for item in items]
        loop_seconds = time.perf_counter() - started
        started = time.perf_counter()
        batched = evaluate_rubric_batch(items, concurrency=concurrency)
        batch_seconds = time.perf_counter() - started
    return {"loop": loop_seconds, "batch": batch_seconds, "same": looped == batched}


async def _cpu_per_call(calls: int, rounds: int, api_base: str) -> tuple[float, float]:
    from osmosis_ai._litellm import import_litellm
    from osmosis_ai.judge.evaluate import aevaluate_rubric
    from osmosis_ai.judge.prompt import build_messages
    from osmosis_ai.judge.routing import response_format

    litellm = import_litellm()
    item = _items(1, api_base)[0]
    messages = build_messages(rubric=RUBRIC, solution_str=item["solution_str"], score_min=0.0, score_max=1.0)
    bare_kwargs = {
        "model": f"openai/{MODEL}",
        "messages": messages,
        "response_format": response_format(f"openai/{MODEL}"),
        "temperature": 0,
        "timeout": 30.0,
        "api_key": "sk-bench",
        "api_base": api_base,
        "max_retries": 0,
    }

    async def bare() -> None:
        await litellm.acompletion(**bare_kwargs)

    async def ours() -> None:
        await aevaluate_rubric(**item)

    for warm_up in (bare, ours):
        for _ in range(20):
            await warm_up()
    totals = {bare: 0.0, ours: 0.0}
    per_round = max(1, calls // rounds)
    for _ in range(rounds):
        for function in (bare, ours):
            started = time.process_time()
            for _ in range(per_round):
                await function()
            totals[function] += time.process_time() - started
    count = per_round * rounds
    return totals[bare] / count, totals[ours] / count


def overhead(calls: int) -> tuple[float, float]:
    with StubProcess(delay=0.0) as api_base:
        return run_sync(_cpu_per_call(calls, rounds=5, api_base=api_base))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--judgments", type=int, default=64)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument(
        "--calls", type=int, default=200, help="calls per side for the CPU overhead measurement"
    )
    args = parser.parse_args()

    speed = throughput(args.judgments, args.concurrency)
    bare, ours = overhead(args.calls)
    n = args.judgments
    speedup = speed["loop"] / speed["batch"]
    extra = (ours - bare) / bare * 100
    print(f"Rubric judging against a local OpenAI-compatible server (child process), {n} judgments")
    print(f"{'scenario':<44}{'wall s':>9}{'per judgment':>15}")
    print(
        f"{'loop of evaluate_rubric, 100 ms latency':<44}{speed['loop']:>9.2f}{speed['loop'] / n * 1000:>12.1f} ms"
    )
    batch_label = f"evaluate_rubric_batch(concurrency={args.concurrency})"
    print(f"{batch_label:<44}{speed['batch']:>9.2f}{speed['batch'] / n * 1000:>12.1f} ms")
    print(f"speed-up {speedup:.1f}x (goal >= 10x); identical scores: {'yes' if speed['same'] else 'NO'}")
    print()
    print(f"Client CPU per call at zero latency ({args.calls} calls each, interleaved)")
    print(f"{'bare litellm.acompletion':<44}{bare * 1000:>9.3f} ms")
    print(
        f"{'aevaluate_rubric (prompt, call, parse)':<44}{ours * 1000:>9.3f} ms   {extra:+.1f}% (goal <= +25%)"
    )


if __name__ == "__main__":
    main()
