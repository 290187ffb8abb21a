"""What ``/metrics`` costs the rollout server: server CPU per rollout with metrics on against off.

    .venv/bin/python -m benchmarks.metrics_cost [--rounds 10] [--rollouts 1500]

Two servers of the calculator example, the same but for ``ServerConfig(metrics=...)``, driven at
once by ``benchmarks/trainer_driver.py`` at concurrency 50 with one tool turn (the paired rounds of
``benchmarks/rollout_server.py``: both see the same load from the rest of the machine, the median of
the per-round ratios is kept). The metrics server is scraped every 5 s during the rounds, as a
Prometheus would (three times as often as the usual 15 s), so the scrapes are in its column. Half the rounds run
the metrics server in the first place, half in the second, and the figure is the geometric mean of
the two placements' ratios, so a bias of either place cancels. Goal: at most 3% more CPU per rollout. Loopback only; every process is stopped at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import sys
import threading
import urllib.request
from collections.abc import Iterator
from unittest import mock

from benchmarks import rollout_server
from benchmarks.rollout_server import Server, paired, print_paired

GOAL = 1.03

METRICS_SERVER = """
import sys
import tempfile

import uvicorn

from examples.calculator.agent import agent_loop
from osmosis_ai.rollout.config import get_settings
from osmosis_ai.rollout.server import ServerConfig, create_app

metrics, port = sys.argv[1] == "on", int(sys.argv[2])
server = get_settings().server.model_copy(update={"outbox_path": tempfile.mkdtemp() + "/outbox.sqlite3"})
app = create_app(agent_loop, config=ServerConfig(server=server, metrics=metrics))
uvicorn.run(app, host="127.0.0.1", port=port, log_level="critical", access_log=False)
"""


def server(metrics: str) -> Server:
    return Server([sys.executable, "-c", METRICS_SERVER, metrics])


@contextlib.contextmanager
def scraping(every: float = 5.0) -> Iterator[list[int]]:
    """Scrape ``/metrics`` of every server ``rollout_server.running`` starts with metrics on, each
    ``every`` seconds; yields the list of scrape counts."""
    stop = threading.Event()
    counts: list[int] = []
    threads: list[threading.Thread] = []
    start = rollout_server.running

    def scrape(url: str, slot: int) -> None:
        while not stop.wait(every):
            with contextlib.suppress(OSError), urllib.request.urlopen(f"{url}/metrics", timeout=5) as page:
                page.read()
                counts[slot] += 1

    @contextlib.contextmanager
    def running(target: Server) -> Iterator[tuple[str, object]]:
        with start(target) as (url, proc):
            if target.argv[-1] == "on":
                counts.append(0)
                thread = threading.Thread(target=scrape, args=(url, len(counts) - 1), daemon=True)
                thread.start()
                threads.append(thread)
            yield url, proc

    with mock.patch.object(rollout_server, "running", running):
        try:
            yield counts
        finally:
            stop.set()
            for thread in threads:
                thread.join()


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=10, help="paired rounds (median kept)")
    parser.add_argument("--rollouts", type=int, default=1500, help="rollouts per server per round")
    args = parser.parse_args()
    half = max(args.rounds // 2, 1)
    with scraping() as scrapes:
        first = paired(server("on"), server("off"), half, args.rollouts)
        second = paired(server("off"), server("on"), half, args.rollouts)
    print("metrics on vs off, concurrency 50, 1 tool turn (ratio: on / off)")
    print_paired("/metrics on (scraped every 5 s) vs off", first)
    print_paired("/metrics off vs on (the servers' places swapped)", second)
    ratio = math.sqrt(first["cpu_ratio"] / second["cpu_ratio"])
    print(f"  server CPU per rollout, on / off, the two placements' geometric mean: x{ratio:.3f}")
    print(f"  scrapes answered: {sum(scrapes)}")
    ok = ratio <= GOAL and not first["unfinished"] and not second["unfinished"]
    print(f"  goal: server CPU per rollout x{GOAL} or less: {'met' if ok else 'NOT MET'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
