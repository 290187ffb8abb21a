"""The 0.3 workspace on disk: ``rollouts/NAME/`` (``main.py`` serving the rollout, ``pyproject.toml``)
beside ``configs/eval/NAME.toml``, the evaluation's settings.

:func:`scaffold` writes a new rollout: a workflow that asks the policy once and answers with its
reply, a grader giving 1.0 when the reply equals the row's label, a three-row dataset and the eval
config naming it, so ``osmosis eval run configs/eval/NAME.toml`` runs at once. Nothing that exists is
ever written over: one existing path refuses the whole scaffold before any file is written.
:func:`rollouts` lists the workspace's rollouts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from osmosis_ai.consts import PACKAGE_VERSION
from osmosis_ai.errors import OsmosisError

__all__ = [
    "DATASET_FILE",
    "ENTRYPOINT",
    "WorkspaceError",
    "WorkspaceRollout",
    "eval_config_path",
    "find_workspace",
    "rollout_dir",
    "rollouts",
    "scaffold",
]

ENTRYPOINT = "main.py"
DATASET_FILE = "dataset.jsonl"
NAME_PATTERN = re.compile(r"[a-z][a-z0-9-]*")


class WorkspaceError(OsmosisError, ValueError):
    """A rollout name or workspace path cannot be used as asked (nothing was written)."""


@dataclass(frozen=True)
class WorkspaceRollout:
    """One rollout of a workspace: its name, its directory, its eval config when it has one."""

    name: str
    directory: Path
    eval_config: Path | None


def rollout_dir(workspace: Path, name: str) -> Path:
    """Where the rollout ``name`` lives in ``workspace``."""
    return workspace / "rollouts" / name


def eval_config_path(workspace: Path, name: str) -> Path:
    """Where the eval config of the rollout ``name`` lives in ``workspace``."""
    return workspace / "configs" / "eval" / f"{name}.toml"


def find_workspace(start: Path) -> Path:
    """The nearest directory from ``start`` upwards that has a ``rollouts/`` directory, else ``start``."""
    start = start.resolve()
    for directory in (start, *start.parents):
        if (directory / "rollouts").is_dir():
            return directory
    return start


def check_name(name: str) -> None:
    """Refuse a rollout name that is not lowercase letters, digits and hyphens starting with a letter."""
    if not NAME_PATTERN.fullmatch(name):
        raise WorkspaceError(
            f"invalid rollout name {name!r}: use lowercase letters, digits and hyphens, starting with a letter"
        )


def scaffold(workspace: Path, name: str) -> list[Path]:
    """Write the rollout ``name`` into ``workspace`` (see the module docstring); the files written.

    Raises :class:`WorkspaceError` for a bad name or when any of its paths exists already."""
    check_name(name)
    directory = rollout_dir(workspace, name)
    files = {
        directory / ENTRYPOINT: _MAIN.replace("{name}", name),
        directory / "pyproject.toml": _PYPROJECT.replace("{name}", name).replace(
            "{version}", PACKAGE_VERSION
        ),
        directory / DATASET_FILE: _DATASET,
        eval_config_path(workspace, name): _EVAL_CONFIG.replace("{name}", name),
    }
    for taken in (directory, eval_config_path(workspace, name)):
        if taken.exists() or taken.is_symlink():
            shown = taken.relative_to(workspace).as_posix()
            raise WorkspaceError(
                f"{shown} already exists: rollout {name!r} was not created (nothing written)"
            )
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("x", encoding="utf-8") as handle:  # "x": never over a file made meanwhile
            handle.write(text)
    return list(files)


def rollouts(workspace: Path) -> list[WorkspaceRollout]:
    """The rollouts of ``workspace`` (directories under ``rollouts/`` with a ``main.py``), by name."""
    root = workspace / "rollouts"
    found = []
    for directory in sorted(root.iterdir()) if root.is_dir() else ():
        if (directory / ENTRYPOINT).is_file():
            config = eval_config_path(workspace, directory.name)
            found.append(WorkspaceRollout(directory.name, directory, config if config.is_file() else None))
    return found


_MAIN = '''"""{name}: a rollout served over the 0.3 wire, made by `osmosis rollout init`.

