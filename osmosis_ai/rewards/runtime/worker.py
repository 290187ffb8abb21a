"""The worker process: imports the reward by name and scores the samples its parent sends.

The parent starts each worker as a fresh interpreter (``python -c`` calling :func:`main`), in a
session of its own, with three descriptors: the command pipe, the result pipe and the slots file
(:mod:`osmosis_ai.rewards.runtime.protocol`). The worker:

1. keeps its channels away from the reward: descriptor 0 is ``/dev/null``, the pipes are not
   inherited by anything the reward starts, ``sys.stdin`` is empty and ``sys.stdout``/``sys.stderr``
   capture per sample (:mod:`osmosis_ai.rewards.runtime.capture`);
2. on Linux, forks: the process the parent started stays as the worker's keeper, which ends every
   process the reward starts (:mod:`osmosis_ai.rewards.runtime.keeper`), and the child goes on;
3. sets the memory limit (``RLIMIT_AS``) before any of the user's code runs;
4. takes the parent's ``sys.path``, imports the reward, awaits the runtime's ``setup`` function if it
   has one (on the event loop the samples then run on), and answers ``READY`` (or ``FAILED``, and exits);
5. scores. A synchronous reward at concurrency 1 is called on the main thread, one sample after the
   other (:func:`~osmosis_ai._usercode.call_inline`: no event loop, no thread hop per sample).
   Anything else runs on an event loop, at most ``concurrency`` samples at once, through
   :func:`~osmosis_ai._usercode.call_user` (async rewards awaited, synchronous ones in
   :class:`~osmosis_ai._usercode.UserThreads`). An async reward past its timeout is cancelled here;
   any other sample past it is killed by the parent, which reads the slots. A sample that finishes
   after its timeout is reported as timed out all the same: the timeout is a limit on the reward,
   measured here, whatever the parent was doing meanwhile.
6. puts the working directory and the environment back as they were after the import once a sample
   is done (at concurrency above 1: whenever no sample runs), so no sample sees another's changes;
7. exits with ``os._exit`` at the end of the command pipe, so threads the reward left running
   cannot keep it alive.
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
import sys
import time
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any

from osmosis_ai._usercode import call_inline, forget_traceback
from osmosis_ai.errors import InfrastructureError
from osmosis_ai.rewards.runtime import keeper
from osmosis_ai.rewards.runtime.capture import CURRENT, Capture, CaptureStream
from osmosis_ai.rewards.runtime.errors import RewardLoadError
from osmosis_ai.rewards.runtime.protocol import (
    CANCELLED,
    ERROR,
    FAILED,
    INFRA,
    LATE,
    MEMORY,
    OK,
    READY,
    RESULTS,
    TIMEOUT,
    FrameBuffer,
    Slots,
    WorkerSettings,
    loads,
    read_frame,
    write_frame,
)
from osmosis_ai.rewards.runtime.target import first_line, import_reward
from osmosis_ai.rewards.score import to_score

if TYPE_CHECKING:
    import asyncio

BOOTSTRAP = (
    "import sys; sys.path.insert(0, sys.argv[1]); from osmosis_ai.rewards.runtime.worker import main; main()"
)
"""The ``python -c`` program of a worker: arguments are the package root, the command, result and
slots descriptors, and the parent's pid."""

FLUSH_SECONDS = 0.02
"""Results of a batch go back together, or sooner once this long has passed since the last ones,
so a kill loses at most this much finished work."""

CANCEL_GRACE = 0.2
"""How long a cancelled async sample has to end before the worker leaves it to the parent's kill."""

IN_WORKER = False
"""True inside a worker process, where starting more workers is refused."""


def main() -> None:
    global IN_WORKER
    IN_WORKER = True
    command_fd, result_fd, slots_fd, parent = (int(arg) for arg in sys.argv[2:6])
    for fd in (command_fd, result_fd, slots_fd):
        os.set_inheritable(fd, False)
    _split_or_check(parent, (command_fd, result_fd, slots_fd))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    commands = os.fdopen(command_fd, "rb", buffering=1 << 16)
    settings: WorkerSettings = read_frame(commands)
    if settings is None:
        os._exit(0)
    slots = Slots.attach(slots_fd, settings.concurrency, settings.window)
    os.close(slots_fd)  # the mapping stays; a reward writing to every descriptor cannot reach the table
    unattributed = Capture(settings.output_limit)
    try:
        fn = _start(settings, unattributed)
        loop = _set_up(settings)
    except BaseException as exc:
        problem = str(exc).splitlines()[0] if isinstance(exc, RewardLoadError) else first_line(exc)
        _send(result_fd, (FAILED, problem, unattributed.take()))
        os._exit(1)
    _send(result_fd, (READY,))
    from osmosis_ai._usercode import is_async_callable

    if loop is None and settings.concurrency == 1 and not is_async_callable(fn):
        _serve_inline(commands, result_fd, slots, _inline_caller(fn, settings.keywords), settings)
    else:
        import asyncio

        # Nothing follows the settings until READY is answered, so the buffered reader holds no
        # frame the event loop's own reads would miss.
        serving = _serve_concurrently(command_fd, result_fd, slots, fn, settings)
        if loop is None:
            asyncio.run(serving)
        else:
            loop.run_until_complete(serving)
    os._exit(0)


