"""The eval config ``osmosis eval run`` reads: 0.3's ``configs/eval/NAME.toml`` of a workspace.

Its tables and keys are 0.3's: ``[experiment]`` (``rollout``, ``entrypoint``, ``model_path``,
``dataset``), ``[evaluation]`` (``limit``, ``n``, ``batch_size``, ``pass_threshold``,
``agent_workflow_timeout_s``, ``grader_timeout_s``, each optional), ``[env]`` (variables for the
rollout server), ``[secrets]`` (``required``: names that must be set in this environment, which the
server inherits) and ``[advanced]`` (the platform's; ignored here). Every mistake is one line naming
the file and the key. What only the platform has is refused with what to do locally: a platform
dataset's name (a local file instead), a ``branch`` or ``commit_sha`` pin (the workspace runs as it
is on disk).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

from osmosis_ai.cli.errors import CLIError
from osmosis_ai.cli.parser import did_you_mean

EXPERIMENT_KEYS = ("rollout", "entrypoint", "model_path", "dataset")
PLATFORM_PINS = {"branch": "a branch", "commit_sha": "a commit"}
EVALUATION_KEYS = (
    "limit",
    "n",
    "batch_size",
    "pass_threshold",
    "agent_workflow_timeout_s",
    "grader_timeout_s",
)
TABLES = ("experiment", "evaluation", "env", "secrets", "advanced")
DATASET_SUFFIXES = (".jsonl", ".csv", ".parquet")
ENV_NAME = re.compile(r"[A-Z_][A-Z0-9_]*")
RESERVED_ENV_PREFIX = "_OSMOSIS_"
# 0.3's per-row limits when the config gives none; a local rollout has the two as one deadline.
DEFAULT_AGENT_TIMEOUT_SEC = 450.0
DEFAULT_GRADER_TIMEOUT_SEC = 150.0


@dataclass(frozen=True)
class EvalConfig:
    """An eval config, checked: where it is, its workspace, and its values."""

    path: Path
    workspace: Path
    rollout: str
    entrypoint: str
    model_path: str
    dataset: str | None  # the [experiment] dataset as written (a platform name or a local path)
    limit: int | None = None
    n: int = 1
    batch_size: int | None = None
    pass_threshold: float = 1.0
    agent_timeout: float = DEFAULT_AGENT_TIMEOUT_SEC
    grader_timeout: float = DEFAULT_GRADER_TIMEOUT_SEC
    env: dict[str, str] = field(default_factory=dict)
    secrets: tuple[str, ...] = ()
    advanced: tuple[str, ...] = ()

    @property
    def rollout_dir(self) -> Path:
        return self.workspace / "rollouts" / self.rollout

    def dataset_file(self, given: str | None) -> Path:
        """The local dataset: ``given`` (``--dataset-file``), else ``dataset`` when it is a file's path
        (relative to the workspace); a platform dataset's name is refused."""
        if given is not None:
            return Path(given).expanduser().resolve()
        if self.dataset is None:
            raise CLIError(f"{self.path}: [experiment] has no dataset; give --dataset-file FILE")
        if Path(self.dataset).suffix.lower() in DATASET_SUFFIXES:
            return (self.workspace / Path(self.dataset).expanduser()).resolve()
        raise CLIError(
            f"{self.path}: experiment.dataset = {self.dataset!r} names a platform dataset; eval run reads a "
            "local file: give --dataset-file FILE (.jsonl, .csv or .parquet) or set dataset to one's path"
        )


def load(path: Path, *, dataset_given: bool) -> EvalConfig:
    """Read and check the eval config at ``path`` (see the module docstring); ``dataset_given``: a
    ``--dataset-file`` stands in for ``experiment.dataset``."""
    path = path.expanduser().resolve()
    if path.suffix != ".toml":
        raise CLIError(f"{path}: an eval config is a .toml file")
    if path.parent.name != "eval" or path.parent.parent.name != "configs":
        raise CLIError(
            f"{path}: an eval config lives in a workspace's configs/eval/ (osmosis rollout init makes one)"
        )
    return _checked(read_toml(path, "eval"), path, path.parent.parent.parent, dataset_given)


