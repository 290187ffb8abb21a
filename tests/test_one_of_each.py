"""One of each, read from the package's code: where the design says a thing exists once, it does.

Each test walks the package's syntax trees (nothing is imported or run) and names every place that
breaks the rule as ``module:line``, so a second copy cannot slip in under another name's cover.
"""

from __future__ import annotations

import ast
import functools

import pytest

from tests.support.package_source import PACKAGE, XDIST_GROUP, package_trees

pytestmark = pytest.mark.xdist_group(XDIST_GROUP)


@functools.cache
def _nodes() -> list[tuple[str, ast.AST]]:
    """Every node of the package with its module, parsed and walked once for all the tests (and only
    when one of them runs, not when the suite is collected)."""
    return [
        (path.relative_to(PACKAGE.parent).as_posix(), node)
        for path, tree in package_trees()
        for node in ast.walk(tree)
    ]


def _definitions(name: str) -> list[str]:
    """Where a class or function called ``name`` is defined (methods included)."""
    return [
        f"{module}:{node.lineno}"
        for module, node in _nodes()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name
    ]


def _calls(owner: str, attribute: str) -> list[str]:
    """Where ``owner.attribute(...)`` is called."""
    return [
        f"{module}:{node.lineno}"
        for module, node in _nodes()
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == attribute
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == owner
    ]


def _in(places: list[str], module: str) -> list[str]:
    return [place for place in places if not place.startswith(module + ":")]


def test_one_model_call_seam() -> None:
    """Every model call goes through models/: only its LiteLLM adapter calls LiteLLM's completion functions."""
    calls = [place for name in ("acompletion", "completion", "atext_completion", "text_completion")
             for place in _calls("litellm", name)]  # fmt: skip
    assert calls and not _in(calls, "osmosis_ai/models/litellm.py"), calls


def test_one_http_client() -> None:
    """The SDK's outgoing HTTP: one aiohttp session per event loop, made in _http.py only."""
    sessions = _calls("aiohttp", "ClientSession")
    assert sessions and not _in(sessions, "osmosis_ai/_http.py"), sessions


def test_one_retry_loop() -> None:
    """One loop retries a call (``_http.retrying``); the judge's and the models' policies are its policies."""
    assert [p.split(":")[0] for p in _definitions("retrying")] == ["osmosis_ai/_http.py"]
    policies = _definitions("RetryPolicy")
    assert [p.split(":")[0] for p in policies] == ["osmosis_ai/_http.py", "osmosis_ai/judge/retry.py"], (
        policies
    )


def test_one_score_rule() -> None:
    """What may be a score is decided in one function, ``rewards/score.py``'s ``to_score``."""
    assert [p.split(":")[0] for p in _definitions("to_score")] == ["osmosis_ai/rewards/score.py"]


def test_one_pool() -> None:
    """Batch work runs through one bounded pool, ``_pool.run_bounded``."""
    assert [p.split(":")[0] for p in _definitions("run_bounded")] == ["osmosis_ai/_pool.py"]


def test_one_run_loop_and_one_plan() -> None:
    """One engine loop (``runs/engine.py``'s ``run_items``) and one plan of a run (``runs/plan.py``)."""
    assert [p.split(":")[0] for p in _definitions("run_items")] == ["osmosis_ai/runs/engine.py"]
    assert [p.split(":")[0] for p in _definitions("RunPlan")] == ["osmosis_ai/runs/plan.py"]


def test_one_server_config() -> None:
    """Every option of a rollout server is a field of one ``ServerConfig``."""
    assert [p.split(":")[0] for p in _definitions("ServerConfig")] == ["osmosis_ai/rollout/server/config.py"]


def test_one_dataset_reader() -> None:
    """Datasets are read by one reader (``runs/dataset.py``), row by row."""
    assert [p.split(":")[0] for p in _definitions("DatasetReader")] == ["osmosis_ai/runs/dataset.py"]
