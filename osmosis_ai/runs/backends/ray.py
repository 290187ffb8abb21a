"""The Ray backend: a run's work items on Ray actors, its dataset, journal and output in this process.

:func:`ray_pool` gives a :class:`RayPool`, the ``process`` of :func:`osmosis_ai.runs.engine.run_items`:
the driver (this process) still takes items lazily a bounded distance ahead, commits each result to
the journal and draws the progress, so resume, ``--fresh`` and the outputs are those of a run in one
process. Each item goes to the least busy of ``workers`` actors, in one call with the other items
sent to that actor within a couple of milliseconds (:meth:`RayPool._send`). An actor is an async Ray actor (its
own event loop) that runs at most its share of the run's concurrency at once, and builds its own
pipeline — the in-process agent, its model clients, the reward runtime — from a :class:`WorkerSpec`:
the name of a factory and plain settings that name the user's modules (``MODULE:ATTR``), so no
user function is ever pickled.

A dead actor (its process killed, its node lost) is replaced, and its items in flight run again on
the others; an item whose worker dies under it :data:`ATTEMPTS` times ends as ``infra_error``, which
a resumed run runs again. Nothing is counted twice, since only the driver journals, and only the
result that came back. Cancelling the run cancels the remote items; closing the pool kills every
actor, and a Ray instance the pool started (no ``address``: a local one with this machine's CPUs)
stops with it. With an ``address`` (``auto``, ``ray://HOST:PORT``, or a Ray job's ``RAY_ADDRESS``)
the working directory and this package travel to the cluster as the job's runtime environment
(``working_dir``, ``py_modules``).
Each worker takes the driver's provider keys and bases (:func:`_driver_environment`), so its model
calls sign in as the driver's do.

``ray`` (the ``osmosis-ai[ray]`` extra) is imported only here, on first use.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import socket
import sys
import urllib.parse
import warnings
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from osmosis_ai.errors import OsmosisError
from osmosis_ai.outcome import Outcome
from osmosis_ai.runs.items import WorkItem
from osmosis_ai.runs.result import Attempt, Result

ATTEMPTS = 3
"""Times an item is sent to a worker that then dies before it is given up as ``infra_error``."""
BATCH = 16
"""The most items in one call to an actor."""
LINGER = 0.002
"""Seconds an item given to an actor waits for others to share its call (see :meth:`RayPool._send`)."""

_CLIENT_PORT = 10001
"""The Ray client server's port, where ``ray://HOST`` without one goes."""
_PROBE_SECONDS = 5.0
"""Seconds :func:`_probe` waits for a cluster's address to accept a connection."""

# Not shipped to a remote cluster with the working directory: environments, history, journals.
_EXCLUDES = [".git", ".venv", "venv", "__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache", "*.sqlite",
             "*.sqlite-*", "node_modules"]  # fmt: skip
# The driver's variables a worker's model calls read, set on each worker as in the driver: a
# cluster's nodes do not have the shell the command ran in (a joined Ray's workers neither).
_FORWARDED_SUFFIXES = ("_API_KEY", "_API_BASE", "_BASE_URL", "_API_VERSION")
_FORWARDED = ("LITELLM_", "OSMOSIS_FORCE_LITELLM")


class RayBackendError(OsmosisError):
    """The Ray backend cannot run: the ``ray`` extra is missing, the cluster is unreachable or runs
    other versions than this machine, or every worker died. The message says how to fix it."""


@dataclass(frozen=True)
class WorkerSpec:
    """What a worker builds its pipeline from, by name only.

    ``factory`` is ``MODULE:ATTR`` of a function ``factory(settings, share)`` returning an async
    context manager that yields the worker's ``process`` (an ``item -> Result`` coroutine function,
    e.g. a :class:`~osmosis_ai.runs.engine.Pipeline`) and closes what it started; ``share`` is the
    number of items the worker runs at once. ``settings`` is plain data (it is pickled)."""

    factory: str
    settings: Mapping[str, Any] = field(default_factory=dict)


