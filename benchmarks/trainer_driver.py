"""A trainer stand-in that drives any rollout server over the wire protocol, for load measurements.

    python benchmarks/trainer_driver.py --target http://127.0.0.1:9000 [--rollouts 500]
        [--concurrency 50] [--tool-turns 1] [--llm-delay 0] [--timeout 120] [--api-key KEY]

It plays TrainGate: it listens on ``--port`` (loopback), sends ``POST /v1/rollout/init`` to
``--target`` for each rollout with at most ``--concurrency`` unfinished at a time, answers every
``/v1/chat/completions`` call at once with a canned reply (``--tool-turns`` replies that call the
``add`` tool with ``a=1, b=2``, then a final ``#### 3``, each with token ids and logprobs), and
counts a rollout finished when its ``/v1/rollout/completed`` arrives. ``--llm-delay`` makes every
chat reply wait, to hold many rollouts in flight.

The last line printed is one JSON object: ``completed``, ``rollouts_per_s``, ``p50_ms``/``p99_ms``
(init sent to callback received), ``statuses``, ``init_errors``, ``extra_callbacks`` (callbacks for
unknown or already finished rollouts) and ``timed_out``. Exit status 0 when every rollout finished.
Only ``aiohttp`` is needed, and nothing from the package under test, so any server can be measured.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from typing import Any

from aiohttp import ClientSession, ClientTimeout, TCPConnector, web

FINAL_ANSWER = {"role": "assistant", "content": "1 + 2 = 3. The answer is #### 3"}


def _tool_call(turn: int) -> dict[str, Any]:
    call = {
        "id": f"call_{turn}",
        "type": "function",
        "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'},
    }
    return {"role": "assistant", "content": "", "tool_calls": [call]}


class Trainer:
    """The trainer's side: the two endpoints a rollout server calls, and the per-rollout bookkeeping."""

    def __init__(self, tool_turns: int, llm_delay: float) -> None:
        self.tool_turns = tool_turns
        self.llm_delay = llm_delay
        self.turns: dict[str, int] = {}
        self.waiting: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self.extra_callbacks = 0

    async def chat(self, request: web.Request) -> web.Response:
        body = await request.json()
        rollout_id = str(body.get("rollout_id", ""))
        if self.llm_delay:
            await asyncio.sleep(self.llm_delay)
        turn = self.turns.get(rollout_id, 0)
        self.turns[rollout_id] = turn + 1
        message = _tool_call(turn) if turn < self.tool_turns else FINAL_ANSWER
        prompt_tokens = 12 * len(body.get("messages", ()))
        return web.json_response(
            {
                "id": f"chatcmpl-{rollout_id}-{turn}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model") or "driver",
                "choices": [
                    {
                        "index": 0,
                        "message": message,
                        "finish_reason": "tool_calls" if "tool_calls" in message else "stop",
                    }
                ],
                "usage": {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": 6,
                    "total_tokens": prompt_tokens + 6,
                },
                "token_ids": [101, 102, 103, 104, 105, 106],
                "logprobs": [-0.25] * 6,
                "prompt_token_ids": list(range(prompt_tokens)),
            }
        )

    async def completed(self, request: web.Request) -> web.Response:
        body = await request.json()
        waiter = self.waiting.get(str(body.get("rollout_id", "")))
        if waiter is None or waiter.done():
            self.extra_callbacks += 1
        else:
            waiter.set_result(body)
        return web.json_response({"status": "ok"})


def _init_body(rollout_id: str, trainer_url: str, tool_turns: int) -> dict[str, Any]:
    return {
        "rollout_id": rollout_id,
        "server_url": trainer_url,
        "messages": [
            {"role": "system", "content": "You are a calculator. Use the tools."},
            {"role": "user", "content": "What is 1 + 2?"},
        ],
        "completion_params": {"temperature": 1.0, "max_tokens": 64},
        "max_turns": tool_turns + 2,
        "max_tokens_total": 8192,
        "metadata": {"ground_truth": "3"},
        "api_key": "driver-callback-key",
    }


