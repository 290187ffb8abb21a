"""The one way user code is called: async awaited, sync in daemon threads, BaseExceptions contained."""

from __future__ import annotations

import asyncio
import functools
import subprocess
import sys
import textwrap
import threading

import pytest

from osmosis_ai._usercode import UserCodeRaised, UserThreads, call_inline, call_user, is_async_callable


async def _coroutine(x: int) -> int:
    return x


class _AsyncCallable:
    async def __call__(self, x: int) -> int:
        return x


class _SyncCallable:
    def __call__(self, x: int) -> int:
        return x


def _decorated_async() -> object:
    @functools.wraps(_coroutine)
    def wrapper(x: int) -> object:
        return _coroutine(x)

    return wrapper


@pytest.mark.parametrize(
    ("function", "expected"),
    [
        (_coroutine, True),
        (functools.partial(_coroutine, 1), True),
        (_AsyncCallable(), True),
        (_decorated_async(), True),
        (len, False),
        (_SyncCallable(), False),
        (lambda x: x, False),
    ],
)
def test_is_async_callable(function: object, expected: bool) -> None:
    assert is_async_callable(function) is expected  # type: ignore[arg-type]


async def test_sync_code_runs_off_the_event_loop_thread() -> None:
    loop_thread = threading.get_ident()
    assert await call_user(threading.get_ident) != loop_thread
    assert await call_user(_coroutine, 5) == 5
    assert await call_user(lambda: _coroutine(7)) == 7  # a sync function returning an awaitable


@pytest.mark.parametrize("raised", [SystemExit(3), KeyboardInterrupt(), GeneratorExit()])
async def test_base_exceptions_come_back_as_an_ordinary_error(raised: BaseException) -> None:
    def sync() -> None:
        raise raised

    async def asynchronous() -> None:
        raise raised

    for function in (sync, asynchronous):
        with pytest.raises(UserCodeRaised) as caught:
            await call_user(function)
        assert caught.value.original is raised


def test_call_inline_runs_on_this_thread_and_contains_base_exceptions() -> None:
    assert call_inline(threading.get_ident) == threading.get_ident()
    assert call_inline(lambda x, *, y: x + y, 1, y=2) == 3
    with pytest.raises(ValueError, match="ordinary"):
        call_inline(int, "ordinary")
    for raised in (SystemExit(3), KeyboardInterrupt()):

        def sync(raised: BaseException = raised) -> None:
            raise raised

        with pytest.raises(UserCodeRaised) as caught:
            call_inline(sync)
        assert caught.value.original is raised


async def test_a_blocked_call_holds_only_its_own_thread() -> None:
    threads = UserThreads(2)
    release = threading.Event()
    blocked = asyncio.ensure_future(threads.call(release.wait))
    try:
        # With one thread stuck, the other still serves calls one after another.
        assert [await threads.call(lambda i=i: i * 2) for i in range(5)] == [0, 2, 4, 6, 8]
        assert not blocked.done()
    finally:
        release.set()
    assert await blocked is True


async def test_a_call_queued_behind_a_blocking_one_gets_a_thread_of_its_own() -> None:
    """The idle thread woken for the blocking call has not taken it yet when the next call comes:
    that call must still get the second thread, not wait behind the blocked one for good."""
    for _ in range(30):  # the window is a race; thirty rounds catch it nearly always
        threads = UserThreads(2)
        await threads.call(int)  # one thread, idle now
        release = threading.Event()
        blocked = asyncio.ensure_future(threads.call(release.wait))
        quick = asyncio.ensure_future(threads.call(lambda: 2))
        try:
            assert await asyncio.wait_for(quick, 10) == 2
        finally:
            release.set()
            await blocked


async def test_a_hung_call_its_caller_gave_up_on_gives_its_thread_back() -> None:
    threads = UserThreads(1)
    release = threading.Event()
    try:
        for _ in range(3):  # each one hangs and is given up on; the next call still gets a thread
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(threads.call(release.wait), 0.05)
        assert await asyncio.wait_for(threads.call(lambda: 7), 10) == 7
    finally:
        release.set()


async def test_finished_calls_keep_their_threads() -> None:
    threads = UserThreads(4)
    used = [await threads.call(threading.current_thread) for _ in range(2000)]  # held: no id is reused
    # A finished call is never taken for one its caller gave up on, which would end its thread and
    # start another: 2,000 calls are served by the pool's own threads, never more than its 4.
    assert len({id(thread) for thread in used}) <= 4


async def test_never_more_threads_than_the_limit() -> None:
    threads = UserThreads(3)
    lock = threading.Lock()
    running = peak = 0
    gate = threading.Event()

    def work() -> None:
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        gate.wait(5)
        with lock:
            running -= 1

    calls = [asyncio.ensure_future(threads.call(work)) for _ in range(10)]
    while True:  # until the three threads have each taken a call
        with lock:
            if running == 3:
                break
        await asyncio.sleep(0.001)
    gate.set()
    await asyncio.gather(*calls)
    assert peak == 3


def test_a_call_that_never_returns_does_not_keep_the_process_alive() -> None:
    script = textwrap.dedent(
        """
        import asyncio, threading
        from osmosis_ai._usercode import call_user

        async def main():
            try:
                await asyncio.wait_for(call_user(threading.Event().wait), 0.05)
            except asyncio.TimeoutError:
                print("gave up", flush=True)

        asyncio.run(main())
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "gave up"


def test_max_threads_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_threads must be at least 1"):
        UserThreads(0)
