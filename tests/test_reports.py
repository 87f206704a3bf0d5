"""`roadmap report` and `roadmap stats` on a seeded database: every section is
there, the numbers are the database's, user text is escaped, files are never
overwritten without --force, and the written report is logged in the cadence."""

from __future__ import annotations

import json
import re
from datetime import date, datetime, time, timedelta, timezone
from pathlib import Path
from xml.etree import ElementTree

import pytest

EVIL = "<script>alert(1)</script>"


def previous_month(today: date) -> tuple[str, date, date]:
    """The month before today's (always complete): label, first day, last day."""
    last = today.replace(day=1) - timedelta(days=1)
    return f"{last.year}-{last.month:02d}", last.replace(day=1), last


def utc_of_local_noon(day: date) -> str:
    """A stored UTC timestamp whose local date is `day` whatever the time zone."""
    return datetime.combine(day, time(12)).astimezone().astimezone(timezone.utc).isoformat()


def seed(home: Path, first: date, last: date) -> dict:
    """Known rows inside the month (and a few outside it, which must not count)."""
    import sqlalchemy as sa

    from roadmap_cli.store import open_store

    home.mkdir(parents=True, exist_ok=True)
    store = open_store(home)
    me = store.learner  # rows below get the column's default; they are made this learner's at the end
    mid = first + timedelta(days=9)
    before = first - timedelta(days=3)
    with store.connection() as conn:
        ins = lambda sql, rows: conn.execute(sa.text(sql), rows)  # noqa: E731
        ins(
            "INSERT INTO settings (learner, key, value) VALUES (:me, :k, :v)",
            [{"me": me, "k": "start_date", "v": json.dumps((first - timedelta(weeks=8)).isoformat())}],
        )
        ins(
            "INSERT INTO checkpoint_progress (checkpoint_id, completed_at, source, evidence) VALUES (:c, :t, :s, :e)",
            [
                {
                    "c": "s1-draw-transformer-block",
                    "t": utc_of_local_noon(mid),
                    "s": "self",
                    "e": "https://example.org/post",
                },
                {
                    "c": "s1-explain-attention-workflow",
                    "t": utc_of_local_noon(mid + timedelta(days=1)),
                    "s": "self",
                    "e": None,
                },
                {"c": "s1-explain-query-key-value", "t": utc_of_local_noon(before), "s": "self", "e": None},
            ],
        )
        attempt = (
            "INSERT INTO grade_attempts (lab_id, started_at, duration_s, outcome, score, max_score, parts, perf, "
            "device, interpret_mode, workspace, grader_sha256) VALUES (:lab, :t, 10, :o, :s, :m, :p, :f, :d, :i, "
            "'/tmp/ws', 'x')"
        )
        parts_ok = [
            {"id": "reference-torch", "points": 10, "max_points": 10, "status": "passed"},
            {"id": "tiled-torch", "points": 20, "max_points": 20, "status": "passed"},
            {"id": "performance", "points": 0, "max_points": 0, "status": "not-graded-here"},
        ]
        perf = [
            {"test": "t", "name": "geomean speed vs SDPA", "value": 0.62, "unit": "ratio"},
            {"test": "t", "name": "fwd 4096", "value": 150.0, "unit": "TFLOP/s", "ratio_vs_sdpa": 0.75},
            {"test": "t", "name": "matmul", "value": 300.0, "unit": "TFLOP/s", "pct_of_baseline": 91.5},
        ]
        ins(
            attempt,
            [
                {
                    "lab": "flash-attention",
                    "t": utc_of_local_noon(before),
                    "o": "failed",
                    "s": 5,
                    "m": 30,
                    "p": json.dumps(parts_ok[:2]),
                    "f": "[]",
                    "d": "cpu",
                    "i": True,
                },
                {
                    "lab": "flash-attention",
                    "t": utc_of_local_noon(mid),
                    "o": "failed",
                    "s": 10,
                    "m": 30,
                    "p": json.dumps(parts_ok[:2]),
                    "f": "[]",
                    "d": "cpu",
                    "i": True,
                },
                {
                    "lab": "flash-attention",
                    "t": utc_of_local_noon(mid + timedelta(days=2)),
                    "o": "passed",
                    "s": 30,
                    "m": 30,
                    "p": json.dumps(parts_ok),
                    "f": json.dumps(perf),
                    "d": "cpu",
                    "i": True,
                },
                {
                    "lab": "minigpt",
                    "t": utc_of_local_noon(mid),
                    "o": "timeout",
                    "s": 0,
                    "m": 100,
                    "p": "[]",
                    "f": "[]",
                    "d": "cpu",
                    "i": False,
                },
            ],
        )
        paper = (
            "INSERT INTO papers (title, title_key, status, read_on, added_on, arxiv_id, url, notes, rating) "
            "VALUES (:t, :k, :s, :r, :a, :x, :u, :n, :g)"
        )
        ins(
            paper,
            [
                {
                    "t": EVIL,
                    "k": "evil",
                    "s": "read",
                    "r": mid.isoformat(),
                    "a": mid.isoformat(),
                    "x": None,
                    "u": "javascript:alert(2)",
                    "n": f"notes {EVIL} *bold*",
                    "g": 4,
                },
                {
                    "t": "FlashAttention-2",
                    "k": "fa2",
                    "s": "reproduced",
                    "r": (mid + timedelta(days=1)).isoformat(),
                    "a": mid.isoformat(),
                    "x": "2307.08691",
                    "u": None,
                    "n": None,
                    "g": None,
                },
                {
                    "t": "Outside",
                    "k": "outside",
                    "s": "read",
                    "r": before.isoformat(),
                    "a": before.isoformat(),
                    "x": None,
                    "u": None,
                    "n": None,
                    "g": None,
                },
                {
                    "t": "Unread",
                    "k": "unread",
                    "s": "to-read",
                    "r": None,
                    "a": mid.isoformat(),
                    "x": None,
                    "u": None,
                    "n": None,
                    "g": None,
                },
            ],
        )
        entry = (
            "INSERT INTO cadence_entries (kind, title, on_date, hours, link, note, created_at) "
            "VALUES (:k, :t, :d, :h, :l, :n, '2026-01-01T00:00:00+00:00')"
        )
        ins(
            entry,
            [
                {
                    "k": "reproduction",
                    "t": "FA2 from scratch",
                    "d": mid.isoformat(),
                    "h": None,
                    "l": "https://github.com/x/y",
                    "n": None,
                },
                {"k": "experiment", "t": EVIL, "d": mid.isoformat(), "h": None, "l": "javascript:alert(3)", "n": EVIL},
                {"k": "benchmark", "t": "matmul sweep", "d": last.isoformat(), "h": None, "l": None, "n": "H100"},
                {"k": "benchmark", "t": "old sweep", "d": before.isoformat(), "h": None, "l": None, "n": None},
                {"k": "hours", "t": None, "d": mid.isoformat(), "h": 2.5, "l": None, "n": None},
                {"k": "hours", "t": None, "d": (mid + timedelta(days=1)).isoformat(), "h": 4.0, "l": None, "n": None},
                {"k": "hours", "t": None, "d": before.isoformat(), "h": 7.0, "l": None, "n": None},
            ],
        )
        for table in ("checkpoint_progress", "grade_attempts", "papers", "cadence_entries"):
            conn.execute(sa.text(f"UPDATE {table} SET learner = :me"), {"me": me})
    store.engine.dispose()
    return {"mid": mid, "before": before}


