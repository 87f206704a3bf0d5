"""`roadmap --help` and `roadmap status` must not import torch or triton (they
cost seconds); heavy imports belong inside the functions that use them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

PROBE = """
import json, sys
from roadmap_cli.cli import main
try:
    main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'triton', 'numpy', 'git', 'psycopg',
                                                         'procrastinate', 'httpx'))
# The paper metadata fetcher (HTTP client, XML) is the `paper log --arxiv/--doi` and `paper refresh` business.
heavy += [m for m in ('roadmap_cli.research.fetch', 'roadmap_cli.research.metadata') if m in sys.modules]
# Defining the SQLModel table classes costs status more than its queries: the
# status path reads with plain SQL (store/settings.py explains).
heavy += [m for m in ('roadmap_cli.store.tables',) if m in sys.modules]
# Cohort mode (PostgreSQL) costs the SQLite path nothing: no driver, no server module.
# (store/queue.py itself is a few constants and SQL, read by the first migration's person_tables.)
heavy += [m for m in ('roadmap_cli.store.server', 'roadmap_cli.tracker.cohort', 'roadmap_cli.grading.queue')
          if m in sys.modules]
sys.stderr.write('\\nPROBE' + json.dumps({'code': code, 'heavy': heavy}) + '\\n')
"""


@pytest.mark.parametrize("args", [["--help"], ["status"], ["status", "--json"], ["next"]])
def test_fast_commands_import_no_torch_or_triton(args: list[str], tmp_path: Path):
    env_home = str(tmp_path / "home")
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={"ROADMAP_HOME": env_home, "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
    )
    line = [ln for ln in proc.stderr.splitlines() if ln.startswith("PROBE")]
    assert line, proc.stderr[-2000:]
    probe = json.loads(line[-1][len("PROBE") :])
    assert probe["code"] in (0, None), proc.stderr[-2000:]
    assert probe["heavy"] == [], f"{args} imported {probe['heavy'][:10]}"
