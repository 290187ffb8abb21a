"""0.3's adapter for the OpenAI Agents SDK: an agent built inside ``AgentWorkflow.run`` calls the
rollout's model, and the session it runs with is the rollout's sample::

    session = OsmosisMemorySession()  # the rollout's sample source from here on
    agent = OsmosisAgent(name="solver", instructions="...", tools=[add], model=OsmosisRolloutModel())
    await Runner.run(agent, "what is 2 + 3?", session=session)
    # return None: the grader gets the session's items

The sample's ``messages`` are the session's items as the SDK stores them (Responses-API items, as 0.3
gives graders); its ``trajectory_messages`` are the same conversation as OpenAI chat messages, the
agent's instructions first: what the model was sent and answered, which a trainer reads.

Needs the ``openai-agents`` extra. Tested with openai-agents 0.24 (0.3 pinned ``<0.21``).
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from osmosis_ai._lazy import require_optional
from osmosis_ai._litellm import import_litellm
from osmosis_ai.rollout.context import RolloutContext, SampleSource, get_rollout_context
from osmosis_ai.rollout.types.sample import RolloutSample

require_optional("agents", feature_name="the OpenAI Agents adapter", install_extra="openai-agents")
import_litellm()  # the SDK's LiteLLM model imports it: configured (offline cost map, quiet) first

from agents import Agent  # noqa: E402
from agents.extensions.models.litellm_model import LitellmModel  # noqa: E402
from agents.memory.session import SessionABC  # noqa: E402
from agents.models.chatcmpl_converter import Converter  # noqa: E402

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

__all__ = [
    "OsmosisAgent",
    "OsmosisLitellmModel",
    "OsmosisMemorySession",
    "OsmosisRolloutModel",
    "SessionSampleSource",
]

# The model name the rollout's endpoint is asked for: the trainer serving it decides which model
# answers. ``litellm_proxy/`` makes LiteLLM post to ``{base_url}/chat/completions`` as given.
ROLLOUT_MODEL = "litellm_proxy/osmosis-rollout"


class SessionSampleSource(SampleSource):
    """The rollout's sample from an Agents SDK session: its items as ``messages``, and as OpenAI chat
    messages (``instructions`` first, when the model has said what they were) as ``trajectory_messages``.

    Works with any ``SessionABC``; :class:`OsmosisMemorySession` registers one for itself.
    """

    def __init__(self, session: Any) -> None:
        self.session = session
        self.instructions: str | None = None

    async def get_sample(self) -> RolloutSample:
        items = list(await self.session.get_items())
        # Null fields left out, as LiteLLM leaves them out of the requests it sends.
        chat: list[dict[str, Any]] = [
            {key: value for key, value in message.items() if value is not None}
            for message in Converter.items_to_messages(items, preserve_tool_output_all_content=True)
        ]
        if self.instructions:
            chat.insert(0, {"role": "system", "content": self.instructions})
        return RolloutSample(messages=items, trajectory_messages=chat)


class OsmosisMemorySession(SessionABC):
    """An in-memory session that is the rollout's sample source: made inside a rollout, it registers
    itself with the rollout's context (a second one in the same rollout is a ``ValueError``); made
    outside one, it is a plain in-memory session, so the same workflow runs without a rollout.

    Using it inside a rollout other than the one it was made in is a ``RuntimeError``: its items would
    become another rollout's sample.
    """

    def __init__(self) -> None:
        self.session_id = uuid.uuid4().hex
        self.items: list[Any] = []
        self._rollout: RolloutContext | None = get_rollout_context()
        if self._rollout is not None:
            self._rollout.set_sample_source(SessionSampleSource(self))

    def _check_rollout(self) -> None:
        current = get_rollout_context()
        if current is not None and current is not self._rollout:
            raise RuntimeError(
                "this OsmosisMemorySession belongs to another rollout (or none): make the session inside "
                "AgentWorkflow.run, once per rollout"
            )

    async def get_items(self, limit: int | None = None) -> list[Any]:
        self._check_rollout()
        return list(self.items if limit is None else self.items[-limit:] if limit > 0 else [])

    async def add_items(self, items: list[Any]) -> None:
        self._check_rollout()
        self.items.extend(items)

    async def pop_item(self) -> Any | None:
        return self.items.pop() if self.items else None

    async def clear_session(self) -> None:
        self.items.clear()


def _unbound() -> NotImplementedError:
    return NotImplementedError(
        "OsmosisRolloutModel stands for the rollout's model and cannot answer itself: give it to "
        "OsmosisAgent(model=...), which connects it to the rollout's chat endpoint"
    )


class OsmosisRolloutModel(LitellmModel):
    """The rollout's model in a workflow's config or agent definition: keeps the keywords for
    :class:`OsmosisLitellmModel` (``should_replay_reasoning_content``) until :class:`OsmosisAgent`
    replaces it with one connected to the running rollout."""

    def __init__(self, **litellm_kwargs: Any) -> None:
        self.litellm_kwargs = litellm_kwargs

    async def get_response(self, *args: Any, **kwargs: Any) -> Any:
        raise _unbound()

    async def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise _unbound()
        yield  # an async generator, as the interface's is


class OsmosisLitellmModel(LitellmModel):
    """The model of the rollout this is made in: the rollout context's ``chat_completions_url`` and
    key. It refuses to be made outside a rollout, and to be called while the rollout has no sample
    source (pass ``session=OsmosisMemorySession()`` to ``Runner.run``): the grader would get nothing.

    ``Runner.run`` asks for whole answers; ``Runner.run_streamed`` asks the endpoint to stream, which
    this package's TrainGate does not do.
    """

    def __init__(self, **litellm_kwargs: Any) -> None:
        rollout = get_rollout_context()
        if rollout is None:
            raise RuntimeError(
                "OsmosisLitellmModel needs a running rollout: make it (or the OsmosisAgent holding it) "
                "inside AgentWorkflow.run"
            )
        # A key-less rollout sends a placeholder: LiteLLM would otherwise send one from this process's
        # environment to whatever URL the rollout names.
        super().__init__(
            model=ROLLOUT_MODEL,
            base_url=rollout.chat_completions_url,
            api_key=rollout.api_key or "no-key",
            **litellm_kwargs,
        )

    @staticmethod
    def _source(system_instructions: str | None) -> None:
        rollout = get_rollout_context()
        if rollout is None or rollout.sample_source is None:
            raise RuntimeError(
                "the rollout's model was called with no sample source registered: pass "
                "session=OsmosisMemorySession() to Runner.run, or the grader gets no conversation"
            )
        if isinstance(rollout.sample_source, SessionSampleSource):
            rollout.sample_source.instructions = system_instructions

    async def get_response(self, system_instructions: str | None, *args: Any, **kwargs: Any) -> Any:
        self._source(system_instructions)
        return await super().get_response(system_instructions, *args, **kwargs)

    async def stream_response(
        self, system_instructions: str | None, *args: Any, **kwargs: Any
    ) -> AsyncIterator[Any]:
        self._source(system_instructions)
        async for event in super().stream_response(system_instructions, *args, **kwargs):
            yield event


class OsmosisAgent(Agent):
    """``agents.Agent``, except that an :class:`OsmosisRolloutModel` given as ``model`` becomes an
    :class:`OsmosisLitellmModel` of the running rollout (so make it inside ``AgentWorkflow.run``)."""

    def __init__(self, *args: Any, model: Any = None, **kwargs: Any) -> None:
        if isinstance(model, OsmosisRolloutModel):
            model = OsmosisLitellmModel(**model.litellm_kwargs)
        super().__init__(*args, model=model, **kwargs)
