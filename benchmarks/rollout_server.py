"""Rollout server throughput, latency and memory against the minimal yardstick server, in one run.

    .venv/bin/python -m benchmarks.rollout_server [--rollouts 2000] [--rounds 3] [--inflight 5000]
        [--max-concurrent 10000] [--trick-rounds 10] [--against DIR] [--agent MODULE:ATTR]

Starts ``osmosis serve --local`` with the calculator example (``--agent`` another agent loop,
``--agent-path`` a directory to import it from) and ``benchmarks/minimal_server.py`` (the least a
rollout server can do), drives both with ``benchmarks/trainer_driver.py`` using the same flags
(concurrency 50 with one tool turn; concurrency 1), and prints the figures side by side with their
ratios (best of ``--rounds``, since the machine is shared), plus each server's CPU time per rollout.
Then it measures the server's resident memory idle and with ``--inflight`` rollouts held in flight
(the driver's ``--llm-delay``), from ``/proc/<pid>/status``, first with the default limits (100
rollouts run, the rest queue), then in a second server with ``--max-concurrent`` rollouts allowed to
run at once (the callback pool then has a connection for each).

Comparisons of two servers are made in paired rounds (``--trick-rounds``): both are driven at the
same time, each by its own driver, so both see the same load from the rest of the machine, and the
median of the per-round ratios is kept (sequential runs on a shared machine swing by more than the
differences measured). Compared that way: each trick the server keeps for speed against its plain
version (answering a valid init below the framework instead of through FastAPI's routing and body
handling; ``tune_gc()`` instead of the default garbage collector settings), one cost (the outbox in
a file, as ``osmosis serve`` keeps it, against the outbox in memory), and with ``--against DIR``
this checkout's server against the one of another source tree, e.g. the code before a change
(``git worktree add ../before HEAD~1``), which also joins the sequential rounds against the minimal
server. Last, the init admission limit (``ServerConfig(max_concurrent_inits=...)``) against none,
by the memory of the same ``--inflight`` burst, each round in fresh servers (median kept).
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


# A server for one comparison: argv = variant, port. "default" is create_app's defaults with the
# outbox in a file, as osmosis serve has it; every other variant changes one thing.
VARIANT_SERVER = """
import sys
import tempfile

import uvicorn

from examples.calculator.agent import agent_loop
from osmosis_ai.rollout.config import get_settings
from osmosis_ai.rollout.server import ServerConfig, create_app
from osmosis_ai.rollout.server.routes import InitGate
from osmosis_ai.rollout.server.runner import tune_gc

variant, port = sys.argv[1], int(sys.argv[2])
InitGate.fast = variant != "fastapi_body"
outbox = ":memory:" if variant == "memory_outbox" else tempfile.mkdtemp() + "/outbox.sqlite3"
inits = 10**9 if variant == "no_admission" else 64
server = get_settings().server.model_copy(update={"outbox_path": outbox})
app = create_app(agent_loop, config=ServerConfig(server=server, max_concurrent_inits=inits))
if variant == "tune_gc":
    tune_gc()
