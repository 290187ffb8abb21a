"""The same 0.3 program served by upstream osmosis-ai 0.3.8 and by this package, side by side.

    .venv/bin/python -m benchmarks.v03_servers [--rollouts 1000] [--concurrency 50 200] [--rounds 3]
        [--against DIR] [--no-upstream] [--bare]

Both servers run ``benchmarks/v03/workflow_main.py`` (one model call per rollout through one shared
HTTP client, an exact-answer grader) against the same model stand-in (``benchmarks.openai_stub``,
no delay), each in its own process: upstream's in ``.venv-upstream03/`` (``make upstream03``), this
package's in this interpreter. Each is driven by upstream's own ``RolloutClient``
(``benchmarks/v03/driver.py``, run by upstream's interpreter) at each concurrency, the two servers
alternating within a round so both see the same load from the rest of the machine. Printed per
concurrency: rollouts/s and server CPU per rollout (user + system time of the server process, from
``/proc``), the median over the rounds of each, and their ratios (this package / upstream); and
``workflow alone``: the CPU per rollout of the workflow's own model call made the same way without
any server, one at a time (``benchmarks/v03/workflow_alone.py``): a lower bound of the part of each
server's figure no server can save (httpx's pool costs more per call the more calls it holds at
once: about 1 ms one at a time, 1.3 ms 8 at a time, 2.4-3.4 ms 50 at a time on the 2-core machine
the figures in docs/benchmarks.md come from). Goals
(issue: serving 0.3 on the one engine): CPU per rollout <= 1/4 of upstream's, rollouts/s >= 2x at
c=200. ``--against DIR`` adds a third server, this package from another source tree (e.g. the code
before a change: ``git archive HEAD | tar -x -C DIR``), driven in the same rounds, and prints this
checkout's ratios to it; ``--no-upstream`` leaves upstream out (a before/after comparison only).
``--bare`` adds ``benchmarks/v03/bare_main.py``: the same model call and grading behind a bare ASGI
app on uvicorn (no validation, lease, deadline, slot or store), about the least any 0.3 server on
uvicorn spends per rollout of this workflow, and prints this package's ratio to it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from benchmarks.openai_stub import StubProcess
from benchmarks.rollout_server import cpu_seconds, free_port, wait_ready

REPO = Path(__file__).resolve().parent.parent
HERE = REPO / "benchmarks" / "v03"
UPSTREAM = REPO / ".venv-upstream03" / "bin" / "python"
SIDES = ("upstream 0.3.8", "this package")
BEFORE = "before"
BARE = "bare ASGI"  # bare_main.py: the floor of a server on uvicorn for this workflow
ALONE = "workflow alone"  # its model calls without a server, one at a time: the least no server can save


@contextlib.contextmanager
def served(side: str, root: Path | None = None) -> Iterator[tuple[str, int]]:
    """The workflow served by ``side`` (upstream's, or this package from ``root``; the bare app for
    :data:`BARE`): its URL and process id."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"_OSMOSIS_ROLLOUT_PORT": str(port)}
    python = str(UPSTREAM) if root is None else sys.executable
    # Run from benchmarks/v03 so upstream's interpreter cannot import this checkout's package; what a
    # server logs goes to a file (a pipe nobody reads would fill and stop it). Each of this package's
    # servers keeps its rollouts in a fresh SQLite file of its own (the default place, under
    # $XDG_STATE_HOME), not in one the servers compared would share.
    with tempfile.TemporaryFile() as log, tempfile.TemporaryDirectory() as state:
        if root is not None:
            env |= {"PYTHONPATH": str(root), "XDG_STATE_HOME": state}
        main = "bare_main.py" if side == BARE else "workflow_main.py"
        process = subprocess.Popen([python, main], cwd=HERE, env=env, stdout=subprocess.DEVNULL, stderr=log)
        url = f"http://127.0.0.1:{port}"
        try:
            wait_ready(url, process)  # type: ignore[arg-type]
            yield url, process.pid
        finally:
            process.terminate()
            process.wait(30)


def drive(url: str, chat: str, rollouts: int, concurrency: int) -> dict[str, float]:
    done = subprocess.run(
        [str(UPSTREAM), "driver.py", url, chat, str(rollouts), str(concurrency)],
        cwd=HERE, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"the driver failed against {url}:\n{done.stderr[-2000:]}")
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def alone(chat: str, rollouts: int) -> float:
    """CPU ms per rollout of the workflow's model call made without a server, one at a time
    (``workflow_alone.py``)."""
    done = subprocess.run(
        [sys.executable, "workflow_alone.py", chat, str(rollouts), "1"],
        cwd=HERE, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"workflow_alone.py failed:\n{done.stderr[-2000:]}")
    return float(json.loads(done.stdout.strip().splitlines()[-1])["cpu_ms"])


