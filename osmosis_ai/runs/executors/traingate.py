"""The TrainGate executor: an agent behind a rollout server, driven over the wire as a trainer would.

For each item it opens a session on the local TrainGate (:class:`~osmosis_ai.traingate.gateway.TrainGate`),
POSTs ``/v1/rollout/init`` to the rollout server with the gateway as ``server_url``, and waits for
the ``/v1/rollout/completed`` callback; the gateway answers the agent's chat calls in between and
checks the protocol. The rollout's time limit covers its init too: a server that never answers
costs the limit, not the HTTP client's own (longer) limits and retries. How it ended is the
session's status — ``COMPLETED``/``ERROR`` as the server reported, or an infrastructure failure
(``INIT_FAILED``, ``UNREACHABLE``, ``TIMEOUT``) — and so its outcome; the attempt's record is the
session's (:meth:`~osmosis_ai.traingate.session.RolloutSession.to_record`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from osmosis_ai._deadline import Deadline
from osmosis_ai.consts import SERVER_KEY_ENV
from osmosis_ai.outcome import Outcome
from osmosis_ai.rollout.core.schemas import REWARD_ERROR_FIELD
from osmosis_ai.rollout.loading import AgentRef
from osmosis_ai.runs.items import WorkItem
from osmosis_ai.runs.journal import PRIMARY
from osmosis_ai.runs.plan import ModelRef, Rows, RunPlan
from osmosis_ai.runs.result import Attempt

if TYPE_CHECKING:
    from osmosis_ai.runs.dataset import DatasetReader
    from osmosis_ai.runs.engine import Pipeline
    from osmosis_ai.traingate.gateway import TrainGate
    from osmosis_ai.traingate.launcher import RolloutLauncher
    from osmosis_ai.traingate.policy.base import Policy
    from osmosis_ai.traingate.session import RolloutSession

# Record keys the engine owns: the scored outcome and reward replace the session's unscored ones.
_SCORED = ("outcome", "reward", "reward_error")


def row_messages(row: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The initial conversation of a dataset row (a 0.3 row may have no system prompt, and one in
    metadata mode no prompt at all)."""
    return [{"role": role, "content": row[column]}
            for role, column in (("system", "system_prompt"), ("user", "user_prompt")) if column in row]  # fmt: skip


def row_metadata(row: Mapping[str, Any], row_index: int, sample_index: int) -> dict[str, Any]:
    """Request metadata: ground truth (a 0.3 row in metadata mode may have none), position, and every
    extra column of the row."""
    extra = {k: v for k, v in row.items() if k not in ("system_prompt", "user_prompt")}
    return {**extra, "row_index": row_index, "sample_index": sample_index}


