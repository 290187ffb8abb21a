"""The local TrainGate: the trainer side of the rollout protocol, served on a loopback port.

Rollout servers call it back on two endpoints (protocol §3.2):

* ``POST /v1/chat/completions`` — routed by ``rollout_id`` to a :class:`RolloutSession`; the
  callback key is checked, the append-only contract is checked against the previous turn, the
  policy answers, and the reply carries ``token_ids``, ``logprobs`` and ``prompt_token_ids``
  besides the OpenAI chat completion. A call repeating an ``Idempotency-Key`` (the agent's client
  retrying one chat call) gets the first call's answer: nothing is generated or recorded twice.
* ``POST /v1/rollout/completed`` — records the final response (the first terminal one wins).
* ``POST /rollouts/{rollout_id}/v1/chat/completions`` — the same chat endpoint for a 0.3 rollout,
  whose workflow calls ``{chat_completions_url}/chat/completions`` with an OpenAI client that knows
  nothing of rollout ids: the id is the path's (:meth:`TrainGate.chat_base`), a body's own is ignored.
  A 0.3 rollout declares no tools before it runs: the tools are those its first call that sends
  ``tools`` sends (the policy is offered them, the token trace renders them).

Refused calls (wrong key, unknown rollout, call after completion) are answered with a 4xx and
recorded, so the run report can show them. The gateway runs inside the caller's event loop.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import time
from collections import deque
from typing import Any, TypeVar
from urllib.parse import quote

from aiohttp import web
from pydantic import ValidationError

from osmosis_ai._sockets import bind_listener
from osmosis_ai.models.rendering import render_completion, render_prompt
from osmosis_ai.rollout.core.schemas import (
    CompletionsChoice,
    CompletionsRequest,
    CompletionsResponse,
    CompletionUsage,
    RolloutResponse,
)
from osmosis_ai.rollout.server.api_key import authorized
from osmosis_ai.traingate import drift
from osmosis_ai.traingate.append_only import canonical, check_extension
from osmosis_ai.traingate.errors import PolicyError, TrainGateError
from osmosis_ai.traingate.policy.base import Generation, Message, Policy
from osmosis_ai.traingate.policy.tokens import TokenPolicy
from osmosis_ai.traingate.session import RejectedCall, RolloutSession, TurnRecord
from osmosis_ai.traingate.tito import TokenTrace, new_trace
from osmosis_ai.traingate.tokenizer import ByteTokenizer, Tokenizer

logger = logging.getLogger(__name__)

BodyT = TypeVar("BodyT", CompletionsRequest, RolloutResponse)

MAX_BODY_BYTES = 64 * 1024 * 1024
SHUTDOWN_GRACE_SEC = 1.0  # how long a closing gateway lets a chat call still in flight finish
INIT_WAIT_S = 60.0  # how long a chat call waits for its rollout's init response to be read
MAX_UNROUTED = 1000  # calls for unknown rollouts kept for the report
INLINE_TOKENIZE_CHARS = 32_768  # longer texts are tokenized in a worker thread
USAGE_KEYS = ("prompt_tokens", "completion_tokens", "total_tokens")


def _error(status: int, detail: str) -> web.Response:
    return web.json_response({"detail": detail}, status=status)


def _validation_detail(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first.get("loc", ()))
    return (
        f"invalid request body: {where}: {first.get('msg')}"
        if where
        else f"invalid request body: {first.get('msg')}"
    )


class TrainGate:
    """A trainer-side gateway serving one run's rollouts. Use as ``async with TrainGate(policy) as gate``."""

    def __init__(
        self, policy: Policy, *, tokenizer: Tokenizer | None = None, host: str = "127.0.0.1"
    ) -> None:
        self.policy = policy
        self.tokenizer: Tokenizer = tokenizer or ByteTokenizer()
        self.host = host
        self.port = 0
        self.sessions: dict[str, RolloutSession] = {}
        self.unrouted: deque[RejectedCall] = deque(maxlen=MAX_UNROUTED)
        self._runner: web.AppRunner | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """Base URL the rollout server calls back (``server_url`` of every RolloutRequest)."""
        return f"http://{self.host}:{self.port}"

    def chat_base(self, rollout_id: str) -> str:
        """The rollout-scoped chat base URL of a 0.3 rollout (its ``chat_completions_url``)."""
        return f"{self.url}/rollouts/{quote(rollout_id, safe='')}/v1"

    async def start(self) -> TrainGate:
        app = web.Application(client_max_size=MAX_BODY_BYTES)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/v1/rollout/completed", self._completed)
        app.router.add_post("/rollouts/{rollout_id}/v1/chat/completions", self._chat)
        app.router.add_get("/health", self._health)
        # A run that ends normally has no chat call left in flight; one stopped (Ctrl-C) mid-call must
        # not wait out aiohttp's default minute for the policy's answer before the stop can go on.
        self._runner = web.AppRunner(
            app, access_log=None, handle_signals=False, shutdown_timeout=SHUTDOWN_GRACE_SEC
        )
        await self._runner.setup()
        try:
            sock = bind_listener(self.host)
        except OSError as exc:
            raise TrainGateError(f"cannot listen on {self.host!r}: {exc} (check --gateway-host)") from exc
        self.port = sock.getsockname()[1]
        await web.SockSite(self._runner, sock, backlog=1024).start()
        logger.debug("TrainGate listening on %s", self.url)
        return self

    async def aclose(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> TrainGate:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # -- sessions ----------------------------------------------------------------------------

    def open_session(
        self,
        rollout_id: str,
        messages: list[Message],
        *,
        row_index: int = 0,
        sample_index: int = 0,
        metadata: dict[str, Any] | None = None,
        tools: list[Message] | None = None,
        policy: Policy | None = None,
    ) -> RolloutSession:
        """Register a rollout before its init is sent, with a fresh per-rollout callback key.

        Chat calls wait until the init response's tools are known (``session.initialized``); pass
        ``tools`` when the rollout is started some other way, so they are known from the start.
        ``policy`` answers this rollout's chat calls instead of the gateway's own.
        """
        if rollout_id in self.sessions:
            raise ValueError(f"rollout_id {rollout_id!r} is already in use by this gateway")
        session = RolloutSession(
            rollout_id=rollout_id,
            row_index=row_index,
            sample_index=sample_index,
            callback_key=secrets.token_urlsafe(24),
            messages=list(messages),
            metadata=dict(metadata or {}),
            policy=policy,
        )
        if tools is not None:
            session.tools = list(tools)
            session.initialized.set()
        session.trace = new_trace(self.tokenizer)
        self.sessions[rollout_id] = session
        return session

    def _route(self, request: web.Request, rollout_id: str, endpoint: str) -> RolloutSession | web.Response:
        """The session for ``rollout_id`` if the caller holds its key; else the refusal to send (recorded)."""
        session = self.sessions.get(rollout_id)
        if session is None:
            self.unrouted.append(RejectedCall(endpoint, 404, f"unknown rollout_id {rollout_id[:100]!r}"))
            return _error(404, f"unknown rollout_id {rollout_id!r}")
        if not authorized(request.headers.get("Authorization"), session.callback_key):
            reason = (
                "missing callback key" if not request.headers.get("Authorization") else "wrong callback key"
            )
            session.rejected.append(RejectedCall(endpoint, 401, reason))
            logger.warning("rejected %s for rollout %s: %s", endpoint, rollout_id, reason)
            return _error(401, "Invalid or missing API key")
        return session

    # -- handlers ----------------------------------------------------------------------------

    async def _health(self, request: web.Request) -> web.Response:
        active = sum(1 for s in self.sessions.values() if not s.finished)
        return web.json_response({"status": "healthy", "policy": self.policy.name, "active_rollouts": active})

    async def _read_json(self, request: web.Request) -> Any:
        try:
            return json.loads(await request.read())
        except ValueError as exc:
            raise web.HTTPBadRequest(
                text=json.dumps({"detail": f"body is not JSON: {exc}"}), content_type="application/json"
            ) from exc

    async def _receive(
        self, request: web.Request, model: type[BodyT], endpoint: str
    ) -> tuple[BodyT, RolloutSession] | web.Response:
        """The call's validated body and its session, or the refusal to send (422, or from ``_route``)."""
        payload = await self._read_json(request)
        scoped = request.match_info.get("rollout_id")
        if scoped is not None and isinstance(payload, dict):
            payload = {**payload, "rollout_id": scoped}
        try:
            body = model.model_validate(payload)
        except ValidationError as exc:
            return _error(422, _validation_detail(exc))
        routed = self._route(request, body.rollout_id, endpoint)
        if isinstance(routed, web.Response):
            return routed
        tools = payload.get("tools") if scoped is not None else None
        if not routed.tools and isinstance(tools, list):
            routed.tools = list(tools)
        return body, routed

    async def _chat(self, request: web.Request) -> web.Response:
        received = await self._receive(request, CompletionsRequest, "/v1/chat/completions")
        if isinstance(received, web.Response):
            return received
        chat, session = received
        if session.finished:
            session.rejected.append(
                RejectedCall("/v1/chat/completions", 409, "chat call after the rollout ended")
            )
            return _error(409, f"rollout {chat.rollout_id!r} has already ended ({session.status})")
        key = request.headers.get("Idempotency-Key")
        if not key:
            status, body = await self._answer(session, chat)
            return web.json_response(body, status=status)
        first = session.replies.get(key)
        if first is not None:
            # A retry of a call already answered or still generating: the first answer, nothing new recorded.
            status, body = await asyncio.shield(first)
            return web.json_response(body, status=status)
        reply = session.remember_reply(key)
        try:
            status, body = await self._answer(session, chat)
        except BaseException:  # cancelled or crashed: waiting retries are told to ask again
            session.forget_reply(key)
            reply.set_result((503, {"detail": "the first attempt of this call was abandoned; retry"}))
            raise
        if status != 200:
            session.forget_reply(key)  # a failed attempt is not an answer: a retry generates again
        reply.set_result((status, body))
        return web.json_response(body, status=status)

    async def _answer(self, session: RolloutSession, chat: CompletionsRequest) -> tuple[int, dict[str, Any]]:
        """Check the request against the conversation so far, generate, record the turn: (status, body)."""
        if not session.initialized.is_set():
            # The agent called back before the init response (with its tools) reached us: wait for it.
            try:
                await asyncio.wait_for(session.initialized.wait(), timeout=INIT_WAIT_S)
            except asyncio.TimeoutError:
                session.errors.append(
                    "chat call arrived but the init response never did; served without tools"
                )
        if (
            chat.tools is not None
        ):  # a 0.3 workflow's tools come with its calls: the policy and the render use them
            session.tools = list(chat.tools)
        turn = session.num_turns
        violation, keys = check_extension(session.expected, session.expected_keys, chat.messages, turn=turn)
        if violation is not None:
            session.violations.append(violation)
            logger.warning(
                "append-only violation in rollout %s: %s", session.rollout_id, violation.describe()
            )
        params = {
            "temperature": chat.temperature,
            "top_p": chat.top_p,
            "max_tokens": chat.max_tokens,
            "stop": chat.stop,
            "logprobs": chat.logprobs,
        }
        started = time.perf_counter()
        prompt_ids: list[int] | None = None
        policy = session.policy or self.policy
        try:
            if isinstance(policy, TokenPolicy):
                generation, prompt_ids = await self._generate_ids(policy, session, chat.messages, params)
            else:
                generation = await policy.generate(chat.messages, tools=session.tools, params=params)
        except PolicyError as exc:
            session.policy_errors += 1
            session.errors.append(f"turn {turn}: {exc}")
            return (502 if exc.retryable else 400), {"detail": str(exc)}
        except Exception as exc:  # a bug in a policy must cost one answer, not the gateway
            logger.exception("policy %s crashed on rollout %s", policy.name, session.rollout_id)
            session.policy_errors += 1
            session.errors.append(f"turn {turn}: policy crashed: {type(exc).__name__}: {exc}")
            return 500, {"detail": f"the policy crashed: {type(exc).__name__}: {exc}"}
        seconds = time.perf_counter() - started
        if session.trace is not None:
            record = await self._traced_record(
                session, session.trace, turn, chat.messages, generation, params, seconds, prompt_ids
            )
        else:
            record = await self._turn_record(session, turn, chat.messages, generation, params, seconds)
        session.add_turn(record)
        session.expected = [*chat.messages, record.message]
        session.expected_keys = [*keys, canonical(record.message)]
        return 200, self._response_body(chat.rollout_id, turn, record, policy)

    async def _generate_ids(
        self, policy: TokenPolicy, session: RolloutSession, messages: list[Message], params: dict[str, Any]
    ) -> tuple[Generation, list[int]]:
        """Extend the rollout's token trace by the turn's prompt and let ``policy`` generate after it.

        The trace is put back as it was if nothing is generated, so a retry of the call extends it again.
        """
        trace = session.trace
        if trace is None or trace.broken is not None:
            why = "the gateway has no chat template" if trace is None else trace.broken
            raise PolicyError(
                f"policy {policy.name!r} needs the rollout's prompt ids: {why}", retryable=False
            )
        if not trace.covered:
            trace.tools = session.tools or None
        point = trace.checkpoint()
        try:
            prompt_ids = await asyncio.to_thread(trace.extend, messages)
        except TrainGateError as exc:
            trace.broken = str(exc)
            raise PolicyError(f"the chat template cannot render the prompt: {exc}", retryable=False) from exc
        try:
            generation = await policy.generate_ids(prompt_ids, tools=session.tools, params=params)
        except BaseException:
            trace.rewind(point)
            raise
        if generation.token_ids is None:
            trace.rewind(point)
            raise PolicyError(f"policy {policy.name!r} returned no token ids", retryable=False)
        return generation, prompt_ids

    async def _encode(self, text: str) -> list[int]:
        """Tokenize; long texts in a worker thread so a big prompt never stalls the other rollouts."""
        if len(text) < INLINE_TOKENIZE_CHARS:
            return self.tokenizer.encode(text)
        return await asyncio.to_thread(self.tokenizer.encode, text)

    async def _turn_record(
        self,
        session: RolloutSession,
        turn: int,
        messages: list[Message],
        gen: Generation,
        params: dict[str, Any],
        seconds: float,
    ) -> TurnRecord:
        """Fill in token data the policy did not report, from the tokenizer."""
        source = "backend" if gen.token_ids is not None else f"tokenizer:{self.tokenizer.name}"
        token_ids = gen.token_ids
        if token_ids is None:
            token_ids = await self._encode(render_completion(gen.message))
        prompt_ids = gen.prompt_token_ids
        if prompt_ids is None:
            prompt_ids = await self._encode(render_prompt(messages))
        return self._record(session, turn, messages, gen, params, seconds, prompt_ids, token_ids, source)

    def _record(
        self,
        session: RolloutSession,
        turn: int,
        messages: list[Message],
        gen: Generation,
        params: dict[str, Any],
        seconds: float,
        prompt_ids: list[int],
        token_ids: list[int],
        source: str,
    ) -> TurnRecord:
        """The turn's record; logprobs and usage the policy did not report are derived from the ids."""
        logprobs = gen.logprobs
        if logprobs is None and (session.policy or self.policy).deterministic:
            logprobs = [0.0] * len(token_ids)
        usage = gen.usage or {
            "prompt_tokens": len(prompt_ids),
            "completion_tokens": len(token_ids),
            "total_tokens": len(prompt_ids) + len(token_ids),
        }
        return TurnRecord(
            index=turn,
            num_request_messages=len(messages),
            message=gen.message,
            finish_reason=gen.finish_reason,
            token_ids=token_ids,
            logprobs=logprobs,
            prompt_token_ids=prompt_ids,
            usage=usage,
            sampling={k: v for k, v in params.items() if v is not None},
            token_source=source,
            latency_ms=round(seconds * 1000, 3),
        )

    async def _traced_record(
        self,
        session: RolloutSession,
        trace: TokenTrace,
        turn: int,
        messages: list[Message],
        gen: Generation,
        params: dict[str, Any],
        seconds: float,
        extended: list[int] | None = None,
    ) -> TurnRecord:
        """Token data from the rollout's token-in-token-out sequence, checked for drift.

        ``extended`` is the turn's prompt when the trace was extended by it already (a token policy
        generated from it).

        Rendering and encoding run in a worker thread: a long conversation's fresh render must not
        stall the other rollouts. A rollout's turns come one after another, so its trace has one user.
        If the template refuses the conversation the rollout goes on with the fixed rendering's ids
        and the refusal is reported.
        """
        if trace.broken is None:
            if not trace.covered:  # tools are known once the init response is in, before the first render
                trace.tools = session.tools or None
            try:
                prompt_ids, token_ids = await asyncio.to_thread(
                    self._trace_turn, trace, turn, messages, gen, extended
                )
            except TrainGateError as exc:
                trace.broken = str(exc)
                session.errors.append(f"turn {turn}: {exc}")
            else:
                source = "backend" if gen.token_ids is not None else f"template:{self.tokenizer.name}"
                return self._record(
                    session, turn, messages, gen, params, seconds, prompt_ids, token_ids, source
                )
        return await self._turn_record(session, turn, messages, gen, params, seconds)

    @staticmethod
    def _trace_turn(
        trace: TokenTrace,
        turn: int,
        messages: list[Message],
        gen: Generation,
        extended: list[int] | None = None,
    ) -> tuple[list[int], list[int]]:
        """Extend the trace by one turn (unless ``extended`` already) and check it: (prompt ids,
        completion ids) as returned to the agent.

        Ids a backend reports are used verbatim; they are checked against the template too.
        """
        prompt_ids = trace.extend(messages) if extended is None else extended
        if gen.prompt_token_ids is not None and extended is None:
            backend_prompt = list(gen.prompt_token_ids)
            if turn > 0:
                trace.check(messages, prompt_ids, turn=turn, reference=backend_prompt)
            if not any(e.kind == drift.BACKEND_PROMPT for e in trace.events):
                trace.check(messages, backend_prompt, turn=turn, kind=drift.BACKEND_PROMPT)
            trace.restart(backend_prompt, len(messages))
            prompt_ids = backend_prompt
        else:
            trace.check(messages, prompt_ids, turn=turn)
        if gen.token_ids is not None:
            trace.check_completion(messages, gen.message, gen.token_ids, turn=turn)
        token_ids = trace.add_completion(gen.message, gen.token_ids)
        return prompt_ids, token_ids

    def _response_body(
        self, rollout_id: str, turn: int, record: TurnRecord, policy: Policy
    ) -> dict[str, Any]:
        """The ``CompletionsResponse`` JSON of the turn ``policy`` answered."""
        usage = record.usage
        response = CompletionsResponse(
            id=f"chatcmpl-{rollout_id}-{turn}",
            created=int(time.time()),
            model=policy.name,
            choices=[CompletionsChoice(message=record.message, finish_reason=record.finish_reason)],
            usage=CompletionUsage(**{key: int(usage.get(key) or 0) for key in USAGE_KEYS}),
            token_ids=record.token_ids,
            logprobs=record.logprobs,
            prompt_token_ids=record.prompt_token_ids,
        )
        return response.model_dump(mode="json")

    async def _completed(self, request: web.Request) -> web.Response:
        received = await self._receive(request, RolloutResponse, "/v1/rollout/completed")
        if isinstance(received, web.Response):
            return received
        result, session = received
        if session.finished and session.response is None:
            session.errors.append(
                f"completion ({result.status.value}) arrived after the rollout ended ({session.status})"
            )
            return web.json_response({"ok": True, "late": True})
        if session.response is not None:
            session.duplicate_completions += 1
            if session.response.get("status") != result.status.value:
                session.errors.append(
                    f"a later completion with status {result.status.value} was ignored (first one wins)"
                )
            return web.json_response({"ok": True, "duplicate": True})
        session.response = result.model_dump(mode="json")
        if result.final_messages:
            violation, _ = check_extension(
                session.expected, session.expected_keys, result.final_messages, turn=-1
            )
            if violation is not None:
                session.violations.append(violation)
        session.finish(result.status.value, result.error_message)
        return web.json_response({"ok": True})
