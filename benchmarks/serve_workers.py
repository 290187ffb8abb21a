"""``osmosis serve --workers 2`` against ``--workers 1`` with a CPU-bound agent, side by side in one run.

    .venv/bin/python -m benchmarks.serve_workers [--rollouts 1500] [--rounds 2] [--concurrency 200]
        [--turn-ms 2.0]

The agent (``agent_loop`` below) does ``--turn-ms`` of pure-Python work after each chat turn (a
fixed amount of work, calibrated once in this process, so both servers do the same), two turns a
rollout (one tool call). Each round starts a fresh ``osmosis serve --local`` with one worker, then
one with two, waits until ``/health`` answers, and drives it with ``benchmarks/trainer_driver.py``
at ``--concurrency`` rollouts in flight; the best round of each is kept (the machine is shared) and
the ratio of the two throughputs printed, with the median of the per-round ratios. Goal: >= 1.6x on
two cores (the driver shares them). The CPU time per rollout of the server (all its processes) and
of the driver is printed too, with the ratio they allow — one worker held to one core, two sharing
both with the driver — which other load on the machine does not move. Loopback only; every process
is stopped; bounded in time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.rollout_server import Server, cpu_seconds, free_port, get_json, trainer
from osmosis_ai.rollout import RolloutAgentLoop, RolloutContext, RolloutRequest, RolloutResult

WORK_ENV = "OSMOSIS_BENCH_TURN_WORK"
GOAL = 1.6
ADD_TOOL = {
    "type": "function",
    "function": {
        "name": "add",
        "description": "Add two numbers",
        "parameters": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                       "required": ["a", "b"]},
    },
}  # fmt: skip


def burn(iterations: int) -> int:
    """Pure-Python work (holds the GIL throughout), as parsing or tool code would."""
    total = 0
    for i in range(iterations):
        total += i * i % 7
    return total


class CpuHeavyAgent(RolloutAgentLoop):
    name = "cpu-heavy"

    def __init__(self) -> None:
        self.work = int(os.environ.get(WORK_ENV, "0"))

    def get_tools(self, request: RolloutRequest) -> list[dict[str, Any]]:
        return [ADD_TOOL]

    async def run(self, ctx: RolloutContext) -> RolloutResult:
        messages = list(ctx.request.messages)
        for _ in range(ctx.request.max_turns):
            result = await ctx.chat(messages, **ctx.request.completion_params)
            burn(self.work)
            messages.append(result.message)
            if not result.has_tool_calls:
                break
            for call in result.tool_calls or []:
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": "3"})
        return ctx.complete(messages, reward=1.0)


agent_loop = CpuHeavyAgent()


def calibrate(turn_ms: float) -> int:
    """Iterations of :func:`burn` that take ``turn_ms`` here (best of a few tries)."""
    probe = 200_000
    fastest = min(_timed(probe) for _ in range(5))
    return max(1, int(probe * turn_ms / 1000 / fastest))


def _timed(iterations: int) -> float:
    started = time.perf_counter()
    burn(iterations)
    return time.perf_counter() - started


def measure(workers: int, work: int, rollouts: int, concurrency: int) -> dict[str, Any]:
    base = Server.serve("benchmarks.serve_workers:agent_loop", **{WORK_ENV: str(work)})
    argv = [*base.argv[:-1], "--workers", str(workers), "--outbox", ":memory:", "-p", str(free_port())]
    url = f"http://127.0.0.1:{argv[-1]}"
    proc = subprocess.Popen(
        argv, cwd=base.tree, env=base.env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                get_json(f"{url}/health")
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"server with {workers} workers did not come up") from None
                time.sleep(0.1)
        flags = ["--rollouts", str(rollouts), "--concurrency", str(concurrency), "--tool-turns", "1"]
        trainer(url, *flags, "--rollouts", str(min(200, rollouts)), "--tag", "warm")  # imports, pools
        before = _tree_cpu_seconds(proc.pid)
        result = trainer(url, *flags, "--timeout", "150")
        result["server_cpu_ms_per_rollout"] = round(
            (_tree_cpu_seconds(proc.pid) - before) / max(result["completed"], 1) * 1000, 3
        )
        return result
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _tree_cpu_seconds(pid: int) -> float:
    """CPU time of the server: the process and its workers (the supervisor's children)."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return cpu_seconds(pid) + sum(cpu_seconds(int(child)) for child in children)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rollouts", type=int, default=1500)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=200)
    parser.add_argument("--turn-ms", type=float, default=2.0, help="pure-Python work per chat turn")
    args = parser.parse_args()
    work = calibrate(args.turn_ms)
    print(f"agent work: {work} iterations per turn (~{args.turn_ms:g} ms here), 2 turns a rollout, "
          f"c={args.concurrency}, {args.rollouts} rollouts a round")  # fmt: skip
    runs: dict[int, list[dict[str, Any]]] = {1: [], 2: []}
    for round_ in range(args.rounds):
        for workers in (1, 2):
            result = measure(workers, work, args.rollouts, args.concurrency)
            runs[workers].append(result)
            print(f"  round {round_ + 1}, --workers {workers}: {result['rollouts_per_s']:8.1f} rollouts/s "
                  f"(p50 {result['p50_ms']} ms, completed {result['completed']}/{args.rollouts}; CPU per "
                  f"rollout: server {result['server_cpu_ms_per_rollout']} ms, driver "
                  f"{result['cpu_ms_per_rollout']} ms)")  # fmt: skip
            if result["completed"] != args.rollouts:
                print(f"    init errors {result['init_errors']}, timed out {result['timed_out']}: "
                      f"{result['first_errors']}")  # fmt: skip
    best = {workers: max(r["rollouts_per_s"] for r in results) for workers, results in runs.items()}
    ratios = [two["rollouts_per_s"] / one["rollouts_per_s"] for one, two in zip(runs[1], runs[2], strict=True)
              if one["rollouts_per_s"]]  # fmt: skip
    ratio = best[2] / best[1] if best[1] else 0.0
    cpu = {workers: {side: statistics.median(r[key] for r in results) for side, key in
                     (("server", "server_cpu_ms_per_rollout"), ("driver", "cpu_ms_per_rollout"))}
           for workers, results in runs.items()}  # fmt: skip
    # What the CPU figures allow, whatever else runs: one worker is held to one core, two share
    # both cores with the driver.
    bound = 2 * cpu[1]["server"] / (cpu[2]["server"] + cpu[2]["driver"])
    print(f"{'--workers 1':>14}: {best[1]:8.1f} rollouts/s")
    print(
        f"{'--workers 2':>14}: {best[2]:8.1f} rollouts/s  -> {ratio:.2f}x (goal >= {GOAL}x; median of "
        f"per-round ratios {statistics.median(ratios):.2f}x)"
    )
    print(f"{'CPU per rollout':>14}: server {cpu[1]['server']:.3f} ms (1 worker), {cpu[2]['server']:.3f} ms "
          f"(2), driver {cpu[2]['driver']:.3f} ms -> at most {bound:.2f}x on two cores")  # fmt: skip
    complete = all(r["completed"] == args.rollouts for results in runs.values() for r in results)
    print(json.dumps({"workers_1_per_s": best[1], "workers_2_per_s": best[2], "ratio": round(ratio, 2),
                      "median_round_ratio": round(statistics.median(ratios), 2), "cpu_bound_ratio": round(bound, 2),
                      "server_cpu_ms": {w: c["server"] for w, c in cpu.items()},
                      "driver_cpu_ms": cpu[2]["driver"], "complete": complete}))  # fmt: skip
    return 0 if complete else 1


if __name__ == "__main__":
    sys.exit(main())