class _Worker:
    """One Ray actor's side: builds the pipeline once, then runs items on its own event loop."""

    def __init__(
        self, spec: WorkerSpec, share: int, directory: str | None, environment: Mapping[str, str]
    ) -> None:
        self._spec, self._share, self._directory = spec, share, directory
        self._environment = dict(environment)
        self._stack = contextlib.AsyncExitStack()
        self._process: Callable[[WorkItem], Any] | None = None

    async def start(self) -> dict[str, Any]:
        import ray

        os.environ.update(self._environment)
        if self._directory is not None and os.path.isdir(self._directory):  # same machine as the driver
            os.chdir(self._directory)
        if os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())  # the user's modules, named MODULE:ATTR, resolve from here
        module, _, attribute = self._spec.factory.rpartition(":")
        factory = getattr(__import__(module, fromlist=[attribute]), attribute)
        self._process = await self._stack.enter_async_context(factory(self._spec.settings, self._share))
        return {"pid": os.getpid(), "ray": ray.__version__, "python": list(sys.version_info[:2])}

    async def run(self, items: list[WorkItem]) -> AsyncIterator[list[tuple[int, Result | Exception]]]:
        """Run ``items`` at once; yield ``(index, result)`` of those that finished together, as
        they finish (an exception the pipeline raised stands in for its result)."""
        process = self._process
        assert process is not None, "start() first"

        async def one(index: int, item: WorkItem) -> tuple[int, Result | Exception]:
            try:
                result: Result = await process(item)
            except Exception as exc:
                return index, exc
            result.attempt.source = None  # the executor's own object stays on the worker
            return index, result

        pending = {asyncio.ensure_future(one(index, item)) for index, item in enumerate(items)}
        try:
            while pending:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                yield [task.result() for task in done]
        finally:  # cancelled (the run stopped): the items still running stop too
            for task in pending:
                task.cancel()

    async def stop(self) -> None:
        await self._stack.aclose()


@dataclass
class _Actor:
    handle: Any
    pid: int
    busy: int = 0
    outbox: list[tuple[WorkItem, asyncio.Future[Result]]] = field(default_factory=list)


