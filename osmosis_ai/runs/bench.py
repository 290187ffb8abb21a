"""Load mode: how many rollouts per second a rollout server sustains when the trainer costs nothing.

The gateway answers every chat call instantly with canned calculator turns (``tool_turns`` calls
of ``add`` then ``"The answer is #### 3"``) and canned token data, so the figures measure the
protocol round trips and the rollout server itself. The append-only check and key checks stay on.
"""

from __future__ import annotations

import time

from osmosis_ai.runs.rollouts import RunConfig, run_rollouts
from osmosis_ai.traingate.gateway import TrainGate
from osmosis_ai.traingate.policy.canned import CannedPolicy
from osmosis_ai.traingate.report import RunSummary, summarize

BENCH_ROW = {
    "system_prompt": "You are a calculator. Use the tools, then answer as '#### <number>'.",
    "user_prompt": "What is 1 + 2?",
    "ground_truth": "3",
}


async def run_bench(
    server_url: str,
    *,
    rollouts: int,
    concurrency: int,
    tool_turns: int = 1,
    timeout: float = 120.0,
    server_api_key: str | None = None,
) -> RunSummary:
    """Run ``rollouts`` canned rollouts against ``server_url`` with ``concurrency`` in flight."""
    config = RunConfig(
        server_url=server_url,
        server_api_key=server_api_key,
        n=rollouts,
        concurrency=concurrency,
        timeout=timeout,
        max_turns=tool_turns + 2,
        completion_params={"temperature": 1.0, "max_tokens": 64},
    )
    async with TrainGate(CannedPolicy(tool_turns)) as gate:
        started = time.perf_counter()
        sessions = await run_rollouts(gate, [BENCH_ROW], config)
        return summarize(sessions, time.perf_counter() - started)
