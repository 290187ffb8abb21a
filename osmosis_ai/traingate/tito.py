"""Token-in-token-out bookkeeping of one rollout, the way a trainer keeps it, with the drift check.

A :class:`TokenTrace` holds the rollout's token sequence: the first prompt rendered by the model's
chat template, then each completion's ids and the ids of the messages appended after it. Turn k+1's
prompt is turn k's prompt + its completion + the appended messages rendered as a continuation, so
the incremental cost of a turn is the new messages' tokens, never the whole conversation.

A continuation is rendered the way trainers do it without re-rendering the history: the template
renders a short neutral conversation (a user and an assistant message) with and without the new
messages; the text after the neutral assistant's end-of-turn token is the continuation. A
completion the backend did not report ids for is the template's rendering of the message after its
generation prompt, up to and including the end-of-turn (``eos_token``): what the model would have
generated for it; what follows that token belongs to the next prompt.

The check (:meth:`TokenTrace.check`) renders the whole conversation afresh and compares; it costs
O(conversation) per turn and is timed separately (``check_seconds``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from osmosis_ai.traingate import drift
from osmosis_ai.traingate.drift import DriftEvent
from osmosis_ai.traingate.tokenizer import ChatTokenizer

Message = dict[str, Any]

NEUTRAL_USER: Message = {"role": "user", "content": "Hello."}
NEUTRAL_ASSISTANT: Message = {"role": "assistant", "content": "Hello!"}


@dataclass
class Continuation:
    """How the template continues a conversation: what to cut after, per rollout's tool list."""

    head: str  # the neutral conversation up to its assistant's end-of-turn
    with_prompt: str  # the neutral user turn followed by the generation prompt