class RayPool:
    """Runs work items on Ray actors (see the module docstring); ``await pool(item)`` is its result."""

    def __init__(self, spec: WorkerSpec, share: int, directory: str | None, replacements: int) -> None:
        self._spec, self._share, self._directory = spec, share, directory
        self._actors: list[_Actor] = []
        self._replacing: dict[int, asyncio.Task[None]] = {}
        self._replacements = replacements
        self._all: list[Any] = []  # every handle ever started, so closing kills them all
        self._calls: set[asyncio.Task[None]] = set()
        self._opening: asyncio.Future[None] | None = None  # see ray_pool(wait=False)

    @property
    def workers(self) -> int:
        """The actors in use now."""
        return len(self._actors)

    @property
    def pids(self) -> list[int]:
        """The process ids of the actors in use (on their nodes)."""
        return [actor.pid for actor in self._actors]

    async def _open(
        self, ray: Any, connecting: asyncio.Future[bool] | None, concurrency: int, workers: int | None
    ) -> None:
        """Once Ray is joined: ``workers`` actors (default one per CPU, at most ``concurrency``), each
        with its share of ``concurrency``, and as many replacements."""
        if connecting is not None:
            await asyncio.shield(connecting)
        cpus = int(ray.cluster_resources().get("CPU", 0)) or 1
        count = max(1, min(workers or cpus, concurrency))
        self._share, self._replacements = math.ceil(concurrency / count), count
        await self._start(count)

    async def _start(self, count: int) -> None:
        import ray

        remote = ray.remote(_Worker).options(num_cpus=1, max_concurrency=self._share + 1, max_restarts=0)
        environment = _driver_environment()
        handles: list[Any] = [
            remote.remote(self._spec, self._share, self._directory, environment) for _ in range(count)
        ]
        self._all.extend(handles)
        try:
            infos = await asyncio.gather(*(handle.start.remote() for handle in handles))
        except ray.exceptions.RayTaskError as exc:  # the factory failed: the same on every worker
            raise _cause(exc) from None
        except ray.exceptions.RayActorError as exc:
            raise RayBackendError(f"a Ray worker died while starting: {_first_line(exc)}") from None
        _check_versions(infos[0])
        self._actors.extend(_Actor(handle, info["pid"]) for handle, info in zip(handles, infos, strict=True))

    async def ready(self) -> None:
        """Wait until Ray is joined and the workers have started (an item sent before waits too);
        raises :class:`RayBackendError` (or the factory's own error) when they cannot start."""
        if self._opening is not None:
            await asyncio.shield(self._opening)

    async def __call__(self, item: WorkItem) -> Result:
        import ray

        await self.ready()
        for _ in range(ATTEMPTS):
            actor = await self._least_busy()
            actor.busy += 1
            try:
                return await self._send(actor, item)
            except ray.exceptions.RayTaskError as exc:  # the pipeline itself raised: the run's error
                raise _cause(exc) from None
            except ray.exceptions.RayActorError:
                await self._replace(actor)
            finally:
                actor.busy -= 1
        message = f"its Ray worker died {ATTEMPTS} times running it"
        return Result(item, Attempt(Outcome.INFRA_ERROR, error=message), Outcome.INFRA_ERROR)

    def _send(self, actor: _Actor, item: WorkItem) -> asyncio.Future[Result]:
        """``item``'s result from ``actor``. A Ray call costs ~0.5 ms of the driver's CPU whatever it
        carries, so the items given to one actor within :data:`LINGER` go in one call (at most
        :data:`BATCH` each); their results come back as they finish, those finishing together in
        one message, so a slow item holds up no other."""
        loop = asyncio.get_running_loop()
        if not actor.outbox:
            loop.call_later(LINGER, self._flush, actor)
        waiter: asyncio.Future[Result] = loop.create_future()
        actor.outbox.append((item, waiter))
        return waiter

    def _flush(self, actor: _Actor) -> None:
        outbox = [(item, waiter) for item, waiter in actor.outbox if not waiter.done()]  # not cancelled
        actor.outbox = []
        for start in range(0, len(outbox), BATCH):
            batch = outbox[start : start + BATCH]
            task = asyncio.ensure_future(self._call(actor, batch))
            self._calls.add(task)
            task.add_done_callback(self._calls.discard)

            def cancelled(
                waiter: asyncio.Future[Result], task: asyncio.Task[None] = task, batch: Any = batch
            ) -> None:
                if waiter.cancelled() and all(other.done() for _, other in batch):  # the run stopped
                    task.cancel()

            for _, waiter in batch:
                waiter.add_done_callback(cancelled)

    async def _call(self, actor: _Actor, batch: list[tuple[WorkItem, asyncio.Future[Result]]]) -> None:
        import ray

        calls = actor.handle.run.options(num_returns="streaming").remote([item for item, _ in batch])
        try:
            async for ref in calls:
                for index, result in await ref:
                    waiter = batch[index][1]
                    if waiter.done():
                        continue
                    if isinstance(result, Exception):
                        waiter.set_exception(result)
                    else:
                        result.item = batch[index][0]
                        waiter.set_result(result)
        except asyncio.CancelledError:
            ray.cancel(calls)  # the remote items stop too: an async actor cancels its task
            raise
        except Exception as exc:  # the worker died (RayActorError), or Ray failed the call
            for _, waiter in batch:
                if not waiter.done():
                    waiter.set_exception(exc)

    async def _least_busy(self) -> _Actor:
        while not self._actors:
            if not self._replacing:
                raise RayBackendError(
                    "every Ray worker died and none could be started again; check the cluster "
                    "(`ray status`) and run the same command again to resume"
                )
            await asyncio.gather(*self._replacing.values())
        return min(self._actors, key=lambda actor: actor.busy)

    async def _replace(self, dead: _Actor) -> None:
        """Drop ``dead`` and start one actor in its place, once however many of its items saw it die."""
        key = id(dead)
        if dead in self._actors:
            self._actors.remove(dead)
            if self._replacements > 0:
                self._replacements -= 1
                self._replacing[key] = asyncio.ensure_future(self._start(1))
        task = self._replacing.get(key)
        if task is not None:
            try:
                await asyncio.shield(task)
            except Exception:  # a replacement that cannot start leaves the others to carry on
                pass
            finally:
                self._replacing.pop(key, None)

    async def aclose(self) -> None:
        """Stop the workers' pipelines (briefly), then kill every actor this pool started."""
        import ray

        if self._opening is not None:
            self._opening.cancel()
            await asyncio.wait([self._opening])
            if not self._opening.cancelled():
                self._opening.exception()  # seen: whoever awaited ready() has raised it already
        for task in [*self._replacing.values(), *self._calls]:
            task.cancel()
        if self._actors:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(
                    asyncio.gather(*(a.handle.stop.remote() for a in self._actors), return_exceptions=True),
                    timeout=2,
                )
        for handle in self._all:
            with contextlib.suppress(Exception):
                ray.kill(handle, no_restart=True)
        self._actors.clear()


