"""Headless Chromium for tests that look at a page the way a person does, without downloading anything.

Debian's ``chromium`` is driven through its command line: ``--dump-dom`` prints the DOM once the
page's scripts have run (``--virtual-time-budget`` lets timers and promises settle first) and
``--screenshot`` writes a PNG. :func:`open_page` keeps a page open and drives it over the DevTools protocol
(clicks, typing, reading the DOM). ``offline=True`` takes the network away (every host resolves to
nothing and every request goes to a closed proxy), so a page that needed one would show it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_chromium() -> str | None:
    """The browser's executable, from ``$CHROMIUM`` or the PATH (Debian's is /usr/bin/chromium)."""
    explicit = os.environ.get("CHROMIUM")
    if explicit:
        return explicit if Path(explicit).exists() else None
    return next((found for name in CANDIDATES if (found := shutil.which(name))), None)


def require_chromium() -> str:
    """The browser's executable, or skip the test saying why."""
    found = find_chromium()
    if found is None:
        pytest.skip("no chromium on PATH (nor $CHROMIUM); 'make programs' installs Debian's chromium")
    return found


def _command(profile: str, offline: bool, *flags: str) -> list[str]:
    """Headless Chromium with a throw-away profile, none of its own background traffic, and with
    ``offline`` no network at all (every host unresolvable, every request sent to a closed proxy)."""
    command = [
        require_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
        "--disable-extensions", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", f"--user-data-dir={profile}", *flags,
    ]  # fmt: skip
    if offline:
        command += ["--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=http://127.0.0.1:9"]
    return command


def _run(url: str, *flags: str, offline: bool, timeout: float) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory(prefix="osmosis-chromium-", ignore_cleanup_errors=True) as profile:
        command = _command(profile, offline, "--virtual-time-budget=5000", *flags)
        return subprocess.run([*command, url], capture_output=True, text=True, timeout=timeout, check=False)


def dump_dom(url: str, *, offline: bool = True, timeout: float = 60) -> str:
    """The page's DOM after its scripts ran, as HTML."""
    result = _run(url, "--dump-dom", offline=offline, timeout=timeout)
    if result.returncode != 0 or not result.stdout.strip():
        raise AssertionError(f"chromium failed ({result.returncode}): {result.stderr[-2000:]}")
    return result.stdout


def screenshot(
    url: str, path: Path, *, size: str = "1280,1600", offline: bool = True, timeout: float = 60
) -> Path:
    """A PNG of the page at ``size`` (width,height) written to ``path``."""
    result = _run(url, f"--screenshot={path}", f"--window-size={size}", offline=offline, timeout=timeout)
    if result.returncode != 0 or not path.exists():
        raise AssertionError(f"chromium wrote no screenshot ({result.returncode}): {result.stderr[-2000:]}")
    return path


class Page:
    """One page of a running Chromium, driven over the DevTools protocol (aiohttp's websocket client)."""

    def __init__(self, socket: Any) -> None:
        self._socket = socket
        self._next_id = 0

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        self._next_id += 1
        await self._socket.send_json({"id": self._next_id, "method": method, "params": params})
        while True:
            message = await self._socket.receive_json(timeout=30)
            if message.get("id") == self._next_id:
                if "error" in message:
                    raise AssertionError(f"{method} failed: {message['error']}")
                return dict(message.get("result", {}))

    async def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (promises awaited)."""
        result = await self.call(
            "Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True
        )
        if "exceptionDetails" in result:
            raise AssertionError(f"{expression!r} raised: {result['exceptionDetails']}")
        return result["result"].get("value")

    async def wait_for(self, expression: str, timeout: float = 10.0) -> Any:
        """Poll ``expression`` until it is truthy; its value."""
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            value = await self.evaluate(expression)
            if value:
                return value
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"timed out waiting for {expression!r}")
            await asyncio.sleep(0.05)


@contextlib.asynccontextmanager
async def open_page(url: str, *, offline: bool = True) -> AsyncIterator[Page]:
    """``url`` open in a headless Chromium, for as long as the block runs."""
    import aiohttp

    from tests.support.sockets import free_port

    port = free_port()
    with tempfile.TemporaryDirectory(prefix="osmosis-chromium-", ignore_cleanup_errors=True) as profile:
        command = _command(profile, offline, f"--remote-debugging-port={port}", "--remote-allow-origins=*")
        # Its own session, so that the browser's helper processes can be ended with it.
        process = subprocess.Popen(
            [*command, url], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        try:
            async with aiohttp.ClientSession() as session:
                target = await _page_target(session, f"http://127.0.0.1:{port}/json/list", process)
                async with session.ws_connect(target, max_msg_size=0) as socket:
                    page = Page(socket)
                    address = json.dumps(url.split("#")[0])
                    await page.wait_for(
                        f"location.href.startsWith({address}) && document.readyState === 'complete'"
                    )
                    yield page
        finally:
            os.killpg(process.pid, signal.SIGKILL)  # a throw-away profile: nothing to shut down cleanly
            process.wait()


async def _page_target(session: Any, listing: str, process: subprocess.Popen[bytes]) -> str:
    """The websocket address of the browser's page, once its DevTools endpoint answers."""
    for _ in range(200):
        if process.poll() is not None:
            raise AssertionError(
                f"chromium exited with {process.returncode} before its DevTools endpoint answered"
            )
        try:
            async with session.get(listing) as response:
                pages = [t for t in await response.json() if t.get("type") == "page"]
                if pages:
                    return str(pages[0]["webSocketDebuggerUrl"])
        except OSError:
            pass
        await asyncio.sleep(0.1)
    raise AssertionError("chromium's DevTools endpoint did not answer within 20 s")
