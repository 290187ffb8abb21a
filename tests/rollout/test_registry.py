"""The agent-loop registry: registration order, duplicates, lookups and the module-level functions."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from osmosis_ai.rollout import registry
from osmosis_ai.rollout.core.base import RolloutAgentLoop, RolloutContext, RolloutResult
from osmosis_ai.rollout.core.exceptions import AgentLoopNotFoundError, OsmosisRolloutError
from osmosis_ai.rollout.core.schemas import OpenAIFunctionToolSchema, RolloutRequest


class Echo(RolloutAgentLoop):
    name = "echo"

    def get_tools(self, request: RolloutRequest) -> list[OpenAIFunctionToolSchema]:
        return []

    async def run(self, ctx: RolloutContext) -> RolloutResult:
        return ctx.complete(list(ctx.request.messages))


class Other(Echo):
    name = "other"


@pytest.fixture(autouse=True)
def _empty_default_registry() -> Iterator[None]:
    def empty() -> None:
        for name in registry.list_agent_loops():
            registry.unregister_agent_loop(name)

    empty()
    yield
    empty()


def test_registry_methods() -> None:
    reg = registry.AgentLoopRegistry()
    echo, other = Echo(), Other()
    reg.register(other)
    reg.register(echo)
    assert reg.list_names() == ["other", "echo"]
    assert reg.get("echo") is echo and reg.get("missing") is None
    with pytest.raises(ValueError, match="'echo' is already registered"):
        reg.register(Echo())
    assert reg.unregister("echo") is True
    assert reg.unregister("echo") is False
    reg.clear()
    assert reg.list_names() == []


def test_module_level_functions() -> None:
    echo = Echo()
    registry.register_agent_loop(echo)
    assert registry.get_agent_loop("echo") is echo
    assert registry.list_agent_loops() == ["echo"]
    with pytest.raises(AgentLoopNotFoundError) as exc:
        registry.get_agent_loop("nope")
    assert str(exc.value) == "Agent loop 'nope' not found. Available: ['echo']"
    assert (exc.value.name, exc.value.available) == ("nope", ["echo"])
    assert isinstance(exc.value, OsmosisRolloutError)
    assert registry.unregister_agent_loop("echo") is True
    assert registry.list_agent_loops() == []