def measure(
    rollouts: int, concurrencies: list[int], rounds: int, roots: dict[str, Path | None]
) -> dict[int, dict[str, dict[str, float]]]:
    """Per concurrency, per side (``roots``: each side's source tree, ``None`` for upstream's): median
    rollouts/s and CPU ms per rollout over ``rounds``; for each other side also ``paired_cpu``, the
    median over the rounds of this package's CPU per rollout divided by that side's in the same round
    (steadier than the ratio of the medians when the machine's load moves between rounds)."""
    seen: dict[int, dict[str, list[tuple[float, float]]]] = {c: {s: [] for s in roots} for c in concurrencies}
    floors: list[float] = []
    with StubProcess(0.0) as chat, contextlib.ExitStack() as stack:
        servers = {side: stack.enter_context(served(side, root)) for side, root in roots.items()}
        for _ in range(rounds):
            for concurrency in concurrencies:
                for side, (url, pid) in servers.items():
                    before = cpu_seconds(pid)
                    try:
                        result = drive(url, chat, rollouts, concurrency)
                    except RuntimeError as exc:
                        raise RuntimeError(f"{side}, c={concurrency}: {exc}") from None
                    if result["successes"] != rollouts:
                        raise RuntimeError(f"{side}: {result['successes']} of {rollouts} rollouts succeeded")
                    cpu_ms = (cpu_seconds(pid) - before) / (rollouts + 1) * 1000
                    seen[concurrency][side].append((rollouts / result["seconds"], cpu_ms))
            floors.append(alone(chat, rollouts))
    figures: dict[int, dict[str, dict[str, float]]] = {}
    for c, sides in seen.items():
        ours = [cpu for _, cpu in sides[SIDES[1]]]
        figures[c] = {
            side: {
                "rollouts_per_s": statistics.median(rate for rate, _ in runs),
                "cpu_ms": statistics.median(cpu for _, cpu in runs),
            }
            for side, runs in sides.items()
        }
        figures[c][ALONE] = {"cpu_ms": statistics.median(floors)}
        for side, runs in sides.items():
            if side != SIDES[1]:
                paired = [mine / theirs for mine, (_, theirs) in zip(ours, runs, strict=True)]
                figures[c][side]["paired_cpu"] = statistics.median(paired)
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rollouts", type=int, default=1000, help="rollouts per run")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[50, 200])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--against", type=Path, default=None, metavar="DIR",
                        help="also serve this package from another source tree (e.g. before a change)")  # fmt: skip
    parser.add_argument("--no-upstream", action="store_true", help="serve upstream's side not at all")
    parser.add_argument("--bare", action="store_true", help="also serve the workflow from a bare ASGI app")
    args = parser.parse_args()
    if not UPSTREAM.exists():
        # the driver is upstream's client, run by upstream's interpreter, whichever servers are compared
        print("no .venv-upstream03/: run `make upstream03` first (it needs a Python 3.12)", file=sys.stderr)
        return 2
    roots: dict[str, Path | None] = {} if args.no_upstream else {SIDES[0]: None}
    roots[SIDES[1]] = REPO
    if args.against is not None:
        roots[BEFORE] = args.against.resolve()
    if args.bare:
        roots[BARE] = REPO
    figures = measure(args.rollouts, args.concurrency, args.rounds, roots)
    print(f"{'concurrency':<13}{'side':<16}{'rollouts/s':>12}{'CPU ms/rollout':>16}")
    for concurrency, sides in figures.items():
        for side, figure in sides.items():
            rate = f"{figure['rollouts_per_s']:>12.0f}" if "rollouts_per_s" in figure else f"{'-':>12}"
            print(f"{concurrency:<13}{side:<16}{rate}{figure['cpu_ms']:>16.2f}")
        us = sides[SIDES[1]]
        for other, whose in (
            (SIDES[0], "upstream's"),
            (BEFORE, "the other tree's"),
            (BARE, "the bare app's"),
        ):
            if other in sides:
                them = sides[other]
                print(
                    f"c={concurrency}: this package {us['rollouts_per_s'] / them['rollouts_per_s']:.2f}x "
                    f"{whose} rollouts/s, {us['cpu_ms'] / them['cpu_ms']:.2f}x its server CPU per rollout "
                    f"(round by round: {them['paired_cpu']:.2f}x)"
                )
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
