"""``osmosis_ai._litellm_compat``: LiteLLM's names at the import path 0.2 code uses, resolved lazily."""

from __future__ import annotations

import pytest

from osmosis_ai import _litellm_compat


def test_litellm_compat_resolves_lazily() -> None:
    assert _litellm_compat.NotFoundError.__name__ == "NotFoundError"
    assert callable(_litellm_compat.acompletion)
    with pytest.raises(AttributeError):
        _litellm_compat.not_a_name  # noqa: B018
