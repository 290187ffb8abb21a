"""Run by upstream osmosis-ai 0.3.8's Python (3.12): its own ``RolloutClient`` drives a 0.3 server.

``python upstream_driver.py SCENARIO SERVER_URL CHAT_URL [API_KEY]`` prints one JSON object of what
the client saw. Scenarios: ``rollouts`` (20 at once, half labelled with the right answer),
``duplicate``, ``cancel`` (the chat stand-in holds the call), ``health``, ``unauthorized``.
Imports only upstream's package (never this repository's).
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import osmosis_ai
from osmosis_ai.rollout.client import RolloutClient, RolloutProtocolError


def question(i: int) -> list[dict[str, Any]]:
    return [{"role": "user", "content": f"what is {i} + {i}?"}]


async def rollouts(client: RolloutClient, chat: str) -> dict[str, Any]:
    async def one(i: int) -> dict[str, Any]:
        label = str(2 * i) if i % 2 == 0 else "wrong"
        result = await client.run_rollout(
            question(i), chat, f"row-{i}", llm_api_key="sk-policy", label=label,
            agent_timeout_sec=60, grader_timeout_sec=30,
        )  # fmt: skip
        reward = result.sample.reward if result.sample is not None else None
        return {
            "id": result.rollout_id,
            "status": str(result.status),
            "reward": reward,
            "error": result.err_message,
        }

    return {"results": await asyncio.gather(*(one(i) for i in range(20)))}


async def duplicate(client: RolloutClient, chat: str) -> dict[str, Any]:
    first = await client.run_rollout_async(question(1), chat, "twice", label="2")
    try:
        await client.run_rollout_async(question(1), chat, "twice", label="2")
    except RolloutProtocolError as exc:
        refused = exc.status_code
    else:
        refused = 202
    result = await first.wait_for_completion()
    return {
        "second": refused,
        "first": str(result.status),
        "reward": result.sample.reward if result.sample else None,
    }


async def cancel(client: RolloutClient, chat: str) -> dict[str, Any]:
    handle = await client.run_rollout_async(question(3), chat, "to-cancel", label="6")
    await handle.wait_for_running()
    first = await client.cancel_rollout("to-cancel")
    again = await client.cancel_rollout("to-cancel")
    result = await handle.wait_for_completion()
    return {"first": first.dispositions, "again": again.dispositions, "status": str(result.status)}


async def health(client: RolloutClient, chat: str) -> dict[str, Any]:
    seen = await client.health()
    idle = await client.wait_idle(timeout_sec=30, poll_interval_sec=0.1)
    return {"health": seen, "idle_process": idle["process_id"]}


async def unauthorized(client: RolloutClient, chat: str) -> dict[str, Any]:
    codes = {}
    for name, call in (
        ("health", client.health()),
        ("rollout", client.run_rollout(question(1), chat, "denied")),
    ):
        try:
            await call
        except RolloutProtocolError as exc:
            codes[name] = exc.status_code
    return {"codes": codes}


async def main(scenario: str, url: str, chat: str, api_key: str | None) -> None:
    client = RolloutClient(url=url, api_key=api_key, admission_timeout_sec=60)
    try:
        seen = await globals()[scenario](client, chat)
    finally:
        await client.aclose()
    print(json.dumps({"client_package": osmosis_ai.__file__, **seen}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else None))
