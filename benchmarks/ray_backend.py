"""``osmosis eval --backend ray`` (2 CPUs) against the same run in one process, and Ray's start-up cost.

Run: ``.venv/bin/python -m benchmarks.ray_backend [--rows 500] [--n 4] [--batch-size 64]``

The eval throughput case of ``benchmarks/eval_throughput.py`` (its provider stand-in in a child
process answering after ``--latency`` seconds, its agent, eval function and dataset), measured side
by side after a warm-up of each: one process (``--backend local``), then Ray with 2 CPUs (two
workers, ``--batch-size`` shared between them) joining a local Ray this process started. Ray's own
cost is reported apart: starting and stopping the local instance (``ray.init(num_cpus=2)``, and
``_shutdown`` of ``osmosis_ai.runs.backends.ray``, the stop a command that started its own Ray
pays), and the workers' start and stop inside each command (the wall time of a 1-row run). Each run's ratio is ideal / measured, the ideal being ``rows x n x latency / batch size``.

Then the same pair through LiteLLM (``OSMOSIS_FORCE_LITELLM=1``, ``--litellm-rows`` rows), where the
client's CPU binds one process (~5 ms of LiteLLM per call, see ``benchmarks/eval_throughput.py``):
the case the goal is set for. Ray is started again for it with the variable set, since a local
Ray's workers take the environment it started with. For this pair the CPU seconds of each kind of
process (this driver, the Ray workers, their reward workers, the stand-in, Ray's own raylet, GCS and
agents; read from /proc) are reported for the one-process run, the Ray run, and a 1-row Ray run with n=2
(a command's workers starting, each importing LiteLLM for its one run), and the Ray run's per-run CPU beyond that start.

Then a cold command, what a user waits for end to end: ``osmosis eval`` of 1 row x n=2 through
LiteLLM as a fresh process, with a Ray of its own (``--backend ray``, no ``--ray-address``: started
while the driver sends its preflight request, stopped at the end) against one process,
``--cold-pairs`` pairs run in turn; medians.

Then ``osmosis reward score`` of ``--reward-rows`` answers with the reward of
``benchmarks/reward_runtime.py`` that spends ~1 ms of CPU: the local pool (``--workers 2``) against
Ray's two workers, each scoring in a reward runtime of one worker process.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks.eval_throughput import AGENT, EVAL_FN, _dataset, _path, run_eval
from benchmarks.openai_stub import StubProcess
from benchmarks.reward_runtime import BUSY
from osmosis_ai.runs.backends.ray import _shutdown


def run_reward_score(folder: Path, dataset: Path, label: str, *extra: str) -> float:
    """Wall seconds of one ``osmosis reward score`` of ``dataset`` with the 1 ms reward."""
    from osmosis_ai.cli.main import main

    argv = ["reward", "score", "-f", BUSY, "-d", str(dataset), "--journal", str(folder / f"score-{label}.sqlite"),
            "-q", *extra]  # fmt: skip
    started = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        status = main(argv)
    if status != 0:
        raise RuntimeError(f"osmosis reward score exited {status}")
    return time.perf_counter() - started


def run_cold(api_base: str, dataset: Path, journal: Path, backend: str) -> float:
    """Wall seconds of ``osmosis eval --backend BACKEND`` of ``dataset`` (n=2) through LiteLLM as a
    fresh process; a Ray backend starts and stops a local Ray of its own."""
    argv = [sys.executable, "-m", "osmosis_ai", "eval", "-m", AGENT, "-d", str(dataset), "--eval-fn", EVAL_FN,
            "--model", "bench", "--base-url", api_base, "--n", "2", "--batch-size", "2", "--journal", str(journal),
            "--backend", backend, "-q"]  # fmt: skip
    environment = os.environ | {"OSMOSIS_FORCE_LITELLM": "1"}
    started = time.perf_counter()
    ran = subprocess.run(argv, cwd=Path(__file__).parents[1], env=environment, capture_output=True, text=True)
    if ran.returncode != 0:
        raise RuntimeError(f"osmosis eval --backend {backend} exited {ran.returncode}: {ran.stderr.strip()}")
    return time.perf_counter() - started


ROLES = ("Ray workers", "driver", "stand-in", "reward workers", "Ray's own (raylet, GCS, agents)")


def _processes() -> dict[int, tuple[float, float, str]]:
    """This process and every one it started, directly or not: (CPU seconds, start tick, command line)."""
    tick = os.sysconf("SC_CLK_TCK")
    table, todo = {}, [os.getpid()]
    while todo:
        pid = todo.pop()
        with contextlib.suppress(OSError):  # ended meanwhile
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            table[pid] = ((int(fields[11]) + int(fields[12])) / tick, float(fields[19]), command)
            for task in os.listdir(f"/proc/{pid}/task"):
                todo.extend(
                    int(child) for child in Path(f"/proc/{pid}/task/{task}/children").read_text().split()
                )
    return table


def _role(pid: int, command: str) -> str:
    """Which of :data:`ROLES` a process is."""
    if pid == os.getpid():
        return "driver"
    for marker, role in (
        ("ray::", "Ray workers"),
        ("openai_stub", "stand-in"),
        ("rewards.runtime.worker", "reward workers"),
    ):
        if marker in command:
            return role
    return ROLES[-1]


@contextlib.contextmanager
def cpu_by_role() -> Iterator[dict[str, float]]:
    """CPU seconds this process and those it started spent in the block, by role (:data:`ROLES`);
    the mapping is filled when the block ends. Sampled every 0.2 s, so a process that ended
    between two samples misses at most its last 0.2 s."""
    first, last, commands = _processes(), {}, {}
    stop = threading.Event()

    def sample() -> None:
        for pid, (cpu, start, command) in _processes().items():
            last[pid] = (cpu, start)
            if command.strip():  # a Ray worker's title is briefly empty while it is being set
                commands[pid] = command

    def loop() -> None:
        while not stop.wait(0.2):
            sample()

    totals: dict[str, float] = dict.fromkeys(ROLES, 0.0)
    sampler = threading.Thread(target=loop, daemon=True)
    sampler.start()
    try:
        yield totals
    finally:
        stop.set()
        sampler.join()
        sample()
        for pid, (cpu, start) in last.items():
            before = first.get(pid)
            totals[_role(pid, commands.get(pid, ""))] += cpu - (
                before[0] if before and before[1] == start else 0.0
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=500)
    parser.add_argument("--n", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--latency", type=float, default=0.1, help="the provider's seconds per answer")
    parser.add_argument("--reward-rows", type=int, default=4000, help="answers for the reward score case")
    parser.add_argument(
        "--litellm-rows", type=int, default=1000, help="rows for the LiteLLM (CPU-bound) case"
    )
    parser.add_argument("--cold-pairs", type=int, default=3, help="cold commands on Ray and on one process")
    args = parser.parse_args()
    import ray

    runs = args.rows * args.n
    ideal = runs * args.latency / args.batch_size
    ray_options = ("--backend", "ray")
    with tempfile.TemporaryDirectory() as tmp, StubProcess(delay=args.latency) as api_base:
        folder = Path(tmp)
        init = _start(ray)
        try:
            (folder / "warm").mkdir()
            warm = _dataset(folder / "warm", 1)
            run_eval(api_base, warm, folder / "warm-local.sqlite", n=1, batch_size=1)
            workers = run_eval(
                api_base, warm, folder / "warm-ray.sqlite", n=1, batch_size=2, extra=ray_options
            )
            dataset = _dataset(folder, args.rows)
            local = run_eval(api_base, dataset, folder / "local.sqlite", n=args.n, batch_size=args.batch_size)
            on_ray = run_eval(api_base, dataset, folder / "ray.sqlite", n=args.n, batch_size=args.batch_size,
                              extra=ray_options)  # fmt: skip
            answers = folder / "answers.jsonl"
            answers.write_text("".join(json.dumps({"solution_str": str(i % 7), "ground_truth": "3"}) + "\n"
                                       for i in range(args.reward_rows)))  # fmt: skip
            run_reward_score(folder, warm_answers(folder), "warm-pool", "--workers", "2")
            pool = run_reward_score(folder, answers, "pool", "--workers", "2")
            scored_on_ray = run_reward_score(folder, answers, "ray", "--workers", "1", *ray_options)
        finally:
            started = time.perf_counter()
            _shutdown(ray)
            shutdown = time.perf_counter() - started
        with _path(litellm=True):
            _start(ray)
            try:
                run_eval(
                    api_base, warm, folder / "warm-local-litellm.sqlite", n=1, batch_size=1, litellm=True
                )
                with (
                    cpu_by_role() as start_cpu
                ):  # a command's workers start, each importing LiteLLM for its run
                    litellm_workers = run_eval(api_base, warm, folder / "warm-ray-litellm.sqlite", n=2, batch_size=2,
                                               litellm=True, extra=ray_options)  # fmt: skip
                (folder / "litellm").mkdir()
                small = _dataset(folder / "litellm", args.litellm_rows)
                with cpu_by_role() as local_cpu:
                    local_bound = run_eval(api_base, small, folder / "local-litellm.sqlite", n=args.n,
                                           batch_size=args.batch_size, litellm=True)  # fmt: skip
                with cpu_by_role() as ray_cpu:
                    ray_bound = run_eval(api_base, small, folder / "ray-litellm.sqlite", n=args.n,
                                         batch_size=args.batch_size, litellm=True, extra=ray_options)  # fmt: skip
                bound = (local_bound, ray_bound)
            finally:
                _shutdown(ray)
        cold: dict[str, list[float]] = {"ray": [], "local": []}
        for pair in range(args.cold_pairs):
            for backend in cold:
                cold[backend].append(
                    run_cold(api_base, warm, folder / f"cold-{backend}-{pair}.sqlite", backend)
                )
    print(f"osmosis eval: {args.rows} rows x n={args.n}, --batch-size {args.batch_size}, "
          f"{args.latency * 1000:.0f} ms latency; ideal {ideal:.2f} s")  # fmt: skip
    print(f"{'':<40}{'wall s':>8}{'ratio to ideal':>16}{'driver CPU per run':>20}")
    for label, (wall, cpu) in (
        ("one process (--backend local)", local),
        ("Ray, 2 CPUs (--backend ray)", on_ray),
    ):
        print(f"{label:<40}{wall:>8.2f}{ideal / wall:>15.2f}x{cpu / runs * 1000:>17.2f} ms")
    print(f"Ray over one process: {local[0] / on_ray[0]:.2f}x (the client CPU does not bind here); "
          f"driver CPU {on_ray[1]:.2f} s of {on_ray[0]:.2f} s; load average {os.getloadavg()[0]:.1f}")  # fmt: skip
    litellm_runs = args.litellm_rows * args.n
    litellm_ideal = litellm_runs * args.latency / args.batch_size
    print(f"through LiteLLM, {args.litellm_rows} rows x n={args.n} (the client CPU binds one process): "
          f"ideal {litellm_ideal:.2f} s")  # fmt: skip
    for label, (wall, cpu) in zip(
        ("one process (--backend local)", "Ray, 2 CPUs (--backend ray)"), bound, strict=True
    ):
        print(f"{label:<40}{wall:>8.2f}{litellm_ideal / wall:>15.2f}x{cpu / litellm_runs * 1000:>17.2f} ms")
    print(f"Ray over one process through LiteLLM: {bound[0][0] / bound[1][0]:.2f}x (goal >= 1.6x where the "
          f"client CPU binds); load average {os.getloadavg()[0]:.1f}")  # fmt: skip
    print(f"CPU seconds by process through LiteLLM (2 cores x the Ray run's wall = {2 * ray_bound[0]:.2f} s; "
          f"a command's workers starting, the 1-row run with n=2, {litellm_workers[0]:.2f} s wall):")  # fmt: skip
    print(f"{'':<34}{'one process':>12}{'Ray':>8}{'Ray, start':>12}{'Ray per run':>13}")
    for role in ROLES:
        per_run = (ray_cpu[role] - start_cpu[role]) / litellm_runs * 1000
        print(
            f"{role:<34}{local_cpu[role]:>12.2f}{ray_cpu[role]:>8.2f}{start_cpu[role]:>12.2f}{per_run:>10.2f} ms"
        )
    print(f"Ray's own cost: local instance start {init:.2f} s, stop {shutdown:.2f} s; a command's workers "
          f"start and stop (a 1-row run) {workers[0]:.2f} s, counted in the Ray run above")  # fmt: skip
    cold_ray, cold_local = (statistics.median(cold[backend]) for backend in ("ray", "local"))
    print(f"a cold command (1 row x n=2 through LiteLLM, a fresh process; medians of {args.cold_pairs}): "
          f"on a Ray of its own {cold_ray:.2f} s, one process {cold_local:.2f} s: Ray adds {cold_ray - cold_local:.2f} s")  # fmt: skip
    print(f"osmosis reward score, {args.reward_rows:,} answers, a reward spending ~1 ms of CPU: local pool "
          f"(2 workers) {pool:.2f} s, Ray (2 workers x 1) {scored_on_ray:.2f} s: Ray {pool / scored_on_ray:.2f}x "
          "the local pool")  # fmt: skip


def _start(ray: Any) -> float:
    """Start a local Ray with 2 CPUs; the seconds it took."""
    started = time.perf_counter()
    ray.init(
        address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False
    )
    return time.perf_counter() - started


def warm_answers(folder: Path) -> Path:
    """A few answers to start the reward runtime's imports once before anything is timed."""
    path = folder / "warm-answers.jsonl"
    path.write_text("".join(json.dumps({"solution_str": "3", "ground_truth": "3"}) + "\n" for _ in range(8)))
    return path


if __name__ == "__main__":
    main()
