"""Output that is piped never wraps: a 200-character home path stays on one
line whatever pytest's temp path length (this used to depend on it)."""

from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures_labs"


@pytest.fixture
def long_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ROADMAP_LABS_DIR", str(FIXTURES / "labs"))
    monkeypatch.setenv("ROADMAP_DEVICE", "cpu")
    monkeypatch.setenv("COLUMNS", "40")  # piped output ignores the terminal width entirely
    base = tmp_path / "h"
    home = base / ("x" * max(200 - len(str(base)) - 1, 10))
    assert len(str(home)) >= 200
    monkeypatch.setenv("ROADMAP_HOME", str(home))
    from roadmap_cli import context

    context.reset()
    return home


def test_long_paths_stay_on_one_line_when_piped(run_cli, long_home: Path) -> None:
    started = run_cli("lab", "start", "adder")
    ws = long_home / "labs" / "adder"
    assert started.exit_code == 0, started
    assert f"Started adder in {ws}" in started.stdout.splitlines()
    status = run_cli("lab", "status", "adder")
    assert any(line.endswith(f"workspace {ws}") for line in status.stdout.splitlines()), status.stdout
    listed = run_cli("lab", "list")
    row = next(line for line in listed.stdout.splitlines() if "adder" in line)
    assert "Adder (engine test lab)" in row and "partly (GPU)" in row


def test_lab_show_piped_is_the_plain_handout(run_cli, long_home: Path) -> None:
    shown = run_cli("lab", "show", "adder")
    readme = (FIXTURES / "labs" / "adder" / "README.md").read_text(encoding="utf-8")
    assert shown.stdout == readme.rstrip("\n") + "\n"


def test_handout_is_in_the_workspace_and_hints_are_not(run_cli, long_home: Path) -> None:
    assert run_cli("lab", "start", "adder").exit_code == 0
    ws = long_home / "labs" / "adder"
    assert (ws / "README.md").read_text(encoding="utf-8") == (FIXTURES / "labs" / "adder" / "README.md").read_text(
        encoding="utf-8"
    )
    assert not (ws / "HINTS.md").exists()
    from git import Repo

    assert not Repo(ws).is_dirty(untracked_files=True)  # committed: a fresh workspace is clean
    assert run_cli("lab", "reset", "adder").exit_code == 0
    assert (ws / "README.md").exists()


def test_usage_errors_are_one_line(run_cli) -> None:
    bad = run_cli("grade", "--bogus")
    assert bad.exit_code == 2
    assert bad.stderr.strip().splitlines() == [
        "error: No such option: --bogus (Possible options: --verbose) (see `roadmap grade --help`)"
    ]
    missing = run_cli("lab", "diff")
    assert missing.exit_code == 2 and len(missing.stderr.strip().splitlines()) == 1
    assert "Missing argument 'A'" in missing.stderr


def test_lab_show_on_a_terminal_goes_through_the_pager(long_home: Path, tmp_path: Path) -> None:
    import os
    import sys

    pexpect = pytest.importorskip("pexpect")
    marker = tmp_path / "paged.txt"
    pager = tmp_path / "pager.sh"
    pager.write_text(f"#!/bin/sh\ncat > {marker}\necho PAGED\n")
    pager.chmod(0o755)
    env = {**os.environ, "PAGER": str(pager)}
    env.pop("COLUMNS", None)
    child = pexpect.spawn(
        sys.executable,
        ["-c", "from roadmap_cli.cli import main; main()", "lab", "show", "adder"],
        env=env,
        encoding="utf-8",
        timeout=60,
    )
    child.expect("PAGED")
    child.expect(pexpect.EOF)
    assert "Adder" in marker.read_text() and "# Adder" not in marker.read_text()  # rendered, then paged
    plain = pexpect.spawn(
        sys.executable,
        ["-c", "from roadmap_cli.cli import main; main()", "lab", "show", "adder", "--no-pager"],
        env=env,
        encoding="utf-8",
        timeout=60,
    )
    plain.expect("Adder")
    plain.expect(pexpect.EOF)
    assert "PAGED" not in plain.before
