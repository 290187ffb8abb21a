"""The config ``osmosis train`` reads: one TOML file describing a small GRPO job.

Three tables. ``[job]``: ``model`` (a model directory, a Hugging Face name such as
``Qwen/Qwen2.5-0.5B-Instruct``, or ``tiny``: a ~100k-parameter model built offline), ``dataset``
(.jsonl, .csv or .parquet with ``system_prompt``, ``user_prompt``, ``ground_truth``), ``output_dir``
(default ``runs/<config name>``) and ``limit`` (the first rows only). ``[target]``: exactly one of
``agent`` (``MODULE:ATTR``, served in this process; with ``grader`` ``MODULE:CLASS`` when it names a
0.3 workflow) and ``url`` (a running 0.2 or 0.3 server; ``api_key_env`` names the variable holding
its key). ``[grpo]``: ``steps``, ``group_size``, ``batch_size`` (prompts per step), ``learning_rate``,
``max_tokens`` (per model turn), ``max_turns``, ``temperature``, ``seed``, ``rollout_timeout_s``.
Paths are relative to the config file. Every mistake is one line naming the file and the key; the
model's and the dataset's paths are checked here, before anything is imported or started.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from osmosis_ai.cli.errors import CLIError
from osmosis_ai.cli.eval.run_config import check_tables, config_number, config_text, read_toml
from osmosis_ai.cli.parser import did_you_mean

TABLES: dict[str, tuple[str, ...]] = {
    "job": ("model", "dataset", "output_dir", "limit"),
    "target": ("agent", "grader", "url", "api_key_env"),
    "grpo": ("steps", "group_size", "batch_size", "learning_rate", "max_tokens", "max_turns", "temperature",
             "seed", "rollout_timeout_s"),
}  # fmt: skip
WHOLE = {"steps": 1, "group_size": 2, "batch_size": 1, "max_tokens": 1, "max_turns": 1, "seed": 0, "limit": 1}
DATASET_SUFFIXES = (".jsonl", ".csv", ".parquet")


@dataclass(frozen=True)
class TrainConfig:
    """A train config, checked: where it is and the plan it describes."""

    path: Path
    plan: Any  # osmosis_ai.train.job.TrainPlan


def load(path: Path, *, output_dir: Path | None = None) -> TrainConfig:
    """Read and check the train config at ``path`` (see the module docstring); ``output_dir`` (the
    command line's) stands for ``job.output_dir``."""
    path = path.expanduser().resolve()
    if path.suffix != ".toml":
        raise CLIError(f"{path}: a train config is a .toml file")
    return TrainConfig(path, _plan(read_toml(path, "train"), path, output_dir))


def _plan(raw: dict[str, Any], path: Path, output_dir: Path | None) -> Any:
    from osmosis_ai.train.job import TrainPlan, check_model

    check_tables(raw, path, TABLES, "a train config")
    for name, value in raw.items():
        for key in value:
            if key not in TABLES[name]:
                raise CLIError(f"{path}: unknown key {name}.{key}{did_you_mean(key, TABLES[name])}")
    job, target, grpo = (raw.get(name, {}) for name in TABLES)
    here = path.parent
    model = config_text(job, "job", "model", path, required=True)
    assert model is not None
    if model != "tiny" and (here / Path(model).expanduser()).exists():
        model = str((here / Path(model).expanduser()).resolve())
    problem = check_model(model)
    if problem is not None:
        raise CLIError(f"{path}: job.model = {problem}")
    dataset_text = config_text(job, "job", "dataset", path, required=True)
    assert dataset_text is not None
    dataset = (here / Path(dataset_text).expanduser()).resolve()
    if dataset.suffix.lower() not in DATASET_SUFFIXES:
        raise CLIError(f"{path}: job.dataset = {dataset_text!r} must be a .jsonl, .csv or .parquet file")
    if not dataset.is_file():
        raise CLIError(f"{path}: job.dataset = {dataset_text!r}: no such file ({dataset})")
    given_output = config_text(job, "job", "output_dir", path, required=False)
    output = output_dir or (here / Path(given_output or f"runs/{path.stem}").expanduser()).resolve()
    spec = _target(target, path)
    numbers = {key: _number(grpo, "grpo", key, path) for key in TABLES["grpo"]}
    settings: dict[str, Any] = {
        ("timeout" if key == "rollout_timeout_s" else key): value
        for key, value in numbers.items()
        if value is not None
    }
    limit = _number(job, "job", "limit", path)
    plan = TrainPlan(model=model, dataset=str(dataset), target=spec, output_dir=str(output),
                     limit=None if limit is None else int(limit), **settings)  # fmt: skip
    if plan.limit is not None and plan.limit < plan.batch_size:
        raise CLIError(
            f"{path}: job.limit = {plan.limit} is fewer rows than grpo.batch_size = {plan.batch_size}"
        )
    return plan


def _target(table: dict[str, Any], path: Path) -> Any:
    from osmosis_ai.train.job import TargetSpec

    agent = config_text(table, "target", "agent", path, required=False)
    url = config_text(table, "target", "url", path, required=False)
    grader = config_text(table, "target", "grader", path, required=False)
    key_env = config_text(table, "target", "api_key_env", path, required=False)
    if (agent is None) == (url is None):
        raise CLIError(
            f"{path}: [target] needs exactly one of agent = 'MODULE:ATTR' or url = 'http://HOST:PORT'"
        )
    if agent is not None and ":" not in agent:
        raise CLIError(f"{path}: target.agent = {agent!r} must be MODULE:ATTR, e.g. 'my_agent:agent_loop'")
    if grader is not None and agent is None:
        raise CLIError(f"{path}: target.grader goes with target.agent naming a 0.3 workflow, not with url")
    if key_env is not None and url is None:
        raise CLIError(f"{path}: target.api_key_env goes with target.url (an in-process agent has no key)")
    if url is not None and not url.startswith(("http://", "https://")):
        raise CLIError(f"{path}: target.url = {url!r} must start with http:// or https://")
    api_key = None
    if key_env is not None:
        api_key = os.environ.get(key_env)
        if not api_key:
            raise CLIError(
                f"{path}: target.api_key_env names {key_env}, which is not set in this environment"
            )
    return TargetSpec(agent=agent, grader=grader, url=url.rstrip("/") if url else None, api_key=api_key)


def _number(table: dict[str, Any], name: str, key: str, path: Path) -> float | None:
    """``table[key]``: a whole number of at least ``WHOLE[key]``, else a finite number above 0."""
    if key in WHOLE:
        return config_number(table, name, key, path, whole=True, least=WHOLE[key])
    return config_number(table, name, key, path)
