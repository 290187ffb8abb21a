"""0.3's local loop from an empty directory: ``osmosis rollout init NAME`` scaffolds the workspace,
``osmosis eval run configs/eval/NAME.toml`` serves its ``main.py`` as a subprocess and scores every row
through the local TrainGate against the OpenAI-compatible stand-in; a second init refuses and writes
nothing; config mistakes are named by key and file; a run stopped mid-way resumes to the same result,
its server stopped."""

from __future__ import annotations

import json
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.report.test_atif import valid_file
from tests.support.cli import REPO, Ran, cli, subprocess_env
from tests.support.openai_server import OpenAIServer, Reply
from tests.support.waiting import wait_until

CONFIG = "configs/eval/calc.toml"
# The rollout on this interpreter, also where uv is on PATH (it would make the rollout an environment
# of its own from the package index).
HERE = ("--python", sys.executable)


@pytest.fixture
def adder(openai_server: OpenAIServer) -> OpenAIServer:
    """The policy stand-in answers ``what is A + B?`` with the sum (the scaffold's dataset asks that)."""

    def answer(payload: Any) -> str:
        found = re.search(r"what is (\d+) \+ (\d+)\?", str(payload["messages"][-1]["content"]))
        return str(int(found.group(1)) + int(found.group(2))) if found else "?"

    openai_server.handler = answer
    return openai_server


def _env(tmp_path: Path) -> dict[str, str]:
    # The server's results and the run's journals stay in the test's directory.
    return {"XDG_STATE_HOME": str(tmp_path / "state"), "OSMOSIS_CACHE_DIR": str(tmp_path / "cache")}


def _osmosis(workspace: Path, *args: str) -> Ran:
    return cli(*args, cwd=workspace, env=_env(workspace.parent))


