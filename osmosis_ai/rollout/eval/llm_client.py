"""Legacy import path of ``ExternalLLMClient``; the client is :mod:`osmosis_ai.evaluation.llm_client`."""

from __future__ import annotations

from osmosis_ai.evaluation.errors import ProviderError, SystemicProviderError
from osmosis_ai.evaluation.llm_client import ExternalLLMClient

__all__ = ["ExternalLLMClient", "ProviderError", "SystemicProviderError"]
