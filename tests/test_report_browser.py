"""The HTML report in a real browser: Debian's headless Chromium through
playwright (never a downloaded browser). No console errors, no dialog (the
paper titled `<script>alert(1)</script>` must show as text), the structure is
the report's, and a screenshot is taken (looked at, not compared by pixels).

Skipped when /usr/bin/chromium is missing (Debian package `chromium`), unless
ROADMAP_REQUIRE_CHROMIUM=1 (CI), where that is a failure.
"""

from __future__ import annotations

import os
from datetime import date
from pathlib import Path

import pytest
from test_reports import EVIL, previous_month, seed

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _need_chromium() -> None:
    if CHROMIUM.exists():
        return
    reason = "needs Debian's `chromium` package (/usr/bin/chromium) for the headless browser test"
    if os.environ.get("ROADMAP_REQUIRE_CHROMIUM") == "1":
        pytest.fail(reason + "; ROADMAP_REQUIRE_CHROMIUM=1 makes it required")
    pytest.skip(reason)


@pytest.mark.slow
def test_html_report_in_headless_chromium(run_cli, roadmap_home: Path, tmp_path: Path):
    _need_chromium()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        if os.environ.get("ROADMAP_REQUIRE_CHROMIUM") == "1":
            raise
        pytest.skip("needs the playwright Python package")
    label, first, last = previous_month(date.today())
    seed(roadmap_home, first, last)
    out = tmp_path / "report.html"
    result = run_cli("report", "--month", label, "--format", "html", "-o", out)
    assert result.exit_code == 0, result

    problems, dialogs, requests = [], [], []
    with sync_playwright() as p:
        # A fresh profile folder per run (playwright passes it as --user-data-dir).
        browser = p.chromium.launch_persistent_context(
            str(tmp_path / "profile"),
            executable_path=str(CHROMIUM),
            args=FLAGS,
            headless=True,
            viewport={"width": 1100, "height": 900},
        )
        try:
            page = browser.new_page()
            page.on("console", lambda msg: problems.append(msg.text) if msg.type in ("error", "warning") else None)
            page.on("pageerror", lambda exc: problems.append(str(exc)))
            page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
            page.on("request", lambda req: requests.append(req.url))
            page.goto(out.as_uri(), wait_until="load")
            assert page.title() == f"Monthly report {label}"
            headings = page.eval_on_selector_all("h2", "els => els.map(e => e.textContent)")
            assert headings == [
                "Checkpoints done",
                "Labs",
                "Papers read",
                "Reproductions, experiments and benchmarks",
                "Hours",
                "Cadence and streaks",
                "Charts",
            ]
            assert page.locator("svg").count() == 5
            assert page.locator("table.checkpoints tbody tr").count() == 2
            assert page.locator("table.parts tbody tr").count() == 3
            assert page.locator("table.perf tbody tr").count() == 3
            assert page.locator("ul.papers li").count() == 2
            assert page.locator("script").count() == 0
            papers = page.inner_text("ul.papers")
            assert EVIL in papers  # shown as text
            assert page.eval_on_selector_all("a", "els => els.filter(a => !/^(https?|file):/.test(a.href)).length") == 0
            for chart in page.locator("figure.chart svg").all():
                box = chart.bounding_box()
                assert box and box["width"] > 200 and box["height"] > 60
            page.screenshot(path=str(tmp_path / "report.png"), full_page=True)
        finally:
            browser.close()
    assert (tmp_path / "report.png").stat().st_size > 10_000
    assert dialogs == [], f"a script ran: {dialogs}"
    assert problems == [], problems
    assert all(url.startswith("file://") for url in requests), requests  # no network


def test_missing_chromium_skips_or_fails_when_required(monkeypatch, tmp_path: Path):
    """The guard itself: a skip naming the Debian package, a failure under ROADMAP_REQUIRE_CHROMIUM=1."""
    import test_report_browser as me

    monkeypatch.setattr(me, "CHROMIUM", tmp_path / "no-chromium")
    monkeypatch.delenv("ROADMAP_REQUIRE_CHROMIUM", raising=False)
    with pytest.raises(pytest.skip.Exception, match="Debian's `chromium` package"):
        me._need_chromium()
    monkeypatch.setenv("ROADMAP_REQUIRE_CHROMIUM", "1")
    with pytest.raises(pytest.fail.Exception, match="ROADMAP_REQUIRE_CHROMIUM=1"):
        me._need_chromium()
