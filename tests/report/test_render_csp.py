"""The report's Content-Security-Policy lets its one script run, by hash, and no other: a script that got
into the page any other way stays inert."""

from __future__ import annotations

import base64
import hashlib
import re
from pathlib import Path

from osmosis_ai.report.readers import parse_results
from osmosis_ai.report.render import render_report
from tests.support.browser import dump_dom

RECORD = '{"rollout_id": "r-0", "row_index": 0, "status": "COMPLETED", "reward": 1.0}\n'
INJECTED = "<script>document.body.setAttribute('data-injected', 'ran')</script>"


def _page() -> str:
    return render_report([parse_results(RECORD, "records.jsonl")])


def test_the_policy_names_the_hash_of_the_one_script() -> None:
    page = _page()
    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page)
    assert policy is not None
    scripts = re.findall(r"<script>(.*?)</script>", page, re.S)
    assert len(scripts) == 1
    digest = base64.b64encode(hashlib.sha256(scripts[0].encode()).digest()).decode()
    directives = dict(part.strip().split(" ", 1) for part in policy.group(1).split(";"))
    assert directives["script-src"] == f"'sha256-{digest}'"
    assert "unsafe-inline" not in directives["script-src"]


def test_an_injected_script_does_not_run_while_the_page_s_own_does(tmp_path: Path) -> None:
    page = _page().replace("<main>", f"<main>{INJECTED}", 1)  # as if a field had slipped through
    path = tmp_path / "report.html"
    path.write_text(page, encoding="utf-8")
    dom = dump_dom(path.as_uri())
    assert "data-ready-ms=" in dom  # the report's own script ran
    assert 'data-injected="ran"' not in dom