uvicorn.run(app, host="127.0.0.1", port=port, log_level="critical", access_log=False)
"""
TRICKS = {  # trick: (variant with it, variant without it)
    "init fast path (vs FastAPI's body handling)": ("default", "fastapi_body"),
    # A cost, not a trick: a CPU ratio above 1 is what the durable outbox costs the happy path.
    "outbox in a file, as osmosis serve (vs in memory)": ("default", "memory_outbox"),
    "tune_gc() (vs the default GC)": ("tune_gc", "default"),
}
C50 = ("--concurrency", "50", "--tool-turns", "1")


class Server:
    """How to start one server: its command for a port, the directory it runs in, its environment."""

    def __init__(self, argv: list[str], tree: Path = REPO, agent_path: str | None = None, **env: str) -> None:
        self.argv = argv
        self.tree = tree
        # No grace period at shutdown: the stopped trainer cannot take the in-flight rollouts' reports.
        path = os.pathsep.join(p for p in (str(tree), agent_path) if p)
        self.env = {
            **os.environ,
            "PYTHONPATH": path,
            "OSMOSIS_ROLLOUT_SERVER_SHUTDOWN_GRACE_SECONDS": "0",
            **env,
        }

    @classmethod
    def serve(
        cls, agent: str = AGENT, tree: Path = REPO, agent_path: str | None = None, **env: str
    ) -> Server:
        argv = [sys.executable, "-m", "osmosis_ai", "serve", "--local", "--no-validate", "-m", agent,
                "--log-level", "critical", "-p"]  # fmt: skip
        return cls(argv, tree, agent_path, **env)

    @classmethod
    def variant(cls, name: str) -> Server:
        return cls([sys.executable, "-c", VARIANT_SERVER, name])

    @classmethod
    def floor(cls) -> Server:
        return cls([sys.executable, str(FLOOR)])


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
def running(server: Server) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``server`` started on a free port and answering; its URL and process. Stopped afterwards."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    # cwd is the tree: for -m and -c, the current directory comes first on sys.path.
    proc = subprocess.Popen(
        [*server.argv, str(port)], cwd=server.tree, env=server.env, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        wait_ready(url, proc)
        yield url, proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def start_trainer(target: str, *flags: str) -> subprocess.Popen[str]:
    args = [sys.executable, str(TRAINER), "--target", target, "--port", str(free_port()), *flags]
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def trainer_result(proc: subprocess.Popen[str]) -> dict[str, Any]:
    out, err = proc.communicate(timeout=180)
    lines = [line for line in out.split("\n") if line.startswith("{")]  # JSON may hold U+2028
    if not lines:
        raise RuntimeError(f"{TRAINER.name} failed: {err[-500:]}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def trainer(target: str, *flags: str) -> dict[str, Any]:
    return trainer_result(start_trainer(target, *flags))


def best(results: list[dict[str, Any]]) -> dict[str, Any]:
    return max(results, key=lambda r: (r["completed"], r["rollouts_per_s"]))


def c50_run(url: str, pid: int, rollouts: int) -> dict[str, Any]:
    before = cpu_seconds(pid)
    result = trainer(url, "--rollouts", str(rollouts), *C50)
    result["cpu_us"] = round((cpu_seconds(pid) - before) / rollouts * 1e6)
    return result


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


# -- paired comparisons ---------------------------------------------------------------------------------


def paired(a: Server, b: Server, rounds: int, rollouts: int) -> dict[str, Any]:
    """``a`` against ``b``: ``rounds`` concurrency-50 runs, both servers driven at once in each round.

    Returns the medians of the per-round ratios a/b of server CPU per rollout and of rollouts/s, and
    in how many rounds ``a`` cost less CPU.
    """
    runs: tuple[list[dict[str, Any]], list[dict[str, Any]]] = ([], [])
    with running(a) as (url_a, proc_a), running(b) as (url_b, proc_b):
        servers = ((url_a, proc_a.pid), (url_b, proc_b.pid))
        for url, _ in servers:
            trainer(url, "--rollouts", "300", "--concurrency", "50")  # warm-up
        for _ in range(rounds):
            before = [cpu_seconds(pid) for _, pid in servers]
            drivers = [start_trainer(url, "--rollouts", str(rollouts), *C50) for url, _ in servers]
            results = [trainer_result(driver) for driver in drivers]
            for result, (_, pid), spent, into in zip(results, servers, before, runs, strict=True):
                result["cpu_us"] = (cpu_seconds(pid) - spent) / rollouts * 1e6
                into.append(result)
    cpu = [x["cpu_us"] / y["cpu_us"] for x, y in zip(*runs, strict=True)]
    rate = [x["rollouts_per_s"] / y["rollouts_per_s"] for x, y in zip(*runs, strict=True)]
    return {
        "cpu_ratio": round(statistics.median(cpu), 3),
        "rate_ratio": round(statistics.median(rate), 3),
        "cpu_lower_rounds": sum(ratio < 1 for ratio in cpu),
        "rounds": rounds,
        "cpu_us": [round(statistics.median(r["cpu_us"] for r in side)) for side in runs],
        "rollouts_per_s": [round(statistics.median(r["rollouts_per_s"] for r in side)) for side in runs],
        "unfinished": sum(r["rollouts"] - r["completed"] for side in runs for r in side),
    }


def print_paired(label: str, figure: dict[str, Any]) -> None:
    cpu, rate = figure["cpu_us"], figure["rollouts_per_s"]
    print(
        f"  {label}: server CPU per rollout x{figure['cpu_ratio']} ({cpu[0]} vs {cpu[1]} us, lower in "
        f"{figure['cpu_lower_rounds']} of {figure['rounds']} rounds), rollouts/s x{figure['rate_ratio']} "
        f"({rate[0]} vs {rate[1]})" + (f", {figure['unfinished']} unfinished" if figure["unfinished"] else "")
    )


def measure_admission(rounds: int, inflight: int, warm_up: int) -> dict[str, Any]:
    """KiB per in-flight rollout in a burst of ``inflight`` inits, with the admission limit and without."""
    kib: dict[str, list[float]] = {"default": [], "no_admission": []}
    for _ in range(rounds):
        for variant, figures in kib.items():
            with running(Server.variant(variant)) as (url, proc):
                trainer(url, "--rollouts", str(warm_up), "--concurrency", "50")
                idle, loaded, seen = measure_inflight(url, proc.pid, inflight)
                figures.append(round((loaded - idle) / max(seen, 1), 2))
    return {
        "with": statistics.median(kib["default"]),
        "without": statistics.median(kib["no_admission"]),
        "runs": kib,
    }


# -- the run ----------------------------------------------------------------------------------------------


def measure_throughput(
    servers: dict[str, Server], rounds: int, rollouts: int, serial: int, inflight: int
) -> dict[str, Any]:
    """Sequential rounds over ``servers`` (best kept), then the in-flight memory of the first one."""
    runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
    with contextlib.ExitStack() as stack:
        started = {name: stack.enter_context(running(server)) for name, server in servers.items()}
        time.sleep(0.3)
        ours_url, ours = started["ours"]
        idle_start = rss_kib(ours.pid)
        for _ in range(rounds):
            for name, (url, proc) in started.items():
                runs.setdefault((name, "c50"), []).append(c50_run(url, proc.pid, rollouts))
                c1 = ["--rollouts", str(serial), "--concurrency", "1", "--tool-turns", "1"]
                runs.setdefault((name, "c1"), []).append(trainer(url, *c1))
        idle, loaded, seen = measure_inflight(ours_url, ours.pid, inflight)
    figures: dict[str, Any] = {"idle_mib": round(idle_start / 1024, 1), "idle_after_load_mib": round(idle / 1024, 1),
                               "inflight": seen, "inflight_mib": round(loaded / 1024, 1),
                               "inflight_kib": round((loaded - idle) / max(seen, 1), 2)}  # fmt: skip
    for name in servers:
        c50 = best(runs[(name, "c50")])
        figures[name] = {
            "c50_rollouts_per_s": c50["rollouts_per_s"],
            "c50_p99_ms": c50["p99_ms"],
            "c50_cpu_us": min(r["cpu_us"] for r in runs[(name, "c50")]),
            "c1_p50_ms": min(r["p50_ms"] for r in runs[(name, "c1")]),
            "statuses": c50["statuses"],
        }
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rollouts", type=int, default=2000, help="rollouts per concurrency-50 run")
    parser.add_argument("--serial", type=int, default=300, help="rollouts per concurrency-1 run")
    parser.add_argument(
        "--rounds", type=int, default=3, help="sequential runs per server and setting (best kept)"
    )
    parser.add_argument(
        "--inflight", type=int, default=5000, help="rollouts held in flight for the memory figure"
    )
    parser.add_argument("--max-concurrent", type=int, default=10000,
                        help="max_concurrent_rollouts of the second, all-running memory phase")  # fmt: skip
    parser.add_argument("--trick-rounds", type=int, default=10,
                        help="paired rounds per comparison (0 skips the tricks; --against still runs)")  # fmt: skip
    parser.add_argument("--against", type=Path, default=None, metavar="DIR",
                        help="another source tree whose osmosis serve is measured against this one's")  # fmt: skip
    parser.add_argument("--agent", default=AGENT, help=f"agent loop both servers serve (default: {AGENT})")
    parser.add_argument(
        "--agent-path", default=None, metavar="DIR", help="directory the agent is imported from"
    )
    args = parser.parse_args()
    ours = Server.serve(args.agent, agent_path=args.agent_path)
    servers = {"ours": ours, "floor": Server.floor()}
    if args.against is not None:
        servers["against"] = Server.serve(args.agent, tree=args.against.resolve(), agent_path=args.agent_path)
    figures = measure_throughput(servers, args.rounds, args.rollouts, args.serial, args.inflight)
    # The same burst with every rollout running at once (not the default: 100 run, the rest queue).
    wide = Server.serve(args.agent, agent_path=args.agent_path,
                        OSMOSIS_ROLLOUT_SERVER_MAX_CONCURRENT_ROLLOUTS=str(args.max_concurrent))  # fmt: skip
    with running(wide) as (url, proc):
        trainer(url, "--rollouts", str(args.rollouts), "--concurrency", "50")  # same warm-up as above
        wide_idle, wide_loaded, wide_seen = measure_inflight(url, proc.pid, args.inflight)
    figures["all_running_inflight_kib"] = round((wide_loaded - wide_idle) / max(wide_seen, 1), 2)
    mine, floor = figures["ours"], figures["floor"]
    figures["c50_ratio"] = round(mine["c50_rollouts_per_s"] / floor["c50_rollouts_per_s"], 2)
    figures["c1_p50_ratio"] = round(mine["c1_p50_ms"] / floor["c1_p50_ms"], 2)
    columns = [name for name in ("ours", "floor", "against") if name in figures]
    titles = {"ours": "osmosis serve", "floor": FLOOR.stem, "against": "--against"}
    print(f"{'':28}" + "".join(f"{titles[name]:>15}" for name in columns) + f"{'ratio':>9}{'goal':>9}")
    rows = [("c50 x1 tool, rollouts/s", "c50_rollouts_per_s", "c50_ratio", ">= 0.8"),
            ("c50 x1 tool, p99 ms", "c50_p99_ms", None, ""),
            ("c50 server CPU us/rollout", "c50_cpu_us", None, ""),
            ("c1 x1 tool, p50 ms", "c1_p50_ms", "c1_p50_ratio", "<= 2.0")]  # fmt: skip
    for label, key, ratio, goal in rows:
        cells = "".join(f"{figures[name][key]:>15}" for name in columns)
        shown = figures[ratio] if ratio else round(mine[key] / floor[key], 2)
        print(f"{label:28}{cells}{shown:>9}{goal:>9}")
    if "against" in figures:
        print(f"  --against's c50 ratio to {FLOOR.stem}: "
              f"{figures['against']['c50_rollouts_per_s'] / floor['c50_rollouts_per_s']:.2f}")  # fmt: skip
    print(
        f"server RSS idle: {figures['idle_mib']} MiB (after load {figures['idle_after_load_mib']} MiB; goal <= 150)"
    )
    print(
        f"server RSS with {figures['inflight']} rollouts in flight (default limits): {figures['inflight_mib']} MiB, "
        f"{figures['inflight_kib']} KiB per rollout (goal <= 20)"
    )
    print(
        f"  (same burst with {wide_seen} in flight, max_concurrent_rollouts={args.max_concurrent}, so every "
        f"rollout holds its own connection to TrainGate: {figures['all_running_inflight_kib']} KiB per rollout)"
    )
    print(
        f"paired rounds (both servers driven at once; medians of the per-round ratios, {args.trick_rounds} rounds):"
    )
    if args.against is not None:
        figures["against_paired"] = paired(ours, servers["against"], max(args.trick_rounds, 1), args.rollouts)
        print_paired(f"this checkout vs {args.against}", figures["against_paired"])
    if args.trick_rounds > 0:
        figures["tricks"] = {}
        for trick, (with_it, without_it) in TRICKS.items():
            figure = paired(
                Server.variant(with_it), Server.variant(without_it), args.trick_rounds, args.rollouts
            )
            figures["tricks"][trick] = figure
            print_paired(trick, figure)
        admission = measure_admission(3, args.inflight, args.rollouts)
        figures["init_admission_kib"] = admission
        print(
            f"  init admission (max_concurrent_inits=64 vs unlimited): {admission['with']} vs "
            f"{admission['without']} KiB per in-flight rollout ({args.inflight}-init burst, median of 3 fresh servers)"
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
