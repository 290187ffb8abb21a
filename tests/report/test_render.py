"""The HTML page of real runs: self-contained, its figures equal the run's, and it works in headless
Chromium with the network taken away (the DOM after the scripts ran, a screenshot, and clicks)."""

from __future__ import annotations

import asyncio
import base64
import gzip
import json
import re
from pathlib import Path

import pytest

from osmosis_ai.report.figures import summarize
from osmosis_ai.report.model import Run
from osmosis_ai.report.readers import read_results
from osmosis_ai.report.render import render_report
from tests.support.browser import dump_dom, open_page, screenshot
from tests.support.results import write_rollout_results


def _write(path: Path, runs: list[Run]) -> Path:
    path.write_text(render_report(runs), encoding="utf-8")
    return path


def _figure(dom: str, name: str, run: int = 0) -> str:
    section = dom.split(f'id="run-{run}"', 1)[1]
    match = re.search(rf'data-figure="{name}">([^<]*)<', section)
    assert match, f"no figure {name} in run {run}"
    return match.group(1)


def test_the_page_loads_nothing_from_elsewhere_and_embeds_every_trajectory(
    rollouts: Path, tmp_path: Path
) -> None:
    run = read_results(rollouts)
    page = _write(tmp_path / "report.html", [run]).read_text()
    assert not re.search(r"""(src|href|action)\s*=\s*["']?(https?:)?//""", page)
    assert "<link" not in page and "@import" not in page and "url(" not in page
    assert "Content-Security-Policy" in page and "default-src 'none'" in page
    blob = re.search(r'class="trajectories" data-run="0">([^<]+)<', page)
    assert blob is not None
    embedded = json.loads(gzip.decompress(base64.b64decode(blob.group(1))))
    assert [t["messages"] for t in embedded] == [row.trajectory.messages for row in run.rows]
    assert [t["violations"] for t in embedded] == [row.trajectory.violations for row in run.rows]


def test_chromium_shows_the_summary_and_the_violation_at_its_message(rollouts: Path, tmp_path: Path) -> None:
    run = read_results(rollouts)
    summary = summarize(run)
    page = _write(tmp_path / "report.html", [run])
    edited = next(i for i, row in enumerate(run.rows) if row.trajectory.violations)
    dom = dump_dom(f"{page.as_uri()}#view=0:{edited}", offline=True)
    assert _figure(dom, "rows") == str(summary.dataset_rows) == "4"  # rows, not rows x samples
    assert _figure(dom, "samples") == str(summary.rows) == "8"
    assert _figure(dom, "completed") == str(summary.completed) == "6"
    assert summary.mean_score is not None and _figure(dom, "mean-score") == f"{summary.mean_score.value:.3f}"
    assert _figure(dom, "violations") == "2"
    assert re.search(r'data-outcome="agent_error"><td>.*?data-count="2"', dom)
    viewer = dom.split(f'class="viewer" data-run="0" data-index="{edited}"', 1)[1].split("</section>")[0]
    messages = re.findall(r'<div class="msg role-(\w+)[^"]*" data-index="(\d+)"', viewer)
    assert [role for role, _ in messages] == [m["role"] for m in run.rows[edited].trajectory.messages]
    assert re.findall(r'<div class="msg role-\w+ violation" data-index="(\d+)"', viewer) == ["1"]
    assert "append-only violation (turn 1, modified)" in viewer and "Think step by step." in viewer
    assert 'class="tokens"' in viewer and "generated" in viewer
    shot = screenshot(f"{page.as_uri()}#view=0:{edited}", tmp_path / "report.png", offline=True)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_every_kind_of_results_renders_its_figures(local_results: dict[str, Path], tmp_path: Path) -> None:
    runs = [read_results(path) for path in local_results.values()]
    page = _write(tmp_path / "all.html", runs)
    dom = dump_dom(page.as_uri() + "#view=2:0")
    for index, run in enumerate(runs):
        assert _figure(dom, "rows", index) == str(len({row.row for row in run.rows}))
        if run.samples_per_row > 1:
            assert _figure(dom, "samples", index) == str(len(run.rows))
    assert "polite enough" in dom.split('id="run-2"', 1)[1]  # the judge's explanation in the viewer
    assert re.search(r'<tr data-figure="average"><td>average</td><td class="num">0.25</td>', dom)


