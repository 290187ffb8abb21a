"""The in-process executor: an agent loop run in this process, its model calls answered by a client.

This is what ``osmosis test`` and ``osmosis eval`` run. For each item it builds the request
(:func:`~osmosis_ai.runs.executors.requests.dataset_row_to_request`), asks the agent for its tools (user
code, called the one way: :func:`osmosis_ai._usercode.call_user`) and checks them, and runs the agent
with a :class:`~osmosis_ai.rollout.RolloutContext` whose LLM is the item's model client (one per model
tag: the model under test, and a baseline); ``ctx.base_url`` is answered by the same client, and closed
when the agent ends. How the attempt ended:

* the agent completed after calling the model → ``completed``; without calling it → ``no_model_calls``;
* the agent reported an error, or raised (``SystemExit`` included) → ``agent_error`` (its message
  kept), unless a model call of this item failed → ``model_error`` (a call through ``ctx.base_url``
  too, although the agent saw only its HTTP error);
* invalid tools → ``agent_error``; the item's time limit passed → ``timeout``;
* a systemic provider failure → ``infra_error``, marked ``systemic``: the run stops there.

The item's deadline holds whatever the agent does. An attempt with a time limit runs on an event
loop of another thread (:class:`osmosis_ai._sync.Apart`), its model calls sent back to the run's
loop (one connection pool, one concurrency limit) in the item's context; the run's loop only waits,
so it keeps time even when the agent blocks its loop (``time.sleep`` in ``async def run``, a busy
loop). At the deadline the agent is cancelled; still running ``ABANDON_GRACE_SECONDS`` later, it is
closed (``GeneratorExit`` where it waits, which ``except CancelledError`` and ``except Exception``
do not catch); still running after as long again, or ignoring its closing too, it is abandoned. The
item is a ``timeout`` either way. Abandoned agents are counted for the process; past
``MAX_ABANDONED_AGENTS`` still running, the run stops (the item's ``systemic`` line) rather than
pile up more. Without a time limit nothing waits on the clock, and the agent runs on the run's own
loop, which costs no thread hand-over. docs/design/agent-deadline.md explains the choice.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from osmosis_ai._deadline import Deadline
from osmosis_ai._sync import Apart, on_loop
from osmosis_ai._usercode import UserCodeRaised, UserThreads, call_user, contain
from osmosis_ai.errors import ToolValidationError
from osmosis_ai.models.errors import ProviderError, SystemicProviderError
from osmosis_ai.outcome import Outcome
from osmosis_ai.rollout.loading import AgentRef
from osmosis_ai.runs.executors.requests import dataset_row_to_request
from osmosis_ai.runs.items import WorkItem
from osmosis_ai.runs.journal import BASELINE, PRIMARY
from osmosis_ai.runs.plan import ModelRef, Rows, RunPlan
from osmosis_ai.runs.result import Attempt

if TYPE_CHECKING:
    from osmosis_ai.runs.dataset import DatasetReader
    from osmosis_ai.runs.engine import Pipeline

ABANDON_GRACE_SECONDS = 1.0
MAX_ABANDONED_AGENTS = 8
_abandoned: set[Apart[Any]] = set()  # agents of this process left running past their closing

_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # what OpenAI-compatible providers accept


def validate_tools(tools: Any) -> list[Any]:
    """Check the agent's tools: each a function tool with a provider-acceptable name and object parameters."""
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise ToolValidationError(f"get_tools must return a list, got {type(tools).__name__}")
    for position, tool in enumerate(tools):
        data = tool.model_dump(exclude_none=True) if hasattr(tool, "model_dump") else tool
        function = data.get("function") if isinstance(data, dict) else None
        if not isinstance(function, dict):
            raise ToolValidationError(f"tool {position} has no 'function' object")
        name = function.get("name")
        if not isinstance(name, str) or not _TOOL_NAME.match(name):
            raise ToolValidationError(
                f"tool {position} has the name {name!r}; use 1-64 letters, digits, '_' or '-'"
            )
        parameters = function.get("parameters")
        if parameters is not None and (
            not isinstance(parameters, dict) or parameters.get("type") != "object"
        ):
            raise ToolValidationError(f"tool {name!r}: 'parameters' must be a JSON schema of type 'object'")
    return tools