@pytest.fixture
def month(roadmap_home: Path) -> tuple[str, date, date]:
    label, first, last = previous_month(date.today())
    seed(roadmap_home, first, last)
    return label, first, last


def db_count(home: Path, sql: str, **params) -> float:
    import sqlite3

    with sqlite3.connect(home / "roadmap.db") as conn:
        return conn.execute(sql, params).fetchone()[0]


def test_report_numbers_equal_the_database(run_cli, month, roadmap_home: Path):
    label, first, last = month
    result = run_cli("report", "--month", label, "--json")
    assert result.exit_code == 0, result
    data = result.json()["data"]
    a, b = first.isoformat(), last.isoformat()
    assert [c["id"] for c in data["checkpoints"]] == ["s1-draw-transformer-block", "s1-explain-attention-workflow"]
    assert data["checkpoints_done_total"] == 3
    assert (
        len(data["papers"])
        == db_count(
            roadmap_home,
            "SELECT count(*) FROM papers WHERE status IN ('read','reproduced') AND read_on BETWEEN :a AND :b",
            a=a,
            b=b,
        )
        == 2
    )
    for kind in ("reproduction", "experiment", "benchmark"):
        assert len(data["entries"][kind]) == db_count(
            roadmap_home,
            "SELECT count(*) FROM cadence_entries WHERE kind = :k AND on_date BETWEEN :a AND :b",
            k=kind,
            a=a,
            b=b,
        )
    assert (
        data["hours"]["total"]
        == db_count(
            roadmap_home,
            "SELECT sum(hours) FROM cadence_entries WHERE kind = 'hours' AND on_date BETWEEN :a AND :b",
            a=a,
            b=b,
        )
        == 6.5
    )
    (lab,) = data["labs"]  # the minigpt timeout does not count
    assert lab["lab_id"] == "flash-attention" and lab["outcome"] == "passed-on-cpu"
    assert lab["attempt"] == 3 and lab["attempts_in_period"] == 2 and lab["score"] == 30 and lab["device"] == "cpu"
    assert [p["status"] for p in lab["parts"]] == ["passed", "passed", "not-graded-here"]
    assert len(lab["not_graded_here"]) == 1
    assert [f["pct_of_baseline"] for f in lab["perf"]] == [62.0, 75.0, 91.5]
    targets = {t["kind"]: t["done"] for t in data["targets"]}
    assert targets["experiment"] == 1 and targets["benchmark"] == 1 and targets["report"] == 0
    assert set(data["streaks"]) == {"week", "month"}
    assert data["charts"]["burnup"]["done"][-1] == 3
    assert sum(w["hours"] for w in data["charts"]["hours"]["weeks"]) >= 6.5