class TrainGateExecutor:
    """Runs each item as one rollout through ``launcher``'s server and ``gate`` (see the module docstring).

    ``timeout`` bounds each rollout from its init to its callback. The gateway forgets a finished
    rollout once ``retain_finished`` later ones have finished (a late callback for it is then refused
    as unknown; ``None`` keeps every one), and with ``keep_turns=False`` the session lets go of its
    per-turn token data once the record holds it (it dominates a run's memory). ``policy`` answers
    these rollouts' chat calls instead of the gateway's own.
    """

    def __init__(
        self,
        gate: TrainGate,
        launcher: RolloutLauncher,
        *,
        timeout: float = 300.0,
        max_turns: int = 10,
        max_tokens_total: int = 8192,
        completion_params: Mapping[str, Any] | None = None,
        run_id: str | None = None,
        retain_finished: int | None = 1024,
        keep_turns: bool = True,
        policy: Policy | None = None,
    ) -> None:
        self.gate = gate
        self.launcher = launcher
        self.timeout = timeout
        self.max_turns = max_turns
        self.max_tokens_total = max_tokens_total
        self.completion_params = dict(completion_params or {})
        self.run_id = run_id or uuid.uuid4().hex[:8]
        self.retain_finished = retain_finished
        self.keep_turns = keep_turns
        self.policy = policy
        self._retired: deque[str] = deque()

    async def run(self, item: WorkItem, *, deadline: Deadline | None = None) -> Attempt:
        session = self.gate.open_session(
            f"tg-{self.run_id}-r{item.row_index}-s{item.sample_index}",
            row_messages(item.row),
            row_index=item.row_index,
            sample_index=item.sample_index,
            metadata=row_metadata(item.row, item.row_index, item.sample_index),
            policy=self.policy,
        )
        try:
            bound = Deadline.after(self.timeout) if deadline is None else deadline.within(self.timeout)
            await self._drive(session, bound)
            return self._attempt(session)
        except BaseException:
            # Stopped (cancelled) or broken: no one will read this rollout, and a gateway that outlives
            # the run (a trainer's Collector) would otherwise keep its session and token data.
            self.gate.sessions.pop(session.rollout_id, None)
            raise
        finally:
            self._retire(session)

    async def _drive(self, session: RolloutSession, bound: Deadline) -> None:
        """Init the rollout and wait for its callback by ``bound``."""
        from osmosis_ai.traingate.launcher import InitRejected, ServerUnreachable

        session.started_at = time.monotonic()
        request = self.launcher.build_request(
            session,
            self.gate.url,
            completion_params=self.completion_params,
            max_turns=self.max_turns,
            max_tokens_total=self.max_tokens_total,
        )
        try:
            init = await asyncio.wait_for(self.launcher.init(request, deadline=bound.end), bound.remaining())
        except (InitRejected, ServerUnreachable) as exc:
            session.initialized.set()
            session.finish("INIT_FAILED" if isinstance(exc, InitRejected) else "UNREACHABLE", str(exc))
            return
        except asyncio.TimeoutError:
            session.initialized.set()
            session.finish(
                "TIMEOUT",
                f"the rollout server at {self.launcher.server_url} did not answer the init within {bound.seconds:g}s",
            )
            return
        session.tools = [tool.model_dump(mode="json", exclude_none=True) for tool in init.tools]
        session.initialized.set()
        if not session.finished:
            session.status = "RUNNING"
        try:
            await asyncio.wait_for(session.done.wait(), timeout=max(bound.remaining(), 0.001))
        except asyncio.TimeoutError:
            session.finish(
                "TIMEOUT",
                f"no /v1/rollout/completed callback within {bound.seconds:g}s ({session.num_turns} chat turn(s) served)",
            )

    def _attempt(self, session: RolloutSession) -> Attempt:
        record = session.to_record()
        for key in _SCORED:
            record.pop(key, None)
        turns = session.turns
        outcome = session.outcome
        error = session.error_message
        if outcome is Outcome.NO_MODEL_CALLS:
            error = "the agent finished without calling the model"
        elif error is None and session.errors and outcome is not Outcome.COMPLETED:
            error = session.errors[-1]
        response = session.response or {}
        reward_error = (response.get("extra_fields") or {}).get(REWARD_ERROR_FIELD)
        attempt = Attempt(
            outcome,
            error=error,
            final_messages=session.final_messages,
            agent_reward=response.get("reward"),
            agent_reward_error=reward_error if isinstance(reward_error, str) and reward_error else None,
            finish_reason=response.get("finish_reason"),
            duration_ms=session.latency_ms,
            prompt_tokens=sum(int(t.usage.get("prompt_tokens") or 0) for t in turns),
            completion_tokens=sum(int(t.usage.get("completion_tokens") or 0) for t in turns),
            num_llm_calls=session.num_turns,
            extra=record,
            source=session,
        )
        if not self.keep_turns:
            session.release_turns()
        return attempt

    def _retire(self, session: RolloutSession) -> None:
        if self.retain_finished is None:
            return
        self._retired.append(session.rollout_id)
        while len(self._retired) > self.retain_finished:
            self.gate.sessions.pop(self._retired.popleft(), None)


COMMAND = "rollout run"
TASK_PREFIX = "rollout-"  # how a listing of journals tells a rollout run's from an eval's


class OneModelSpec:
    """What an executor spec running one model, ``model``, says of it: its one tag, its journal's name
    and the base URL ``concurrency="auto"`` reads."""

    model: ModelRef

    @property
    def tags(self) -> list[str]:
        return [PRIMARY]

    @property
    def base_url(self) -> str | None:
        return self.model.base_url

    def journal_name(self) -> str:
        return self.model.name