def _workspace(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    made = _osmosis(workspace, "rollout", "init", "calc")
    assert made.returncode == 0, made.stderr
    return workspace


def _eval(workspace: Path, server: OpenAIServer, *extra: str, python: tuple[str, ...] = HERE) -> Ran:
    return _osmosis(
        workspace, "eval", "run", CONFIG, "--base-url", server.url, "--api-key", "k", *python, *extra
    )


def test_init_then_eval_run_scores_every_row(tmp_path: Path, adder: OpenAIServer) -> None:
    workspace = _workspace(tmp_path)
    listed = _osmosis(workspace, "rollout", "list", "--json")
    assert json.loads(listed.stdout)["rollouts"] == [
        {"name": "calc", "directory": "rollouts/calc", "eval_config": CONFIG}
    ]
    ran = _eval(
        workspace,
        adder,
        "--json",
        "-o",
        str(tmp_path / "records.jsonl"),
        "--report",
        str(tmp_path / "r.html"),
    )
    assert ran.returncode == 0, ran.stderr
    assert "records.jsonl" in (tmp_path / "r.html").read_text()  # the report of the run's records
    summary = json.loads(ran.stdout)
    assert summary["kind"] == "eval run" and summary["rows"] == 3
    assert summary["outcomes"]["completed"] == 3 and summary["mean_score"]["value"] == 1.0
    records = [json.loads(line) for line in (tmp_path / "records.jsonl").read_text().splitlines()]
    assert [(r["row_index"], r["reward"]) for r in records] == [(0, 1.0), (1, 1.0), (2, 1.0)]
    # Three rollouts plus the policy's preflight; every rollout's call came through the TrainGate.
    assert len(adder.requests) == 4

    _assert_stopped(workspace)
    again = _eval(workspace, adder, "-q")  # the journal has every rollout: nothing runs again
    assert again.returncode == 0, again.stderr
    assert again.stdout == "3 rollouts: 3 completed (100.0%); mean reward 1.000 over 3 completed\n"
    assert len(adder.requests) == 4


def test_trajectories_are_one_valid_atif_file_per_rollout_that_report_opens(
    tmp_path: Path, adder: OpenAIServer
) -> None:
    workspace = _workspace(tmp_path)
    directory, records = tmp_path / "trajectories", tmp_path / "records.jsonl"
    ran = _eval(workspace, adder, "-o", str(records), "--trajectories", str(directory))
    assert ran.returncode == 0, ran.stderr
    assert f"wrote 3 ATIF trajectories to {directory}" in ran.stdout
    by_id = {r["rollout_id"]: r for r in map(json.loads, records.read_text().splitlines())}
    assert sorted(p.name for p in directory.iterdir()) == sorted(f"{rollout}.json" for rollout in by_id)
    for path in directory.iterdir():
        document = valid_file(path)
        record = by_id[document["trajectory_id"]]
        osmosis = document["extra"]["osmosis"]
        assert (osmosis["command"], osmosis["outcome"], osmosis["reward"]) == ("eval run", "completed", 1.0)
        agent_steps = [step for step in document["steps"] if step["source"] == "agent"]
        assert [s["metrics"]["completion_token_ids"] for s in agent_steps] == [
            t["token_ids"] for t in record["turns"]
        ]
    report = _osmosis(workspace, "report", str(directory), "--json")
    assert report.returncode == 0, report.stderr
    [summary] = json.loads(report.stdout)["runs"]
    assert (summary["kind"], summary["outcomes"]["completed"]) == ("eval run", 3)


def test_pass_at_k_rows_and_a_changed_rollout(tmp_path: Path, adder: OpenAIServer) -> None:
    workspace = _workspace(tmp_path)
    config = workspace / CONFIG
    config.write_text(config.read_text().replace("# n = 1 ", "n = 2 "))
    ran = _eval(workspace, adder, "--rows", "0,2", "--json")
    assert ran.returncode == 0, ran.stderr
    summary = json.loads(ran.stdout)
    assert summary["samples_per_row"] == 2 and summary["outcomes"]["completed"] == 4
    assert summary["pass_at_k"]["2"]["value"] == 1.0

    main = workspace / "rollouts" / "calc" / "main.py"
    main.write_text(main.read_text() + "\n# edited\n")
    refused = _eval(workspace, adder, "--rows", "0,2", "-q")
    assert refused.returncode == 1
    assert "rollout changed" in refused.stderr and "--fresh" in refused.stderr
    assert _eval(workspace, adder, "--rows", "0,2", "-q", "--fresh").returncode == 0


def test_retry_failed_runs_the_failed_rollouts_again(tmp_path: Path, openai_server: OpenAIServer) -> None:
    workspace = _workspace(tmp_path)
    broken = {"7 + 5"}

    def answer(payload: Any) -> Reply:
        found = re.search(r"what is (\d+) \+ (\d+)\?", str(payload["messages"][-1]["content"]))
        if found is None:
            return Reply(content="ok")  # the preflight
        if f"{found.group(1)} + {found.group(2)}" in broken:
            return Reply(status=400)  # the policy refuses this row's call: the workflow fails
        return Reply(content=str(int(found.group(1)) + int(found.group(2))))

    openai_server.handler = answer
    first = _eval(workspace, openai_server, "-q")
    assert first.returncode == 1 and first.stdout.startswith("3 rollouts: 2 completed"), first.stdout
    broken.clear()
    kept = _eval(workspace, openai_server, "-q")  # a failure is kept without --retry-failed
    assert kept.returncode == 1 and kept.stdout.startswith("3 rollouts: 2 completed"), kept.stdout
    retried = _eval(workspace, openai_server, "-q", "--retry-failed")
    assert retried.returncode == 0, retried.stderr
    assert retried.stdout == "3 rollouts: 3 completed (100.0%); mean reward 1.000 over 3 completed\n"


def test_a_dataset_as_0_3_writes_it(tmp_path: Path, adder: OpenAIServer) -> None:
    # 0.3.8's local datasets may leave out system_prompt and name the answer `label`.
    workspace = _workspace(tmp_path)
    data = tmp_path / "rows.csv"
    data.write_text("user_prompt,label,topic\nwhat is 1 + 1?,2,sums\nwhat is 2 + 2?,5,sums\n")
    ran = _eval(workspace, adder, "--dataset-file", str(data), "--rows", "1", "--json")
    assert ran.returncode == 0, ran.stderr  # a wrong answer is a completed rollout rewarded 0
    summary = json.loads(ran.stdout)
    assert summary["outcomes"]["completed"] == 1 and summary["mean_score"]["value"] == 0.0
    assert adder.requests[-1].json["messages"] == [{"role": "user", "content": "what is 2 + 2?"}]


def test_metadata_mode_rows_are_the_workflows_input(tmp_path: Path, adder: OpenAIServer) -> None:
    # 0.3.8's metadata mode: a `metadata` column (an object, or its JSON text in a CSV cell) is the
    # rollout's metadata, and the prompt and label columns may be left out or left blank.
    workspace = _workspace(tmp_path)
    main = workspace / "rollouts" / "calc" / "main.py"
    text = main.read_text()
    for old, new in [
        ("rollout.api_key, ctx.prompt)", "rollout.api_key, prompt)"),
        ("[*ctx.prompt, {", "[*prompt, {"),
        ("        rollout = get_rollout_context()\n",
         "        rollout = get_rollout_context()\n        prompt = ctx.prompt or "
         "[{'role': 'user', 'content': 'what is {a} + {b}?'.format(**ctx.metadata)}]\n"),
        ("(ctx.label or \"\").strip()", "(ctx.label or str(ctx.metadata['a'] + ctx.metadata['b']))"),
    ]:  # fmt: skip
        assert old in text, old
        text = text.replace(old, new)
    main.write_text(text)
    data = tmp_path / "rows.csv"
    data.write_text('user_prompt,label,metadata\n,,"{""a"": 3, ""b"": 4}"\nwhat is 1 + 1?,2,\n')
    ran = _eval(workspace, adder, "--dataset-file", str(data), "--json")
    assert ran.returncode == 0, ran.stderr + (workspace / ".osmosis/logs/calc-server.log").read_text()[-2000:]
    summary = json.loads(ran.stdout)
    assert summary["outcomes"]["completed"] == 2 and summary["mean_score"]["value"] == 1.0
    asked = sorted(r.json["messages"][-1]["content"] for r in adder.requests[1:])
    assert asked == ["what is 1 + 1?", "what is 3 + 4?"]

    lines = tmp_path / "rows.jsonl"
    lines.write_text('{"metadata": {}}\n')  # no prompt and nothing in metadata: no input at all
    refused = _eval(workspace, adder, "--dataset-file", str(lines), "-q")
    assert refused.returncode == 1 and refused.stderr.count("\n") == 1
    assert "row 0 has no user_prompt and no metadata" in refused.stderr


def _telling_its_interpreter(workspace: Path) -> Path:
    """The scaffold's main.py, which also writes the interpreter it runs on to its log."""
    main = workspace / "rollouts" / "calc" / "main.py"
    main.write_text(main.read_text().replace("import uvicorn\n", "import uvicorn\n\nimport sys\n"
                                             "print('interpreter:', sys.executable, flush=True)\n", 1))  # fmt: skip
    return workspace / ".osmosis" / "logs" / "calc-server.log"


def test_the_rollout_runs_under_python_or_in_this_environment_as_its_header_says(
    tmp_path: Path, adder: OpenAIServer
) -> None:
    workspace = _workspace(tmp_path)
    log = _telling_its_interpreter(workspace)
    main = (workspace / "rollouts" / "calc" / "main.py").resolve()
    bare = tmp_path / "bin"  # a PATH without uv: the rollout runs in this environment
    bare.mkdir()
    env = {**_env(tmp_path), "PATH": str(bare)}
    here = cli("eval", "run", CONFIG, "--base-url", adder.url, "--api-key", "k", cwd=workspace, env=env)
    assert here.returncode == 0, here.stderr
    assert f"Rollout server: {main} in this environment ({sys.executable}) (log: " in here.stdout
    assert f"interpreter: {sys.executable}\n" in log.read_text()

    # A virtualenv of its own (its packages this one's, by a .pth file), named with --python.
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    [site] = venv.glob("lib/python*/site-packages")
    (site / "outer.pth").write_text("\n".join(sys.path[1:]) + "\n")
    python = venv / "bin" / "python"
    own = cli("eval", "run", CONFIG, "--base-url", adder.url, "--api-key", "k", "--python", str(python), "--fresh",
              cwd=workspace, env=env)  # fmt: skip
    assert own.returncode == 0, own.stderr
    assert f"Rollout server: {main} under {python} (--python) (log: " in own.stdout
    assert f"interpreter: {python}\n" in log.read_text()


@pytest.mark.skipif(
    shutil.which("uv") is None,
    reason="uv is not on PATH here: the rollout's uv-managed environment (uv sync, then uv run) is tested "
    "where uv is installed",
)
def test_with_uv_on_path_the_rollout_runs_in_its_uv_environment(tmp_path: Path, adder: OpenAIServer) -> None:
    workspace = _workspace(tmp_path)
    log = _telling_its_interpreter(workspace)
    pyproject = workspace / "rollouts" / "calc" / "pyproject.toml"
    # The rollout's environment gets this checkout (the package index gives its dependencies).
    pyproject.write_text(re.sub(r"dependencies = \[.*\]", f'dependencies = ["osmosis-ai[server] @ {REPO.as_uri()}"]',
                                pyproject.read_text()))  # fmt: skip
    ran = _eval(workspace, adder, python=())
    assert ran.returncode == 0, ran.stderr + log.read_text()[-3000:]
    assert "in its uv environment (uv run --project " in ran.stdout
    assert f"interpreter: {workspace.resolve() / 'rollouts' / 'calc' / '.venv'}" in log.read_text()
    assert ran.stdout.endswith("3 rollouts: 3 completed (100.0%); mean reward 1.000 over 3 completed\n")

    pyproject.write_text("[project\n")  # an environment uv cannot make: one line with the end of its output
    broken = _eval(workspace, adder, "--fresh", python=())
    assert broken.returncode == 1 and broken.stderr.count("\n") == 1, broken.stderr
    assert f"uv sync --project {pyproject.parent.resolve()} failed with status" in broken.stderr
    assert "[project" in broken.stderr.partition("its output ends:")[2]  # uv quoting the line


def test_a_second_init_refuses_and_leaves_the_files(tmp_path: Path) -> None:
    workspace = _workspace(tmp_path)
    main = workspace / "rollouts" / "calc" / "main.py"
    main.write_text("# mine\n")
    files = sorted(p for p in workspace.rglob("*") if p.is_file())
    again = _osmosis(workspace, "rollout", "init", "calc")
    assert again.returncode == 1
    assert again.stderr == (
        "Error: rollouts/calc already exists: rollout 'calc' was not created (nothing written)\n"
    )
    assert main.read_text() == "# mine\n"
    assert sorted(p for p in workspace.rglob("*") if p.is_file()) == files
    # A config left behind alone is not written over either.
    (workspace / "configs" / "eval" / "other.toml").write_text("kept")
    assert _osmosis(workspace, "rollout", "init", "other").returncode == 1
    assert (workspace / "configs" / "eval" / "other.toml").read_text() == "kept"
    assert not (workspace / "rollouts" / "other").exists()


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (("# limit = 100 ", "limt = 100 "), "unknown key evaluation.limt (did you mean 'limit'?)"),
        (("# n = 1 ", "n = 0 "), "evaluation.n must be a whole number of at least 1, got 0"),
        (('entrypoint = "main.py"', 'entrypoint = "main.py"\ncommit_sha = "abc1234"'),
         "experiment.commit_sha pins a commit on the platform"),
        (('dataset = "rollouts/calc/dataset.jsonl"', 'dataset = "my-platform-set"'),
         "experiment.dataset = 'my-platform-set' names a platform dataset"),
        (("[evaluation]", "[evaluaton]"), "unknown table [evaluaton] (did you mean 'evaluation'?)"),
    ],
)  # fmt: skip
def test_a_bad_config_is_named_by_key_and_file(tmp_path: Path, edit: tuple[str, str], expected: str) -> None:
    workspace = _workspace(tmp_path)
    config = workspace / CONFIG
    text = config.read_text()
    assert edit[0] in text
    config.write_text(text.replace(edit[0], edit[1], 1))
    ran = _osmosis(workspace, "eval", "run", CONFIG)
    assert ran.returncode == 1
    assert ran.stderr.startswith(f"Error: {config.resolve()}: ") and expected in ran.stderr
    assert ran.stderr.count("\n") == 1


