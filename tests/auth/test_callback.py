from __future__ import annotations

import threading

import httpx
import pytest

from osmosis_ai.auth.callback import CallbackServer
from osmosis_ai.auth.errors import LoginError
from tests.support.sockets import listener


def test_busy_ports_are_a_login_error():
    taken = listener()
    taken.listen()
    port = taken.getsockname()[1]
    try:
        with pytest.raises(LoginError, match=f"no free port for the login callback in {port}-{port}"):
            CallbackServer("s", ports=range(port, port + 1))
    finally:
        taken.close()


def test_the_page_waits_for_the_verdict_and_a_second_callback_is_refused():
    with CallbackServer("right-state") as server:
        pages: list[httpx.Response] = []
        browser = threading.Thread(
            target=lambda: pages.append(
                httpx.get(server.redirect_uri, params={"token": "t1", "state": "right-state"}, timeout=30)
            )
        )
        browser.start()
        outcome = server.wait(timeout=30)
        assert outcome.token == "t1" and outcome.error is None
        again = httpx.get(server.redirect_uri, params={"token": "t2", "state": "right-state"}, timeout=10)
        assert again.status_code == 400 and "already completed" in again.text
        assert pages == []  # still held open: the token is not verified yet
        server.set_verdict(False, "no <b>such</b> token")
        browser.join(timeout=30)
    assert pages[0].status_code == 400
    assert "no &lt;b&gt;such&lt;/b&gt; token" in pages[0].text
    assert pages[0].headers["cache-control"] == "no-store"


def test_unknown_paths_are_not_found():
    with CallbackServer("s") as server:
        base = server.redirect_uri.rsplit("/", 1)[0]
        assert httpx.get(base + "/elsewhere", timeout=10).status_code == 404
