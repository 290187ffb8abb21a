"""Rubric judging: a loop of ``evaluate_rubric`` vs ``evaluate_rubric_batch``, and our CPU overhead.

Run: ``.venv/bin/python -m benchmarks.judge [--judgments 64] [--concurrency 32] [--calls 200]``

The judge is ``benchmarks/openai_stub.py`` running in a child process (so its CPU is not counted
against the client), named by its base URL (``api_base``), answering each request with a score
derived from the candidate text, once with 100 ms of simulated latency and once with none. A
judge behind a base URL is called on the direct path (the SDK's own aiohttp pool); each figure is
also taken through LiteLLM (``OSMOSIS_FORCE_LITELLM=1``), side by side.

1. Throughput: the same judgments through a plain loop of ``evaluate_rubric`` and through
   ``evaluate_rubric_batch(concurrency=32)`` (goal: >= 10x faster, identical scores), on both paths.
2. Overhead: client-process CPU time per call (``time.process_time``) of ``aevaluate_rubric`` on
   each path versus a bare ``litellm.acompletion`` sending the same messages and response format,
   at zero latency, interleaved in rounds on one event loop after a warm-up (goal: within 25% of
   bare LiteLLM through LiteLLM). All run on the judge's background loop, the one synchronous
   ``evaluate_rubric`` calls use.
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

from benchmarks.openai_stub import StubProcess
from osmosis_ai._sync import run_sync
from osmosis_ai.models.complete import FORCE_LITELLM_ENV

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


def _through_litellm(on: bool) -> None:
    os.environ[FORCE_LITELLM_ENV] = "1" if on else "0"


def throughput(judgments: int, concurrency: int) -> dict[str, Any]:
    from osmosis_ai import evaluate_rubric, evaluate_rubric_batch

    with StubProcess(delay=0.1) as api_base:
        items = _items(judgments, api_base)
        for path in (True, False):  # warm-up: imports, client pools
            _through_litellm(path)
            evaluate_rubric(**items[0])
        started = time.perf_counter()
        looped = [evaluate_rubric(**item) for item in items]
        loop_seconds = time.perf_counter() - started
        batches = {}
        for label, path in (("direct", False), ("litellm", True)):
            _through_litellm(path)
            started = time.perf_counter()
            batched = evaluate_rubric_batch(items, concurrency=concurrency)
            batches[label] = (time.perf_counter() - started, batched == looped)
        os.environ.pop(FORCE_LITELLM_ENV, None)
    return {"loop": loop_seconds, "batch": batches}


async def _cpu_per_call(calls: int, rounds: int, api_base: str) -> dict[str, float]:
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

    async def through_litellm() -> None:
        _through_litellm(True)
        await aevaluate_rubric(**item)

    async def direct() -> None:
        _through_litellm(False)
        await aevaluate_rubric(**item)

    sides = {"bare": bare, "litellm": through_litellm, "direct": direct}
    for warm_up in sides.values():
        for _ in range(20):
            await warm_up()
    totals = dict.fromkeys(sides, 0.0)
    per_round = max(1, calls // rounds)
    for _ in range(rounds):
        for name, function in sides.items():
            started = time.process_time()
            for _ in range(per_round):
                await function()
            totals[name] += time.process_time() - started
    os.environ.pop(FORCE_LITELLM_ENV, None)
    count = per_round * rounds
    return {name: total / count for name, total in totals.items()}


def overhead(calls: int) -> dict[str, float]:
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
    cpu = overhead(args.calls)
    n = args.judgments
    print(f"Rubric judging against a local OpenAI-compatible server (child process), {n} judgments")
    print(f"{'scenario':<58}{'wall s':>9}{'per judgment':>15}")
    label = "loop of evaluate_rubric, 100 ms latency, direct path"
    print(f"{label:<58}{speed['loop']:>9.2f}{speed['loop'] / n * 1000:>12.1f} ms")
    for path in ("direct", "litellm"):
        seconds, same = speed["batch"][path]
        where = "direct path" if path == "direct" else "through LiteLLM"
        label = f"evaluate_rubric_batch(concurrency={args.concurrency}), {where}"
        print(f"{label:<58}{seconds:>9.2f}{seconds / n * 1000:>12.1f} ms   "
              f"speed-up {speed['loop'] / seconds:.1f}x, identical scores: {'yes' if same else 'NO'}")  # fmt: skip
    print("(goal: batch >= 10x the loop)")
    print()
    print(f"Client CPU per call at zero latency ({args.calls} calls each, interleaved)")
    bare = cpu["bare"]
    print(f"{'bare litellm.acompletion':<58}{bare * 1000:>9.3f} ms")
    for path, label in (
        ("litellm", "aevaluate_rubric through LiteLLM"),
        ("direct", "aevaluate_rubric, direct path"),
    ):
        ours = cpu[path]
        print(f"{label:<58}{ours * 1000:>9.3f} ms   {(ours - bare) / bare * 100:+.1f}% of bare LiteLLM")
    print("(goal: through LiteLLM within +25% of bare LiteLLM)")


if __name__ == "__main__":
    main()
