"""Rollout server throughput, latency and memory against the minimal yardstick server, in one run.

    .venv/bin/python -m benchmarks.rollout_server [--rollouts 2000] [--rounds 3] [--inflight 5000]
        [--max-concurrent 10000] [--trick-rounds 3]

Starts ``osmosis serve --local`` with the calculator example and ``benchmarks/minimal_server.py`` (the
least a rollout server can do), drives both with ``benchmarks/trainer_driver.py`` using the same flags
(concurrency 50 with one tool turn; concurrency 1), and prints the figures side by side with their
ratios (best of ``--rounds``, since the machine is shared), plus each server's CPU time per rollout
(which other load on the machine does not skew). Then it measures the server's resident
memory idle and with ``--inflight`` rollouts held in flight (the driver's ``--llm-delay``), from
``/proc/<pid>/status``, first with the default limits (100 rollouts run, the rest queue), then in a
second server with ``--max-concurrent`` rollouts allowed to run at once (the callback pool then has a
connection for each). Last, the tricks the server keeps for speed, each against its plain
version in servers started side by side (``--trick-rounds`` interleaved concurrency-50 runs, best
kept): answering a valid init below the framework, its body validated in one step, instead of
through FastAPI's routing and body handling, and
``tune_gc()`` instead of the default garbage collector settings; and one cost the same way: the
outbox in a file (as ``osmosis serve`` keeps it) against the outbox in memory. Then the init
admission limit (``create_app(max_concurrent_inits=...)``) against none, by the memory of the same
``--inflight`` burst, each round in fresh servers (``--trick-rounds`` rounds, median kept).
Loopback only; every process is stopped at the end; bounded in time.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
# The project's own yardsticks. OSMOSIS_BENCH_SHARED cross-checks with an external pair
# (trainer_sim.py, limit_server.py): "1" means ../shared/bench beside the checkout, any other value
# is that directory. Asked for and missing is an error, not a silent fallback.
_SHARED_SETTING = os.environ.get("OSMOSIS_BENCH_SHARED", "")
SHARED = REPO.parent / "shared" / "bench" if _SHARED_SETTING == "1" else Path(_SHARED_SETTING)
USE_SHARED = _SHARED_SETTING not in ("", "0")
if USE_SHARED and not (SHARED / "trainer_sim.py").exists():
    raise SystemExit(f"OSMOSIS_BENCH_SHARED={_SHARED_SETTING}: no trainer_sim.py in {SHARED}")
TRAINER = SHARED / "trainer_sim.py" if USE_SHARED else REPO / "benchmarks" / "trainer_driver.py"
FLOOR = SHARED / "limit_server.py" if USE_SHARED else REPO / "benchmarks" / "minimal_server.py"
AGENT = "examples.calculator.agent:agent_loop"
GOALS = {"c50_ratio": 0.8, "c1_p50_ratio": 2.0, "idle_mib": 150.0, "inflight_kib": 20.0}


# A server for one trick comparison: argv = port, variant. "default" is create_app's defaults with
# the outbox in a file, as osmosis serve has it; every other variant changes one thing.
VARIANT_SERVER = """
import sys
import tempfile

import uvicorn

from examples.calculator.agent import agent_loop
from osmosis_ai.rollout.server.app import create_app
from osmosis_ai.rollout.server.routes import FastInit
from osmosis_ai.rollout.server.runner import tune_gc

port, variant = int(sys.argv[1]), sys.argv[2]
FastInit.enabled = variant != "fastapi_body"
outbox = ":memory:" if variant == "memory_outbox" else tempfile.mkdtemp() + "/outbox.sqlite3"
inits = 10**9 if variant == "no_admission" else 64
app = create_app(agent_loop, outbox_path=outbox, max_concurrent_inits=inits)
if variant == "tune_gc":
    tune_gc()