def _split_or_check(parent: int, channels: tuple[int, ...]) -> None:
    if keeper.available():
        keeper.split(parent, channels)
    elif os.getppid() != parent:  # the parent is gone already: nobody is waiting for this worker
        os._exit(1)


def _start(settings: WorkerSettings, unattributed: Capture) -> Callable[..., Any]:
    """Set the process up and import the reward."""
    import faulthandler

    faulthandler.enable(all_threads=True)  # a fatal signal's traceback goes to descriptor 2, to the parent
    sys.stdin = io.StringIO()
    sys.stdout = CaptureStream(1, unattributed)
    sys.stderr = CaptureStream(2, unattributed)
    if settings.memory_limit_mb is not None:
        import resource

        limit = settings.memory_limit_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    sys.argv[:] = settings.argv
    sys.path[:] = settings.sys_path
    return import_reward(settings.module, settings.attribute, settings.main_file, spec=settings.name)


def _set_up(settings: WorkerSettings) -> asyncio.AbstractEventLoop | None:
    """The event loop with ``settings.setup`` awaited on it (``None`` without a setup): what the
    setup builds there (clients, pools bound to their loop) serves every sample on that loop."""
    if settings.setup is None:
        return None
    import asyncio

    module, _, attribute = settings.setup.rpartition(":")
    setup = import_reward(module, attribute, None, spec=settings.setup)
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    loop.run_until_complete(setup(*settings.setup_args))
    return loop


def _inline_caller(
    fn: Callable[..., Any], keywords: tuple[str, ...] | None
) -> Callable[[tuple[Any, ...]], Any]:
    if keywords is None:
        return lambda args: call_inline(fn, *args)
    return lambda args: call_inline(fn, **dict(zip(keywords, args, strict=True)))


def _send(fd: int, message: object) -> None:
    try:
        write_frame(fd, message)
    except OSError:  # the parent is gone or closed the pipe: nobody is waiting for this worker
        os._exit(1)


def _outcome(call: Callable[[], Any], name: str, kind: str, raw: bool) -> tuple[int, Any]:
    try:
        value = call()
        return OK, value if raw else to_score(value, name, kind=kind)
    except MemoryError as exc:
        forget_traceback(exc)
        return MEMORY, first_line(exc)
    except InfrastructureError as exc:
        forget_traceback(exc)
        return INFRA, first_line(exc)
    except Exception as exc:
        forget_traceback(exc)
        return ERROR, first_line(exc)


class _Baseline:
    """The working directory and environment the reward was imported with, put back after each
    sample (a concurrent worker: whenever no sample runs), so a sample that changes them does not
    change what the samples after it see. Checking costs a ``getcwd`` and one dict comparison."""

    def __init__(self) -> None:
        self.cwd = os.getcwd()
        self.environ = os.environ
        self.data = dict(os.environ._data)  # type: ignore[attr-defined]  # the encoded mapping putenv mirrors

    def restore(self) -> None:
        try:
            moved = os.getcwd() != self.cwd
        except OSError:  # the directory it moved to is gone
            moved = True
        if moved:
            with contextlib.suppress(OSError):  # the original one is gone: nothing to go back to
                os.chdir(self.cwd)
        if os.environ is not self.environ:
            os.environ = self.environ  # noqa: B003 - the original mapping back, not a new environment
        if self.environ._data != self.data:  # type: ignore[attr-defined]
            current = self.environ._data  # type: ignore[attr-defined]
            for key in [key for key in current if key not in self.data]:
                del self.environ[self.environ.decodekey(key)]
            for key, value in self.data.items():
                if current.get(key) != value:
                    self.environ[self.environ.decodekey(key)] = self.environ.decodevalue(value)


