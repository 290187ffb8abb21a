"""``benchmarks/openai_stub.py`` answers like an OpenAI-compatible judge, from its own process."""

from __future__ import annotations

import json
import urllib.request

from benchmarks.openai_stub import StubProcess, verdict_for


def test_openai_stub_answers_with_the_verdict_for_the_last_message() -> None:
    body = {"model": "judge", "messages": [{"role": "user", "content": "candidate text"}]}
    with StubProcess(delay=0.0) as api_base:
        request = urllib.request.Request(
            f"{api_base}/chat/completions",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            reply = json.loads(response.read())
    content = reply["choices"][0]["message"]["content"]
    assert json.loads(content) == verdict_for("candidate text")