def test_markdown_has_every_section_and_escapes_user_text(run_cli, month):
    label, _, _ = month
    result = run_cli("report", "--month", label)
    assert result.exit_code == 0, result
    md = result.stdout
    for heading in (
        "# Monthly report " + label,
        "## Checkpoints done",
        "## Labs",
        "## Papers read",
        "## Reproductions, experiments and benchmarks",
        "## Hours",
        "## Cadence and streaks",
        "## Charts",
    ):
        assert heading in md
    assert "<script>" not in md and "\\<script\\>" in md
    assert "javascript:" not in md.replace("javascript:alert", "")  # shown as text only, never as a link target
    assert "](javascript" not in md
    assert "[FlashAttention-2](https://arxiv.org/abs/2307.08691)" in md
    assert "CPU-only: 1 part(s) need a CUDA GPU" in md
    assert "62.0%" in md and "91.5%" in md


def test_html_is_self_contained_and_escaped(run_cli, month, tmp_path: Path):
    label, _, _ = month
    out = tmp_path / "r.html"
    result = run_cli("report", "--month", label, "--format", "html", "-o", out)
    assert result.exit_code == 0, result
    html = out.read_text()
    assert "<script" not in html.lower() and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert 'href="javascript' not in html
    assert html.count("<svg") == 5
    assert not re.search(
        r'(src|href)="https?://',
        html.replace('href="https://arxiv.org/abs/2307.08691"', "")
        .replace('href="https://github.com/x/y"', "")
        .replace('href="https://example.org/post"', ""),
    )
    assert "Content-Security-Policy" in html


