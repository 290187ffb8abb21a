"""``osmosis_ai.rollout._compat``: the optional-dependency helpers kept at the import path 0.2 code uses."""

from __future__ import annotations

import importlib.util

import pytest

from osmosis_ai.rollout import _compat


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