`python main.py` serves it on $_OSMOSIS_ROLLOUT_PORT (8000 when unset), and
`osmosis eval run configs/eval/{name}.toml` starts it and sends it every row of the dataset.
The workflow asks the policy once and answers with its reply; the grader scores 1.0 when the
reply is the row's label. Replace both with your own.
"""

from __future__ import annotations

import asyncio
import json
import os
import urllib.request
from typing import Any

import uvicorn

from osmosis_ai.rollout.agent_workflow import AgentWorkflow
from osmosis_ai.rollout.backend.local import LocalBackend
from osmosis_ai.rollout.context import AgentWorkflowContext, GraderContext, get_rollout_context
from osmosis_ai.rollout.grader import Grader
from osmosis_ai.rollout.server import create_rollout_server


def chat(url: str, api_key: str | None, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """One chat completion from the policy (the standard library only; any HTTP client will do)."""
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    body = json.dumps({"model": "policy", "messages": messages}).encode()
    request = urllib.request.Request(f"{url}/chat/completions", data=body, headers=headers)
    with urllib.request.urlopen(request, timeout=300) as response:
        return json.load(response)["choices"][0]["message"]


class Workflow(AgentWorkflow):
    async def run(self, ctx: AgentWorkflowContext) -> list[dict[str, Any]]:
        rollout = get_rollout_context()
        assert rollout is not None, "run() is called inside a rollout"
        reply = await asyncio.to_thread(chat, rollout.chat_completions_url, rollout.api_key, ctx.prompt)
        return [*ctx.prompt, {"role": "assistant", "content": reply.get("content") or ""}]


class ExactAnswer(Grader):
    async def grade(self, ctx: GraderContext) -> None:
        assert ctx.sample is not None, "grade() is called with the workflow's sample"
        answer = str(ctx.sample.messages[-1].get("content") or "").strip()
        ctx.set_reward(1.0 if answer == (ctx.label or "").strip() else 0.0)


app = create_rollout_server(backend=LocalBackend(workflow=Workflow, grader=ExactAnswer))

if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(os.environ.get("_OSMOSIS_ROLLOUT_PORT", "8000")))
'''

_PYPROJECT = """[project]
name = "{name}"
version = "0.1.0"
description = "The {name} rollout, made by `osmosis rollout init`."
requires-python = ">=3.10"
dependencies = ["osmosis-ai[server]>={version}"]

[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"
"""

_DATASET = "".join(
    f'{{"system_prompt": "Answer with the number only.", "user_prompt": "what is {a} + {b}?", '
    f'"ground_truth": "{a + b}"}}\n'
    for a, b in ((2, 3), (7, 5), (40, 2))
)

_EVAL_CONFIG = """# The {name} rollout's evaluation: osmosis eval run configs/eval/{name}.toml

[experiment]
rollout = "{name}"                         # the directory under rollouts/
entrypoint = "main.py"                     # the file in it that serves the rollout
model_path = "openai/gpt-4o-mini"          # the policy (LiteLLM name; --base-url for an OpenAI-compatible server)
dataset = "rollouts/{name}/dataset.jsonl"  # a local .jsonl/.csv/.parquet file (or give --dataset-file)

[evaluation]
# Every key is optional.
# limit = 100                    # the first N rows only
# n = 1                          # rollouts per row; pass@k is reported for k up to n
# batch_size = 1                 # rollouts in flight
# pass_threshold = 1.0           # a reward at least this passes
# agent_workflow_timeout_s = 450
# grader_timeout_s = 150

# [env]
# LOG_LEVEL = "INFO"             # set in the rollout server's environment
"""