def test_the_flag_form_of_eval_is_still_0_2s(tmp_path: Path) -> None:
    ran = _osmosis(tmp_path, "eval", "-d", "d.jsonl", "--eval-fn", "m:f")
    assert ran.returncode == 1 and "osmosis eval needs -m/--module" in ran.stderr


def _port_of(log: Path) -> int:
    found = re.search(r"http://127\.0\.0\.1:(\d+)", log.read_text())
    assert found, log.read_text()
    return int(found.group(1))


def _refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    except ConnectionRefusedError:
        return True
    return False


def _assert_stopped(workspace: Path) -> None:
    """The rollout server the run started (its port from its log) no longer listens. A stop that
    outlasted the command's grace leaves it to the kernel's signal, so it is waited for."""
    port = _port_of(workspace / ".osmosis" / "logs" / "calc-server.log")
    wait_until(lambda: _refused(port), timeout=30, what=f"the rollout server on port {port} stopped")


def test_a_main_py_that_does_not_serve_is_one_line_with_its_output(
    tmp_path: Path, adder: OpenAIServer
) -> None:
    workspace = _workspace(tmp_path)
    (workspace / "rollouts" / "calc" / "main.py").write_text("raise SystemExit('no server today')\n")
    ran = _eval(workspace, adder)
    assert ran.returncode == 1 and ran.stderr.count("\n") == 1
    assert "rollouts/calc/main.py exited with status 1 before serving" in ran.stderr
    assert "no server today" in ran.stderr and "Traceback" not in ran.stderr


