"""Test-runs per second of the sandbox's local tier: a 30-line solution and 5 asserts, 2 in parallel.

Run: ``.venv/bin/python -m benchmarks.sandbox_throughput [--runs N] [--rounds R]``.

Two ways, in alternating blocks (the machine is shared and noisy): ``run(code, tests=...)`` from two
workers, each run in a sandbox started for it; and ``SandboxPool(2)``'s ``run`` from two workers,
each run in a sandbox the pool started ahead (osmosis_ai/sandbox/pool.py). A block is ``runs`` runs,
timed from the first start to the last end; the pool's block includes starting its replacements, so
it ends as it began, with its sandboxes ready. Reported: each block's runs/s and CPU ms per run (this
process and its children), the medians and the pool's gain. Goal: the pool at least 5% faster, the
bar for keeping one.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable

from osmosis_ai.sandbox import SandboxOutcome, SandboxPool, SandboxResult, probe, run

GOAL = 0.05
PARALLEL = 2
SOLUTION = """\
def is_prime(n):
    if n < 2:
        return False
    i = 2
    while i * i <= n:
        if n % i == 0:
            return False
        i += 1
    return True

def primes_below(n):
    return [k for k in range(n) if is_prime(k)]


def fib(n):
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a


def word_counts(text):
    counts = {}
    for word in text.split():
        counts[word] = counts.get(word, 0) + 1
    return counts


def reverse_words(text):
    return " ".join(reversed(text.split()))
"""
TESTS = (
    "assert is_prime(97) and not is_prime(91)",
    "assert primes_below(20) == [2, 3, 5, 7, 11, 13, 17, 19]",
    "assert fib(30) == 832040",
    "assert word_counts('a b a') == {'a': 2, 'b': 1}",
    "assert reverse_words('x y z') == 'z y x'",
)


async def _block(runs: int, one: Callable[[], Awaitable[SandboxResult]]) -> float:
    """Seconds for ``runs`` runs of ``one``, :data:`PARALLEL` at a time."""
    left = runs

    async def worker() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            result = await one()
            assert result.outcome is SandboxOutcome.PASSED, result

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(PARALLEL)))
    return time.perf_counter() - started


async def _fresh(runs: int) -> float:
    return await _block(runs, lambda: run(SOLUTION, tests=TESTS))


async def _pooled(runs: int) -> float:
    async with SandboxPool(PARALLEL) as pool:
        await asyncio.gather(*pool._starting)  # ready, as it will be again at the end
        started = time.perf_counter()
        await _block(runs, lambda: pool.run(SOLUTION, tests=TESTS))
        await asyncio.gather(*pool._starting)
        return time.perf_counter() - started


def _cpu() -> float:
    spent = os.times()
    return spent.user + spent.system + spent.children_user + spent.children_system


async def measure(runs: int, rounds: int) -> dict[str, list[tuple[float, float]]]:
    """Per way, each block's (runs/s, CPU ms per run)."""
    ways = {"fresh sandbox per run": _fresh, "SandboxPool": _pooled}
    for way in ways.values():  # warm-up: page cache, the probe
        await way(PARALLEL)
    blocks: dict[str, list[tuple[float, float]]] = {name: [] for name in ways}
    for index in range(rounds):
        order = list(ways.items()) if index % 2 == 0 else list(ways.items())[::-1]
        for name, way in order:
            cpu = _cpu()
            seconds = await way(runs)
            blocks[name].append((runs / seconds, (_cpu() - cpu) / runs * 1000))
    return blocks


async def _main(runs: int, rounds: int) -> int:
    machine = await probe()
    if machine.tier is None or machine.python is None:
        print(f"no sandbox tier here: {machine.refusal or machine.python_note}")
        return 1
    blocks = await measure(runs, rounds)
    print(f"test-runs/s, {PARALLEL} in parallel, {rounds} alternating blocks of {runs} runs each")
    for name, measured in blocks.items():
        rates = ", ".join(f"{rate:.1f}" for rate, _ in measured)
        cpu = statistics.median(cpu for _, cpu in measured)
        median = statistics.median(rate for rate, _ in measured)
        print(f"{name}: median {median:.1f} runs/s ({rates}); CPU {cpu:.1f} ms per run")
    fresh, pooled = (statistics.median(rate for rate, _ in measured) for measured in blocks.values())
    gain = pooled / fresh - 1
    met = gain >= GOAL
    print(f"goal: the pool >= {GOAL:.0%} faster: {'met' if met else 'NOT met'} ({gain:+.0%})")
    return 0 if met else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100, help="runs per block (default 100)")
    parser.add_argument("--rounds", type=int, default=4, help="blocks of each way (default 4)")
    arguments = parser.parse_args()
    return asyncio.run(_main(arguments.runs, arguments.rounds))


if __name__ == "__main__":
    sys.exit(main())