@dataclass(frozen=True)
class RolloutServer(OneModelSpec):
    """The plan's executor spec for a rollout server driven through the local TrainGate, the policy
    ``model`` answering the agent's chat calls: the agent served in-process (``agent``) or a running
    server at ``url`` (with ``server_api_key``). ``tokenizer``/``chat_template`` name the token
    accounting (default: bytes); the gateway binds ``gateway_host``."""

    model: ModelRef
    agent: AgentRef | None = None
    url: str | None = None
    server_api_key: str | None = field(default=None, repr=False, compare=False)
    tokenizer: str | None = None
    chat_template: str | None = None
    gateway_host: str = "127.0.0.1"
    max_turns: int = 10
    completion_params: tuple[tuple[str, Any], ...] = ()
    task_prefix = TASK_PREFIX

    def key(self) -> str | None:
        """The Bearer key of the ``url`` server: ``server_api_key``, else ``$OSMOSIS_SERVER_API_KEY``."""
        return self.server_api_key or os.environ.get(SERVER_KEY_ENV) or None

    def target(self) -> str:
        """The server as the run names it: ``url:<url>``, or the served agent's reference."""
        return f"url:{self.url}" if self.url else (self.agent.spec if self.agent else "")

    def task_id_parts(self, plan: RunPlan) -> list[Any]:
        """The server, the policy, the dataset's path, ``n``, ``max_turns``, the sampling parameters,
        the reward function and the tokenizer, as the command line gives them; the rows selected when
        not all (so a run of every row keeps its journal)."""
        params = dict(self.completion_params)
        reward = plan.scoring.functions[0] if plan.scoring.functions else None
        named = [COMMAND, self.target(), self.model.name, self.model.base_url,
                 str(Path(plan.rows.dataset).resolve()), plan.n, self.max_turns, params.get("temperature"),
                 params.get("max_tokens"), reward, self.tokenizer, self.chat_template]  # fmt: skip
        if plan.rows.offset or plan.rows.limit is not None:
            named.append([plan.rows.offset, plan.rows.limit])
        return named

    def read_rows(self, rows: Rows) -> DatasetReader:
        from osmosis_ai.runs.dataset import DatasetReader

        return DatasetReader(rows.dataset)

    def prepare(self, plan: RunPlan) -> PreparedServer:
        from osmosis_ai.rollout.loading import load_function
        from osmosis_ai.traingate.tokenizer import load_tokenizer

        functions = [load_function(spec, what=plan.scoring.kind, example="e.g. 'my_rewards:score'")
                     for spec in plan.scoring.functions]  # fmt: skip
        tokenizer = load_tokenizer(self.tokenizer, chat_template=self.chat_template)
        agent_loop = None if self.url or self.agent is None else self.agent.load()
        return PreparedServer(plan, self, tokenizer, agent_loop, functions)


def tokenizer_identity(spec: str | None, chat_template: str | None) -> dict[str, str | None]:
    """Digests of the files the tokenizer ``spec`` and ``chat_template`` come from (a directory's JSON
    and template files; its weights are not read)."""
    import hashlib

    from osmosis_ai.runs.journal import file_digest

    def files_digest(files: list[Path]) -> str:
        digest = hashlib.sha256()
        for file in sorted(files):
            digest.update(file.name.encode() + b"\0" + file.read_bytes())
        return digest.hexdigest()

    tokenizer = spec
    if spec and spec != "bytes":
        path = Path(spec)
        if path.is_dir():
            tokenizer = files_digest([*path.glob("*.json"), *path.glob("*.jinja")])
        else:
            beside = path.parent / "tokenizer_config.json"
            tokenizer = files_digest([path, *([beside] if beside.is_file() else [])])
    return {"tokenizer": tokenizer, "chat_template": file_digest(chat_template) if chat_template else None}