def test_markdown_file_writes_svgs_beside_it_and_never_overwrites(run_cli, month, tmp_path: Path):
    label, _, _ = month
    out = tmp_path / f"report-{label}.md"
    chart = tmp_path / f"report-{label}-burnup.svg"
    chart.write_text("mine")
    refused = run_cli("report", "--month", label, "-o", out)
    assert refused.exit_code == 2 and "not overwritten" in refused.stderr and "--force" in refused.stderr
    assert not out.exists() and chart.read_text() == "mine"
    ok = run_cli("report", "--month", label, "-o", out, "--force")
    assert ok.exit_code == 0, ok
    md = out.read_text()
    names = ["burnup", "hours", "calendar", "grades", "loss"]
    for name in names:
        svg = tmp_path / f"report-{label}-{name}.svg"
        assert svg.read_text().startswith("<svg") and f"({svg.name})" in md
        ElementTree.fromstring(svg.read_text())
    assert "<script" not in "".join((tmp_path / f"report-{label}-{n}.svg").read_text() for n in names)
    again = run_cli("report", "--month", label, "-o", out)
    assert again.exit_code == 2 and out.read_text() == md


@pytest.mark.parametrize(
    "args, message",
    [
        (["--month", "2026-13"], "invalid --month '2026-13'"),
        (["--month", "nov"], "invalid --month 'nov'"),
        (["--quarter", "2026-Q5"], "invalid --quarter '2026-Q5'"),
        ([], "choose one period"),
        (["--month", "2026-01", "--quarter", "2026-Q1"], "choose one period"),
        (["--month", "2999-01"], "has not started yet"),
        (["--month", "2026-01", "--format", "pdf"], "unknown --format"),
        (["--month", "2026-01", "--json", "-o", "x.md"], "writes no file"),
    ],
)
def test_bad_period_is_one_line_exit_2(run_cli, args, message):
    result = run_cli("report", *args)
    assert result.exit_code == 2, result
    assert message in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_report_log_links_the_written_file_and_the_cadence_counts_it(run_cli, month, tmp_path: Path):
    label, _, _ = month
    out = tmp_path / "nov.md"
    result = run_cli("report", "--month", label, "-o", out, "--log")
    assert result.exit_code == 0, result
    entries = run_cli("log", "list", "--kind", "report", "--json").json()["data"]["entries"]
    assert [e["link"] for e in entries] == [out.resolve().as_uri()]
    line = run_cli("cadence", "--month", "--json").json()["data"]["line"]
    assert {k["kind"]: k["done"] for k in line["kinds"]}["report"] == 1
    quarter = f"{date.today().year}-Q{(date.today().month - 1) // 3 + 1}"
    blog = run_cli("report", "--quarter", quarter, "--format", "html", "-o", tmp_path / "q.html", "--log")
    assert blog.exit_code == 0, blog
    assert run_cli("log", "list", "--kind", "blog", "--json").json()["data"]["entries"][0]["link"].endswith("/q.html")
    assert run_cli("report", "--month", label, "--log").exit_code == 2  # nothing written, nothing to link


def test_log_report_and_blog_take_a_file(run_cli, tmp_path: Path):
    written = tmp_path / "post.html"
    written.write_text("<p>hi</p>")
    result = run_cli("log", "blog", "My post", "--file", written, "--json")
    assert result.exit_code == 0, result
    assert result.json()["data"]["link"] == written.resolve().as_uri()
    assert run_cli("log", "report", "x", "--file", tmp_path / "missing.md").exit_code == 2
    both = run_cli("log", "report", "x", "--file", written, "--link", "https://x")
    assert both.exit_code == 2 and "not both" in both.stderr
    week = run_cli("cadence", "--quarter", "--json").json()["data"]["line"]
    assert {k["kind"]: k["done"] for k in week["kinds"]}["blog"] == 1