SORTED_SCORES = (
    "Array.from(document.querySelectorAll('table.rows tbody tr')).map(r => r.cells[4].textContent)"
)
VISIBLE = "Array.from(document.querySelectorAll('table.rows tbody tr')).filter(r => !r.hidden).length"


@pytest.mark.timeout(120)
async def test_the_table_sorts_filters_searches_and_opens_rows_offline(
    rollouts: Path, tmp_path: Path
) -> None:
    run = read_results(rollouts)
    page = _write(tmp_path / "report.html", [run])
    async with open_page(page.as_uri(), offline=True) as browser:
        await browser.evaluate("document.querySelectorAll('table.rows th')[4].click()")
        assert await browser.evaluate(SORTED_SCORES) == [
            "0.250",
            "0.250",
            "0.500",
            "0.500",
            "1.000",
            "1.000",
            "–",
            "–",
        ]
        await browser.evaluate("document.querySelectorAll('table.rows th')[4].click()")
        assert (await browser.evaluate(SORTED_SCORES))[:2] == ["–", "–"]
        await browser.evaluate(
            "{ const s = document.querySelector('select.filter'); s.value = 'agent_error';"
            "s.dispatchEvent(new Event('change')) }"
        )
        assert await browser.evaluate(VISIBLE) == 2
        assert await browser.evaluate("document.querySelector('span.shown').textContent") == "2 of 8 rows"
        await browser.evaluate(
            "{ const s = document.querySelector('select.filter'); s.value = ''; s.dispatchEvent(new Event('change'));"
            "const q = document.querySelector('input.search'); q.value = 'r3-s1'; q.dispatchEvent(new Event('input')) }"
        )
        assert await browser.evaluate(VISIBLE) == 1
        await browser.evaluate("document.querySelector('table.rows tbody tr:not([hidden])').click()")
        label = await browser.wait_for("document.querySelector('.viewer:not([hidden]) h3')?.textContent")
        assert label.endswith("-r3-s1")
        opened = next(i for i, row in enumerate(run.rows) if row.label == label)
        assert await browser.evaluate("location.hash") == f"#view=0:{opened}"


async def test_two_runs_side_by_side_show_their_differences(
    results_dir: Path, rollouts: Path, tmp_path: Path
) -> None:
    written = asyncio.to_thread(
        write_rollout_results, results_dir, "changed.jsonl", rewards=(0.0, 0.5, 1.0, 1.0)
    )
    after = read_results(await written)
    page = _write(tmp_path / "compare.html", [read_results(rollouts), after])
    async with open_page(page.as_uri(), offline=True) as browser:
        changes = await browser.evaluate(
            "Array.from(document.querySelectorAll('table.changes tbody tr'))"
            ".map(r => [r.dataset.key, r.className, r.cells[5].textContent])"
        )
        assert changes == [["0", "worse", "-1.000"], ["3", "better", "0.750"]]  # row against row
        figures = await browser.evaluate(
            "Object.fromEntries(Array.from(document.querySelectorAll('#comparison-1 [data-figure]'))"
            ".map(e => [e.dataset.figure, e.textContent]))"
        )
        assert figures == {
            "mean-difference": "-0.083",
            "improved": "1",
            "worse": "1",
            "tied": "1",
            "outcome-changes": "0",
        }


def test_a_regrade_of_several_samples_per_row_counts_samples_and_rows_apart() -> None:
    from osmosis_ai.report.model import Row

    def grading(scores: list[float]) -> Run:
        rows = [Row(row=i // 2, sample=i % 2, outcome="completed", score=s) for i, s in enumerate(scores)]
        return Run(source="r.jsonl", kind="regrade", rows=rows)

    run = grading([1.0, 1.0, 0.0, 1.0, 0.5, 0.5])
    run.previous = grading([1.0, 0.0, 0.0, 0.0, 0.5, 1.0])
    page = render_report([run])
    regrade = page.split('id="regrade-0"', 1)[1].split("</section>", 1)[0]
    found = dict(
        re.findall(
            r'<span class="label">([^<]*)</span><span class="value" data-figure="[^"]*">([^<]*)<', regrade
        )
    )
    assert found == {
        "mean difference (B − A)": "0.250",  # per-row means: rows 0 and 1 gain 0.5, row 2 loses 0.25
        "samples better (W)": "2",
        "samples worse (L)": "1",
        "samples tied (T)": "3",
        "samples with outcome changed": "0",
    }
    section = page.split('id="run-0"', 1)[1]
    assert 'data-figure="rows">3<' in section and 'data-figure="samples">6<' in section