def _cause(exc: Any) -> BaseException:
    cause = getattr(exc, "cause", None)
    return cause if isinstance(cause, BaseException) else exc


def _first_line(exc: BaseException) -> str:
    return next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)


def _check_versions(info: Mapping[str, Any]) -> None:
    import ray

    here = {"ray": ray.__version__, "python": list(sys.version_info[:2])}
    there = {"ray": info["ray"], "python": list(info["python"])}
    if here != there:
        raise RayBackendError(
            f"the Ray cluster runs Ray {there['ray']} on Python {'.'.join(map(str, there['python']))}, "
            f"this machine Ray {here['ray']} on Python {'.'.join(map(str, here['python']))}; install the "
            f"cluster's versions here (pip install 'ray[client]=={there['ray']}') or use a matching cluster"
        )


def _import_ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        from osmosis_ai._lazy import install_hint

        raise RayBackendError(f"--backend ray needs the package 'ray'; {install_hint('ray')}") from exc
    return ray


def _connect(ray: Any, address: str | None, num_cpus: int | None) -> bool:
    """Start or join Ray (blocking: run off the event loop); whether this call started the instance."""
    options: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "configure_logging": False}
    if address is None:
        ray.init(address="local", num_cpus=num_cpus or os.cpu_count() or 1, **options)  # never a stale one
        return True
    import osmosis_ai

    package = os.path.dirname(os.path.abspath(osmosis_ai.__file__))
    runtime_env = {"working_dir": os.getcwd(), "excludes": _EXCLUDES, "py_modules": [package]}
    _probe(address)
    try:
        with warnings.catch_warnings():  # its own "timed out" warning says what the error below says
            warnings.simplefilter("ignore")
            ray.init(address=address, runtime_env=runtime_env, **options)
    except ConnectionError as exc:
        if "AuthToken" in str(exc.__cause__):
            raise RayBackendError(
                f"the Ray cluster at {_named(address)} refused this machine's token; set RAY_AUTH_TOKEN (or "
                "~/.ray/auth_token) to the cluster's, which `ray get-auth-token` prints on its head node"
            ) from None
        raise _unreachable(address, _first_line(exc)) from None
    except ValueError as exc:  # an address Ray cannot read (RAY_ADDRESS set to the Jobs API's http URL)
        raise RayBackendError(
            f"Ray cannot use the address {_named(address)}: {' '.join(str(exc).split())}"
        ) from None
    except RuntimeError as exc:
        if "version" not in str(exc).lower():
            raise
        raise RayBackendError(
            f"the Ray cluster at {_named(address)} runs other versions than this machine "
            f"({_first_line(exc)}); install the cluster's Ray and Python versions here"
        ) from None
    return False


def _probe(address: str) -> None:
    """Refuse an address that nothing answers at once: Ray's client retries a ``ray://`` one for
    30 s, and a head node's ``HOST:PORT`` (a Ray job's ``RAY_ADDRESS``) is waited on for minutes."""
    if address == "auto" or ("://" in address and not address.startswith("ray://")):
        return  # found by Ray itself, or a scheme Ray refuses in its own words
    try:
        parts = urllib.parse.urlsplit(address if "://" in address else f"//{address}")
        host, port = parts.hostname, parts.port or (_CLIENT_PORT if parts.scheme == "ray" else None)
    except ValueError:
        return  # Ray's own parser words it
    if not host or port is None:
        return
    try:
        socket.create_connection((host, port), timeout=_PROBE_SECONDS).close()
    except OSError as exc:
        reason = (exc.strerror or "").lower() or f"no answer in {_PROBE_SECONDS:g} s"
        raise _unreachable(address, reason) from None


