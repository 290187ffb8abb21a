"""The workflow's own work without a server, for ``benchmarks.v03_servers``: the model call
``workflow_main.py`` makes per rollout (the same shared httpx client, the same body), made
``ROLLOUTS`` times ``CONCURRENCY`` at a time on uvloop, as uvicorn runs it. The CPU it takes is the
part of a server's CPU per rollout that no server can save.

    python workflow_alone.py CHAT_URL ROLLOUTS CONCURRENCY

Prints one JSON line: rollouts, cpu_ms (process CPU per call), seconds.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

import httpx
import uvloop


async def main(chat: str, rollouts: int, concurrency: int) -> None:
    client = httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=512))
    gate = asyncio.Semaphore(concurrency)

    async def one(i: int) -> None:
        async with gate:
            response = await client.post(
                f"{chat}/chat/completions",
                json={"model": "policy", "messages": [{"role": "user", "content": f"what is {i} + {i}?"}]},
                headers={"Authorization": "Bearer sk-bench"},
            )
            response.raise_for_status()
            response.json()["choices"][0]["message"]

    await asyncio.gather(*(one(i) for i in range(concurrency)))  # connections out of the measured window
    cpu, started = time.process_time(), time.monotonic()
    await asyncio.gather(*(one(i) for i in range(rollouts)))
    cpu_ms = (time.process_time() - cpu) / rollouts * 1000
    print(json.dumps({"rollouts": rollouts, "cpu_ms": cpu_ms, "seconds": time.monotonic() - started}))


if __name__ == "__main__":
    uvloop.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
