"""The bridge from synchronous code to the SDK's coroutines (osmosis_ai._sync), the blocking
twins made with it, and Apart/on_loop (a coroutine on another thread's loop, and its calls back). Each twin's real call path, from plain code and from inside a running event loop,
is tested beside its coroutine function (judge, rewards runtime, auth, registration)."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from osmosis_ai._sync import Apart, on_loop, run_sync, synchronous
from osmosis_ai.auth.client import aauthenticated_request, acall, authenticated_request, call
from osmosis_ai.judge.batch import aevaluate_rubric_batch, evaluate_rubric_batch
from osmosis_ai.judge.evaluate import aevaluate_rubric, evaluate_rubric
from osmosis_ai.rewards.runtime.batch import ascore_batch, score_batch
from osmosis_ai.rollout.server.registration import aregister_with_platform, register_with_platform

ROOT = Path(__file__).resolve().parents[1]
_REQUEST = contextvars.ContextVar("request", default="none")


async def _loop_and_request() -> tuple[asyncio.AbstractEventLoop, str]:
    await asyncio.sleep(0)
    return asyncio.get_running_loop(), _REQUEST.get()


def test_returns_the_result_and_raises_the_exception() -> None:
    async def fail() -> None:
        raise LookupError("boom")

    assert run_sync(asyncio.sleep(0, result=7)) == 7
    with pytest.raises(LookupError, match="boom"):
        run_sync(fail())


async def test_from_a_running_loop_the_coroutine_gets_a_loop_of_its_own() -> None:
    loop, _ = run_sync(_loop_and_request())
    assert loop is not asyncio.get_running_loop() and loop.is_closed()


def test_the_callers_context_variables_reach_the_coroutine() -> None:
    token = _REQUEST.set("r-1")
    try:
        assert run_sync(_loop_and_request())[1] == "r-1"
    finally:
        _REQUEST.reset(token)


def test_the_calling_threads_event_loop_is_left_alone() -> None:
    """A 0.2-era script that set up a loop keeps it after a blocking SDK call."""
    seen: list[object] = []

    def script() -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            run_sync(asyncio.sleep(0))
            seen.append(asyncio.get_event_loop() is loop)
        except BaseException as exc:
            seen.append(exc)
        finally:
            asyncio.set_event_loop(None)
            loop.close()

    thread = threading.Thread(target=script)
    thread.start()
    thread.join()
    assert seen == [True]


def test_ctrl_c_cancels_the_coroutine_lets_it_clean_up_and_raises_keyboard_interrupt(tmp_path: Path) -> None:
    script = tmp_path / "wait_then_ctrl_c.py"
    script.write_text(
        textwrap.dedent("""
        import asyncio
        from osmosis_ai._sync import run_sync

        async def work():
            print("started", flush=True)
            try:
                await asyncio.sleep(3600)
            finally:
                await asyncio.sleep(0)  # cleanup that needs the loop
                print("cleaned up", flush=True)

        run_sync(work())
    """)
    )
    process = subprocess.Popen(
        [sys.executable, str(script)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline() == b"started\n"
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=20)
    finally:
        process.kill()
    assert stdout == b"cleaned up\n"
    assert process.returncode == -signal.SIGINT and b"KeyboardInterrupt" in stderr


async def _scale(value: float, *, factor: float = 2.0) -> float:
    await asyncio.sleep(0)
    if factor < 0:
        raise ValueError("negative factor")
    return value * factor


def test_a_twin_takes_the_same_parameters_and_returns_the_result() -> None:
    scale = synchronous(_scale, "scale", "Blocking _scale.")
    assert inspect.signature(scale) == inspect.signature(_scale)
    assert (scale.__name__, scale.__doc__) == ("scale", "Blocking _scale.")
    assert not inspect.iscoroutinefunction(scale)
    assert scale(3) == 6 and scale(value=3, factor=3) == 9
    with pytest.raises(ValueError, match="negative factor"):
        scale(1, factor=-1)


async def test_a_twin_works_inside_a_running_event_loop() -> None:
    assert synchronous(_scale, "scale", "")(2, factor=5) == 10


@pytest.mark.parametrize(
    ("sync", "coroutine_function"),
    [
        (evaluate_rubric, aevaluate_rubric),
        (evaluate_rubric_batch, aevaluate_rubric_batch),
        (score_batch, ascore_batch),
        (call, acall),
        (authenticated_request, aauthenticated_request),
        (register_with_platform, aregister_with_platform),
    ],
)
def test_public_twins_match_their_coroutine_functions(sync, coroutine_function) -> None:
    assert inspect.signature(sync) == inspect.signature(coroutine_function)
    assert sync.__name__ == coroutine_function.__name__.removeprefix("a")
    assert sync.__doc__


async def test_apart_runs_on_another_threads_loop_with_the_callers_context() -> None:
    _REQUEST.set("r-2")
    apart = Apart(_loop_and_request())
    assert await apart.wait()
    loop, request = apart.result()
    assert loop is not asyncio.get_running_loop() and request == "r-2"

    async def fail() -> None:
        raise LookupError("boom")

    failing = Apart(fail())
    assert await failing.wait()
    with pytest.raises(LookupError, match="boom"):
        failing.result()


async def test_apart_keeps_the_callers_loop_free_while_the_coroutine_blocks_its_own() -> None:
    blocking, release = threading.Event(), threading.Event()

    async def blocks() -> None:
        blocking.set()
        release.wait()  # blocks its loop, not the caller's
        await asyncio.sleep(3600)

    apart = Apart(blocks())
    assert await asyncio.to_thread(blocking.wait, 30)
    assert not await apart.wait(0.05)  # the caller's loop ran its timer meanwhile
    apart.cancel()  # not heard: its loop is blocked
    assert not apart.done
    release.set()
    assert await apart.wait()
    with pytest.raises(asyncio.CancelledError):  # heard once its loop ran again
        apart.result()


async def test_apart_close_ends_a_coroutine_that_swallows_its_cancellation() -> None:
    began, cleaned = threading.Event(), threading.Event()

    async def stubborn() -> None:
        began.set()
        try:
            while True:
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.sleep(3600)
        finally:
            cleaned.set()

    apart = Apart(stubborn())
    assert await asyncio.to_thread(began.wait, 30)
    apart.cancel()
    assert not await apart.wait(0.1)
    apart.close()
    assert await apart.wait()
    assert cleaned.is_set()


async def test_a_loop_left_with_running_tasks_is_never_taken_again() -> None:
    ended = threading.Event()

    async def leaves_a_task() -> asyncio.AbstractEventLoop:
        async def background() -> None:
            try:
                await asyncio.sleep(3600)
            finally:
                ended.set()

        asyncio.get_running_loop().create_task(background())
        return asyncio.get_running_loop()

    first = Apart(leaves_a_task())
    assert await first.wait()
    left = first.result()
    assert await asyncio.to_thread(ended.wait, 30)  # its leftover was cancelled, as asyncio.run does
    loops = []
    for _ in range(3):
        apart = Apart(_loop_and_request())
        assert await apart.wait()
        loops.append(apart.result()[0])
    assert left not in loops


async def test_on_loop_runs_on_the_given_loop_and_a_cancelled_caller_cancels_it_there() -> None:
    home = asyncio.get_running_loop()
    started, cancelled = asyncio.Event(), asyncio.Event()

    async def at_home() -> asyncio.AbstractEventLoop:
        started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return asyncio.get_running_loop()

    async def caller() -> None:
        await on_loop(home, at_home())

    apart = Apart(caller())
    await started.wait()
    apart.cancel()
    await cancelled.wait()
    assert await apart.wait()
    assert await Apart(on_loop(home, _loop_and_request())).wait()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX only")
def test_a_forked_child_gets_loops_of_its_own() -> None:
    async def twice() -> int:
        apart = Apart(asyncio.sleep(0, result=5))
        assert await apart.wait()
        return apart.result()

    assert asyncio.run(twice()) == 5  # leaves an idle loop thread, which a child does not inherit
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child reports through the pipe
        try:
            os.write(write, str(asyncio.run(asyncio.wait_for(twice(), 30))).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as answer:
        assert answer.read() == "5"
    os.waitpid(child, 0)