async def _end(agent: Apart[Any]) -> str | None:
    """Stop ``agent`` (see the module docstring); the line that stops the run if too many are left running."""
    agent.cancel()
    if await agent.wait(ABANDON_GRACE_SECONDS):
        return None
    agent.close()
    if await agent.wait(ABANDON_GRACE_SECONDS):
        return None
    _abandoned.difference_update([left for left in _abandoned if left.done])
    _abandoned.add(agent)
    if len(_abandoned) <= MAX_ABANDONED_AGENTS:
        return None
    return (
        f"{len(_abandoned)} agents are still running after their time limit, each blocking its event "
        "loop or ignoring its cancellation; fix the agent before running more"
    )


class _OnRunLoop:
    """The run's model client as an agent on its own loop sees it: each call runs on the run's loop."""

    def __init__(self, client: Any, loop: asyncio.AbstractEventLoop) -> None:
        self._client, self._loop = client, loop

    async def chat_completions(self, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
        return await on_loop(self._loop, self._client.chat_completions(messages, **kwargs))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


@dataclass(frozen=True)
class LocalModel:
    """One model an in-process run talks to: its client, and how its requests are labelled."""

    client: Any
    rollout_id_prefix: str = "local"
    metadata: Mapping[str, Any] = field(default_factory=dict)


class InProcessExecutor:
    """Runs ``agent_loop`` in-process on each item with the item's model (see the module docstring).

    ``models`` maps a model tag (``primary``, ``baseline``) to its :class:`LocalModel`. ``debug_dir``
    is where ``ctx.log_event`` writes ``<rollout id>.jsonl`` traces (``None``: nowhere).
    """

    def __init__(
        self,
        agent_loop: Any,
        models: Mapping[str, LocalModel],
        *,
        max_turns: int = 10,
        completion_params: Mapping[str, Any] | None = None,
        debug_dir: str | None = None,
        threads: UserThreads | None = None,
    ) -> None:
        self.agent_loop = agent_loop
        self.models = dict(models)
        self.max_turns = max_turns
        self.completion_params = dict(completion_params or {})
        self.debug_dir = debug_dir
        self.threads = threads

    async def run(self, item: WorkItem, *, deadline: Deadline | None = None) -> Attempt:
        """Run the agent on ``item``; never raises for the item's own failure (see the module docstring)."""
        model = self.models[item.model_tag]
        client = model.client
        client.reset_metrics()
        started = time.monotonic()
        attempt = Attempt(Outcome.AGENT_ERROR)
        try:
            request = dataset_row_to_request(
                item.row,
                item.row_index,
                max_turns=self.max_turns,
                completion_params=self.completion_params,
                rollout_id_prefix=model.rollout_id_prefix,
                metadata_overrides=model.metadata,
            )
            if deadline is None:  # nothing to keep time for: the agent shares the run's loop
                agent = asyncio.get_running_loop().create_task(self._run_agent(request, client))
                try:
                    await asyncio.wait((agent,))
                except asyncio.CancelledError:
                    agent.cancel()  # the run stops at once, whether the agent hears or not
                    raise
                attempt = agent.result()
            else:
                attempt = await self._run_apart(request, client, deadline, attempt)
        except SystemicProviderError as exc:
            attempt.outcome, attempt.error, attempt.systemic = Outcome.INFRA_ERROR, str(exc), str(exc)
        except ToolValidationError as exc:
            attempt.error = f"tool validation error: {exc}"
        except asyncio.TimeoutError:
            attempt.outcome = Outcome.TIMEOUT
            attempt.error = f"the agent did not finish within {deadline.seconds:g}s" if deadline else None
        except ProviderError as exc:
            attempt.outcome, attempt.error = Outcome.MODEL_ERROR, str(exc)
        except UserCodeRaised as exc:  # SystemExit, KeyboardInterrupt... from the agent
            attempt.error = str(exc)
        except Exception as exc:  # the agent's own code failed: this item's outcome, not the run's end
            attempt.error = f"{type(exc).__name__}: {exc}"
        finally:
            client.clear_tools()
        self._count(client, attempt, started)
        return attempt

    async def _run_apart(self, request: Any, client: Any, deadline: Deadline, attempt: Attempt) -> Attempt:
        """The attempt on a loop of its own (see the module docstring); an agent left running with too
        many others gives ``attempt`` the line that stops the run."""
        llm = _OnRunLoop(client, asyncio.get_running_loop())
        agent = Apart(self._run_agent(request, llm), name="osmosis-agent")
        try:
            finished = await agent.wait(deadline.remaining())
        except asyncio.CancelledError:
            agent.cancel()
            await agent.wait(ABANDON_GRACE_SECONDS)  # its own clean-up runs before the run unwinds
            raise
        if not finished:
            attempt.systemic = await _end(agent)
            raise asyncio.TimeoutError
        return agent.result()

    async def _run_agent(self, request: Any, client: Any) -> Attempt:
        """The attempt, run on the agent's own loop: built here and returned, so an agent that ends
        after its deadline cannot change the item's result."""
        from osmosis_ai.rollout import RolloutContext

        attempt = Attempt(Outcome.AGENT_ERROR)
        tools = validate_tools(await call_user(self.agent_loop.get_tools, request, threads=self.threads))
        client.set_tools(tools)
        context = RolloutContext(
            request=request, tools=tools, llm=client, _start_time=time.time(), _debug_dir=self.debug_dir
        )
        try:
            answer = await contain(lambda: self.agent_loop.run(context))
        except Exception:
            failure = context._end_model_route()
            # A model call through ctx.base_url failed: the agent saw only its HTTP error, but the
            # item's outcome is the model's failure, as for a ctx.chat call that raised.
            if isinstance(failure, ProviderError):
                raise failure from None
            raise
        finally:
            context._end_model_route()
        attempt.finish_reason = getattr(answer, "finish_reason", None)
        attempt.final_messages = list(getattr(answer, "final_messages", None) or [])
        if getattr(answer, "status", None) == "COMPLETED":
            calls = client.get_metrics().num_llm_calls
            attempt.outcome = Outcome.COMPLETED if calls else Outcome.NO_MODEL_CALLS
            attempt.agent_reward = getattr(answer, "reward", None)
            if not calls:
                attempt.error = "the agent finished without calling the model"
            return attempt
        attempt.outcome = Outcome.MODEL_ERROR if getattr(client, "failed_calls", 0) else Outcome.AGENT_ERROR
        attempt.error = (
            getattr(answer, "error_message", None) or "the agent reported an error without a message"
        )
        return attempt

    @staticmethod
    def _count(client: Any, attempt: Attempt, started: float) -> None:
        metrics = client.get_metrics()
        attempt.duration_ms = (time.monotonic() - started) * 1000
        attempt.prompt_tokens = metrics.prompt_tokens
        attempt.completion_tokens = metrics.response_tokens
        attempt.num_llm_calls = metrics.num_llm_calls
        attempt.retries = getattr(client, "retries", 0)


@dataclass(frozen=True)
class InProcessAgent:
    """The plan's executor spec for an agent loop run in the run's process (or in each Ray worker),
    its model calls answered by ``models`` (``primary``, and ``baseline`` for a comparison).
    ``label`` names the command in request ids and metadata (``test``, ``eval``)."""

    agent: AgentRef
    models: tuple[tuple[str, ModelRef], ...]
    label: str
    max_turns: int = 10
    completion_params: tuple[tuple[str, Any], ...] = ()
    debug_dir: str | None = None
    task_prefix = ""

    @property
    def tags(self) -> list[str]:
        return [tag for tag, _ in self.models]

    @property
    def base_url(self) -> str | None:
        return self.model().base_url

    def model(self, tag: str = PRIMARY) -> ModelRef:
        return dict(self.models)[tag]

    def journal_name(self) -> str:
        return self.model().name

    def task_id_parts(self, plan: RunPlan) -> list[Any]:
        """The agent, the eval functions, the models and their base URLs, the dataset's path, the rows
        selected, ``n``, ``max_turns`` and the sampling parameters."""
        primary = self.model()
        named: list[Any] = [
            self.agent.spec,
            list(plan.scoring.functions),
            primary.name,
            str(Path(plan.rows.dataset).resolve()),
        ]
        if plan.rows.offset or plan.rows.limit is not None:
            named.append([plan.rows.offset, plan.rows.limit])
        if BASELINE in self.tags:
            baseline = self.model(BASELINE)
            named.append([baseline.name, baseline.base_url])
        named.append([primary.base_url, plan.n, self.max_turns, dict(self.completion_params)])
        return named

    def read_rows(self, rows: Rows) -> DatasetReader:
        from osmosis_ai.runs.dataset import DatasetReader

        return DatasetReader(rows.dataset)

    def prepare(self, plan: RunPlan) -> PreparedAgent:
        from osmosis_ai.runs.pipeline import load_scorers

        return PreparedAgent(plan, self, self.agent.load(), load_scorers(plan.scoring))


class PreparedAgent:
    """The agent loop and the eval functions, loaded."""

    def __init__(self, plan: RunPlan, spec: InProcessAgent, agent_loop: Any, scorers: list[Any]) -> None:
        self.plan, self.spec, self.agent_loop, self.scorers = plan, spec, agent_loop, scorers

    def fingerprint(self, rows: int) -> dict[str, Any]:
        from osmosis_ai.rollout.loading import source_digest
        from osmosis_ai.runs.journal import file_digest

        spec, plan = self.spec, self.plan
        primary = spec.model()
        description: dict[str, Any] = {
            "agent": f"{spec.agent.spec}@{spec.agent.digest(self.agent_loop)}",
            "eval_fns": [f"{fn.name}@{source_digest(fn.fn)}" for fn in self.scorers],
            "model": primary.name,
            "base_url": primary.base_url,
            "dataset": file_digest(plan.rows.dataset),
            "rows": [plan.rows.offset, rows],
            "n": plan.n,
            "max_turns": spec.max_turns,
            "completion_params": dict(spec.completion_params),
        }
        if BASELINE in spec.tags:
            baseline = spec.model(BASELINE)
            description["baseline"] = [baseline.name, baseline.base_url]
        return description

    @contextlib.asynccontextmanager
    async def session(self, plan: RunPlan, tags: list[str], observer: Any) -> AsyncIterator[AgentSession]:
        from osmosis_ai.runs.executors.model_client import ExternalLLMClient

        async with contextlib.AsyncExitStack() as stack:
            clients = {}
            for tag in tags:
                model = self.spec.model(tag)
                client = ExternalLLMClient(
                    model.name, api_key=model.api_key, api_base=model.base_url, observer=observer
                )
                clients[tag] = await stack.enter_async_context(client)
            yield AgentSession(self, clients)


class AgentSession:
    """The agent's model clients, open: each model's preflight, and the pipeline over them."""

    def __init__(self, prepared: PreparedAgent, clients: dict[str, Any]) -> None:
        self.prepared, self.clients = prepared, clients

    async def preflight(self, on_event: Callable[[Any], Any]) -> None:
        from osmosis_ai.runs.events import ModelChecked, tell

        for tag, client in self.clients.items():
            await tell(on_event, ModelChecked(tag, client.display_name))
            try:
                await client.preflight_check()
            except SystemicProviderError as exc:
                if tag == PRIMARY:
                    raise
                raise SystemicProviderError(f"({tag}) {exc}", kind=exc.kind, status=exc.status) from exc

    def pipeline(self, in_flight: int) -> contextlib.AbstractAsyncContextManager[Pipeline]:
        from osmosis_ai.runs.pipeline import scored

        return scored(self.prepared.plan, self.executor(in_flight))

    def executor(self, in_flight: int) -> InProcessExecutor:
        """The agent with this session's clients; synchronous agent code gets a thread per item in
        flight (``in_flight``), its own."""
        spec = self.prepared.spec
        models = {tag: self.local_model(tag, client) for tag, client in self.clients.items()}
        return InProcessExecutor(
            self.prepared.agent_loop,
            models,
            max_turns=spec.max_turns,
            completion_params=dict(spec.completion_params),
            debug_dir=spec.debug_dir,
            threads=UserThreads(in_flight, name=f"osmosis-{spec.label}"),
        )

    def replacing(self, tag: str, client: Any) -> AgentSession:
        """This session with ``tag``'s calls going to ``client`` instead (an interactive session's)."""
        return AgentSession(self.prepared, {**self.clients, tag: client})

    def local_model(self, tag: str, client: Any) -> LocalModel:
        """``client`` labelled as the command labels its requests (``test``, ``eval``, ``eval-baseline``)."""
        label = self.prepared.spec.label
        metadata: dict[str, Any] = {"execution_mode": label}
        if label == "test":
            metadata["test_mode"] = True
        if tag != PRIMARY:
            metadata["model_tag"] = tag
        return LocalModel(client, label if tag == PRIMARY else f"{label}-{tag}", metadata)
