"""Size and opening time of the HTML report of a 1,000-rollout run.

Run: ``.venv/bin/python -m benchmarks.report [--rollouts 1000] [--runs 5]``.

The run is real: ``osmosis rollout run`` drives the calculator example with the offline scripted
policy (``--n`` repeats the 8 dataset rows up to the asked number of rollouts) and keeps every record
with its token ids; ``osmosis report`` turns it into the page. Then headless Chromium (Debian's
``chromium``) opens the page and, alternately, a blank page, ``--runs`` times each:

* size of the page against the 2 MB budget (and of the JSONL it was made from),
* wall time of ``chromium --dump-dom`` on the report over the same on a blank page (a ratio: the
  machine is shared), and the page's own clock when its script finished (``data-ready-ms``, ms after
  navigation start) — the issue's goal is "opens in under 2 s",
* the page's clock when the trajectory of the last row was drawn, opened by its address
  (``#view=0:N``): decompressing every trajectory of the run, then drawing one.
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BUDGET = 2 * 1024 * 1024
DATASET_ROWS = 8  # examples/calculator/dataset.jsonl


def _osmosis(*args: str) -> None:
    subprocess.run(
        [sys.executable, "-m", "osmosis_ai", *args], cwd=REPO, check=True, stdout=subprocess.DEVNULL
    )


def _chromium(browser: str, url: str, profile: Path, *flags: str) -> tuple[float, str]:
    command = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
               f"--user-data-dir={profile}", "--host-resolver-rules=MAP * ~NOTFOUND", *flags, "--dump-dom", url]  # fmt: skip
    start = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, check=True, timeout=120)
    return time.perf_counter() - start, result.stdout


def _clock(dom: str, name: str) -> float:
    match = re.search(rf'data-{name}="(\d+)"', dom)
    if not match:
        raise SystemExit(f"the page did not record data-{name}: did its script run?")
    return float(match.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rollouts", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    with tempfile.TemporaryDirectory(prefix="osmosis-report-bench-") as directory:
        root = Path(directory)
        records, page, blank = root / "rollouts.jsonl", root / "report.html", root / "blank.html"
        n = max(1, args.rollouts // DATASET_ROWS)
        _osmosis("rollout", "run", "-m", "examples.calculator.agent:agent_loop", "-d",
                 "examples/calculator/dataset.jsonl", "--model", "scripted", "--n", str(n), "-q", "-o", str(records),
                 "--journal", str(root / "journal.sqlite"))  # fmt: skip
        start = time.perf_counter()
        _osmosis("report", str(records), "-o", str(page), "-q")
        render_s = time.perf_counter() - start
        size = page.stat().st_size
        print(f"rollouts: {n * DATASET_ROWS}; JSONL {records.stat().st_size / 1e6:.1f} MB")
        print(f"report: {size / 1024:,.0f} KB = {size / BUDGET:.1%} of the 2 MB budget "
              f"(osmosis report took {render_s:.2f} s, interpreter start included)")  # fmt: skip
        if browser is None:
            print("chromium not found: no opening times ('make browser' installs it)")
            return
        blank.write_text("<!DOCTYPE html><html><body><script>document.body.dataset.readyMs = "
                         "Math.round(performance.now())</script></body></html>")  # fmt: skip
        profile = root / "profile"
        _chromium(browser, blank.as_uri(), profile)  # warm the browser's caches
        walls, blank_walls, ready, blank_ready, viewer = [], [], [], [], []
        last = n * DATASET_ROWS - 1
        for _ in range(args.runs):
            wall, dom = _chromium(browser, page.as_uri(), profile)
            walls.append(wall)
            ready.append(_clock(dom, "ready-ms"))
            wall, dom = _chromium(browser, blank.as_uri(), profile)
            blank_walls.append(wall)
            blank_ready.append(_clock(dom, "ready-ms"))
            _, dom = _chromium(
                browser, f"{page.as_uri()}#view=0:{last}", profile, "--virtual-time-budget=10000"
            )
            viewer.append(_clock(dom, "viewer-ms"))
        ratios = [a / b for a, b in zip(walls, blank_walls, strict=True)]
        print(f"chromium --dump-dom, median of {args.runs}: report {statistics.median(walls):.2f} s, "
              f"blank page {statistics.median(blank_walls):.2f} s, ratio {statistics.median(ratios):.2f}x")  # fmt: skip
        print(f"page usable (its own clock): report {statistics.median(ready):.0f} ms, "
              f"blank page {statistics.median(blank_ready):.0f} ms")  # fmt: skip
        print(
            f"last row's trajectory drawn (all trajectories decompressed): {statistics.median(viewer):.0f} ms"
        )


if __name__ == "__main__":
    main()