def test_planned_burnup_matches_the_status_schedule(month):
    """The burn-up's plan line is status's plan: same figure, before rounding down."""
    from roadmap_cli.curriculum import load_curriculum
    from roadmap_cli.paths import data_root
    from roadmap_cli.reports.series import planned_done
    from roadmap_cli.tracker.status import _schedule

    cur = load_curriculum(data_root() / "curriculum.yaml")
    start = date(2026, 1, 5)
    for days in (0, 3, 10, 45, 100, 200, 400, 2000):
        day = start + timedelta(days=days)
        assert int(planned_done(cur, start, day)) == _schedule(cur, {}, start, day, None).expected_done


def test_svg_charts_escape_every_text():
    from roadmap_cli.reports import svg

    line = svg.line_chart(
        EVIL,
        [svg.SvgSeries(EVIL, [(0, 1), (1, 2)], color='"><script>')],
        x_label=EVIL,
        y_label=EVIL,
        x_format=lambda x: EVIL,
    )
    bars = svg.bar_chart(EVIL, [(EVIL, 3.0)], unit=EVIL, y_label=EVIL, target=(1, 2))
    empty = svg.line_chart(EVIL, [], x_label="x", y_label="y", empty=EVIL)
    cal = svg.calendar(
        EVIL,
        {
            "weeks": [{"label": EVIL, "start": "2026-11-02", "days": [1, 0, 2, 5, None, None, None], "met": True}],
            "total": 8,
            "active_days": 3,
            "weeks_met": 1,
        },
    )
    for doc in (line, bars, empty, cal):
        assert "<script" not in doc and "&lt;script&gt;" in doc
        assert doc.startswith("<svg") and doc.rstrip().endswith("</svg>")
        ElementTree.fromstring(doc)  # well-formed XML


def test_rows_of_another_learner_stay_out(run_cli, month, roadmap_home: Path, monkeypatch):
    """Cohort mode: the report reads the current learner's rows only."""
    import sqlite3

    label, first, last = month
    mid = (first + timedelta(days=9)).isoformat()
    when = utc_of_local_noon(first + timedelta(days=9))
    with sqlite3.connect(roadmap_home / "roadmap.db") as conn:
        conn.execute(
            "INSERT INTO checkpoint_progress (checkpoint_id, completed_at, source, learner) "
            "VALUES ('s1-read-transformer-paper-diagram', ?, 'self', 'bo')",
            (when,),
        )
        conn.execute(
            "INSERT INTO papers (title, title_key, status, read_on, added_on, learner) "
            "VALUES ('Bo paper', 'bo', 'read', ?, ?, 'bo')",
            (mid, mid),
        )
        conn.execute(
            "INSERT INTO cadence_entries (kind, title, on_date, created_at, learner) "
            "VALUES ('experiment', 'Bo exp', ?, 'x', 'bo')",
            (mid,),
        )
        conn.execute(
            "INSERT INTO grade_attempts (lab_id, started_at, duration_s, outcome, score, max_score, parts, perf, "
            "device, interpret_mode, workspace, grader_sha256, learner) VALUES ('minigpt', ?, 1, 'passed', 100, "
            "100, '[]', '[]', 'cuda', 0, '/w', 'x', 'bo')",
            (when,),
        )
    data = run_cli("report", "--month", label, "--json").json()["data"]
    assert len(data["checkpoints"]) == 2 and data["checkpoints_done_total"] == 3
    assert len(data["papers"]) == 2 and len(data["entries"]["experiment"]) == 1
    assert [lab["lab_id"] for lab in data["labs"]] == ["flash-attention"]
    monkeypatch.setenv("ROADMAP_LEARNER", "bo")
    data = run_cli("report", "--month", label, "--json").json()["data"]
    assert [c["id"] for c in data["checkpoints"]] == ["s1-read-transformer-paper-diagram"]
    assert [p["title"] for p in data["papers"]] == ["Bo paper"]
    assert [e["title"] for e in data["entries"]["experiment"]] == ["Bo exp"]
    assert [lab["lab_id"] for lab in data["labs"]] == ["minigpt"]
    assert run_cli("stats", "--json").json()["data"]["grades"] == [{"lab_id": "minigpt", "points": [[1, 100.0]]}]


