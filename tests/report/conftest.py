"""Results files written once per session by the real commands (see ``tests/support/results.py``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.openai_server import OpenAIServer, Reply
from tests.support.results import (
    write_eval_results,
    write_rollout_results,
    write_rubric_results,
    write_test_results,
)


@pytest.fixture(scope="session")
def results_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("results")


@pytest.fixture(scope="session")
def rollouts(results_dir: Path) -> Path:
    return write_rollout_results(results_dir)


@pytest.fixture(scope="session")
def local_results(results_dir: Path) -> Iterator[dict[str, Path]]:
    """``test``, ``eval`` and ``eval-rubric`` outputs, written one after the other (each through the
    command line's ``main()``), their model calls answered by the stand-in: the agent's (they offer
    tools) with an answer, the judge's with a verdict."""

    def reply(payload: Any) -> Reply:
        if payload.get("tools"):
            return Reply(content="The answer is #### 19")
        return Reply(content=json.dumps({"score": 0.75, "explanation": "polite enough"}))

    writers = {"test": write_test_results, "eval": write_eval_results, "eval-rubric": write_rubric_results}
    with OpenAIServer() as server:
        server.handler = reply
        yield {kind: write(results_dir, server.url) for kind, write in writers.items()}