def read_toml(path: Path, kind: str) -> dict[str, Any]:
    """The TOML document at ``path``, a ``kind`` config; a missing, unreadable or invalid file is one line."""
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CLIError(f"{path}: no such {kind} config") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CLIError(f"{path}: cannot read the {kind} config: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise CLIError(f"{path}: invalid TOML: {exc}") from None


def check_tables(raw: dict[str, Any], path: Path, tables: Iterable[str], config: str) -> None:
    """Every top-level name in ``raw`` one of ``tables`` and a table; ``config`` names the kind
    (``an eval config``) in the error."""
    tables = list(tables)
    for name, value in raw.items():
        if name not in tables:
            raise CLIError(f"{path}: unknown table [{name}]{did_you_mean(name, tables)}; {config} has "
                           f"{', '.join(f'[{t}]' for t in tables)}")  # fmt: skip
        if not isinstance(value, dict):
            raise CLIError(f"{path}: {name} must be a table ([{name}])")


def _checked(raw: dict[str, Any], path: Path, workspace: Path, dataset_given: bool) -> EvalConfig:
    check_tables(raw, path, TABLES, "an eval config")
    experiment = raw.get("experiment")
    if experiment is None:
        raise CLIError(f"{path}: no [experiment] table")
    for key in experiment:
        if key in PLATFORM_PINS:
            raise CLIError(f"{path}: experiment.{key} pins {PLATFORM_PINS[key]} on the platform; eval run uses "
                           "the workspace as it is on disk: remove the key")  # fmt: skip
        if key not in EXPERIMENT_KEYS:
            raise CLIError(f"{path}: unknown key experiment.{key}{did_you_mean(key, EXPERIMENT_KEYS)}")
    needed = [k for k in EXPERIMENT_KEYS if k != "dataset" or not dataset_given]
    values = {
        key: config_text(experiment, "experiment", key, path, required=key in needed)
        for key in EXPERIMENT_KEYS
    }
    rollout, entrypoint = values["rollout"], values["entrypoint"]
    assert rollout is not None and entrypoint is not None and values["model_path"] is not None
    if Path(rollout).name != rollout or rollout in (".", ".."):
        raise CLIError(f"{path}: experiment.rollout = {rollout!r} must be a directory name under rollouts/")
    if Path(entrypoint).is_absolute() or ".." in Path(entrypoint).parts:
        raise CLIError(
            f"{path}: experiment.entrypoint = {entrypoint!r} must be a path inside rollouts/{rollout}/"
        )
    if not (workspace / "rollouts" / rollout / entrypoint).is_file():
        raise CLIError(f"{path}: experiment.rollout/entrypoint: rollouts/{rollout}/{entrypoint} does not exist "
                       "(osmosis rollout list shows this workspace's rollouts)")  # fmt: skip
    evaluation = raw.get("evaluation", {})
    for key in evaluation:
        if key not in EVALUATION_KEYS:
            raise CLIError(f"{path}: unknown key evaluation.{key}{did_you_mean(key, EVALUATION_KEYS)}")
    limit, n, batch_size = (
        config_number(evaluation, "evaluation", k, path, whole=True) for k in ("limit", "n", "batch_size")
    )
    threshold = config_number(evaluation, "evaluation", "pass_threshold", path, positive=False)
    agent_timeout = config_number(evaluation, "evaluation", "agent_workflow_timeout_s", path)
    grader_timeout = config_number(evaluation, "evaluation", "grader_timeout_s", path)
    return EvalConfig(
        path=path,
        workspace=workspace,
        rollout=rollout,
        entrypoint=entrypoint,
        model_path=values["model_path"],
        dataset=values["dataset"],
        limit=None if limit is None else int(limit),
        n=1 if n is None else int(n),
        batch_size=None if batch_size is None else int(batch_size),
        pass_threshold=1.0 if threshold is None else threshold,
        agent_timeout=DEFAULT_AGENT_TIMEOUT_SEC if agent_timeout is None else agent_timeout,
        grader_timeout=DEFAULT_GRADER_TIMEOUT_SEC if grader_timeout is None else grader_timeout,
        env=_env(raw.get("env", {}), path),
        secrets=_secrets(raw.get("secrets", {}), path),
        advanced=tuple(sorted(raw.get("advanced", {}))),
    )


def config_text(table: dict[str, Any], name: str, key: str, path: Path, *, required: bool) -> str | None:
    """``table[key]`` of the config's table ``[name]``: a non-empty string (``None`` when absent and not
    ``required``)."""
    value = table.get(key)
    if value is None:
        if required:
            raise CLIError(f"{path}: {name}.{key} is missing")
        return None
    if not isinstance(value, str) or not value.strip():
        raise CLIError(f"{path}: {name}.{key} must be a non-empty string, got {value!r}")
    return value


def config_number(
    table: dict[str, Any],
    name: str,
    key: str,
    path: Path,
    *,
    whole: bool = False,
    positive: bool = True,
    least: int = 1,
) -> float | None:
    """``table[key]`` of the config's table ``[name]``: a whole number >= ``least`` (``whole``), else a
    finite number (> 0 when ``positive``)."""
    value = table.get(key)
    if value is None:
        return None
    if whole:
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise CLIError(f"{path}: {name}.{key} must be a whole number of at least {least}, got {value!r}")
        return value
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or value != value
        or value in (float("inf"), float("-inf"))
    ):
        raise CLIError(f"{path}: {name}.{key} must be a number, got {value!r}")
    if positive and value <= 0:
        raise CLIError(f"{path}: {name}.{key} must be more than 0, got {value!r}")
    return float(value)


def _env(table: dict[str, Any], path: Path) -> dict[str, str]:
    for key, value in table.items():
        if not ENV_NAME.fullmatch(key) or key.startswith(RESERVED_ENV_PREFIX):
            raise CLIError(f"{path}: env.{key}: a variable name is upper-case letters, digits and _, "
                           f"not starting with {RESERVED_ENV_PREFIX}")  # fmt: skip
        if not isinstance(value, str):
            raise CLIError(f"{path}: env.{key} must be a string, got {value!r}")
    return dict(table)


def _secrets(table: dict[str, Any], path: Path) -> tuple[str, ...]:
    for key in table:
        if key != "required":
            raise CLIError(f"{path}: unknown key secrets.{key}{did_you_mean(key, ['required'])}")
    required = table.get("required", [])
    if not isinstance(required, list) or not all(isinstance(name, str) for name in required):
        raise CLIError(f'{path}: secrets.required must be a list of names, e.g. ["OPENAI_API_KEY"]')
    return tuple(required)
