"""Upstream 0.3.8's own ``RolloutClient`` driving a 0.3 server, for ``benchmarks.v03_servers``; run
by upstream's interpreter (it imports only upstream's package).

    python driver.py SERVER_URL CHAT_URL ROLLOUTS CONCURRENCY

Prints one JSON line: rollouts, successes, seconds.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

import httpx

from osmosis_ai.rollout.client import RolloutClient


async def main(url: str, chat: str, rollouts: int, concurrency: int) -> None:
    # Connections enough for every rollout's long poll: the client's pool never limits a server.
    http = httpx.AsyncClient(limits=httpx.Limits(max_connections=2 * concurrency + 16))
    client = RolloutClient(url=url, http_client=http, admission_timeout_sec=120)
    gate = asyncio.Semaphore(concurrency)
    successes = 0

    async def one(i: int) -> None:
        nonlocal successes
        async with gate:
            result = await client.run_rollout(
                [{"role": "user", "content": f"what is {i} + {i}?"}], chat, f"r-{time.time_ns()}-{i}",
                llm_api_key="sk-bench", label=str(2 * i), agent_timeout_sec=120, grader_timeout_sec=60,
            )  # fmt: skip
            successes += str(result.status) == "success"

    await one(-1)  # connections and first-use costs out of the measured window
    successes = 0
    started = time.monotonic()
    await asyncio.gather(*(one(i) for i in range(rollouts)))
    seconds = time.monotonic() - started
    print(json.dumps({"rollouts": rollouts, "successes": successes, "seconds": seconds}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])))
