"""``--backend ray`` on a real local Ray (one per xdist group of these tests, 2 CPUs): the same outcomes,
scores, pass@k and output files as one process (eval, test, reward score, regrade with a reward and
with a rubric's judge, eval-rubric, eval run with a server per worker); a worker SIGKILLed mid-run
loses no item and counts none twice; a run stopped on Ray resumes in one process, and one killed in
one process resumes on Ray, to the uninterrupted result; no actor stays. The ``slow`` ones start the command as a subprocess with a Ray of its own:
Ctrl-C exits 130 with one line and stops every process of that Ray, and a SIGKILLed driver takes its
Ray and workers along and resumes in one process."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from osmosis_ai.runs.journal import Journal
from tests.support.cli import REPO, Ran, cli, osmosis, subprocess_env
from tests.support.journals import journalled, untimed
from tests.support.openai_server import OpenAIServer, Reply
from tests.support.sockets import free_port
from tests.support.waiting import wait_until

# Their xdist groups (the suite uses --dist loadgroup) are set in tests/runs/conftest.py.

CALCULATOR = ["-m", "examples.calculator.agent:agent_loop", "-d", str(REPO / "examples/calculator/dataset.jsonl"),
              "--model", "scripted"]  # fmt: skip
REWARD = "examples.calculator.reward:calculator_reward"


@pytest.fixture(scope="module")
def ray_session() -> Iterator[Any]:
    """One local Ray (2 CPUs) for this module's tests on this worker; each backend use joins it as it is. It stops
    after the module's last test: an idle Ray's own processes keep using CPU until it stops."""
    ray = pytest.importorskip("ray")
    ray.init(
        address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False
    )
    yield ray
    ray.shutdown()


def _alive_actors() -> list[Any]:
    import ray._private.state

    return [a for a in ray._private.state.actors().values() if a["State"] != "DEAD"]


def _no_actors_left() -> None:
    wait_until(lambda: not _alive_actors(), timeout=30, what="every actor gone")


def test_eval_on_ray_gives_the_results_of_one_process(ray_session: Any, tmp_path: Path) -> None:
    outputs = {}
    for backend in ("local", "ray"):
        out = tmp_path / f"{backend}.json"
        ran = cli("eval", *CALCULATOR, "--eval-fn", REWARD, "--n", "2", "--batch-size", "4", "--backend", backend,
                  "--journal", str(tmp_path / f"{backend}.sqlite"), "-o", str(out))  # fmt: skip
        assert ran.returncode == 0, ran.stderr
        outputs[backend] = (ran.stdout, json.loads(out.read_text()))
    local_lines, ray_lines = (stdout.splitlines() for stdout, _ in (outputs["local"], outputs["ray"]))
    assert ray_lines[-1] == local_lines[-1] + "; on 2 Ray workers"
    assert any(line.startswith("pass@2 ") and line.endswith("1.000 [1.000, 1.000]") for line in ray_lines)
    assert untimed(outputs["ray"][1]) == untimed(outputs["local"][1])
    _no_actors_left()


def test_test_on_ray_gives_the_results_of_one_process(ray_session: Any, tmp_path: Path) -> None:
    documents = {}
    for backend in ("local", "ray"):
        out = tmp_path / f"{backend}.json"
        ran = cli("test", *CALCULATOR, "--concurrency", "4", "--backend", backend, "-o", str(out))
        assert ran.returncode == 0, ran.stderr
        documents[backend] = json.loads(out.read_text())
    assert ran.stdout.splitlines()[-2].endswith("; on 2 Ray workers")
    assert untimed(documents["ray"]) == untimed(documents["local"])
    _no_actors_left()


def test_reward_score_on_ray_gives_the_output_of_one_process(ray_session: Any, tmp_path: Path) -> None:
    data = tmp_path / "answers.jsonl"
    data.write_text("".join(json.dumps({"solution_str": f"#### {i % 3}", "ground_truth": "1", "id": i}) + "\n"
                            for i in range(12)))  # fmt: skip
    lines = {}
    for backend in ("local", "ray"):
        out = tmp_path / f"{backend}.jsonl"
        ran = cli("reward", "score", "-f", REWARD, "-d", str(data), "--workers", "1", "--backend", backend,
                  "--journal", str(tmp_path / f"{backend}.sqlite"), "-o", str(out), "--max-failure-rate", "1")  # fmt: skip
        assert ran.returncode == 0, ran.stderr
        lines[backend] = out.read_text()
    assert "Backend: Ray, 2 workers" in ran.stdout
    assert lines["ray"] == lines["local"]
    assert [json.loads(line)["score"] for line in lines["ray"].splitlines()] == [
        float(i % 3 == 1) for i in range(12)
    ]
    _no_actors_left()


def test_regrade_on_ray_gives_the_output_and_journal_of_one_process(
    ray_session: Any, openai_server: OpenAIServer, tmp_path: Path
) -> None:
    openai_server.default = Reply(content="12")
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps({"system_prompt": "s", "user_prompt": f"q{i}", "ground_truth": truth})
                            + "\n" for i, truth in enumerate(["12", "2", "5", "12"])))  # fmt: skip
    results = tmp_path / "eval.json"
    ran = cli("eval", "-m", "tests.support.agents:agent_loop", "-d", str(data), "--eval-fn", "tests.support.evals:exact",
              "--model", "m", "--base-url", openai_server.url, "--n", "2", "--journal", str(tmp_path / "eval.sqlite"),
              "--log-samples", "-o", str(results), "-q")  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    samples = tmp_path / "eval.samples.jsonl"
    requests = len(openai_server.requests)
    runs = {}
    for backend in ("local", "ray"):
        out, journal = tmp_path / f"{backend}.jsonl", tmp_path / f"{backend}.sqlite"
        ran = cli("regrade", str(results), str(samples), "--reward", "tests.support.rewards:contains", "-d", str(data),
                  "-r", "2", "-o", str(out), "--journal", str(journal), "--backend", backend)  # fmt: skip
        assert ran.returncode == 0, ran.stderr
        lines = ran.stdout.replace(str(out), "OUT").replace(str(journal), "JOURNAL").splitlines()
        runs[backend] = (lines, out.read_text(), journalled(journal))
    assert len(openai_server.requests) == requests  # not one model call: the stored answers were scored
    (local_lines, *local_files), (ray_lines, *ray_files) = runs["local"], runs["ray"]
    assert ray_files == local_files  # the output file and every journalled record, repeats included
    assert sum(tag == "repeat-1" for _, _, tag, _, _ in ray_files[1]) == 8
    assert local_lines[1].startswith("Scoring: ") and ray_lines[1] == "Backend: Ray, 2 workers"
    assert ray_lines[:1] + ray_lines[2:] == local_lines[:1] + local_lines[2:]  # the comparison's figures
    assert (
        ray_lines[-1] == "8 answers regraded: 8 scored"
        and "Changed: 2 of 8 answers scored by both (25.0%)" in ray_lines
    )
    _no_actors_left()


def test_rubric_regrade_on_ray_judges_as_one_process(
    ray_session: Any, openai_server: OpenAIServer, tmp_path: Path
) -> None:
    (tmp_path / "rubric_configs.yaml").write_text(
        "version: 1\ndefault_score_min: 0\ndefault_score_max: 1\nrubrics:\n  - id: tone\n"
        "    rubric: Is the reply polite?\n    model_info:\n      provider: openai\n"
        f"      model: local-judge\n      api_base: {openai_server.url}\n      timeout: 5\n"
    )
    (tmp_path / "judged.jsonl").write_text("".join(
        json.dumps({"conversation_id": f"c{i}", "rubric_id": "tone", "solution_str": f"reply {i}"}) + "\n"
        for i in range(4)
    ))  # fmt: skip
    home = tmp_path / "home"
    home.mkdir()
    judged = cli(
        "eval-rubric", "-r", "tone", "-d", "judged.jsonl", "-o", "rubric.json", cwd=tmp_path, home=home
    )
    assert judged.returncode == 0, judged.stderr

    def verdict(payload: dict[str, Any]) -> str:  # the judge's score: whether the answer's number is odd
        number = int(re.findall(r"reply (\d)", json.dumps(payload["messages"]))[-1])
        return json.dumps({"score": float(number % 2), "explanation": "odd"})

    openai_server.handler = verdict
    before = len(openai_server.requests)
    outputs = {}
    for backend in ("local", "ray"):
        ran = cli("regrade", "rubric.json", "--rubric", "tone", "-o", f"{backend}.jsonl", "-q", "--backend", backend,
                  "--journal", str(tmp_path / f"{backend}.sqlite"), "--concurrency", "1", cwd=tmp_path, home=home)  # fmt: skip
        assert ran.returncode == 0, ran.stderr
        outputs[backend] = (tmp_path / f"{backend}.jsonl").read_text()
    assert len(openai_server.requests) - before == 8  # the judge's calls, once per answer and backend
    assert outputs["ray"] == outputs["local"]
    assert [json.loads(line)["reward"] for line in outputs["ray"].splitlines()] == [0.0, 1.0, 0.0, 1.0]
    _no_actors_left()


def test_eval_rubric_on_ray_judges_as_one_process(
    ray_session: Any, openai_server: OpenAIServer, tmp_path: Path
) -> None:
    (tmp_path / "rubric_configs.yaml").write_text(
        "version: 1\ndefault_score_min: 0\ndefault_score_max: 1\nrubrics:\n  - id: tone\n"
        "    rubric: Is the reply polite?\n    model_info:\n      provider: openai\n"
        f"      model: local-judge\n      api_base: {openai_server.url}\n      timeout: 5\n"
    )
    (tmp_path / "judged.jsonl").write_text("".join(
        json.dumps({"conversation_id": f"c{i}", "rubric_id": "tone", "solution_str": f"reply {i}"}) + "\n"
        for i in range(4)
    ))  # fmt: skip
    home = tmp_path / "home"
    home.mkdir()

    def verdict(payload: dict[str, Any]) -> str:  # the judge's score: whether the answer's number is odd
        number = int(re.findall(r"reply (\d)", json.dumps(payload["messages"]))[-1])
        return json.dumps({"score": float(number % 2), "explanation": f"number {number}"})

    openai_server.handler = verdict
    judged = {}
    for backend in ("local", "ray"):
        ran = cli("eval-rubric", "-r", "tone", "-d", "judged.jsonl", "-n", "2", "-o", f"{backend}.json",
                  "--journal", str(tmp_path / f"{backend}.sqlite"), "--backend", backend, "--concurrency", "1",
                  cwd=tmp_path, home=home)  # fmt: skip
        assert ran.returncode == 0, ran.stderr
        assert ran.stdout.endswith("8 judgments: 8 completed (100.0%)\n")
        records = json.loads((tmp_path / f"{backend}.json").read_text())["records"]
        judged[backend] = [
            (r["id"], [(run["score"], run["explanation"]) for run in r["runs"]]) for r in records
        ]
    assert ran.stdout.startswith("Backend: Ray, 1 worker\n")  # one: each worker pays LiteLLM's import
    assert len(openai_server.requests) == 16  # every judgment once per backend
    assert judged["ray"] == judged["local"]
    assert [scores for _, scores in judged["ray"]] == [[(float(i % 2), f"number {i}")] * 2 for i in range(4)]
    _no_actors_left()


async def test_a_worker_killed_mid_run_loses_no_item_and_counts_none_twice(
    ray_session: Any, tmp_path: Path
) -> None:
    from osmosis_ai.runs.backends.ray import WorkerSpec, ray_pool
    from osmosis_ai.runs.engine import run_items
    from osmosis_ai.runs.items import work_items

    pids, release = tmp_path / "pids", tmp_path / "release"
    pids.mkdir()
    rows = [(i, {"value": i / 10, "hold": i == 3}) for i in range(8)]
    spec = WorkerSpec("tests.support.ray_workers:held", {"pids": str(pids), "release": str(release)})
    seen: list[tuple[int, int]] = []
    journal = Journal.open(tmp_path / "journal.sqlite", {"test": "ray"})
    with contextlib.closing(journal):
        async with ray_pool(spec, concurrency=4) as pool:
            assert pool.workers == 2
            run = asyncio.ensure_future(
                run_items(
                    work_items(rows, n=2),
                    pool,
                    concurrency=4,
                    journal=journal,
                    on_result=lambda r: seen.append(r.item.key),
                )
            )
            held = await asyncio.to_thread(wait_until, lambda: list(pids.iterdir()), 30, "an item held")
            victim = int(held[0].read_text())
            os.kill(victim, signal.SIGKILL)
            await asyncio.to_thread(wait_until, lambda: victim not in pool.pids, 30, "the worker replaced")
            release.touch()
            await run
            assert pool.workers == 2 and victim not in pool.pids
        recorded = journal.records()
    expected = [(row, sample) for row in range(8) for sample in range(2)]
    assert sorted(seen) == expected  # every item once, the ones on the killed worker included
    assert sorted(recorded) == expected
    assert {key: recorded[key].data["reward"] for key in expected} == {(r, s): r / 10 for r, s in expected}
    _no_actors_left()


async def test_an_item_held_on_a_worker_holds_up_none_sent_with_it(ray_session: Any, tmp_path: Path) -> None:
    from osmosis_ai.runs.backends.ray import WorkerSpec, ray_pool
    from osmosis_ai.runs.engine import run_items
    from osmosis_ai.runs.items import work_items

    pids, release = tmp_path / "pids", tmp_path / "release"
    pids.mkdir()
    rows = [(i, {"value": i, "hold": i == 0}) for i in range(8)]
    spec = WorkerSpec("tests.support.ray_workers:held", {"pids": str(pids), "release": str(release)})
    seen: list[int] = []
    async with ray_pool(spec, concurrency=8) as pool:
        # the 8 items are given out in one turn of the loop: 4 to a worker in one call each
        run = asyncio.ensure_future(run_items(work_items(rows), pool, concurrency=8,
                                              on_result=lambda r: seen.append(r.item.row_index)))  # fmt: skip
        await asyncio.to_thread(wait_until, lambda: len(seen) == 7, 30, "the 7 items not held")
        assert sorted(seen) == list(range(1, 8)) and not run.done()  # row 0 is still held
        release.touch()
        await run
    assert seen[-1] == 0
    _no_actors_left()


async def test_a_pipeline_that_raises_fails_the_run_with_its_error(ray_session: Any, tmp_path: Path) -> None:
    from osmosis_ai.runs.backends.ray import WorkerSpec, ray_pool
    from osmosis_ai.runs.engine import run_items
    from osmosis_ai.runs.items import work_items

    rows = [(i, {"value": i, "boom": i == 5}) for i in range(8)]
    spec = WorkerSpec("tests.support.ray_workers:held", {"pids": str(tmp_path), "release": str(tmp_path)})
    async with ray_pool(spec, concurrency=4) as pool:
        with pytest.raises(ValueError, match=r"^boom at row 5$"):
            await run_items(work_items(rows), pool, concurrency=4)
    _no_actors_left()


def test_eval_stopped_on_ray_resumes_in_one_process_to_the_uninterrupted_result(
    ray_session: Any, openai_server: OpenAIServer, tmp_path: Path
) -> None:
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps({"system_prompt": "s", "user_prompt": f"q{i}", "ground_truth": str(i % 3)})
                            + "\n" for i in range(6)))  # fmt: skip
    served = 0

    def stop_after_some(payload: dict[str, Any]) -> Reply:  # preflight and 5 answers, then a refused key
        nonlocal served
        served += 1
        return Reply(content="1") if served <= 6 else Reply(status=401)

    def command(journal: str, *extra: str) -> list[str]:
        return ["eval", "-m", "tests.support.agents:agent_loop", "-d", str(data), "--eval-fn", "tests.support.evals:exact",
                "--model", "m", "--base-url", openai_server.url, "--n", "2", "--batch-size", "2",
                "--journal", str(tmp_path / journal), *extra]  # fmt: skip

    openai_server.handler = stop_after_some
    stopped = cli(*command("resumed.sqlite", "--backend", "ray"))
    assert stopped.returncode == 1 and "the run stopped" in stopped.stderr
    _no_actors_left()
    openai_server.handler = None
    openai_server.default = Reply(content="1")
    resumed = cli(*command("resumed.sqlite", "-o", str(tmp_path / "resumed.json")))
    assert resumed.returncode == 0, resumed.stderr
    assert "Resuming" in resumed.stdout or "resum" in resumed.stdout.lower()
    whole = cli(*command("whole.sqlite", "-o", str(tmp_path / "whole.json")))
    assert whole.returncode == 0, whole.stderr
    assert resumed.stdout.splitlines()[-1] == whole.stdout.splitlines()[-1]
    documents = [json.loads((tmp_path / f"{name}.json").read_text()) for name in ("resumed", "whole")]
    assert untimed(documents[0]) == untimed(documents[1])


def _workspace(tmp_path: Path) -> Path:
    """``osmosis rollout init calc``'s workspace; its server keeps its state in the test's directory
    (set by the config's [env]: a Ray worker has the environment of the Ray it belongs to)."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    assert cli("rollout", "init", "calc", cwd=workspace).returncode == 0
    config = workspace / "configs" / "eval" / "calc.toml"
    config.write_text(config.read_text() + f'\n[env]\nXDG_STATE_HOME = "{tmp_path / "state"}"\n')
    return workspace


def _servers_started(workspace: Path) -> int:
    log = workspace / ".osmosis" / "logs" / "calc-server.log"
    return (
        len(re.findall(r"Uvicorn running on http://127\.0\.0\.1:\d+", log.read_text())) if log.exists() else 0
    )


def test_eval_run_on_ray_gives_the_results_of_one_process_each_worker_serving_the_rollout(
    ray_session: Any, openai_server: OpenAIServer, tmp_path: Path
) -> None:
    def add(payload: dict[str, Any]) -> str:
        found = re.search(r"what is (\d+) \+ (\d+)\?", str(payload["messages"][-1]["content"]))
        return str(int(found.group(1)) + int(found.group(2))) if found else "?"

    openai_server.handler = add
    workspace = _workspace(tmp_path)
    runs, servers = {}, {}
    for backend in ("local", "ray"):
        out = tmp_path / f"{backend}.jsonl"
        started = _servers_started(workspace)
        ran = cli("eval", "run", "configs/eval/calc.toml", "--base-url", openai_server.url, "--api-key", "k",
                  "--python", sys.executable, "--max-in-flight", "2", "--backend", backend,
                  "--journal", str(tmp_path / f"{backend}.sqlite"), "-o", str(out), cwd=workspace)  # fmt: skip
        assert ran.returncode == 0, ran.stderr
        records = [json.loads(line) for line in out.read_text().splitlines()]
        runs[backend] = (ran.stdout.splitlines(), [(r["row_index"], r["outcome"], r["reward"], r["final_messages"])
                                                   for r in records])  # fmt: skip
        servers[backend] = _servers_started(workspace) - started
    (local_lines, local_records), (ray_lines, ray_records) = runs["local"], runs["ray"]
    assert "Backend: Ray, 2 workers" in ray_lines
    assert ray_lines[-1] == local_lines[-1] + "; on 2 Ray workers"
    assert ray_records == local_records and [r[2] for r in ray_records] == [1.0, 1.0, 1.0]
    # One server for the run in one process; on Ray one per worker, none in the driver.
    assert servers == {"local": 1, "ray": 2}
    _no_actors_left()


def test_eval_run_on_ray_is_resumed_in_one_process_to_the_result_of_a_whole_run(
    ray_session: Any, openai_server: OpenAIServer, tmp_path: Path
) -> None:
    broken = {"7 + 5"}

    def answer(payload: dict[str, Any]) -> Reply:
        found = re.search(r"what is (\d+) \+ (\d+)\?", str(payload["messages"][-1]["content"]))
        if found is None:
            return Reply(content="ok")  # the preflight
        if f"{found.group(1)} + {found.group(2)}" in broken:
            return Reply(status=400)  # this row's rollout fails
        return Reply(content=str(int(found.group(1)) + int(found.group(2))))

    openai_server.handler = answer
    workspace = _workspace(tmp_path)

    def run(journal: str, *extra: str) -> Ran:
        return cli("eval", "run", "configs/eval/calc.toml", "--base-url", openai_server.url, "--api-key", "k",
                   "--python", sys.executable, "--max-in-flight", "2", "--journal", str(tmp_path / journal),
                   "-q", *extra, cwd=workspace)  # fmt: skip

    first = run("resumed.sqlite", "--backend", "ray")
    assert first.returncode == 1 and first.stdout.startswith("3 rollouts: 2 completed"), first.stdout
    _no_actors_left()
    broken.clear()
    resumed = run("resumed.sqlite", "--retry-failed", "-o", str(tmp_path / "resumed.jsonl"))
    assert resumed.returncode == 0, resumed.stderr
    asked = [r.json["messages"][-1]["content"] for r in openai_server.requests]
    assert asked.count("what is 2 + 3?") == 1 and asked.count("what is 40 + 2?") == 1  # not run again
    whole = run("whole.sqlite", "-o", str(tmp_path / "whole.jsonl"))
    assert (
        resumed.stdout
        == whole.stdout
        == "3 rollouts: 3 completed (100.0%); mean reward 1.000 over 3 completed\n"
    )
    records = {
        name: [(r["row_index"], r["reward"], r["final_messages"])
               for r in map(json.loads, (tmp_path / f"{name}.jsonl").read_text().splitlines())]
        for name in ("resumed", "whole")
    }  # fmt: skip
    assert records["resumed"] == records["whole"]


def test_eval_run_on_ray_whose_rollout_does_not_serve_is_the_one_line_of_one_process(
    ray_session: Any, openai_server: OpenAIServer, tmp_path: Path
) -> None:
    workspace = _workspace(tmp_path)
    (workspace / "rollouts" / "calc" / "main.py").write_text("raise SystemExit('no server today')\n")
    lines = {}
    for backend in ("local", "ray"):
        ran = cli("eval", "run", "configs/eval/calc.toml", "--base-url", openai_server.url, "--api-key", "k",
                  "--python", sys.executable, "--backend", backend, "--journal", str(tmp_path / f"{backend}.sqlite"),
                  cwd=workspace)  # fmt: skip
        assert ran.returncode == 1 and ran.stderr.count("\n") == 1, ran.stderr
        lines[backend] = ran.stderr
    for line in lines.values():  # the worker's error comes back as it is in one process
        assert (
            line.startswith("Error: ") and "rollouts/calc/main.py exited with status 1 before serving" in line
        )
        assert "no server today" in line and "Traceback" not in line
    _no_actors_left()


def _descendants(root: int) -> dict[int, str]:
    """The processes under ``root`` now (by parent PID, from /proc), each with its command line."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                stat = Path(f"/proc/{entry}/stat").read_text()
                children.setdefault(int(stat.rsplit(")", 1)[1].split()[1]), []).append(int(entry))
    found: dict[int, str] = {}
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            with contextlib.suppress(OSError):
                found[child] = Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\0", b" ").decode()
                todo.append(child)
    return found


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for its parent does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _journalled_runs(journal: Path) -> int:
    info = Journal.inspect(journal) if journal.exists() else None
    return -1 if info is None else info.runs


class _HeldEval:
    """``osmosis eval --backend ray`` of 6 rows as a subprocess that starts its own Ray: the stand-in
    answers the preflight and the first ``answered`` runs, then holds every model call (until
    :meth:`release`), so the test acts while items are in flight on both workers."""

    def __init__(self, server: OpenAIServer, tmp_path: Path, *, answered: int, backend: str = "ray") -> None:
        self.data = tmp_path / "data.jsonl"
        self.data.write_text("".join(json.dumps({"system_prompt": "s", "user_prompt": f"q{i}", "ground_truth": str(i % 2)})
                                     + "\n" for i in range(6)))  # fmt: skip
        self.journal = tmp_path / "journal.sqlite"
        self.gate = threading.Event()
        self.server = server
        served = itertools.count(1)
        server.handler = lambda payload: Reply(
            content="1", gate=None if next(served) <= answered + 1 else self.gate
        )
        command = self.command(backend, self.journal)
        self.process = subprocess.Popen([sys.executable, "-m", "osmosis_ai", *command], cwd=REPO,
                                        env=subprocess_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        text=True)  # fmt: skip
        self.answered = answered

    def command(self, backend: str, journal: Path, *extra: str) -> list[str]:
        return ["eval", "-m", "tests.support.agents:agent_loop", "-d", str(self.data), "--eval-fn", "tests.support.evals:exact",
                "--model", "m", "--base-url", self.server.url, "--batch-size", "2", "--backend", backend,
                "--journal", str(journal), *extra]  # fmt: skip

    def resumed_and_whole(self, backend: str, tmp_path: Path) -> tuple[Ran, Ran, list[Any]]:
        """The killed run resumed on ``backend``, the same run uninterrupted in one process, and
        their ``-o`` documents without timing fields."""
        resumed = cli(*self.command(backend, self.journal, "-o", str(tmp_path / "resumed.json")))
        assert resumed.returncode == 0, resumed.stderr
        whole = cli(*self.command("local", tmp_path / "whole.sqlite", "-o", str(tmp_path / "whole.json")))
        assert whole.returncode == 0, whole.stderr
        documents = [
            untimed(json.loads((tmp_path / f"{name}.json").read_text())) for name in ("resumed", "whole")
        ]
        return resumed, whole, documents

    def held(self) -> dict[int, str]:
        """Once the answered runs are journalled and two more are held at the model: every process
        the command started (its Ray's, the workers', their reward processes)."""
        wait_until(lambda: (self.server.in_flight.now >= 2 and _journalled_runs(self.journal) == self.answered)
                   or self.process.poll() is not None, timeout=90, what="two runs held, the others journalled")  # fmt: skip
        assert self.process.poll() is None, self.process.communicate()
        return _descendants(self.process.pid)

    def release(self) -> None:
        self.gate.set()
        self.server.handler = None
        self.server.default = Reply(content="1")
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()
        self.process.communicate(timeout=60)


@pytest.mark.slow
def test_ctrl_c_during_an_eval_on_ray_exits_130_with_one_line_and_stops_its_ray(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    pytest.importorskip("ray")
    run = _HeldEval(openai_server, tmp_path, answered=2)
    try:
        started = run.held()
        assert any("raylet" in line for line in started.values()) and any(
            "_Worker" in line for line in started.values()
        ), started
        run.process.send_signal(signal.SIGINT)
        _, stderr = run.process.communicate(timeout=60)
        assert run.process.returncode == 130
        # The one line saying why; on a loaded machine a stop past 1 s adds the CLI's "still stopping" notice.
        notice = "Interrupted: still stopping... (Ctrl-C again to quit at once)"
        assert [line for line in stderr.splitlines() if line != notice] == [
            "Interrupted: the finished runs are kept in the journal; run the same command again to resume."
        ]
        wait_until(lambda: not any(_alive(pid) for pid in started), 30, "every process of its Ray gone")
    finally:
        run.release()
    assert _journalled_runs(run.journal) == 2  # the finished runs are kept, the interrupted ones are not


@pytest.mark.slow
def test_an_eval_on_ray_whose_driver_is_killed_leaves_no_worker_and_resumes_in_one_process(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    pytest.importorskip("ray")
    run = _HeldEval(openai_server, tmp_path, answered=2)
    try:
        started = run.held()
        run.process.send_signal(signal.SIGKILL)
        run.process.wait(timeout=30)
        # Ray's reaper takes its raylet, GCS and workers (and so the reward processes) along at once.
        # Its two agents wait on the stopped GCS for up to a minute before they exit: not waited on here.
        agents = ("ray::DashboardAgent", "ray::RuntimeEnvAgent")
        ours = [pid for pid, line in started.items() if not line.startswith(agents)]
        wait_until(
            lambda: not [pid for pid in ours if _alive(pid)], 30, "the killed run's Ray and workers gone"
        )
    finally:
        for pid in started:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        run.release()
    assert _journalled_runs(run.journal) == 2
    resumed, whole, documents = run.resumed_and_whole("local", tmp_path)
    assert "Resuming: 2 of 6" in resumed.stdout
    assert resumed.stdout.splitlines()[-1] == whole.stdout.splitlines()[-1]
    assert documents[0] == documents[1]


@pytest.mark.slow
def test_ray_starts_during_the_preflight_and_a_refused_preflight_stops_it_with_the_local_line(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    pytest.importorskip("ray")
    gate = threading.Event()
    openai_server.handler = lambda payload: Reply(status=401, gate=gate)
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps({"system_prompt": "s", "user_prompt": f"q{i}", "ground_truth": "1"}) + "\n"
                            for i in range(2)))  # fmt: skip

    def command(backend: str) -> list[str]:
        return ["eval", "-m", "tests.support.agents:agent_loop", "-d", str(data), "--eval-fn", "tests.support.evals:exact",
                "--model", "m", "--base-url", openai_server.url, "--batch-size", "2", "--backend", backend,
                "--journal", str(tmp_path / f"{backend}.sqlite")]  # fmt: skip

    process = subprocess.Popen([sys.executable, "-m", "osmosis_ai", *command("ray")], cwd=REPO, env=subprocess_env(),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        # The preflight request is held at the stand-in while the command's Ray and its workers start.
        wait_until(lambda: sum("_Worker" in line for line in _descendants(process.pid).values()) == 2
                   or process.poll() is not None, timeout=90, what="both workers started during the preflight")  # fmt: skip
        assert process.poll() is None, process.communicate()
        assert openai_server.in_flight.now == 1  # the preflight, its max_tokens=1:
        assert [request.json["max_tokens"] for request in openai_server.requests] == [1]
        started = _descendants(process.pid)
    finally:
        gate.set()
        _, stderr = process.communicate(timeout=60)
    wait_until(lambda: not any(_alive(pid) for pid in started), 30, "every process of its Ray gone")
    local = cli(*command("local"))
    assert process.returncode == local.returncode != 0
    assert stderr.strip().splitlines() == local.stderr.strip().splitlines()[-1:]  # the one line, the same
    assert len(openai_server.requests) == 2  # the two preflights: nothing else was sent


@pytest.mark.parametrize("command", ["eval", "test"])
def test_the_workers_start_during_the_preflight_on_a_joined_ray_and_a_refused_one_leaves_none(
    ray_session: Any, openai_server: OpenAIServer, tmp_path: Path, command: str
) -> None:
    gate = threading.Event()
    openai_server.handler = lambda payload: Reply(status=401, gate=gate)
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps({"system_prompt": "s", "user_prompt": f"q{i}", "ground_truth": "1"}) + "\n"
                            for i in range(2)))  # fmt: skip

    def run(backend: str) -> Ran:
        options = (["--eval-fn", "tests.support.evals:exact", "--batch-size", "2", "--journal",
                    str(tmp_path / f"{backend}.sqlite")] if command == "eval" else ["--concurrency", "2"])  # fmt: skip
        return cli(command, "-m", "tests.support.agents:agent_loop", "-d", str(data), "--model", "m",
                   "--base-url", openai_server.url, *options, "--backend", backend)  # fmt: skip

    ran: list[Ran] = []
    thread = threading.Thread(target=lambda: ran.append(run("ray")))
    thread.start()
    try:
        # The preflight request is held at the stand-in while both workers start on the joined Ray.
        def started() -> bool:
            running = [actor for actor in _alive_actors() if actor["State"] == "ALIVE"]
            return len(running) == 2 and openai_server.in_flight.now == 1

        wait_until(lambda: started() or not thread.is_alive(), timeout=60,
                   what="both workers started during the preflight")  # fmt: skip
        assert thread.is_alive(), ran
        assert [request.json["max_tokens"] for request in openai_server.requests] == [1]
    finally:
        gate.set()
        thread.join(timeout=60)
    _no_actors_left()
    local = run("local")
    assert ran[0].returncode == local.returncode != 0
    assert ran[0].stderr.strip().splitlines()[-1:] == local.stderr.strip().splitlines()[-1:]
    assert len(openai_server.requests) == 2  # the two preflights: nothing else was sent


def test_the_worker_signs_in_with_the_drivers_provider_key_and_one_worker_is_one_in_the_lines(
    ray_session: Any, openai_server: OpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Set after the session's Ray started: its workers' processes have only what the driver sends them.
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-of-the-driver")
    openai_server.default = Reply(content="1")
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps({"system_prompt": "s", "user_prompt": f"q{i}", "ground_truth": "1"}) + "\n"
                            for i in range(4)))  # fmt: skip
    ran = cli("eval", "-m", "tests.support.agents:agent_loop", "-d", str(data), "--eval-fn", "tests.support.evals:exact",
              "--model", "deepseek/m", "--base-url", openai_server.url, "--batch-size", "1", "--backend", "ray",
              "--journal", str(tmp_path / "ray.sqlite"))  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    lines = ran.stdout.splitlines()  # one worker: each pays LiteLLM's import (seconds of CPU)
    assert "Backend: Ray, 1 worker" in lines and lines[-1].endswith("; on 1 Ray worker")
    assert len(openai_server.requests) == 5  # the driver's preflight, then the workers' four answers
    assert {request.headers.get("authorization") for request in openai_server.requests} == {
        "Bearer sk-of-the-driver"
    }
    _no_actors_left()


def test_an_eval_killed_in_one_process_resumes_on_ray_to_the_uninterrupted_result(
    ray_session: Any, openai_server: OpenAIServer, tmp_path: Path
) -> None:
    run = _HeldEval(openai_server, tmp_path, answered=3, backend="local")
    try:
        run.held()
        run.process.send_signal(signal.SIGKILL)
        run.process.wait(timeout=30)
    finally:
        run.release()
    assert _journalled_runs(run.journal) == 3
    resumed, whole, documents = run.resumed_and_whole("ray", tmp_path)
    assert "Resuming: 3 of 6" in resumed.stdout
    assert resumed.stdout.splitlines()[-1] == whole.stdout.splitlines()[-1] + "; on 2 Ray workers"
    assert documents[0] == documents[1]
    _no_actors_left()


def test_a_missing_ray_is_one_line_with_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # what an installation without the extra imports
    ran = cli("test", *CALCULATOR, "--backend", "ray")
    assert ran.returncode == 1
    assert ran.stderr.strip().splitlines()[-1] == (
        "Error: --backend ray needs the package 'ray'; install it with: pip install 'osmosis-ai[ray]'"
    )


def test_a_cluster_of_other_versions_is_refused_with_the_fix() -> None:
    pytest.importorskip("ray")
    from osmosis_ai.runs.backends.ray import RayBackendError, _check_versions

    with pytest.raises(
        RayBackendError, match=r"runs Ray 2\.0\.0 on Python 3\.9, .*pip install 'ray\[client\]==2\.0\.0'"
    ):
        _check_versions({"ray": "2.0.0", "python": [3, 9]})


@pytest.mark.parametrize(
    ("options", "status", "message"),
    [
        (["--ray-address", "auto"], 1, "Error: --ray-address needs --backend ray"),
        (
            ["--backend", "ray", "--ray-address", "10.0.0.1:6379"],
            2,
            "expected 'auto' (the Ray this machine is a node of) or 'ray://HOST:PORT'",
        ),
    ],
)
def test_ray_options_are_checked_before_anything_runs(options: list[str], status: int, message: str) -> None:
    ran = cli("eval", *CALCULATOR, "--eval-fn", REWARD, *options)
    assert ran.returncode == status and message in ran.stderr


@pytest.mark.parametrize("given", ["option", "RAY_ADDRESS"])
def test_a_cluster_address_that_nothing_answers_is_one_line_at_once(given: str, tmp_path: Path) -> None:
    pytest.importorskip("ray")
    port = free_port()
    if given == "option":  # Ray's client would retry it for 30 s
        address, options, env, named = (
            f"ray://127.0.0.1:{port}",
            ["--ray-address", f"ray://127.0.0.1:{port}"],
            {},
            "",
        )
    else:  # a head node's own address, as a Ray job's driver has it; Ray would wait minutes
        address, options, env, named = (
            f"127.0.0.1:{port}",
            [],
            {"RAY_ADDRESS": f"127.0.0.1:{port}"},
            " (RAY_ADDRESS)",
        )
    ran = osmosis("eval", *CALCULATOR, "--eval-fn", REWARD, "--backend", "ray", *options,
                  "--journal", str(tmp_path / "journal.sqlite"), env=env, timeout=60)  # fmt: skip
    assert ran.returncode == 1
    assert ran.stderr.strip().splitlines()[-1] == (
        f"Error: cannot reach the Ray cluster at '{address}'{named} (connection refused); start it (`ray start "
        "--head`) or give the address it prints (--ray-address auto or ray://HOST:10001)"
    )


def test_ray_address_set_to_the_jobs_api_url_is_one_line_with_the_fix(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    ran = osmosis("eval", *CALCULATOR, "--eval-fn", REWARD, "--backend", "ray", "--journal",
                  str(tmp_path / "journal.sqlite"), env={"RAY_ADDRESS": "http://127.0.0.1:8265"}, timeout=60)  # fmt: skip
    assert ran.returncode == 1 and "Traceback" not in ran.stderr
    line = ran.stderr.strip().splitlines()[-1]
    assert line.startswith("Error: Ray cannot use the address 'http://127.0.0.1:8265' (RAY_ADDRESS): ")
    assert "Set RAY_ADDRESS to the GCS address instead" in line


def test_a_ray_jobs_driver_joins_the_cluster_of_its_ray_address(ray_session: Any, tmp_path: Path) -> None:
    before = len(ray_session._private.state.actors())  # every actor this Ray ever had, the dead too
    address = ray_session.get_runtime_context().gcs_address
    out = tmp_path / "ray.json"
    ran = osmosis("eval", *CALCULATOR, "--eval-fn", REWARD, "--n", "2", "--batch-size", "4", "--backend", "ray",
                  "--journal", str(tmp_path / "journal.sqlite"), "-o", str(out), env={"RAY_ADDRESS": address})  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines()[-1].endswith("; on 2 Ray workers")
    assert len(ray_session._private.state.actors()) == before + 2  # its workers ran on this Ray
    assert ray_session.cluster_resources().get("CPU") == 2  # which the command left running
    _no_actors_left()


def test_regrade_refuses_auto_concurrency_on_ray_before_anything_runs(tmp_path: Path) -> None:
    ran = cli(
        "regrade",
        str(tmp_path / "any.jsonl"),
        "--rubric",
        "tone",
        "--concurrency",
        "auto",
        "--backend",
        "ray",
    )
    assert ran.returncode == 1 and ran.stderr == (
        "Error: --concurrency auto follows one process's judge requests; give --concurrency N with --backend ray\n"
    )
