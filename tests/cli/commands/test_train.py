"""``osmosis train CONFIG.toml`` through the CLI's main in this process: the CPU example end to end (the
tiny model built offline, TRL's real GRPOTrainer, the calculator agent served in-process, every step's
figures sent to the loggers), a planted failure excluded and counted, a job with nothing to train on
failing in one line, a 0.3 workflow trained at a url and in-process; config mistakes refused by key
before torch is imported (processes of their own, which import no torch)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.support.cli import REPO, cli, subprocess_env
from tests.train.agents import LabelGrader, TwoTurnWorkflow

EXAMPLE = REPO / "examples" / "train" / "calculator-cpu.toml"
# A job run through the CLI's main in this process: torch and TRL are imported once for all of them
# (each process of its own spent ~9 CPU-s, most of it on those imports), in one xdist worker.
IN_PROCESS = pytest.mark.xdist_group("trl")
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRL_EXPERIMENTAL_SILENCE": "1"}

# Fails every row whose ``fail`` column is true (after one model turn), else rewards 1.0.
FLAKY_AGENT = """
from osmosis_ai.rollout import RolloutAgentLoop


class Flaky(RolloutAgentLoop):
    name = "flaky"

    def get_tools(self, request):
        return []

    async def run(self, ctx):
        first = await ctx.chat(list(ctx.request.messages))
        if ctx.request.metadata.get("fail"):
            raise RuntimeError("planted failure")
        return ctx.complete([*ctx.request.messages, first.message], reward=1.0)