def test_quarter_markdown(run_cli, month):
    label, first, _ = month
    quarter = f"{first.year}-Q{(first.month - 1) // 3 + 1}"
    result = run_cli("report", "--quarter", quarter.lower())  # 2026-q4 is accepted too
    assert result.exit_code == 0, result
    assert f"# Quarterly report {quarter}" in result.stdout
    assert "| Target (quarter) |" in result.stdout and "quarterly streak" in result.stdout


def test_html_is_never_printed_to_a_terminal(month, roadmap_home: Path):
    """On a terminal HTML is refused with one line; redirected, it is printed."""
    import os
    import pty
    import subprocess
    import sys

    label, _, _ = month
    cmd = [sys.executable, "-m", "roadmap_cli", "report", "--month", label, "--format", "html"]
    env = dict(os.environ, ROADMAP_HOME=str(roadmap_home))
    leader, follower = pty.openpty()
    try:
        proc = subprocess.run(cmd, stdout=follower, stderr=subprocess.PIPE, env=env, timeout=120)
    finally:
        os.close(follower)
        os.close(leader)
    assert proc.returncode == 2 and b"not for a terminal" in proc.stderr
    piped = subprocess.run(cmd, capture_output=True, env=env, timeout=120)
    assert piped.returncode == 0 and piped.stdout.startswith(b"<!DOCTYPE html>")


def test_markdown_blocks_are_separated(run_cli, month):
    """GitHub reads a line right after a list item as part of it: every heading,
    bold kind label and table starts after a blank line."""
    label, _, _ = month
    lines = run_cli("report", "--month", label).stdout.splitlines()
    for i, line in enumerate(lines[1:], 1):
        if line.startswith(("#", "**", "| Date", "| Part", "| Kernel", "| Week", "| Target", "![")):
            assert lines[i - 1] == "", f"line {i + 1} {line!r} follows {lines[i - 1]!r}"


def test_report_wording_interpreter_only_for_triton_labs_and_one_day_singular(run_cli, roadmap_home: Path):
    """minigpt has no Triton: its CPU attempt is plain `cpu`; flash-attention's says "(Triton interpreter)".
    One active day is "1 day"; a burn-up's y ticks are whole checkpoints."""
    import re

    from roadmap_cli.reports import svg

    label, first, last = previous_month(date.today())
    seed(roadmap_home, first, last)
    import sqlalchemy as sa

    from roadmap_cli.store import open_store

    store = open_store(roadmap_home)
    with store.connection() as conn:
        conn.execute(
            sa.text("UPDATE grade_attempts SET outcome = 'failed', interpret_mode = 1 WHERE lab_id = 'minigpt'")
        )
    store.engine.dispose()
    text = run_cli("report", "--month", label).stdout
    labs = {block.split("\n", 1)[0]: block for block in text.split("### ")[1:]}
    minigpt = next(b for head, b in labs.items() if "(minigpt)" in head)
    flash = next(b for head, b in labs.items() if "(flash-attention)" in head)
    assert "device cpu;" in minigpt and "interpreter" not in minigpt, minigpt
    assert "device cpu (Triton interpreter);" in flash, flash
    cal = svg.calendar("c", {"columns": [], "total": 5, "active_days": 1, "weeks_met": 0, "weeks": []})
    assert "5 logged on 1 day;" in cal, cal
    chart = svg.line_chart(
        "b", [svg.SvgSeries("plan", [(0, 0.0), (1, 14.5)])], x_label="x", y_label="y", y_min=0, y_integer=True
    )
    ticks = re.findall(r'text-anchor="end" font-size="11"[^>]*>([^<]+)</text>', chart)
    assert ticks and all(t.isdigit() for t in ticks), ticks