def test_stopped_mid_run_it_resumes_to_the_same_result_and_stops_its_server(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    workspace = _workspace(tmp_path)
    held = threading.Event()

    def answer(payload: Any) -> Reply:
        found = re.search(r"what is (\d+) \+ (\d+)\?", str(payload["messages"][-1]["content"]))
        if found is None:
            return Reply(content="ok")  # the preflight
        a, b = int(found.group(1)), int(found.group(2))
        return Reply(content=str(a + b), gate=held if a == 40 else None)  # the last row waits

    openai_server.handler = answer
    command = ["eval", "run", CONFIG, "--base-url", openai_server.url, "--api-key", "k", *HERE, "-q",
               "-o", str(tmp_path / "records.jsonl")]  # fmt: skip
    env = subprocess_env(**_env(tmp_path))
    process = subprocess.Popen([sys.executable, "-m", "osmosis_ai", *command], cwd=workspace, env=env,
                               text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    try:
        wait_until(lambda: openai_server.in_flight.now == 1 and len(openai_server.requests) == 4,
                   timeout=60, what="the last row's model call held")  # fmt: skip
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=60)
    finally:
        held.set()
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, stderr
    assert stderr.startswith("Interrupted") and "kept" in stderr  # within the grace or at its end
    _assert_stopped(workspace)

    resumed = _osmosis(workspace, *command)
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout == "3 rollouts: 3 completed (100.0%); mean reward 1.000 over 3 completed\n"
    records = [json.loads(line) for line in (tmp_path / "records.jsonl").read_text().splitlines()]
    assert [(r["row_index"], r["reward"]) for r in records] == [(0, 1.0), (1, 1.0), (2, 1.0)]
    asked = [r.json["messages"][-1]["content"] for r in openai_server.requests]
    assert asked.count("what is 2 + 3?") == 1 and asked.count("what is 7 + 5?") == 1  # not run again


@pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the kernel's parent-death signal is Linux's"
)
def test_a_killed_run_leaves_no_server_behind(tmp_path: Path, openai_server: OpenAIServer) -> None:
    workspace = _workspace(tmp_path)
    held = threading.Event()
    # The preflight (one token) is answered; every rollout's call waits, so the run is mid-way.
    openai_server.handler = lambda payload: Reply(
        content="ok", gate=None if payload.get("max_tokens") == 1 else held
    )
    command = ["eval", "run", CONFIG, "--base-url", openai_server.url, "--api-key", "k", *HERE, "-q"]
    env = subprocess_env(**_env(tmp_path))
    process = subprocess.Popen([sys.executable, "-m", "osmosis_ai", *command], cwd=workspace, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        wait_until(lambda: openai_server.in_flight.now >= 1, timeout=60, what="a rollout's model call held")
        log = workspace / ".osmosis" / "logs" / "calc-server.log"
        wait_until(
            lambda: log.is_file() and "127.0.0.1:" in log.read_text(), timeout=60, what="the server up"
        )
        process.kill()  # no chance to stop its server itself
        process.wait(30)
    finally:
        held.set()
        if process.poll() is None:
            process.kill()
    _assert_stopped(workspace)