agent_loop = Flaky()
"""


def _job(tmp_path: Path, *, fail: list[bool], steps: int = 1, batch_size: int = 2) -> Path:
    (tmp_path / "flaky_agent.py").write_text(FLAKY_AGENT)
    lines = [
        f'{{"system_prompt": "Answer.", "user_prompt": "What is {i} + 1?", "ground_truth": "{i + 1}", "fail": {str(f).lower()}}}'
        for i, f in enumerate(fail)
    ]
    (tmp_path / "data.jsonl").write_text("\n".join(lines) + "\n")
    config = tmp_path / "job.toml"
    config.write_text(
        textwrap.dedent(f"""
        [job]
        model = "tiny"
        dataset = "data.jsonl"

        [target]
        agent = "flaky_agent:agent_loop"

        [grpo]
        steps = {steps}
        group_size = 2
        batch_size = {batch_size}
        max_tokens = 4
        max_turns = 1
        rollout_timeout_s = 60
    """)
    )
    return config


@IN_PROCESS
def test_the_cpu_example_trains_and_reports_every_step(tmp_path: Path) -> None:
    """The example as a user runs it: every step's line, report, journal records and figures sent to
    the loggers, the model saved."""
    from osmosis_ai.runs.journal import Journal
    from tests.observe.test_loggers import events

    out = tmp_path / "out"
    env = {
        **OFFLINE,
        "TENSORBOARD_LOGDIR": str(tmp_path / "tb"),
        "WANDB_MODE": "offline",
        "WANDB_DIR": str(tmp_path),
    }
    ran = cli("train", str(EXAMPLE), "--output-dir", str(out), "--log-to", "tensorboard", "--log-to", "wandb",
              env=env)  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    steps = [line for line in ran.stdout.splitlines() if line.startswith("step ")]
    assert [line.split()[1] for line in steps] == ["1/3", "2/3", "3/3"]
    assert all("excluded 0%" in line and "trained 8/8" in line for line in steps), ran.stdout
    assert "Trained 3 steps" in ran.stdout
    assert "Logged to tensorboard" in ran.stdout and "Logged to wandb" in ran.stdout
    # Every step's figures, at its step: the trainer's loss and reward, the share excluded, what it trained on
    scalars = {(v.tag, e.step): v.simple_value for e in events(tmp_path / "tb") for v in e.summary.value}
    for step in (1, 2, 3):
        assert math.isfinite(scalars[("train/loss", step)]) and scalars[("train/reward", step)] == 0.0
        assert scalars[("train/osmosis/excluded_frac", step)] == 0.0
        assert (scalars[("train/rollouts", step)], scalars[("train/trained", step)]) == (8.0, 8.0)
    assert scalars[("summary/train_steps", 0)] == 3.0  # and the finished job
    (records,) = (tmp_path / "wandb").glob("offline-run-*/run-*.wandb")
    assert b"train/loss" in records.read_bytes() and b"train_steps" in records.read_bytes()
    assert sorted(p.name for p in (out / "reports").iterdir()) == [f"step-000{i}.html" for i in (1, 2, 3)]
    assert "<html" in (out / "reports" / "step-0003.html").read_text()
    assert (out / "model" / "config.json").is_file()
    contents = Journal.read(out / "journal.sqlite")
    assert contents is not None and contents.status == "completed"
    assert sorted(contents.records) == ["step-0001", "step-0002", "step-0003"]
    for records in contents.records.values():
        assert len(records) == 8
        assert all(
            r.data["trained"] and r.data["trajectory"]["token_ids"] and r.data["row_index"] < 8
            for r in records
        )
    report = cli("report", str(out / "journal.sqlite"), "-o", str(tmp_path / "all.html"), "-q")
    assert report.returncode == 0, report.stderr


@IN_PROCESS
def test_a_planted_failure_is_excluded_and_counted_never_trained_on(tmp_path: Path) -> None:
    from osmosis_ai.runs.journal import Journal

    config = _job(tmp_path, fail=[False, True])
    ran = cli("train", str(config), "--json", cwd=tmp_path, env=OFFLINE)
    assert ran.returncode == 0, ran.stderr
    document = json.loads(ran.stdout)  # --json: the one object, no step lines
    (step,) = document["steps"]
    assert step["excluded_frac"] == 0.5 and step["trained"] == 2 and step["rollouts"] == 4
    assert (document["rollouts"], document["trained"]) == (4, 2)
    contents = Journal.read(tmp_path / "runs" / "job" / "journal.sqlite")
    assert contents is not None
    by_row = {(r.row_index, r.sample_index): r for r in contents.records["step-0001"]}
    assert sorted(by_row) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    for sample in (0, 1):
        ok, failed = by_row[(0, sample)], by_row[(1, sample)]
        assert ok.data["trained"] and ok.data["reward"] == 1.0
        assert failed.outcome.value == "agent_error" and failed.data["reward"] is None
        assert not failed.data["trained"] and "planted failure" in failed.data["not_trained"]


@IN_PROCESS
def test_a_job_with_nothing_to_train_on_fails_in_one_line(tmp_path: Path) -> None:
    config = _job(tmp_path, fail=[True], batch_size=1)
    ran = cli("train", str(config), cwd=tmp_path, env=OFFLINE)
    assert ran.returncode == 1
    errors = [line for line in ran.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and errors[0].startswith("Error: no rollout could be trained on"), ran.stderr
    assert "planted failure" in errors[0]


@IN_PROCESS
@pytest.mark.parametrize("where", ["url", "in-process"])
def test_a_0_3_workflow_and_grader_train_at_a_url_or_in_process(tmp_path: Path, where: str) -> None:
    from osmosis_ai.rollout.backend.local import LocalBackend
    from osmosis_ai.rollout.server import create_rollout_server
    from osmosis_ai.runs.journal import Journal
    from tests.support.server import RunningServer

    data = [
        {"system_prompt": "Add.", "user_prompt": f"What is {i} + 1?", "ground_truth": str(i % 2)}
        for i in range(2)
    ]
    (tmp_path / "data.jsonl").write_text("".join(json.dumps(row) + "\n" for row in data))
    server = None
    if where == "url":
        app = create_rollout_server(backend=LocalBackend(workflow=TwoTurnWorkflow, grader=LabelGrader),
                                    configure_logging=False)  # fmt: skip
        server = RunningServer(app).start()
        target = f'url = "{server.url}"'
    else:
        target = 'agent = "tests.train.agents:TwoTurnWorkflow"\ngrader = "tests.train.agents:LabelGrader"'
    config = tmp_path / "job.toml"
    config.write_text(
        f'[job]\nmodel = "tiny"\ndataset = "data.jsonl"\n[target]\n{target}\n'
        "[grpo]\nsteps = 1\ngroup_size = 2\nbatch_size = 2\nmax_tokens = 4\nrollout_timeout_s = 60\n"
    )
    try:
        ran = cli("train", str(config), env=OFFLINE)
    finally:
        if server is not None:
            server.stop()
    assert ran.returncode == 0, ran.stderr
    contents = Journal.read(tmp_path / "runs" / "job" / "journal.sqlite")
    assert contents is not None
    records = contents.records["step-0001"]
    assert len(records) == 4 and all(r.data["trained"] for r in records)
    assert sorted((r.row_index, r.data["reward"]) for r in records) == [
        (0, 0.0),
        (0, 0.0),
        (1, 1.0),
        (1, 1.0),
    ]
    # two model turns with the environment's message between them: tokens the model did not generate
    assert all(0 in r.data["trajectory"]["loss_mask"] for r in records)


GOOD = {
    "job": {"model": '"tiny"', "dataset": '"data.jsonl"'},
    "target": {"agent": '"flaky_agent:agent_loop"'},
    "grpo": {"steps": "1"},
}


def _write(tmp_path: Path, tables: dict[str, dict[str, str]]) -> Path:
    (tmp_path / "data.jsonl").write_text(
        '{"system_prompt": "s", "user_prompt": "u", "ground_truth": "g"}\n' * 2
    )
    text = "".join(
        f"[{name}]\n" + "".join(f"{key} = {value}\n" for key, value in table.items())
        for name, table in tables.items()
    )
    path = tmp_path / "job.toml"
    path.write_text(text)
    return path


def _changed(table: str, key: str, value: str | None) -> dict[str, dict[str, str]]:
    tables = {name: dict(values) for name, values in GOOD.items()}
    tables.setdefault(table, {})
    if value is None:
        tables[table].pop(key)
    else:
        tables[table][key] = value
    return tables


@pytest.mark.parametrize(
    ("table", "key", "value", "said"),
    [
        ("job", "model", None, "job.model is missing"),
        ("job", "model", '"no/such/dir"', "job.model = no/such/dir: no such model directory"),
        ("job", "dataset", '"missing.jsonl"', "job.dataset = 'missing.jsonl': no such file"),
        ("job", "dataset", '"data.txt"', "job.dataset = 'data.txt' must be a .jsonl, .csv or .parquet file"),
        ("job", "limt", "3", "unknown key job.limt (did you mean 'limit'?)"),
        ("grpo", "group_size", "1", "grpo.group_size must be a whole number of at least 2, got 1"),
        ("grpo", "learning_rate", '"fast"', "grpo.learning_rate must be a number, got 'fast'"),
        ("grpo", "steps", "1.5", "grpo.steps must be a whole number of at least 1, got 1.5"),
        ("grpo", "learning_rate", "0", "grpo.learning_rate must be more than 0, got 0"),
        ("target", "agent", None, "[target] needs exactly one of agent"),
        ("target", "agent", '"flaky_agent"', "target.agent = 'flaky_agent' must be MODULE:ATTR"),
        ("target", "url", '"http://127.0.0.1:1"', "[target] needs exactly one of agent"),
        ("target", "api_key_env", '"KEY"', "target.api_key_env goes with target.url"),
        ("trainer", "steps", "1", "unknown table [trainer]"),
    ],
)
def test_a_config_mistake_is_one_line_naming_its_key(
    tmp_path: Path, table: str, key: str, value: str | None, said: str
) -> None:
    config = _write(tmp_path, _changed(table, key, value))
    ran = cli("train", str(config))
    lines = ran.stderr.strip().splitlines()
    assert ran.returncode == 1 and len(lines) == 1, ran.stderr
    assert lines[0].startswith(f"Error: {config}: ") and said in lines[0]


def test_paths_in_a_config_expand_the_home_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from osmosis_ai.cli import train_config

    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    config = _write(tmp_path, _changed("job", "dataset", '"~/d.jsonl"'))
    (home / "d.jsonl").write_text((tmp_path / "data.jsonl").read_text())
    config.write_text(config.read_text().replace("[job]\n", '[job]\noutput_dir = "~/out"\n'))
    plan = train_config.load(config).plan
    assert (Path(plan.dataset), Path(plan.output_dir)) == (home / "d.jsonl", home / "out")


def test_config_mistakes_are_found_before_torch_is_imported(tmp_path: Path) -> None:
    config = _write(tmp_path, _changed("grpo", "batch_size", "0"))
    probe = (
        "import sys\nfrom osmosis_ai.cli.main import main\n"
        f"status = main(['train', {str(config)!r}])\nprint(status, 'torch' in sys.modules)"
    )
    ran = subprocess.run([sys.executable, "-c", probe], env=subprocess_env(), capture_output=True, text=True,
                         timeout=120)  # fmt: skip
    assert ran.stdout.split() == ["1", "False"], ran.stderr
    assert "grpo.batch_size must be a whole number of at least 1" in ran.stderr


def test_a_server_that_does_not_answer_fails_in_one_line_before_torch(tmp_path: Path) -> None:
    from tests.support.sockets import free_port

    tables = _changed("target", "agent", None)
    tables["target"]["url"] = f'"http://127.0.0.1:{free_port()}"'
    config = _write(tmp_path, tables)
    probe = (
        "import sys\nfrom osmosis_ai.cli.main import main\n"
        f"status = main(['train', {str(config)!r}])\nprint(status, 'torch' in sys.modules)"
    )
    ran = subprocess.run([sys.executable, "-c", probe], env=subprocess_env(), capture_output=True, text=True,
                         timeout=120)  # fmt: skip
    assert ran.stdout.split()[-2:] == ["1", "False"], ran.stderr
    lines = ran.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and "127.0.0.1" in lines[0], ran.stderr
