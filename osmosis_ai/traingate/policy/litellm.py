"""Any LiteLLM model, or any OpenAI-compatible server (vLLM, SGLang, Ollama) by base URL, as a policy.

The rollout's tools are sent with every request (chat requests from the agent never carry them,
the init response does) and the request's sampling parameters are passed through. Token ids and
log-probabilities are taken from the backend when it reports them — vLLM/SGLang-style
``prompt_token_ids`` on the response and ``token_ids`` on the choice, or ``token_id:<n>`` tokens in
the logprobs content — otherwise the gateway falls back to its tokenizer.
"""

from __future__ import annotations

import logging
from typing import Any

from osmosis_ai._http import is_retryable_status
from osmosis_ai._litellm import aimport_litellm, import_litellm
from osmosis_ai.traingate.errors import PolicyError
from osmosis_ai.traingate.policy.base import Generation, Message, Policy

logger = logging.getLogger(__name__)

_SAMPLING_KEYS = ("temperature", "top_p", "max_tokens", "stop", "logprobs")
# vLLM's documented extra parameters for token ids on chat completions: ``prompt_token_ids`` on the
# response and ``token_ids`` on the choice, and logprob tokens spelled ``token_id:<n>``.
TOKEN_ID_OPTIONS = {"return_token_ids": True, "return_tokens_as_token_ids": True}
_MESSAGE_KEYS = ("role", "content", "tool_calls", "reasoning_content")


def _field(obj: Any, name: str) -> Any:
    """Read ``name`` from a LiteLLM object or a plain dict (extras live in either)."""
    if isinstance(obj, dict):
        return obj.get(name)
    return getattr(obj, name, None)


def _int_list(value: Any) -> list[int] | None:
    if isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return list(value)
    return None


def _clean_message(raw: Any) -> Message:
    """The assistant message as plain JSON with only protocol keys; ``tool_calls`` only when present."""
    data = raw.model_dump() if hasattr(raw, "model_dump") else dict(raw)
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


def _token_data(response: Any, choice: Any) -> tuple[list[int] | None, list[float] | None, list[int] | None]:
    """Completion ids, completion logprobs and prompt ids, as far as the backend reported them."""
    entries = _field(_field(choice, "logprobs"), "content") or []
    logprobs = [float(_field(e, "logprob")) for e in entries] or None
    token_ids = _int_list(_field(choice, "token_ids"))
    if token_ids is None and entries:
        tokens = [str(_field(e, "token") or "") for e in entries]
        if all(t.startswith("token_id:") and t[9:].isdigit() for t in tokens):
            token_ids = [int(t[9:]) for t in tokens]
    return token_ids, logprobs, _int_list(_field(response, "prompt_token_ids"))


class LiteLLMPolicy(Policy):
    """A LiteLLM model (``openai/gpt-4o-mini``, ``ollama/qwen2.5``...) or an OpenAI-compatible server."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 600.0,
        request_token_ids: bool = False,
    ) -> None:
        """``request_token_ids`` asks an OpenAI-compatible server (vLLM, SGLang) for the ids it used."""
        self.name = model
        self.request_token_ids = request_token_ids
        self.model = model
        self.base_url = base_url
        self._api_key = api_key
        self.timeout = timeout
        self._provider: str | None = None
        if base_url:
            # A bare or org-prefixed name ("Qwen/Qwen2.5-7B") behind a base URL means an OpenAI-compatible server.
            prefix = model.split("/", 1)[0]
            if "/" not in model or prefix not in import_litellm().provider_list:
                self._provider = "openai"

    def _request_kwargs(self, tools: list[Message], params: dict[str, Any]) -> dict[str, Any]:
        kwargs: dict[str, Any] = {k: params[k] for k in _SAMPLING_KEYS if params.get(k) is not None}
        # One backend request per attempt: the agent's client already retries the gateway's 502, and
        # LiteLLM's / the OpenAI SDK's own retries would multiply with it.
        kwargs["max_retries"] = 0
        kwargs["num_retries"] = 0
        if tools:
            kwargs["tools"] = tools
        if self.base_url:
            kwargs["api_base"] = self.base_url
        if self._api_key:
            kwargs["api_key"] = self._api_key
        elif self._provider == "openai":
            kwargs["api_key"] = "not-needed"  # local servers ignore it; the OpenAI client insists on one
        if self._provider:
            kwargs["custom_llm_provider"] = self._provider
        if self.request_token_ids:
            kwargs["extra_body"] = dict(TOKEN_ID_OPTIONS)
            kwargs["logprobs"] = True
        return kwargs

    async def preflight(self) -> None:
        """One ``max_tokens=1`` request by the route the rollouts will take; systemic failures raise."""
        from osmosis_ai.evaluation.providers import preflight

        await preflight(self.model, self._request_kwargs([], {}), timeout=min(self.timeout, 30.0))

    async def generate(
        self, messages: list[Message], *, tools: list[Message], params: dict[str, Any]
    ) -> Generation:
        litellm = await aimport_litellm()  # the first import takes seconds: not on the event loop
        try:
            response = await litellm.acompletion(
                model=self.model,
                messages=messages,
                timeout=self.timeout,
                **self._request_kwargs(tools, params),
            )
        except Exception as exc:
            detail = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
            status = getattr(exc, "status_code", None)
            retryable = not isinstance(status, int) or is_retryable_status(status)
            raise PolicyError(
                f"the policy backend {self.model!r} failed: {detail}", retryable=retryable
            ) from exc
        choices = _field(response, "choices") or []
        if not choices:
            raise PolicyError(f"the policy backend {self.model!r} returned no choices")
        choice = choices[0]
        token_ids, logprobs, prompt_ids = _token_data(response, choice)
        usage = _field(response, "usage")
        usage_dict = None
        if usage is not None:
            usage_dict = {
                k: int(_field(usage, k) or 0) for k in ("prompt_tokens", "completion_tokens", "total_tokens")
            }
        return Generation(
            message=_clean_message(_field(choice, "message")),
            finish_reason=str(_field(choice, "finish_reason") or "stop"),
            token_ids=token_ids,
            logprobs=logprobs,
            prompt_token_ids=prompt_ids,
            usage=usage_dict,
        )