@dataclass
class TokenTrace:
    """The token sequence of one rollout; see the module docstring.

    ``ids`` is the trajectory (latest prompt + latest completion), ``mask`` marks its generated
    tokens with 1, ``covered`` counts the messages it holds (the latest assistant message included).
    """

    tokenizer: ChatTokenizer
    tools: list[Message] | None = None
    ids: list[int] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)
    covered: int = 0
    events: list[DriftEvent] = field(default_factory=list)
    incremental_seconds: float = 0.0
    check_seconds: float = 0.0
    # (token offset, message index) where the rendering of each message (or group of messages) starts.
    segments: list[tuple[int, int]] = field(default_factory=list)
    broken: str | None = None  # why the template could not render this rollout (the trace then stops)
    _continuation: Continuation | None = None
    _last_drift: int | None = None

    # -- the incremental path -------------------------------------------------------------------

    def _render(self, messages: list[Message], *, generation_prompt: bool) -> str:
        return self.tokenizer.render(messages, tools=self.tools, add_generation_prompt=generation_prompt)

    def _end_of_turn(self, text: str) -> int:
        """Offset just after the last end-of-turn token in ``text`` (its end if there is none)."""
        eos = self.tokenizer.eos_token
        at = text.rfind(eos) if eos else -1
        return len(text) if at < 0 else at + len(eos or "")

    def _neutral(self) -> Continuation:
        if self._continuation is None:
            history = self._render([NEUTRAL_USER, NEUTRAL_ASSISTANT], generation_prompt=False)
            with_prompt = self._render([NEUTRAL_USER], generation_prompt=True)
            # The end of turn is looked for in the assistant's part only: the user turn ends with one too.
            opening = len(with_prompt) if history.startswith(with_prompt) else 0
            head = history[: opening + self._end_of_turn(history[opening:])]
            self._continuation = Continuation(head=head, with_prompt=with_prompt)
        return self._continuation

    def continuation_text(self, new_messages: list[Message]) -> str:
        """The text the template adds after an assistant turn for ``new_messages`` plus the generation prompt."""
        head = self._neutral().head
        rendered = self._render([NEUTRAL_USER, NEUTRAL_ASSISTANT, *new_messages], generation_prompt=True)
        # A template that closes a final assistant turn differently from one followed by more
        # messages shares less than ``head``: the continuation then starts where they part (drift),
        # moved back to the start of a special token the two share only partly.
        cut = drift.common_prefix(head, rendered)
        if cut < len(head):
            cut = self.tokenizer.token_start(rendered, cut)
        return rendered[cut:]

    def completion_text(self, message: Message) -> str:
        """What the model generates for ``message``: its rendering after the generation prompt, to end of turn."""
        neutral = self._neutral().with_prompt
        rendered = self._render([NEUTRAL_USER, message], generation_prompt=False)
        if rendered.startswith(neutral):
            text = rendered[len(neutral) :]
            return text[: self._end_of_turn(text)]
        # The generation prompt is not a prefix of the rendered turn (it opens a block the message
        # closes differently): the message's own text is the best guess of what was generated.
        content = message.get("content")
        return (content if isinstance(content, str) else "") + (self.tokenizer.eos_token or "")

    def extend(self, messages: list[Message]) -> list[int]:
        """Turn's prompt ids: the first render, or the trajectory + the messages appended since."""
        started = time.perf_counter()
        if not self.ids:
            self.segments.append((0, 0))
            self.ids = self.tokenizer.encode(self._render(messages, generation_prompt=True))
            self.mask = [0] * len(self.ids)
        else:
            new = messages[self.covered :]
            self.segments.append((len(self.ids), self.covered))
            added = self.tokenizer.encode(self.continuation_text(new))
            self.ids.extend(added)
            self.mask.extend([0] * len(added))
        self.covered = len(messages)
        self.incremental_seconds += time.perf_counter() - started
        return list(self.ids)

    def checkpoint(self) -> tuple[int, int, int]:
        """Where the trajectory stands, for :meth:`rewind` (a turn's prompt extended, then not answered)."""
        return len(self.ids), self.covered, len(self.segments)

    def rewind(self, point: tuple[int, int, int]) -> None:
        """Drop what was added since :meth:`checkpoint` returned ``point``."""
        length, covered, segments = point
        del self.ids[length:], self.mask[length:], self.segments[segments:]
        self.covered = covered

    def restart(self, prompt_ids: list[int], num_messages: int) -> None:
        """Continue from ``prompt_ids`` (the backend's): the mask is kept where they agree with the trajectory."""
        differs = drift.first_difference(self.ids, prompt_ids)
        kept = len(prompt_ids) if differs is None else differs
        self.mask = self.mask[:kept] + [0] * (len(prompt_ids) - kept)
        self.ids = list(prompt_ids)
        self.segments = [(start, index) for start, index in self.segments if start < kept] or [(0, 0)]
        self.covered = num_messages

    def add_completion(self, message: Message, token_ids: list[int] | None = None) -> list[int]:
        """Append the generated ids (the backend's, else the template's rendering of ``message``)."""
        started = time.perf_counter()
        ids = (
            list(token_ids) if token_ids is not None else self.tokenizer.encode(self.completion_text(message))
        )
        self.segments.append((len(self.ids), self.covered))
        self.ids.extend(ids)
        self.mask.extend([1] * len(ids))
        self.covered += 1
        self.incremental_seconds += time.perf_counter() - started
        return ids

    def release(self) -> None:
        """Drop the trajectory's ids once written out; the drift events stay."""
        self.ids, self.mask, self.segments = [], [], []

    def to_record(self) -> dict[str, Any]:
        """The rollout record's keys for the trajectory a trainer trains on and the drift found."""
        return {
            "trajectory": {"token_ids": self.ids, "loss_mask": self.mask},
            "drift_events": [event.to_dict() for event in self.events],
        }

    # -- the check ------------------------------------------------------------------------------

    def message_at(self, position: int) -> int:
        """Index of the message whose tokens hold ``position``."""
        found = 0
        for start, index in self.segments:
            if start > position:
                break
            found = index
        return found

    def compare(
        self,
        kept: list[int],
        rendered: list[int],
        *,
        turn: int,
        kind: str,
        messages: list[Message],
        message: int | None = None,
    ) -> DriftEvent | None:
        """A drift event for the first difference of ``kept`` and ``rendered``, or ``None`` if equal."""
        position = drift.first_difference(kept, rendered)
        if position is None:
            return None
        decode = self.tokenizer.decode
        cause = drift.classify(
            kept, rendered, position, decode=decode, special_ids=self.tokenizer.special_ids, messages=messages
        )
        kept_text, rendered_text = drift.snippets(kept, rendered, position, decode)
        line = drift.template_line(
            self.tokenizer.template.source_of(tools=self.tools is not None),
            cause,
            decode(list(kept[position : position + 1])),
            decode(list(rendered[position : position + 1])),
            decode(list(kept[max(0, position - 1) : position])),
        )
        return DriftEvent(
            turn=turn,
            message=self.message_at(position) if message is None else message,
            position=position,
            kind=kind,
            cause=cause,
            trajectory=kept_text,
            rendered=rendered_text,
            template_line=line[0] if line else None,
            template_text=line[1] if line else None,
        )

    def fresh_prompt(self, messages: list[Message]) -> list[int]:
        """The whole conversation rendered and encoded afresh (the reference of the check)."""
        return self.tokenizer.encode(self._render(messages, generation_prompt=True))

    def check(
        self,
        messages: list[Message],
        prompt_ids: list[int],
        *,
        turn: int,
        kind: str = drift.TEMPLATE,
        reference: list[int] | None = None,
    ) -> DriftEvent | None:
        """Compare a turn's prompt with a fresh render (or ``reference``); record and return a *new* drift.

        Once the sequences part, every later turn differs at the same token: only a difference at
        another position is a new event.
        """
        started = time.perf_counter()
        try:
            expected = self.fresh_prompt(messages) if reference is None else reference
            event = self.compare(prompt_ids, expected, turn=turn, kind=kind, messages=messages)
        finally:
            self.check_seconds += time.perf_counter() - started
        if event is None:
            if kind == drift.TEMPLATE:
                self._last_drift = None
            return None
        if kind == drift.TEMPLATE:
            if event.position == self._last_drift:
                return None
            self._last_drift = event.position
        self.events.append(event)
        return event

    def check_completion(
        self, messages: list[Message], message: Message, token_ids: list[int], *, turn: int
    ) -> DriftEvent | None:
        """Compare a backend's generated ids with the template's rendering of the message it was parsed into."""
        started = time.perf_counter()
        try:
            expected = self.tokenizer.encode(self.completion_text(message))
            event = self.compare(
                token_ids,
                expected,
                turn=turn,
                kind=drift.BACKEND_COMPLETION,
                messages=[*messages, message],
                message=len(messages),
            )
        finally:
            self.check_seconds += time.perf_counter() - started
        if event is not None:
            self.events.append(event)
        return event


def new_trace(tokenizer: Any, tools: list[Message] | None = None) -> TokenTrace | None:
    """A trace when ``tokenizer`` renders the model's chat template, else ``None`` (nothing to keep)."""
    if not isinstance(tokenizer, ChatTokenizer):
        return None
    return TokenTrace(tokenizer, tools=tools or None)