def _percentile_ms(sorted_seconds: list[float], fraction: float) -> float:
    if not sorted_seconds:
        return -1.0
    index = min(len(sorted_seconds) - 1, int(fraction * len(sorted_seconds)))
    return round(sorted_seconds[index] * 1000, 2)


async def drive(args: argparse.Namespace) -> dict[str, Any]:
    trainer = Trainer(args.tool_turns, args.llm_delay)
    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_post("/v1/chat/completions", trainer.chat)
    app.router.add_post("/v1/rollout/completed", trainer.completed)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", args.port).start()
    trainer_url = f"http://127.0.0.1:{args.port}"
    headers = {"Authorization": f"Bearer {args.api_key}"} if args.api_key else {}

    slots = asyncio.Semaphore(args.concurrency)
    latencies: list[float] = []
    statuses: dict[str, int] = {}
    init_errors: list[str] = []
    loop = asyncio.get_running_loop()

    async def one(index: int, session: ClientSession) -> None:
        rollout_id = f"{args.tag}drv{index}-{os.getpid()}"
        async with slots:
            waiter: asyncio.Future[dict[str, Any]] = loop.create_future()
            trainer.waiting[rollout_id] = waiter
            started = time.perf_counter()
            try:
                body = _init_body(rollout_id, trainer_url, args.tool_turns)
                async with session.post(
                    f"{args.target}/v1/rollout/init", json=body, headers=headers
                ) as reply:
                    text = await reply.text()
                    if reply.status not in (200, 202):
                        init_errors.append(f"HTTP {reply.status}: {text[:200]}")
                        return
                report = await waiter
            except Exception as exc:  # a benchmark counts failures instead of stopping at the first
                init_errors.append(repr(exc)[:200])
                return
            latencies.append(time.perf_counter() - started)
            status = str(report.get("status"))
            statuses[status] = statuses.get(status, 0) + 1

    started = time.perf_counter()
    connector = TCPConnector(limit=args.concurrency * 2)
    async with ClientSession(connector=connector, timeout=ClientTimeout(total=args.timeout)) as session:
        tasks = [asyncio.create_task(one(index, session)) for index in range(args.rollouts)]
        _, pending = await asyncio.wait(tasks, timeout=args.timeout)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
    wall = time.perf_counter() - started
    await runner.cleanup()

    latencies.sort()
    return {
        "tag": args.tag,
        "rollouts": args.rollouts,
        "concurrency": args.concurrency,
        "tool_turns": args.tool_turns,
        "completed": len(latencies),
        "statuses": statuses,
        "wall_s": round(wall, 3),
        "rollouts_per_s": round(len(latencies) / wall, 1) if wall else 0.0,
        "p50_ms": _percentile_ms(latencies, 0.5),
        "p99_ms": _percentile_ms(latencies, 0.99),
        "mean_ms": round(statistics.mean(latencies) * 1000, 2) if latencies else -1.0,
        "init_errors": len(init_errors),
        "first_errors": init_errors[:3],
        "extra_callbacks": trainer.extra_callbacks,
        "timed_out": len(pending),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="http://127.0.0.1:9000", help="the rollout server's base URL")
    parser.add_argument("--port", type=int, default=9100, help="port this trainer listens on (loopback)")
    parser.add_argument("--rollouts", type=int, default=500)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--tool-turns", type=int, default=1)
    parser.add_argument("--llm-delay", type=float, default=0.0, help="seconds every chat reply waits")
    parser.add_argument("--timeout", type=float, default=120.0, help="bound on the whole run, seconds")
    parser.add_argument("--api-key", default=None, help="Bearer key the rollout server expects")
    parser.add_argument("--tag", default="", help="prefix for rollout ids")
    args = parser.parse_args()
    result = asyncio.run(drive(args))
    print(json.dumps(result))
    return 0 if result["completed"] == args.rollouts else 1


if __name__ == "__main__":
    sys.exit(main())
