"""`--log-to wandb|tensorboard|mlflow` on `osmosis eval` and `rollout run`, each tool in its offline or
local mode, its output read back: W&B offline into a temporary directory, tensorboardX event files,
an MLflow file store."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest

from osmosis_ai.observe import loggers
from tests.support.cli import CALCULATOR, CALCULATOR_DATASET, cli, osmosis
from tests.support.openai_server import OpenAIServer

REWARD = "examples.calculator.reward:calculator_reward"
ROWS = len(CALCULATOR_DATASET.read_text().splitlines())
EVAL = ("eval", "-m", CALCULATOR, "-d", str(CALCULATOR_DATASET), "--eval-fn", REWARD, "--model", "scripted",
        "--n", "2", "--fresh")  # fmt: skip


def events(directory: Path) -> list[Any]:
    """Every event of the TFRecord event files in ``directory`` (length, CRC, data, CRC per record)."""
    # Imported here: tensorboardX's package imports torch, which every pytest-xdist worker would pay for
    # at collection.
    from tensorboardX.proto import event_pb2

    found = []
    for path in sorted(directory.rglob("events.out.tfevents.*")):
        data = path.read_bytes()
        at = 0
        while at < len(data):
            (length,) = struct.unpack("<Q", data[at : at + 8])
            event = event_pb2.Event()
            event.ParseFromString(data[at + 12 : at + 12 + length])
            found.append(event)
            at += 12 + length + 4
    return found


def env_for(tmp_path: Path) -> dict[str, str]:
    return {
        "WANDB_MODE": "offline",
        "WANDB_DIR": str(tmp_path),
        "WANDB_PROJECT": "osmosis-test",
        "TENSORBOARD_LOGDIR": str(tmp_path / "tb"),
        "MLFLOW_TRACKING_URI": (tmp_path / "mlruns").as_uri(),
        "MLFLOW_ALLOW_FILE_STORE": "true",
    }


def test_eval_logs_to_all_three_tools_and_no_secret_from_the_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # this process reads the store back
    key = "sk-proj-Secret0123456789abcdef"
    # a process of its own: W&B keeps the first run's directory for the rest of a process
    ran = osmosis(*EVAL, "--api-key", key, "--log-to", "tensorboard", "--log-to", "mlflow", "--log-to", "wandb",
                  "--journal", str(tmp_path / "j"), cwd=tmp_path, env=env_for(tmp_path))  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert [line.split(":")[0] for line in ran.stdout.splitlines() if line.startswith("Logged to")] == [
        "Logged to tensorboard",
        "Logged to mlflow",
        "Logged to wandb",
    ]
    # No tool, no journal holds the key; what each tool did get: the command line with the key
    # masked, the settings without it
    written = [path for path in tmp_path.rglob("*") if path.is_file()]
    assert any(path.suffix == ".wandb" for path in written) and (tmp_path / "tb").is_dir()
    for path in written:
        assert key[8:].encode() not in path.read_bytes(), path

    # TensorBoard: scalars, pass@k by k, the histogram of every scored sample, the config and samples
    seen = events(tmp_path / "tb")
    scalars = {
        (v.tag, e.step): v.simple_value for e in seen for v in e.summary.value if v.HasField("simple_value")
    }
    assert scalars[("summary/rows", 0)] == 2 * ROWS
    assert scalars[("summary/completed", 0)] == 2 * ROWS
    assert scalars[("pass_at_k", 1)] == scalars[("pass_at_k", 2)] == 1.0
    (histogram,) = [v.histo for e in seen for v in e.summary.value if v.tag == "scores"]
    assert histogram.num == 2 * ROWS and histogram.max == 1.0
    texts = {
        v.tag.partition("/")[0]: v.tensor.string_val[0].decode()
        for e in seen
        for v in e.summary.value
        if v.metadata.plugin_data.plugin_name == "text"
    }
    assert '| model | "scripted" |' in texts["config"]
    assert texts["samples"].count("| completed |") == 2 * ROWS

    # MLflow: the config as parameters, the figures as metrics, histogram and samples as artifacts
    from mlflow.tracking import MlflowClient

    client = MlflowClient((tmp_path / "mlruns").as_uri())
    (run,) = client.search_runs([client.get_experiment_by_name("osmosis").experiment_id])
    assert run.data.params["model"] == "scripted" and run.data.params["n"] == "2"
    assert not any("key" in name for name in run.data.params)
    assert run.data.metrics["completed"] == 2 * ROWS and run.data.metrics["pass_at_2"] == 1.0
    artifacts = Path(run.info.artifact_uri.removeprefix("file://"))
    assert sum(json.loads((artifacts / "score_histogram.json").read_text())["counts"]) == 2 * ROWS
    samples = json.loads((artifacts / "samples.json").read_text())
    assert samples["columns"] == list(loggers.SAMPLE_COLUMNS) and len(samples["data"]) == 2 * ROWS

    # W&B offline: the sample table in the run's files, the summary and config in its record log
    (offline,) = (tmp_path / "wandb").glob("offline-run-*")
    (table,) = (offline / "files" / "media" / "table").glob("samples_*.table.json")
    assert len(json.loads(table.read_text())["data"]) == 2 * ROWS
    (records,) = offline.glob("run-*.wandb")
    log = records.read_bytes()
    for text in (b"pass@2", b"completed", b"score_histogram", b"osmosis-test", b"scripted", b"[redacted]"):
        assert text in log, text


def test_rollout_run_logs_to_tensorboard(tmp_path: Path) -> None:
    ran = cli("rollout", "run", "-m", CALCULATOR, "-d", str(CALCULATOR_DATASET), "--model", "scripted",
              "--log-to", "tensorboard", cwd=tmp_path, env=env_for(tmp_path))  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    scalars = {v.tag: v.simple_value for e in events(tmp_path / "tb") for v in e.summary.value}
    assert scalars["summary/rows"] == ROWS
    assert scalars["summary/outcome_completed"] == ROWS
    logged = sorted((tmp_path / "tb").rglob("events.out.tfevents.*"))
    again = cli("rollout", "run", "-m", CALCULATOR, "-d", str(CALCULATOR_DATASET), "--model", "scripted",
                "--log-to", "tensorboard", cwd=tmp_path, env=env_for(tmp_path))  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert "Nothing was left to run: already logged to tensorboard\n" in again.stdout
    assert sorted((tmp_path / "tb").rglob("events.out.tfevents.*")) == logged  # no second logger run


def test_a_missing_extra_is_one_line_naming_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # what this installation lacks, as a package that is not there
    monkeypatch.setitem(loggers.TOOLS, "wandb", ("osmosis_no_such_package", "wandb"))
    ran = cli(*EVAL, "--log-to", "wandb", cwd=tmp_path)
    assert ran.returncode == 1
    assert ran.stderr.strip().splitlines() == [
        "Error: --log-to: wandb needs the osmosis_no_such_package package: pip install 'osmosis-ai[wandb]'"
    ]
    assert ran.stdout == ""  # refused before any work


def test_an_unknown_tool_is_a_usage_error_with_a_suggestion(tmp_path: Path) -> None:
    ran = cli(*EVAL, "--log-to", "tensorbord", cwd=tmp_path)
    assert ran.returncode == 2
    assert "invalid choice 'tensorbord' (did you mean 'tensorboard'?)" in ran.stderr


def test_reward_score_logs_to_tensorboard(tmp_path: Path) -> None:
    (tmp_path / "scorers.py").write_text(
        "def exact(solution_str, ground_truth, extra_info):\n    return float(solution_str == ground_truth)\n"
    )
    rows = [{"solution_str": "3", "ground_truth": "3"}, {"solution_str": "4", "ground_truth": "3"}]
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    ran = cli("reward", "score", "-f", "scorers:exact", "-d", str(data), "--workers", "0",
              "--log-to", "tensorboard", cwd=tmp_path, env=env_for(tmp_path))  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    seen = events(tmp_path / "tb")
    scalars = {v.tag: v.simple_value for e in seen for v in e.summary.value}
    assert scalars["summary/rows"] == 2
    (histogram,) = [v.histo for e in seen for v in e.summary.value if v.tag == "scores"]
    assert (histogram.num, histogram.min, histogram.max, histogram.sum) == (2, 0.0, 1.0, 1.0)


def test_regrade_logs_to_tensorboard(tmp_path: Path) -> None:
    out = tmp_path / "run.jsonl"
    ran = cli("rollout", "run", "-m", CALCULATOR, "-d", str(CALCULATOR_DATASET), "--model", "scripted",
              "-o", str(out), cwd=tmp_path, env=env_for(tmp_path))  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    regraded = cli("regrade", str(out), "--reward", "examples.calculator.reward:calculator_reward",
                   "-d", str(CALCULATOR_DATASET), "--reward-workers", "0", "--log-to", "tensorboard",
                   cwd=tmp_path, env=env_for(tmp_path))  # fmt: skip
    assert regraded.returncode == 0, regraded.stderr
    scalars = {v.tag: v.simple_value for e in events(tmp_path / "tb") for v in e.summary.value}
    assert scalars["summary/rows"] == ROWS


def test_every_tool_gets_the_settings_with_their_secrets_left_out_or_masked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in env_for(tmp_path).items():
        monkeypatch.setenv(name, value)
    config = {"api_key": "sk-0123456789abcdefSECRET", "base_url": "https://user:PASSWORD1@example.com/v1",
              "headers": ["Authorization: Bearer TOKEN1234"], "max_tokens": 64}  # fmt: skip
    loggers.log_run(
        ["tensorboard", "mlflow"], loggers.RunLog(name="r", kind="eval", config=config, summary={})
    )
    for path in tmp_path.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert not any(secret in data for secret in (b"SECRET", b"PASSWORD1", b"TOKEN1234")), path
    from mlflow.tracking import MlflowClient

    client = MlflowClient((tmp_path / "mlruns").as_uri())
    (run,) = client.search_runs([client.get_experiment_by_name("osmosis").experiment_id])
    assert run.data.params == {
        "base_url": "https://user:[redacted]@example.com/v1",
        "headers": '["Authorization: Bearer [redacted]"]',
        "max_tokens": "64",
    }


@pytest.mark.parametrize(
    ("tool", "settings", "message"),
    [
        ("mlflow", {"MLFLOW_TRACKING_URI": "http://127.0.0.1:{port}"}, "does not answer"),
        ("wandb", {"WANDB_MODE": "online", "WANDB_API_KEY": "", "NETRC": "{tmp}/no-netrc"}, "no W&B API key"),
        ("tensorboard", {"TENSORBOARD_LOGDIR": "{tmp}/a-file/tb"}, "cannot write under"),
    ],
)
def test_a_logger_that_cannot_take_the_run_is_refused_before_any_model_call(
    openai_server: OpenAIServer, tmp_path: Path, tool: str, settings: dict[str, str], message: str
) -> None:
    from tests.support.sockets import free_port

    (tmp_path / "a-file").write_text("not a directory")
    env = {**env_for(tmp_path), **{k: v.format(port=free_port(), tmp=tmp_path) for k, v in settings.items()}}
    ran = cli("eval", "-m", CALCULATOR, "-d", str(CALCULATOR_DATASET), "--eval-fn", REWARD, "--model", "m",
              "--base-url", openai_server.url, "--journal", str(tmp_path / "j"), "--log-to", tool, env=env)  # fmt: skip
    assert openai_server.requests == []  # nothing paid for: the logger is checked first
    assert ran.returncode == 1 and ran.stdout == ""
    assert ran.stderr.startswith(f"Error: --log-to {tool}: ") and message in ran.stderr
    assert ran.stderr.count("\n") == 1


def test_a_jobs_steps_reach_each_tool_as_each_step_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``open_runs``: the figures of each step at their step (MLflow's store has them as the step
    ends), then the finished run; a job that stops ends its runs as failed."""
    from mlflow.tracking import MlflowClient

    for name, value in env_for(tmp_path).items():
        monkeypatch.setenv(name, value)
    runs = loggers.open_runs(["tensorboard", "mlflow"], name="job", kind="train",
                             config={"api_key": "sk-0123456789abcdefSECRET", "steps": 2})  # fmt: skip
    client = MlflowClient((tmp_path / "mlruns").as_uri())
    runs.step(1, {"train/loss": 0.5, "train/reward": 0.25})
    (run,) = client.search_runs([client.get_experiment_by_name("osmosis").experiment_id])
    assert run.data.metrics == {"train/loss": 0.5, "train/reward": 0.25}  # before the next step
    runs.step(2, {"train/loss": 0.125, "train/reward": 0.75})
    runs.finish(loggers.RunLog(name="job", kind="train", config={}, summary={"rows": 4.0}, scores=[1.0, 0.0]))

    scalars = {(v.tag, e.step): v.simple_value for e in events(tmp_path / "tb") for v in e.summary.value}
    assert {key: scalars[key] for key in scalars if key[0].startswith("train/")} == {
        ("train/loss", 1): 0.5, ("train/reward", 1): 0.25, ("train/loss", 2): 0.125, ("train/reward", 2): 0.75,
    }  # fmt: skip
    assert scalars[("summary/rows", 0)] == 4.0
    (run,) = client.search_runs([client.get_experiment_by_name("osmosis").experiment_id])
    history = client.get_metric_history(run.info.run_id, "train/loss")
    assert sorted((m.step, m.value) for m in history) == [(1, 0.5), (2, 0.125)]
    assert run.data.metrics["rows"] == 4.0 and run.info.status == "FINISHED"
    assert run.data.params == {"steps": "2"}  # the key left out

    # A tool that refuses a step (its run deleted under it) gets nothing more; the others get every step.
    refusing = loggers.open_runs(["mlflow", "tensorboard"], name="refused", kind="train", config={})
    (deleted,) = [r for r in client.search_runs([client.get_experiment_by_name("osmosis").experiment_id])
                  if r.info.run_name == "refused"]  # fmt: skip
    client.delete_run(deleted.info.run_id)
    (refusal,) = refusing.step(1, {"train/loss": 2.0})
    assert refusal.tool == "mlflow" and str(refusal).startswith("--log-to mlflow: ")
    assert refusing.step(2, {"train/loss": 4.0}) == []
    refusing.finish(loggers.RunLog(name="refused", kind="train", config={}, summary={}, scores=[]))
    logged = {(v.tag, e.step, v.simple_value) for e in events(tmp_path / "tb") for v in e.summary.value}
    assert {("train/loss", 1, 2.0), ("train/loss", 2, 4.0)} <= logged

    stopped = loggers.open_runs(["mlflow"], name="stopped", kind="train", config={})
    stopped.step(1, {"train/loss": 1.0})
    stopped.abort()
    runs_now = client.search_runs([client.get_experiment_by_name("osmosis").experiment_id])
    assert sorted(r.info.status for r in runs_now) == ["FAILED", "FINISHED"]
