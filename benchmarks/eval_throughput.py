"""``osmosis eval`` throughput against a provider with 100 ms latency, compared with the ideal.

Run: ``.venv/bin/python -m benchmarks.eval_throughput [--rows 1000] [--n 4] [--batch-size 64] [--timeout S]``

With ``--timeout`` every ``osmosis eval`` run has that time limit, so each agent runs on an event
loop of another thread (docs/design/agent-deadline.md): run it with and without to see that cost.

The provider is ``benchmarks/openai_stub.py`` in a child process (its CPU is not counted against
the client) answering after ``--latency`` seconds. The ideal wall time is
``rows x n x latency / batch size``: every slot always busy, zero client cost. Measured side by
side, in this process after a warm-up run of each path (so imports are not counted):

1. ``osmosis eval`` (``main([...])``, the command users run: agent, eval function, journal with a
   disk sync per commit, outcome counts, summary) over ``rows`` rows x ``n`` runs, ``--batch-size``
   in flight, ``-q``, on the direct path to the base URL (the SDK's own aiohttp pool);
2. the same command through LiteLLM (``OSMOSIS_FORCE_LITELLM=1``);
3. bare ``litellm.acompletion`` calls, the same number, the same concurrency: the floor LiteLLM
   itself sets on this machine.

Each is reported as the ratio ideal / measured (goal for ``osmosis eval`` on the direct path:
>= 0.8x), with the client CPU time per run, and the ceiling one process can reach through LiteLLM:
ideal / the CPU seconds bare LiteLLM spent (a single event loop cannot finish before its CPU work
is done).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from benchmarks.openai_stub import StubProcess
from osmosis_ai.models.complete import FORCE_LITELLM_ENV

AGENT = "benchmarks.eval_agent:agent_loop"
EVAL_FN = "benchmarks.eval_agent:verdict_passes"


def _dataset(folder: Path, rows: int) -> Path:
    path = folder / "eval_bench.jsonl"
    lines = (
        json.dumps(
            {"system_prompt": "Answer briefly.", "user_prompt": f"Question {i}?", "ground_truth": str(i)}
        )
        for i in range(rows)
    )
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@contextlib.contextmanager
def _path(litellm: bool) -> Iterator[None]:
    """Model calls through LiteLLM (``litellm=True``) or on the direct path, for the block's length."""
    saved = os.environ.get(FORCE_LITELLM_ENV)
    os.environ[FORCE_LITELLM_ENV] = "1" if litellm else "0"
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(FORCE_LITELLM_ENV, None)
        else:
            os.environ[FORCE_LITELLM_ENV] = saved


def run_eval(
    api_base: str,
    dataset: Path,
    journal: Path,
    *,
    n: int,
    batch_size: int,
    litellm: bool = False,
    extra: tuple[str, ...] = (),
) -> tuple[float, float]:
    """Wall and CPU seconds of one ``osmosis eval`` run (``extra``: more options); raises if the
    command did not succeed."""
    from osmosis_ai.cli.main import main

    argv = ["eval", "-m", AGENT, "-d", str(dataset), "--eval-fn", EVAL_FN, "--model", "bench",
            "--base-url", api_base, "--n", str(n), "--batch-size", str(batch_size), "--journal", str(journal),
            "-q", *extra]  # fmt: skip
    wall, cpu = time.perf_counter(), time.process_time()
    with contextlib.redirect_stdout(io.StringIO()), _path(litellm):  # the command's own summary line
        status = main(argv)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    if status != 0:
        raise RuntimeError(f"osmosis eval exited {status}")
    return wall, cpu


async def _bare(api_base: str, calls: int, concurrency: int) -> None:
    from osmosis_ai._litellm import import_litellm

    litellm = import_litellm()
    slots = asyncio.Semaphore(concurrency)

    async def one(index: int) -> None:
        async with slots:
            await litellm.acompletion(
                model="openai/bench", api_base=api_base, api_key="not-needed", max_retries=0, timeout=120.0,
                messages=[{"role": "system", "content": "Answer briefly."},
                          {"role": "user", "content": f"Question {index}?"}],
            )  # fmt: skip

    await asyncio.gather(*(one(i) for i in range(calls)))


def run_bare(api_base: str, calls: int, concurrency: int) -> tuple[float, float]:
    """Wall and CPU seconds of ``calls`` bare ``litellm.acompletion`` calls, ``concurrency`` in flight."""
    wall, cpu = time.perf_counter(), time.process_time()
    asyncio.run(_bare(api_base, calls, concurrency))
    return time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--n", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--latency", type=float, default=0.1, help="the provider's seconds per answer")
    parser.add_argument("--timeout", help="osmosis eval's --timeout (default: none)")
    args = parser.parse_args()
    extra = ("--timeout", args.timeout) if args.timeout else ()

    runs = args.rows * args.n
    ideal = runs * args.latency / args.batch_size
    with tempfile.TemporaryDirectory() as tmp, StubProcess(delay=args.latency) as api_base:
        folder = Path(tmp)
        (folder / "warm").mkdir()
        warm = _dataset(folder / "warm", 8)
        for litellm in (False, True):  # imports, LiteLLM's set-up, the pools
            run_eval(api_base, warm, folder / f"warm-{litellm}.sqlite", n=1, batch_size=8, litellm=litellm,
                     extra=extra)  # fmt: skip
        dataset = _dataset(folder, args.rows)
        measured = {}
        for label, litellm in (("direct", False), ("litellm", True)):
            measured[label] = run_eval(api_base, dataset, folder / f"{label}.sqlite", n=args.n,
                                       batch_size=args.batch_size, litellm=litellm, extra=extra)  # fmt: skip
        measured["bare"] = run_bare(api_base, runs, args.batch_size)
    limit = f", --timeout {args.timeout}" if args.timeout else ""
    print(f"osmosis eval: {args.rows} rows x n={args.n}, --batch-size {args.batch_size}{limit}, "
          f"{args.latency * 1000:.0f} ms latency; ideal {ideal:.2f} s")  # fmt: skip
    print(f"{'':<34}{'wall s':>8}{'ratio to ideal':>16}{'CPU per run':>14}")
    for key, label in (("direct", "osmosis eval, direct path"), ("litellm", "osmosis eval, through LiteLLM"),
                       ("bare", "bare litellm.acompletion")):  # fmt: skip
        wall, cpu = measured[key]
        print(f"{label:<34}{wall:>8.2f}{ideal / wall:>15.2f}x{cpu / runs * 1000:>11.2f} ms")
    direct, through, bare = measured["direct"][0], measured["litellm"][0], measured["bare"][0]
    # One event loop cannot finish sooner than the CPU LiteLLM alone spends on every call.
    print(
        f"ceiling set by LiteLLM's CPU alone (one process): {ideal / measured['bare'][1]:.2f}x of the ideal"
    )
    print(f"goal for osmosis eval on the direct path: >= 0.8x of the ideal; it reached {ideal / direct:.2f}x "
          f"({through / direct:.2f}x faster than through LiteLLM, which took {through / bare:.2f}x the bare "
          "LiteLLM time)")  # fmt: skip


if __name__ == "__main__":
    main()