def _unreachable(address: str, reason: str) -> RayBackendError:
    return RayBackendError(
        f"cannot reach the Ray cluster at {_named(address)} ({reason}); start it (`ray start --head`) or give "
        "the address it prints (--ray-address auto or ray://HOST:10001)"
    )


def _driver_environment() -> dict[str, str]:
    """This process's provider keys and bases (``*_API_KEY``, ``*_API_BASE``, ``*_BASE_URL``,
    ``*_API_VERSION``; not the server keys of ``OSMOSIS_*``), ``LITELLM_*`` and ``OSMOSIS_FORCE_LITELLM``."""
    return {
        name: value
        for name, value in os.environ.items()
        if name.startswith(_FORWARDED)
        or (name.endswith(_FORWARDED_SUFFIXES) and not name.startswith("OSMOSIS_"))
    }


def _shutdown(ray: Any) -> None:
    """Stop the local Ray this process started (blocking: run off the event loop).

    ``ray.shutdown()`` stops the GCS before the autoscaler monitor, whose SIGTERM handler then
    waits to report to the stopped GCS until Ray kills it a second later: a second of every local
    run's end, and of every Ctrl-C. A local instance has nothing to autoscale, so the monitor is
    killed first; the rest stop as Ray stops them (the raylet takes its workers and agents along)."""
    node = getattr(getattr(ray, "_private", None), "worker", None)
    processes = getattr(getattr(node, "_global_node", None), "all_processes", None) or {}
    for info in processes.get("monitor", []):
        with contextlib.suppress(Exception):  # another Ray's internals: then it is only slower
            info.process.kill()
            info.process.wait(timeout=5)
    ray.shutdown()


@contextlib.asynccontextmanager
async def ray_pool(
    spec: WorkerSpec,
    *,
    concurrency: int,
    address: str | None = None,
    workers: int | None = None,
    num_cpus: int | None = None,
    wait: bool = True,
) -> AsyncIterator[RayPool]:
    """A :class:`RayPool` of ``workers`` actors (default: one per CPU of the cluster, at most
    ``concurrency``), each running ``ceil(concurrency / workers)`` items at once.

    A Ray this process is already connected to is used as it is (and left running); otherwise
    ``address`` (default: ``RAY_ADDRESS``, as in a Ray job) joins a cluster, and without one a local
    instance with ``num_cpus`` (default: this machine's) starts and stops with the pool. Raises
    :class:`RayBackendError` with the fix when Ray is missing, unreachable or of other versions.

    With ``wait=False`` the pool is given at once while Ray and its workers start, so the caller's
    own preparations (a model's preflight request, loading the data) overlap them; ``await
    pool.ready()`` waits for the start and raises its error, and items sent meanwhile wait for it."""
    ray = _import_ray()
    address = address or _environment_address()
    connecting: asyncio.Future[bool] | None = None
    if not ray.is_initialized():
        connecting = asyncio.ensure_future(asyncio.to_thread(_connect, ray, address, num_cpus))
    pool = RayPool(spec, 1, os.getcwd() if address is None else None, replacements=0)
    pool._opening = asyncio.ensure_future(pool._open(ray, connecting, concurrency, workers))
    try:
        if wait:
            await pool.ready()
        yield pool
    finally:
        try:
            await pool.aclose()
        finally:
            # ray.init cannot be interrupted: a start still under way is let finish, then stopped.
            if connecting is not None and await _settled(connecting):
                await asyncio.to_thread(_shutdown, ray)


def _named(address: str) -> str:
    """``address`` as an error shows it, saying so when it is ``RAY_ADDRESS``'s."""
    return f"{address!r} (RAY_ADDRESS)" if address == _environment_address() else repr(address)


def _environment_address() -> str | None:
    """``RAY_ADDRESS``, which a Ray job's driver is given: the cluster it runs in (``local`` means none)."""
    address = os.environ.get("RAY_ADDRESS", "").strip()
    return address if address and address != "local" else None


async def _settled(connecting: asyncio.Future[bool]) -> bool:
    """Whether ``connecting`` (:func:`_connect`, under way or done) started a Ray instance."""
    await asyncio.wait([connecting])
    return not connecting.cancelled() and connecting.exception() is None and connecting.result()