uvicorn.run(app, host="127.0.0.1", port=port, log_level="critical", access_log=False)
"""
TRICKS = {  # trick: (variant with it, variant without it)
    "init fast path (vs FastAPI's body handling)": ("default", "fastapi_body"),
    # A cost, not a trick: a negative saving is what the durable outbox costs the happy path.
    "outbox in a file, as osmosis serve (vs in memory)": ("default", "memory_outbox"),
    "tune_gc() (vs the default GC)": ("tune_gc", "default"),
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process: a cost figure that other load on the machine does not skew."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=2) as response:
        return json.loads(response.read())


def wait_ready(url: str, proc: subprocess.Popen[bytes], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        with (
            contextlib.suppress(OSError, ValueError),
            socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1])), timeout=0.5),
        ):
            return
        time.sleep(0.05)
    raise RuntimeError(f"{url} did not come up")


@contextlib.contextmanager
def process(args: list[str], env: dict[str, str] | None = None) -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(args, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def trainer(target: str, *flags: str) -> dict[str, Any]:
    args = [
        sys.executable,
        str(TRAINER),
        "--target",
        target,
        "--port",
        str(free_port()),
        *flags,
    ]
    out = subprocess.run(args, capture_output=True, text=True, timeout=180, check=False)
    lines = [line for line in out.stdout.split("\n") if line.startswith("{")]  # JSON may hold U+2028
    if not lines:
        raise RuntimeError(f"{TRAINER.name} failed: {out.stderr[-500:]}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def best(results: list[dict[str, Any]]) -> dict[str, Any]:
    return max(results, key=lambda r: (r["completed"], r["rollouts_per_s"]))


def measure_inflight(url: str, pid: int, count: int) -> tuple[int, int, int]:
    """RSS before and while ``count`` rollouts wait on a slow trainer; returns (idle KiB, loaded KiB, seen)."""
    idle = rss_kib(pid)
    args = [
        sys.executable, str(TRAINER), "--target", url, "--port", str(free_port()),
        "--rollouts", str(count), "--concurrency", str(count), "--llm-delay", "10", "--timeout", "40",
    ]  # fmt: skip
    sim = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    peak, seen = idle, 0
    try:
        deadline = time.monotonic() + 25
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError):  # the server may be too busy to answer in time
                seen = int(get_json(f"{url}/health")["active_rollouts"])
            peak = max(peak, rss_kib(pid))
            if seen >= count:
                time.sleep(0.5)  # let every rollout reach its first chat call
                peak = max(peak, rss_kib(pid))
                break
            time.sleep(0.1)
    finally:
        sim.terminate()
        sim.wait(timeout=15)
    return idle, peak, seen


def server_env(**extra: str) -> dict[str, str]:
    # No grace period at shutdown: the stopped trainer cannot take the in-flight rollouts' reports.
    return {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "OSMOSIS_ROLLOUT_SERVER_SHUTDOWN_GRACE_SECONDS": "0",
        **extra,
    }


def serve_command(url: str) -> list[str]:
    port = url.rsplit(":", 1)[1]
    return [sys.executable, "-m", "osmosis_ai", "serve", "--local", "--no-validate", "-m", AGENT, "-p", port,
            "--log-level", "critical"]  # fmt: skip


def floor_command(url: str) -> list[str]:
    return [sys.executable, str(FLOOR), url.rsplit(":", 1)[1]]


def c50_run(url: str, pid: int, rollouts: int) -> dict[str, Any]:
    before = cpu_seconds(pid)
    result = trainer(url, "--rollouts", str(rollouts), "--concurrency", "50", "--tool-turns", "1")
    result["cpu_us"] = round((cpu_seconds(pid) - before) / rollouts * 1e6)
    return result


def measure_tricks(rounds: int, rollouts: int) -> dict[str, dict[str, Any]]:
    """Per trick: best rollouts/s and least server CPU per rollout, with and without it."""
    variants = sorted({variant for pair in TRICKS.values() for variant in pair})
    runs: dict[str, list[dict[str, Any]]] = {variant: [] for variant in variants}
    with contextlib.ExitStack() as stack:
        servers = {}
        for variant in variants:
            url = f"http://127.0.0.1:{free_port()}"
            command = [sys.executable, "-c", VARIANT_SERVER, url.rsplit(":", 1)[1], variant]
            servers[variant] = (url, stack.enter_context(process(command, server_env())))
        for url, proc in servers.values():
            wait_ready(url, proc)
            trainer(url, "--rollouts", "300", "--concurrency", "50")  # warm-up
        for _ in range(rounds):
            for variant, (url, proc) in servers.items():
                runs[variant].append(c50_run(url, proc.pid, rollouts))
    figures = {}
    for trick, (with_it, without_it) in TRICKS.items():
        on, off = best(runs[with_it]), best(runs[without_it])
        cpu_on = min(r["cpu_us"] for r in runs[with_it])
        cpu_off = min(r["cpu_us"] for r in runs[without_it])
        figures[trick] = {
            "rollouts_per_s": {"with": on["rollouts_per_s"], "without": off["rollouts_per_s"]},
            "cpu_us_per_rollout": {"with": cpu_on, "without": cpu_off},
            "cpu_saved_pct": round((cpu_off - cpu_on) / cpu_off * 100, 1),
            "throughput_gain_pct": round((on["rollouts_per_s"] / off["rollouts_per_s"] - 1) * 100, 1),
        }
    return figures


def measure_admission(rounds: int, inflight: int, warm_up: int) -> dict[str, Any]:
    """KiB per in-flight rollout in a burst of ``inflight`` inits, with the admission limit and without."""
    kib: dict[str, list[float]] = {"default": [], "no_admission": []}
    for _ in range(rounds):
        for variant, figures in kib.items():
            url = f"http://127.0.0.1:{free_port()}"
            command = [sys.executable, "-c", VARIANT_SERVER, url.rsplit(":", 1)[1], variant]
            with process(command, server_env()) as proc:
                wait_ready(url, proc)
                trainer(url, "--rollouts", str(warm_up), "--concurrency", "50")
                idle, loaded, seen = measure_inflight(url, proc.pid, inflight)
                figures.append(round((loaded - idle) / max(seen, 1), 2))
    return {
        "with": statistics.median(kib["default"]),
        "without": statistics.median(kib["no_admission"]),
        "runs": kib,
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rollouts", type=int, default=2000, help="rollouts per concurrency-50 run")
    parser.add_argument("--serial", type=int, default=300, help="rollouts per concurrency-1 run")
    parser.add_argument("--rounds", type=int, default=3, help="runs per server and setting (best is kept)")
    parser.add_argument(
        "--inflight", type=int, default=5000, help="rollouts held in flight for the memory figure"
    )
    parser.add_argument(
        "--max-concurrent",
        type=int,
        default=10000,
        help="max_concurrent_rollouts of the second, all-running memory phase",
    )
    parser.add_argument(
        "--trick-rounds", type=int, default=3, help="runs per variant in the tricks phase (0 skips it)"
    )
    args = parser.parse_args()
    ours_url = f"http://127.0.0.1:{free_port()}"
    floor_url = f"http://127.0.0.1:{free_port()}"
    with (
        process(serve_command(ours_url), server_env()) as ours,
        process(floor_command(floor_url)) as floor_proc,
    ):
        wait_ready(ours_url, ours)
        wait_ready(floor_url, floor_proc)
        time.sleep(0.3)
        idle_start = rss_kib(ours.pid)
        runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
        pids = {"ours": ours.pid, "floor": floor_proc.pid}
        for _ in range(args.rounds):
            for name, url in (("ours", ours_url), ("floor", floor_url)):
                runs.setdefault((name, "c50"), []).append(c50_run(url, pids[name], args.rollouts))
                c1 = ["--rollouts", str(args.serial), "--concurrency", "1", "--tool-turns", "1"]
                runs.setdefault((name, "c1"), []).append(trainer(url, *c1))
        idle, loaded, seen = measure_inflight(ours_url, ours.pid, args.inflight)
    # The same burst with every rollout running at once (not the default: 100 run, the rest queue).
    all_url = f"http://127.0.0.1:{free_port()}"
    all_running = server_env(
        OSMOSIS_ROLLOUT_SERVER_MAX_CONCURRENT_ROLLOUTS=str(args.max_concurrent),
    )
    with process(serve_command(all_url), all_running) as wide:
        wait_ready(all_url, wide)
        trainer(all_url, "--rollouts", str(args.rollouts), "--concurrency", "50")  # same warm-up as above
        wide_idle, wide_loaded, wide_seen = measure_inflight(all_url, wide.pid, args.inflight)

    ours50, floor50 = best(runs[("ours", "c50")]), best(runs[("floor", "c50")])
    ours1 = min(runs[("ours", "c1")], key=lambda r: r["p50_ms"])
    floor1 = min(runs[("floor", "c1")], key=lambda r: r["p50_ms"])
    figures = {
        "c50_rollouts_per_s": {"ours": ours50["rollouts_per_s"], "floor": floor50["rollouts_per_s"]},
        "c50_ratio": round(ours50["rollouts_per_s"] / floor50["rollouts_per_s"], 2),
        "c50_p99_ms": {"ours": ours50["p99_ms"], "floor": floor50["p99_ms"]},
        "c50_cpu_us_per_rollout": {
            "ours": min(r["cpu_us"] for r in runs[("ours", "c50")]),
            "floor": min(r["cpu_us"] for r in runs[("floor", "c50")]),
        },
        "c1_p50_ms": {"ours": ours1["p50_ms"], "floor": floor1["p50_ms"]},
        "c1_p50_ratio": round(ours1["p50_ms"] / floor1["p50_ms"], 2),
        "statuses": {"c50": ours50["statuses"], "c1": ours1["statuses"]},
        "idle_mib": round(idle_start / 1024, 1),
        "idle_after_load_mib": round(idle / 1024, 1),
        "inflight": seen,
        "inflight_mib": round(loaded / 1024, 1),
        "inflight_kib": round((loaded - idle) / max(seen, 1), 2),
        "all_running_inflight_kib": round((wide_loaded - wide_idle) / max(wide_seen, 1), 2),
    }
    print(f"{'':28}{'osmosis serve':>15}{FLOOR.stem:>15}{'ratio':>9}{'goal':>9}")
    print(
        f"{'c50 x1 tool, rollouts/s':28}{ours50['rollouts_per_s']:>15}{floor50['rollouts_per_s']:>15}"
        f"{figures['c50_ratio']:>9}{'>= ' + str(GOALS['c50_ratio']):>9}"
    )
    print(f"{'c50 x1 tool, p99 ms':28}{ours50['p99_ms']:>15}{floor50['p99_ms']:>15}")
    cpu = figures["c50_cpu_us_per_rollout"]
    print(
        f"{'c50 server CPU us/rollout':28}{cpu['ours']:>15}{cpu['floor']:>15}{cpu['ours'] / cpu['floor']:>9.2f}"
    )
    print(
        f"{'c1 x1 tool, p50 ms':28}{ours1['p50_ms']:>15}{floor1['p50_ms']:>15}"
        f"{figures['c1_p50_ratio']:>9}{'<= 2.0':>9}"
    )
    print(
        f"server RSS idle: {figures['idle_mib']} MiB (after load {figures['idle_after_load_mib']} MiB; goal <= 150)"
    )
    print(
        f"server RSS with {seen} rollouts in flight (default limits): {figures['inflight_mib']} MiB, "
        f"{figures['inflight_kib']} KiB per rollout (goal <= 20)"
    )
    print(
        f"  (same burst with {wide_seen} in flight, max_concurrent_rollouts={args.max_concurrent}, so every "
        f"rollout holds its own connection to TrainGate: {figures['all_running_inflight_kib']} KiB per rollout)"
    )
    if args.trick_rounds > 0:
        tricks = measure_tricks(args.trick_rounds, args.rollouts)
        figures["tricks"] = tricks
        print("tricks, c50 x1 tool, each against its plain version (best of the interleaved runs):")
        for trick, figure in tricks.items():
            cpu, rate = figure["cpu_us_per_rollout"], figure["rollouts_per_s"]
            print(
                f"  {trick}: server CPU {cpu['with']} vs {cpu['without']} us/rollout "
                f"({figure['cpu_saved_pct']}% saved), {rate['with']} vs {rate['without']} rollouts/s "
                f"({figure['throughput_gain_pct']:+}%)"
            )
        admission = measure_admission(args.trick_rounds, args.inflight, args.rollouts)
        figures["init_admission_kib"] = admission
        print(
            f"  init admission (max_concurrent_inits=64 vs unlimited): {admission['with']} vs "
            f"{admission['without']} KiB per in-flight rollout ({args.inflight}-init burst, median)"
        )
    print(json.dumps(figures))
    ok = (
        figures["c50_ratio"] >= GOALS["c50_ratio"]
        and figures["c1_p50_ratio"] <= GOALS["c1_p50_ratio"]
        and figures["idle_mib"] <= GOALS["idle_mib"]
        and figures["inflight_kib"] <= GOALS["inflight_kib"]
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
