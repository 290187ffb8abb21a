"""0.3's adapter for Strands Agents: an agent made inside ``AgentWorkflow.run`` with the rollout's model
calls the rollout's endpoint, and its history is the rollout's sample::

    agent = OsmosisStrandsAgent(model=OsmosisRolloutModel(), tools=[add], system_prompt="...")
    await agent.invoke_async("what is 2 + 3?")
    # return None: the grader gets the agent's messages

The sample's ``messages`` are the agent's own (Strands' content blocks, as 0.3 gives graders); its
``trajectory_messages`` are the same conversation as OpenAI chat messages, the system prompt first:
what the model was sent and answered, which a trainer reads.

Needs the ``strands`` extra. Tested with strands-agents 1.62.
"""

from __future__ import annotations

from typing import Any

from osmosis_ai._lazy import require_optional
from osmosis_ai._litellm import import_litellm
from osmosis_ai.rollout.context import SampleSource, get_rollout_context
from osmosis_ai.rollout.types.sample import RolloutSample

require_optional("strands", feature_name="the Strands adapter", install_extra="strands")
import_litellm()  # Strands' LiteLLM model imports it: configured (offline cost map, quiet) first

from strands import Agent as StrandsAgent  # noqa: E402
from strands.models.litellm import LiteLLMModel  # noqa: E402

__all__ = ["OsmosisRolloutModel", "OsmosisStrandsAgent"]

# The model name the rollout's endpoint is asked for: the trainer serving it decides which model
# answers. ``litellm_proxy/`` makes LiteLLM post to ``{api_base}/chat/completions`` as given.
ROLLOUT_MODEL = "litellm_proxy/osmosis-rollout"


def _plain_text(message: dict[str, Any]) -> dict[str, Any]:
    """``message`` with content that is one text part as that text, as the prompt it came from had it."""
    match message.get("content"):
        case [{"type": "text", "text": str(text), **rest}] if not rest:
            return {**message, "content": text}
    return message


class RolloutLiteLLMModel(LiteLLMModel):
    """Strands' LiteLLM model with text content sent as strings: Strands turns each message into
    content parts, so a prompt given as text would come back to the rollout's endpoint changed (the
    TrainGate's append-only check) and reach chat templates that expect text as a string."""

    @classmethod
    def format_request_messages(cls, *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        return [_plain_text(message) for message in super().format_request_messages(*args, **kwargs)]


class StrandsAgentSampleSource(SampleSource):
    """The rollout's sample from a Strands agent: its ``messages``, and the same conversation as the
    OpenAI chat messages its model sends (system prompt first) as ``trajectory_messages``."""

    def __init__(self, agent: Any) -> None:
        self.agent = agent

    async def get_sample(self) -> RolloutSample:
        messages = list(self.agent.messages)
        system = self.agent.system_prompt if isinstance(self.agent.system_prompt, str) else None
        chat = RolloutLiteLLMModel.format_request_messages(messages, system)
        return RolloutSample(messages=messages, trajectory_messages=chat)


class OsmosisRolloutModel(LiteLLMModel):
    """The rollout's model in a workflow's config or agent definition: keeps the keywords for
    Strands' ``LiteLLMModel`` (``params={...}``, ``stream``) until :class:`OsmosisStrandsAgent` replaces
    it with one connected to the running rollout. It cannot answer itself."""

    def __init__(self, **litellm_kwargs: Any) -> None:
        self.litellm_kwargs = litellm_kwargs


def _blocks(message: dict[str, Any]) -> dict[str, Any]:
    """A chat message with text ``content`` as Strands holds it: a list of content blocks."""
    content = message.get("content")
    return {**message, "content": [{"text": content}]} if isinstance(content, str) else message


class OsmosisStrandsAgent(StrandsAgent):
    """``strands.Agent``, except that an :class:`OsmosisRolloutModel` given as ``model`` becomes a
    LiteLLM model of the running rollout (its ``chat_completions_url`` and key) and the agent the
    rollout's sample source: make it inside ``AgentWorkflow.run``, one per rollout. ``messages`` may
    be chat messages with text content.

    The rollout's model asks for whole answers (``stream=False``; this package's TrainGate does not
    stream) unless ``OsmosisRolloutModel(stream=True)`` says otherwise.
    """

    def __init__(
        self, *args: Any, messages: list[dict[str, Any]] | None = None, model: Any = None, **kwargs: Any
    ) -> None:
        if messages:
            messages = [_blocks(message) for message in messages]
        rollout = None
        if isinstance(model, OsmosisRolloutModel):
            rollout = get_rollout_context()
            if rollout is None:
                raise RuntimeError(
                    "OsmosisRolloutModel needs a running rollout: make the OsmosisStrandsAgent inside "
                    "AgentWorkflow.run"
                )
            # A key-less rollout sends a placeholder: LiteLLM would otherwise send one from this
            # process's environment to whatever URL the rollout names.
            model = RolloutLiteLLMModel(
                client_args={
                    "api_base": rollout.chat_completions_url,
                    "api_key": rollout.api_key or "no-key",
                },
                model_id=ROLLOUT_MODEL,
                **{"stream": False, **model.litellm_kwargs},
            )
        super().__init__(*args, model=model, messages=messages, **kwargs)
        if rollout is not None:
            rollout.set_sample_source(StrandsAgentSampleSource(self))
