"""The sandbox under attack: model answers scored by ``code_tests_reward``, and scorers SIGKILLed mid-run.

    .venv/bin/python -m benchmarks.chaos_sandbox [--rows 200] [--runs 1000] [--seed 7]

1. **Scoring** (:func:`score_answers`): ``osmosis reward score`` (a real process, two workers) with
   :data:`code_tests` over ``rows`` answers: correct ones, wrong ones, and hostile ones (a fork bomb,
   an infinite loop, a sleep past the deadline, a memory bomb, connections to this machine's listening
   socket and to the outside, reading a secret file and the caller's secret environment variable,
   writing outside the sandbox, ``kill -9 -1``). A hostile answer defines the right function only
   if its attack worked, so a score above 0 is an escape (``kill -9 -1`` excepted: it harms nothing
   outside, so its answer scores 1). Then the same rows with ``$OSMOSIS_SANDBOX_BWRAP`` naming a
   missing file: a sandbox that cannot start, every row ``infra_error``, never a score.
   Counted: rows whose score is not the expected one, connections the listener took, files written
   outside, sandbox processes left (new PIDs whose command line is bwrap's or the harness's).
2. **Kills** (:func:`killed_scorers`): scorer processes (``--scorer``) each run random attacks, eight
   at a time, and are SIGKILLed at a random moment while their sandboxes run, until ``runs`` sandbox
   runs have started. After each kill, the processes carrying that scorer's marker (in their command
   line or environment) are listed: those alive 1 s later are counted (a killed caller's sandboxes
   run on to their deadline plus the backstop's grace: docs/design/sandbox.md), and those still
   alive past it are left over.

Goals: every row's score as expected, no connection, no file outside, every row ``infra_error``
without bwrap, and 0 processes left in both. ``tests/sandbox/test_chaos.py`` runs the short form.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.chaos_runtime import living, marked, wait_gone
from osmosis_ai.sandbox import code_tests_reward
from osmosis_ai.sandbox.local import BACKSTOP_GRACE, HARNESS
from osmosis_ai.sandbox.machine import BWRAP_ENV

REPO = Path(__file__).resolve().parent.parent
REWARD = "benchmarks.chaos_sandbox:code_tests"
SANDBOX_TIMEOUT = 2.0
SECRET_ENV = "OSMOSIS_CHAOS_SECRET"

code_tests = functools.partial(code_tests_reward, timeout=SANDBOX_TIMEOUT, memory_mb=256)
"""The reward scored: ``code_tests_reward`` with a short deadline, so the hanging answers cost little."""

TESTS = ["assert add(1, 2) == 3", "assert add(-4, 4) == 0", "assert add(10, 5) == 15"]
RIGHT = "def add(a, b):\n    return a + b\n"
WRONG = "def add(a, b):\n    return a - b\n"  # every test fails
HALF = "def add(a, b):\n    return a + b if a > 0 else 99\n"  # the first and last pass

# Each attack's code; where it could succeed, the right function is defined only after it did.
ATTACKS = {
    "fork bomb": "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n",
    "infinite loop": "while True:\n    pass\n",
    "sleep": "import time\ntime.sleep(3600)\n",
    "memory bomb": "hoard = [bytearray(64 * 1024 * 1024) for _ in range(1000)]\n",
    "network": (
        "import socket\nreached = False\nfor host in {hosts!r}:\n    try:\n"
        "        socket.create_connection((host, {port}), timeout=1).sendall(b'escaped')\n"
        "        reached = True\n    except OSError:\n        pass\n"
        "if reached:\n" + "".join(f"    {line}\n" for line in RIGHT.splitlines())
    ),
    "secret file": (
        "try:\n    stolen = open({secret!r}).read()\nexcept OSError:\n    stolen = ''\n"
        "if stolen:\n" + "".join(f"    {line}\n" for line in RIGHT.splitlines())
    ),
    "secret env": (
        f"import os\nif os.environ.get({SECRET_ENV!r}):\n"
        + "".join(f"    {line}\n" for line in RIGHT.splitlines())
    ),
    "write outside": (
        "import os\ntry:\n    open({outside!r}, 'w').write('escaped')\n    wrote = True\n"
        "except OSError:\n    wrote = False\n"
        "if wrote:\n" + "".join(f"    {line}\n" for line in RIGHT.splitlines())
    ),
    "kill -9 -1": "import os\ntry:\n    os.kill(-1, 9)\nexcept OSError:\n    pass\n" + RIGHT,
}
EXPECTED = {"right": 1.0, "wrong": 0.0, "half": 2 / 3, **dict.fromkeys(ATTACKS, 0.0), "kill -9 -1": 1.0}
KINDS = ("right", "wrong", "half", *ATTACKS)
WEIGHTS = (40, 20, 10, *[30 / len(ATTACKS)] * len(ATTACKS))


def _answer(code: str) -> str:
    return f"Here is my solution:\n\n```python\n{code}```\n"


class Listener:
    """A TCP listener on every address of this machine, counting the connections it takes."""

    def __init__(self) -> None:
        self.socket = socket.create_server(("0.0.0.0", 0))
        self.port = self.socket.getsockname()[1]
        self.taken = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self.socket.accept()
            except OSError:
                return
            self.taken += 1
            connection.close()

    def close(self) -> None:
        self.socket.close()


def _hosts() -> list[str]:
    """Addresses of this machine (its loopback and the one that routes out) and one outside it."""
    hosts = ["127.0.0.1"]
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("192.0.2.1", 9))  # no packet is sent: this only picks the outgoing address
        hosts.append(probe.getsockname()[0])
    except OSError:
        pass
    finally:
        probe.close()
    return [*hosts, "1.1.1.1"]


def make_rows(count: int, seed: int, root: Path, port: int) -> list[dict[str, Any]]:
    """``count`` rows of :data:`KINDS` (each kind at least once when ``count`` allows), their kind in
    ``extra_info``; the secret file and the outside path under ``root``."""
    rng = random.Random(seed)
    kinds = list(KINDS[:count]) + rng.choices(KINDS, WEIGHTS, k=max(count - len(KINDS), 0))
    rng.shuffle(kinds)
    values = {"hosts": _hosts(), "port": port, "secret": str(root / "secret.txt")}
    rows = []
    for index, kind in enumerate(kinds):
        template = {"right": RIGHT, "wrong": WRONG, "half": HALF}.get(kind) or ATTACKS[kind]
        code = template.format(**values, outside=str(root / f"escaped-{index}"))
        rows.append(
            {"solution_str": _answer(code), "ground_truth": "\n".join(TESTS), "extra_info": {"kind": kind}}
        )
    return rows


def _sandbox_processes(before: set[int]) -> set[int]:
    """New processes that are a sandbox's: bwrap (its command line carries ``--unshare-user``), the
    harness and what it forked (they keep its command line)."""
    return (marked("--unshare-user") | marked(HARNESS)) - before - {os.getpid()}


def _carrying(marker: str) -> set[int]:
    """Processes with ``marker`` in their command line (bwrap: its ``--setenv``) or environment (every
    process in the sandbox; readable by root or the same uid): one scorer's sandboxes, none other's."""
    found = marked(marker)
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            if entry.name.isdigit() and marker.encode() in (entry / "environ").read_bytes():
                found.add(int(entry.name))
    return found


def _score_command(
    root: Path, data: Path, out: Path, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "osmosis_ai", "reward", "score", "-f", REWARD, "-d", str(data),
               "--workers", "2", "--timeout", "60", "--journal", str(out.with_suffix(".sqlite")),
               "-o", str(out), "--max-failure-rate", "0", "-q"]  # fmt: skip
    return subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=1200)


def score_answers(rows: int, seed: int) -> dict[str, Any]:
    """Case 1 of the module docstring."""
    listener = Listener()
    before = _sandbox_processes(set())
    try:
        with tempfile.TemporaryDirectory(prefix="osmosis-chaos-sandbox-") as directory:
            root = Path(directory)
            (root / "secret.txt").write_text("hunter2")
            data = root / "answers.jsonl"
            written = make_rows(rows, seed, root, listener.port)
            data.write_text("".join(json.dumps(row) + "\n" for row in written))
            env = {**os.environ, "PYTHONPATH": str(REPO), SECRET_ENV: "hunter2"}
            env.pop(BWRAP_ENV, None)
            started = time.monotonic()
            scored = _score_command(root, data, root / "scored.jsonl", env)
            seconds = time.monotonic() - started
            lines = [json.loads(line) for line in (root / "scored.jsonl").read_text().splitlines()]
            wrong = []
            for line in lines:
                kind = written[line["row_index"]]["extra_info"]["kind"]
                expected = EXPECTED[kind]
                if (
                    line["outcome"] != "completed"
                    or line["score"] is None
                    or abs(line["score"] - expected) > 1e-9
                ):
                    wrong.append({"row": line["row_index"], "kind": kind, "outcome": line["outcome"],
                                  "score": line["score"], "expected": expected, "error": line.get("error")})  # fmt: skip
            escaped = sorted(path.name for path in root.glob("escaped-*"))
            infra_rows = written[: max(3, min(rows, 10))]
            (root / "infra.jsonl").write_text("".join(json.dumps(row) + "\n" for row in infra_rows))
            down = _score_command(
                root, root / "infra.jsonl", root / "down.jsonl", {**env, BWRAP_ENV: str(root / "no-bwrap")}
            )
            down_lines = [json.loads(line) for line in (root / "down.jsonl").read_text().splitlines()]
    finally:
        listener.close()
    left = wait_gone(_sandbox_processes(before), limit=10.0)
    return {
        "rows": len(lines),
        "exit_status": scored.returncode,
        "stderr": scored.stderr.strip()[-2000:],
        "seconds": round(seconds, 1),
        "kinds": dict(Counter(row["extra_info"]["kind"] for row in written)),
        "wrong": wrong,
        "connections": listener.taken,
        "escaped_files": escaped,
        "processes_left": len(left),
        "infra": {
            "rows": len(down_lines),
            "exit_status": down.returncode,
            "outcomes": dict(Counter(line["outcome"] for line in down_lines)),
            "scores": sorted({str(line["score"]) for line in down_lines}),
            "named_the_setting": all(BWRAP_ENV in (line.get("error") or "") for line in down_lines),
        },
    }


# -- kills ------------------------------------------------------------------------------------------

SCORER_ATTACKS = ("fork bomb", "infinite loop", "sleep", "memory bomb", "kill -9 -1")
CONCURRENT = 8


async def _attack_forever(marker: str, seed: int, timeout: float) -> None:
    from osmosis_ai.sandbox import run

    rng = random.Random(seed)

    async def one() -> None:
        while True:
            print("started", flush=True)
            code = ATTACKS[rng.choice(SCORER_ATTACKS)]
            await run(code, tests=TESTS, timeout=timeout, memory_mb=256, env={"OSMOSIS_CHAOS_MARK": marker})

    await asyncio.gather(*(one() for _ in range(CONCURRENT)))


@dataclass
class Kills:
    runs: int = 0
    kills: int = 0
    seen_during: int = 0  # sandbox processes seen alive just before a kill: the count can find them
    backstopped: int = 0  # alive 1 s after the kill: ended by the backstop at their deadline
    left: int = 0


def killed_scorers(runs: int, seed: int, timeout: float = SANDBOX_TIMEOUT) -> dict[str, Any]:
    """Case 2 of the module docstring, each run with ``timeout``."""
    rng = random.Random(seed)
    tally = Kills()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop(BWRAP_ENV, None)
    while tally.runs < runs:
        marker = f"chaos-sandbox-{uuid.uuid4().hex}"
        scorer = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.chaos_sandbox", "--scorer", marker, str(rng.randrange(1 << 30)),
             str(timeout)],
            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )  # fmt: skip
        assert scorer.stdout is not None
        started = 0
        while started < CONCURRENT and scorer.stdout.readline():  # its first runs are starting
            started += 1
        time.sleep(rng.uniform(0.0, 1.0))  # a random moment: bwrap starting, the code running, the deadline
        tally.seen_during += len(living(_carrying(marker)))
        scorer.kill()
        scorer.wait()
        started += sum(1 for line in scorer.stdout if line.startswith("started"))
        scorer.stdout.close()
        tally.runs += started
        tally.kills += 1
        after = wait_gone(_carrying(marker), limit=1.0)
        tally.backstopped += len(after)
        tally.left += len(wait_gone(after | _carrying(marker), limit=timeout + BACKSTOP_GRACE))
    return {
        "runs": tally.runs,
        "kills": tally.kills,
        "seen_during": tally.seen_during,
        "backstopped": tally.backstopped,
        "processes_left": tally.left,
    }


def run(rows: int, runs: int, seed: int) -> dict[str, Any]:
    return {"scoring": score_answers(rows, seed), "kills": killed_scorers(runs, seed)}


def goals_met(results: dict[str, Any]) -> bool:
    scoring, kills, infra = results["scoring"], results["kills"], results["scoring"]["infra"]
    return (
        scoring["exit_status"] == 0
        and not scoring["wrong"]
        and scoring["connections"] == 0
        and not scoring["escaped_files"]
        and scoring["processes_left"] == 0
        and infra["exit_status"] == 1
        and infra["outcomes"] == {"infra_error": infra["rows"]}
        and infra["scores"] == ["None"]
        and kills["processes_left"] == 0
    )


def table(results: dict[str, Any]) -> list[tuple[str, str, str]]:
    scoring, kills, infra = results["scoring"], results["kills"], results["scoring"]["infra"]
    return [
        ("rows scored / with the wrong score or outcome", f"{scoring['rows']} / {len(scoring['wrong'])}", "all / 0"),
        ("connections taken / files written outside", f"{scoring['connections']} / {len(scoring['escaped_files'])}",
         "0 / 0"),
        ("sandbox processes left after scoring", str(scoring["processes_left"]), "0"),
        ("no bwrap: rows infra_error / scored", f"{infra['outcomes'].get('infra_error', 0)}/{infra['rows']} / "
         f"{sum(n for o, n in infra['outcomes'].items() if o == 'completed')}", "all / 0"),
        ("sandbox runs / scorer SIGKILLs / sandbox processes seen at the kills",
         f"{kills['runs']} / {kills['kills']} / {kills['seen_during']}", "reported"),
        ("  of them alive 1 s after the kill (ended at their deadline + 2 s)", str(kills["backstopped"]), "reported"),
        ("sandbox processes left after the kills", str(kills["processes_left"]), "0"),
    ]  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--scorer", nargs=3, metavar=("MARKER", "SEED", "TIMEOUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.scorer:
        asyncio.run(_attack_forever(args.scorer[0], int(args.scorer[1]), float(args.scorer[2])))
        return 0
    results = run(args.rows, args.runs, args.seed)
    rows = table(results)
    width = max(len(label) for label, _, _ in rows)
    print(f"{'sandbox chaos':<{width}}  result  goal")
    for label, value, goal in rows:
        print(f"{label:<{width}}  {value}  {goal}")
    print(json.dumps(results, default=str))
    return 0 if goals_met(results) else 1


if __name__ == "__main__":
    sys.exit(main())
