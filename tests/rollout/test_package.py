"""The ``osmosis_ai.rollout`` package surface: every exported name resolves, imports stay light."""

from __future__ import annotations

import subprocess
import sys

import pytest

import osmosis_ai.rollout as rollout
from osmosis_ai.errors import OsmosisError


def test_all_is_sorted_and_complete() -> None:
    assert rollout.__all__ == sorted(rollout.__all__)
    assert len(rollout.__all__) == 95  # 76 of 0.2, 19 of 0.3 that do not clash with them
    assert set(rollout.__all__) <= set(dir(rollout))


@pytest.mark.parametrize("name", rollout.__all__)
def test_every_exported_name_resolves(name: str) -> None:
    assert getattr(rollout, name) is not None


def test_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        rollout.nope  # noqa: B018


def test_error_tree_roots() -> None:
    for name in (
        "OsmosisRolloutError",
        "AgentLoopValidationError",
        "PublicIPDetectionError",
        "ToolArgumentError",
    ):
        assert issubclass(getattr(rollout, name), OsmosisError)


def test_importing_the_package_and_agent_api_stays_light() -> None:
    code = (
        "import sys, osmosis_ai.rollout as r\n"
        "heavy = {'pydantic', 'fastapi', 'uvicorn', 'aiohttp', 'httpx'}\n"
        "print(sorted(heavy & set(sys.modules)))\n"
        "r.RolloutAgentLoop, r.RolloutRequest\n"
        "print(sorted({'fastapi', 'uvicorn', 'aiohttp', 'httpx'} & set(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ["[]", "[]"]
