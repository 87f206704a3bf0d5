"""The report's jinja2 templates ship in the wheel (package data under
roadmap_cli/reports/templates), and render from the installed package."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.e2e  # a wheel built
@pytest.mark.slow
def test_wheel_carries_the_report_templates(tmp_path: Path):
    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(dist), str(REPO)],
        check=True,
        timeout=300,
    )
    wheel = next(dist.glob("roadmap_cli-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    for template in ("report.md.j2", "report.html.j2"):
        assert f"roadmap_cli/reports/templates/{template}" in names, sorted(n for n in names if "reports" in n)
    # Render from the unpacked wheel alone (not the checkout): the templates are found beside render.py.
    target = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(target)
    probe = (
        "import sys; sys.path.insert(0, sys.argv[1]); import roadmap_cli.reports.render as r; "
        "assert r.TEMPLATES.is_dir() and str(r.TEMPLATES).startswith(sys.argv[1]), r.TEMPLATES; "
        "print(sorted(p.name for p in r.TEMPLATES.iterdir()))"
    )
    out = subprocess.run(
        [sys.executable, "-I", "-c", probe, str(target)],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": ""},
    )
    assert out.returncode == 0, out.stderr
    assert "report.html.j2" in out.stdout
