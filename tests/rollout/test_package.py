"""The package surface: every 6.1 name resolves, imports stay light, optional-dependency helpers."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

import osmosis_ai.rollout as rollout
from osmosis_ai.errors import OsmosisError
from osmosis_ai.rollout import _compat

CORE_NAMES = [
    name
    for name, module in rollout._EXPORTS.items()
    if not module.startswith("osmosis_ai.rollout.server")  # the server half has its own tests
]


def test_all_is_sorted_and_complete() -> None:
    assert rollout.__all__ == sorted(rollout.__all__)
    assert len(rollout.__all__) == 76
    assert set(rollout.__all__) <= set(dir(rollout))


@pytest.mark.parametrize("name", CORE_NAMES)
def test_core_names_resolve(name: str) -> None:
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


def test_compat_helpers() -> None:
    module, ok = _compat.import_optional("json")
    assert ok and module is not None and module.dumps({}) == "{}"
    assert _compat.import_optional("osmosis_missing_module_xyz") == (None, False)
    with pytest.raises(
        ImportError, match=r"required for tracing; install it with: pip install 'osmosis-ai\[mcp\]'"
    ):
        _compat.require_optional("osmosis_missing_module_xyz", feature_name="tracing", install_extra="mcp")
    with pytest.raises(ImportError, match="pip install"):
        _compat.require_optional("osmosis_missing_module_xyz")
    assert _compat.FASTAPI_AVAILABLE is (importlib.util.find_spec("fastapi") is not None)
    assert _compat.PYDANTIC_SETTINGS_AVAILABLE is True
    assert _compat.uvicorn is not None and _compat.uvicorn.__name__ == "uvicorn"
    with pytest.raises(AttributeError):
        _compat.not_a_module  # noqa: B018