def _serve_inline(
    commands: IO[bytes],
    result_fd: int,
    slots: Slots,
    call: Callable[[tuple[Any, ...]], Any],
    settings: WorkerSettings,
) -> None:
    timeout = settings.timeout if settings.timeout is not None else float("inf")
    name, kind = settings.name, settings.kind
    capture = Capture(settings.output_limit)
    CURRENT.set(capture)
    clock = time.monotonic
    baseline = _Baseline()
    results: list[tuple[int, int, Any, float, str]] = []
    while (batch := read_frame(commands)) is not None:
        flushed = clock()
        for seq, payload in batch:
            started = clock()
            slots.start(0, seq, started)
            status, value = _outcome(lambda: call(loads(payload)), name, kind, settings.raw)  # noqa: B023 - called at once
            ended = clock()
            if ended - started > timeout:
                status, value = TIMEOUT, LATE
            slots.finish(seq, status, value, ended - started)
            slots.clear(0)
            baseline.restore()
            results.append((seq, status, value, ended - started, capture.take()))
            if ended - flushed > FLUSH_SECONDS:
                _send(result_fd, (RESULTS, results))
                results, flushed = [], ended
        if results:
            _send(result_fd, (RESULTS, results))
            results = []


async def _serve_concurrently(
    command_fd: int,
    result_fd: int,
    slots: Slots,
    fn: Callable[..., Any],
    settings: WorkerSettings,
) -> None:
    """Up to ``concurrency`` samples at once on this event loop (see the module docstring)."""
    import asyncio
    import contextvars
    from collections import deque

    from osmosis_ai._usercode import UserThreads, call_user, is_async_callable

    loop = asyncio.get_running_loop()
    is_async = is_async_callable(fn)
    threads = None if is_async else UserThreads(settings.concurrency, name="osmosis-reward")
    keywords, name, kind, timeout = settings.keywords, settings.name, settings.kind, settings.timeout
    waiting: deque[tuple[int, bytes]] = deque()
    free = list(range(settings.concurrency))
    wake = asyncio.Event()
    ended = False
    results: list[tuple[int, int, Any, float, str]] = []
    tasks: set[asyncio.Task[None]] = set()
    baseline = _Baseline()

    frames = FrameBuffer()
    os.set_blocking(command_fd, False)

    def readable() -> None:
        nonlocal ended
        try:
            data = os.read(command_fd, 1 << 16)
        except BlockingIOError:
            return
        if not data:
            ended = True
            loop.remove_reader(command_fd)
        for batch in frames.feed(data):
            waiting.extend(batch)
        wake.set()

    def flush() -> None:
        if results:
            _send(result_fd, (RESULTS, results[:]))
            results.clear()

    def finish(seq: int, status: int, value: Any, duration: float, capture: Capture) -> None:
        if timeout is not None and duration > timeout and status != TIMEOUT:
            status, value = TIMEOUT, LATE
        slots.finish(seq, status, value, duration)
        if not results:
            loop.call_soon(flush)  # everything that finishes in this loop iteration goes in one frame
        results.append((seq, status, value, duration, capture.take()))

    def invoke(args: tuple[Any, ...]) -> Any:
        call_args, call_kwargs = (
            (args, {}) if keywords is None else ((), dict(zip(keywords, args, strict=True)))
        )
        if is_async:
            return call_user(fn, *call_args, **call_kwargs)
        context = contextvars.copy_context()  # the thread writes to this sample's capture
        return call_user(context.run, fn, *call_args, threads=threads, **call_kwargs)

    async def run(slot: int, seq: int, payload: bytes) -> None:
        capture = Capture(settings.output_limit)
        CURRENT.set(capture)
        started = time.monotonic()
        slots.start(slot, seq, started)
        released = True
        try:
            task = asyncio.ensure_future(invoke(loads(payload)))
            done, _ = await asyncio.wait({task}, timeout=timeout if is_async else None)
            if done:
                status, value = _outcome(task.result, name, kind, settings.raw)
            else:
                task.cancel()
                stopped, _ = await asyncio.wait({task}, timeout=CANCEL_GRACE)
                status, value = TIMEOUT, CANCELLED
                released = bool(stopped)  # a sample that will not stop keeps its slot: the parent kills
        except Exception as exc:  # the payload itself: it was pickled by the parent, so this is rare
            status, value = ERROR, first_line(exc)
        finish(seq, status, value, time.monotonic() - started, capture)
        if released:
            slots.clear(slot)
            free.append(slot)
        if len(free) == settings.concurrency:
            baseline.restore()
        wake.set()

    loop.add_reader(command_fd, readable)
    while True:
        while waiting and free:
            seq, payload = waiting.popleft()
            task = asyncio.ensure_future(run(free.pop(), seq, payload))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        if ended:
            return
        wake.clear()
        await wake.wait()
