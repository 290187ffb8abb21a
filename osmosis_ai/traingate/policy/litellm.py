"""Any LiteLLM model, or any OpenAI-compatible server (vLLM, SGLang, Ollama) by base URL, as a policy.

The rollout's tools are sent with every request (chat requests from the agent never carry them,
the init response does) and the request's sampling parameters are passed through. Token ids and
log-probabilities are taken from the backend when it reports them — vLLM/SGLang-style
``prompt_token_ids`` on the response and ``token_ids`` on the choice, or ``token_id:<n>`` tokens in
the logprobs content — otherwise the gateway falls back to its tokenizer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from osmosis_ai.models import complete as models
from osmosis_ai.models.errors import ModelCallError
from osmosis_ai.traingate.errors import PolicyError
from osmosis_ai.traingate.policy.base import Generation, Message, Policy

if TYPE_CHECKING:
    from osmosis_ai.models.concurrency import CallObserver

_SAMPLING_KEYS = ("temperature", "top_p", "max_tokens", "stop", "logprobs")
# vLLM's documented extra parameters for token ids on chat completions: ``prompt_token_ids`` on the
# response and ``token_ids`` on the choice, and logprob tokens spelled ``token_id:<n>``.
TOKEN_ID_OPTIONS = {"return_token_ids": True, "return_tokens_as_token_ids": True}


def _clean_message(data: Message) -> Message:
    """The assistant message as plain JSON with only protocol keys; ``tool_calls`` only when present."""
    message: Message = {"role": "assistant", "content": data.get("content")}
    calls = data.get("tool_calls")
    if calls:
        message["tool_calls"] = [
            {
                "id": call.get("id"),
                "type": call.get("type") or "function",
                "function": {
                    "name": call.get("function", {}).get("name"),
                    "arguments": call.get("function", {}).get("arguments") or "{}",
                },
            }
            for call in calls
        ]
    if data.get("reasoning_content"):
        message["reasoning_content"] = data["reasoning_content"]
    return message


class LiteLLMPolicy(Policy):
    """A named provider's model (``openai/gpt-4o-mini``, ``ollama/qwen2.5``...) or an OpenAI-compatible server.

    Requests go through the model seam (:mod:`osmosis_ai.models.complete`), which decides the route
    once, on the first request.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 600.0,
        request_token_ids: bool = False,
        observer: CallObserver | None = None,
    ) -> None:
        """``request_token_ids`` asks an OpenAI-compatible server (vLLM, SGLang) for the ids it used;
        ``observer`` (an adaptive concurrency limit) hears how each backend request ended."""
        self.name = model
        self.request_token_ids = request_token_ids
        self.model = model
        self.base_url = base_url
        self._api_key = api_key
        self.timeout = timeout
        self.observer = observer
        self._route: models.Route | None = None

    async def _target(self) -> models.Route:
        if self._route is None:
            self._route = await models.aroute(self.model, api_base=self.base_url, api_key=self._api_key)
        return self._route

    def _params(self, tools: list[Message], params: dict[str, Any]) -> dict[str, Any]:
        """The request's fields: one backend request per attempt, since the agent's client already
        retries the gateway's 502 and further retries here would multiply with it."""
        kwargs: dict[str, Any] = {k: params[k] for k in _SAMPLING_KEYS if params.get(k) is not None}
        if tools:
            kwargs["tools"] = tools
        if self.request_token_ids:
            kwargs["extra_body"] = dict(TOKEN_ID_OPTIONS)
            kwargs["logprobs"] = True
        return kwargs

    async def preflight(self) -> None:
        """One ``max_tokens=1`` request by the route the rollouts will take; systemic failures raise."""
        from osmosis_ai.models.providers import check_error

        target = await self._target()
        try:
            await models.preflight(target, timeout=min(self.timeout, 30.0), **self._params([], {}))
        except ModelCallError as exc:
            raise check_error(self.model, exc) from exc

    async def generate(
        self, messages: list[Message], *, tools: list[Message], params: dict[str, Any]
    ) -> Generation:
        target = self._route or await self._target()
        try:
            reply = await models.complete(
                target, messages, timeout=self.timeout, observer=self.observer, **self._params(tools, params)
            )
        except ModelCallError as exc:
            raise PolicyError(
                f"the policy backend {self.model!r} failed: {exc.message}", retryable=exc.transient
            ) from exc
        if reply.message is None:
            raise PolicyError(f"the policy backend {self.model!r} returned no choices")
        return Generation(
            message=_clean_message(reply.message),
            finish_reason=reply.finish_reason,
            token_ids=reply.token_ids,
            logprobs=reply.logprobs,
            prompt_token_ids=reply.prompt_token_ids,
            usage=reply.usage,
        )