class PreparedServer:
    """The tokenizer, the served agent and the reward function, loaded."""

    def __init__(
        self, plan: RunPlan, spec: RolloutServer, tokenizer: Any, agent_loop: Any, functions: list[Any]
    ) -> None:
        self.plan, self.spec, self.tokenizer, self.agent_loop, self.functions = (
            plan,
            spec,
            tokenizer,
            agent_loop,
            functions,
        )

    def fingerprint(self, rows: int) -> dict[str, Any]:
        """What decides a rollout's result: the agent's code (a ``url`` server's cannot be read, so only
        its URL), the policy and its base URL (never its key), ``n``, ``max_turns``, the sampling
        parameters, the reward function's source, the tokenizer's and template's files, the dataset."""
        from osmosis_ai.rollout.loading import source_digest
        from osmosis_ai.runs.journal import file_digest

        spec, plan = self.spec, self.plan
        params = dict(spec.completion_params)
        agent = (
            spec.target()
            if spec.url or spec.agent is None
            else f"{spec.agent.spec}@{spec.agent.digest(self.agent_loop)}"
        )
        reward = self.functions[0] if self.functions else None
        return {
            "command": COMMAND,
            "agent": agent,
            "model": spec.model.name,
            "base_url": spec.model.base_url,
            "n": plan.n,
            "max_turns": spec.max_turns,
            "completion_params": {
                "temperature": params.get("temperature"),
                "max_tokens": params.get("max_tokens"),
            },
            "reward": f"{plan.scoring.functions[0]}@{source_digest(reward)}" if reward is not None else None,
            **tokenizer_identity(spec.tokenizer, spec.chat_template),
            "dataset": file_digest(plan.rows.dataset),
        }

    @contextlib.asynccontextmanager
    async def session(self, plan: RunPlan, tags: list[str], observer: Any) -> AsyncIterator[ServerSession]:
        from osmosis_ai.traingate.policy import make_policy
        from osmosis_ai.traingate.tokenizer import ChatTokenizer

        model = self.spec.model
        policy = make_policy(model.name, base_url=model.base_url, api_key=model.api_key,
                             request_token_ids=isinstance(self.tokenizer, ChatTokenizer), observer=observer)  # fmt: skip
        try:
            yield ServerSession(self, policy)
        finally:
            await policy.aclose()


class ServerSession:
    """The policy, open: its preflight, and the pipeline driving the server through a TrainGate."""

    def __init__(self, prepared: PreparedServer, policy: Any) -> None:
        self.prepared, self.policy = prepared, policy
        self._health: dict[str, Any] | None = None  # the ``url`` server's /health answer, once asked

    async def preflight(self, on_event: Callable[[Any], Any]) -> None:
        # A wrong URL or key: one error before any rollout, not one failed rollout per row.
        if self.prepared.spec.url:
            await self._server_health()
        await self.policy.preflight()  # a bad key or model: one line and nothing run

    async def _server_health(self) -> dict[str, Any]:
        """The ``url`` server's ``/health`` answer (asked once; the server's checks raise)."""
        from osmosis_ai.traingate.launcher import RolloutLauncher

        spec = self.prepared.spec
        if self._health is None:
            assert spec.url is not None
            self._health = await RolloutLauncher(spec.url, api_key=spec.key()).check(
                timeout=min(10.0, self.prepared.plan.timeout or 10.0)
            )
        return self._health

    @contextlib.asynccontextmanager
    async def pipeline(self, in_flight: int) -> AsyncIterator[Pipeline]:
        from osmosis_ai.runs.executors.traingate03 import TrainGate03Executor
        from osmosis_ai.runs.pipeline import scored
        from osmosis_ai.traingate.gateway import TrainGate
        from osmosis_ai.traingate.launcher import RolloutLauncher, speaks_03
        from osmosis_ai.traingate.launcher03 import Launcher03
        from osmosis_ai.traingate.local_server import serve_agent_loop_locally

        prepared, spec, plan = self.prepared, self.prepared.spec, self.prepared.plan
        async with contextlib.AsyncExitStack() as stack:
            # The gateway outlives the rollout server, so late callbacks sent while it shuts down are still heard.
            gate = await stack.enter_async_context(
                TrainGate(self.policy, tokenizer=prepared.tokenizer, host=spec.gateway_host)
            )
            if spec.url:
                url, key = spec.url, spec.key()
            else:
                url, key = (
                    await stack.enter_async_context(serve_agent_loop_locally(prepared.agent_loop)),
                    None,
                )
            # The server's /health tells 0.3 (process_id and lifecycle) from 0.2.
            v03 = bool(spec.url) and speaks_03(await self._server_health())
            launcher = await stack.enter_async_context(
                (Launcher03 if v03 else RolloutLauncher)(url, api_key=key, max_connections=in_flight)
            )
            executor = (TrainGate03Executor if v03 else TrainGateExecutor)(
                gate,
                launcher,
                timeout=plan.timeout or 300.0,
                max_turns=spec.max_turns,
                completion_params=dict(spec.completion_params),
                keep_turns=False,
            )
            yield await stack.enter_async_context(scored(plan, executor))
