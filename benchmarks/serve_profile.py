"""Where ``osmosis serve``'s CPU per rollout goes: a cProfile of the server over one measured run.

    .venv/bin/python -m benchmarks.serve_profile [--rollouts 3000] [--top 30] [--out FILE]

Starts ``osmosis serve --local`` with the calculator example under a profiler that the SIGUSR1
signal switches on and SIGUSR2 off (dumping the statistics to ``--out``), warms it up with
``benchmarks/trainer_driver.py``, then profiles exactly one concurrency-50 run with one tool turn,
the load of :mod:`benchmarks.rollout_server`: start-up, imports and the warm-up stay out of the
figures. Prints the server's CPU time per rollout in that run (inflated by the profiler, about
twice: read shares, not absolute µs), then the profiled µs per rollout by package (``osmosis_ai`` by module) and the ``--top`` functions by own time. The dump
opens with ``pstats`` for anything else (callers, cumulative times). Loopback only; the server is
stopped at the end.
"""

from __future__ import annotations

import argparse
import collections
import pstats
import re
import signal
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.rollout_server import AGENT, C50, Server, cpu_seconds, running, trainer

# Run in the server process: ``osmosis serve`` with the profiler behind two signals.
HOOK = """
import cProfile, os, signal, sys
out = sys.argv.pop(1)
profile = cProfile.Profile()
signal.signal(signal.SIGUSR1, lambda *_: profile.enable())
def stop(*_):
    profile.disable()
    profile.dump_stats(out + ".part")
    os.replace(out + ".part", out)  # whole or not there
signal.signal(signal.SIGUSR2, stop)
from osmosis_ai.cli import main
sys.argv[0] = "osmosis"
sys.exit(main())
"""


def component(path: str, function: str) -> str:
    """The package a profiled function belongs to (``osmosis_ai`` and ``examples`` by module)."""
    if path == "~":  # a builtin: named by itself, the C time of SQLite, pydantic and the like
        return f"builtin {function}"
    for marker in ("osmosis_ai/", "examples/"):
        if marker in path:
            return marker + path.rsplit(marker, 1)[1]
    site = re.search(r"site-packages/([^/]+)", path)
    if site:
        return site.group(1)
    stdlib = re.search(r"python3\.\d+/([^/]+)", path)
    return f"stdlib {stdlib.group(1) if stdlib else path}"


def report(dump: Path, rollouts: int, top: int) -> None:
    stats = pstats.Stats(str(dump))
    entries = stats.stats  # type: ignore[attr-defined]
    by_component: collections.Counter[str] = collections.Counter()
    for (path, _line, function), (_, _, own, _, _) in entries.items():
        by_component[component(path, function)] += own
    total = sum(by_component.values())
    print(f"profiled: {total / rollouts * 1e6:.0f} us per rollout in all")
    for name, seconds in by_component.most_common(top):
        print(f"  {seconds / rollouts * 1e6:8.1f} us  {seconds / total:6.1%}  {name}")
    print(f"top {top} functions by own time (us per rollout, calls per rollout):")
    rows = sorted(entries.items(), key=lambda item: -item[1][2])[:top]
    for (path, line, function), (_, calls, own, _, _) in rows:
        where = path.rsplit("site-packages/", 1)[-1]
        print(f"  {own / rollouts * 1e6:8.1f} us {calls / rollouts:5.1f}  {where}:{line}({function})")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rollouts", type=int, default=3000, help="rollouts in the profiled run")
    parser.add_argument("--top", type=int, default=30, help="rows of each table")
    parser.add_argument("--out", type=Path, default=None, help="where the pstats dump goes")
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp()) / "serve.prof"
    serve = Server.serve(AGENT)
    server = Server([sys.executable, "-c", HOOK, str(out), *serve.argv[3:]])
    with running(server) as (url, proc):
        trainer(url, "--rollouts", "300", "--concurrency", "50")  # warm-up, not profiled
        proc.send_signal(signal.SIGUSR1)
        before = cpu_seconds(proc.pid)
        result = trainer(url, "--rollouts", str(args.rollouts), *C50)
        spent = cpu_seconds(proc.pid) - before
        proc.send_signal(signal.SIGUSR2)
        deadline = time.monotonic() + 30
        while not out.exists() and time.monotonic() < deadline:  # the dump is written in the server
            time.sleep(0.1)
    if result["completed"] != args.rollouts or not out.exists():
        print(f"the profiled run did not finish: {result}", file=sys.stderr)
        return 1
    print(
        f"{args.rollouts} rollouts at c=50 x1 tool: {result['rollouts_per_s']} rollouts/s, "
        f"server CPU {spent / args.rollouts * 1e6:.0f} us per rollout while profiled; dump in {out}"
    )
    report(out, args.rollouts, args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
