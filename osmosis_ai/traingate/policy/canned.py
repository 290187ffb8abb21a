"""The instant policy of ``osmosis rollout bench``: canned calculator turns with canned token data.

It measures the protocol and the rollout server, not a model: ``tool_turns`` assistant messages
that call ``add`` with ``{"a": 1, "b": 2}``, then ``"The answer is #### 3"``. It reports fixed token
ids, log-probabilities and prompt ids itself, so the gateway does no tokenizer work.
"""

from __future__ import annotations

import json
from typing import Any

from osmosis_ai.traingate.policy.base import Generation, Message, Policy

_TOKENS = list(range(1, 9))
_LOGPROBS = [-0.1] * len(_TOKENS)
_ARGUMENTS = json.dumps({"a": 1, "b": 2})


class CannedPolicy(Policy):
    """Answers instantly; see the module docstring."""

    name = "canned"

    def __init__(self, tool_turns: int = 1) -> None:
        self.tool_turns = tool_turns

    async def generate(
        self, messages: list[Message], *, tools: list[Message], params: dict[str, Any]
    ) -> Generation:
        turn = sum(1 for m in messages if m.get("role") == "assistant")
        prompt_ids = list(range(len(messages)))
        usage = {"prompt_tokens": len(prompt_ids), "completion_tokens": len(_TOKENS)}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        if turn < self.tool_turns:
            call = {
                "id": f"call_{turn}",
                "type": "function",
                "function": {"name": "add", "arguments": _ARGUMENTS},
            }
            message: Message = {"role": "assistant", "content": "", "tool_calls": [call]}
            finish = "tool_calls"
        else:
            message, finish = {"role": "assistant", "content": "The answer is #### 3"}, "stop"
        return Generation(message, finish, list(_TOKENS), list(_LOGPROBS), prompt_ids, usage)
