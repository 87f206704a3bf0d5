"""What judges cannot be changed (issue 25, item 3): every grade compares the
grader's files (engine, grading_kit, the lab's lab.yaml and tests/) with the
install's manifest first and refuses on a difference with one line; the
grader reads bytecode only from a private cache."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from roadmap_cli.grading import manifest

FIXTURES = Path(__file__).parent / "fixtures_labs"
REPAIR = "(repair: reinstall roadmap, see roadmap doctor)"

pytestmark = pytest.mark.usefixtures("fake_labs")  # tests/conftest.py: graded as on a machine without a GPU


@pytest.fixture
def install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the fixture labs with a wheel-style manifest of it and of the engine; the check is on."""
    labs = tmp_path / "labs"
    shutil.copytree(FIXTURES / "labs", labs)
    shutil.copytree(FIXTURES / "kernels", tmp_path / "kernels")
    monkeypatch.setenv("ROADMAP_LABS_DIR", str(labs))
    target = tmp_path / "_manifest.json"
    target.write_text(json.dumps(manifest.build(labs)))
    monkeypatch.setattr(manifest, "MANIFEST_FILE", target)
    monkeypatch.delenv("ROADMAP_DEV_UNLOCKED", raising=False)  # tests/conftest.py sets it for every other test
    return labs


def _workspace(run_cli, labs: Path, tmp_path: Path, monkeypatch) -> Path:
    ws = tmp_path / "ws"
    assert run_cli("lab", "start", "adder", "--dir", str(ws)).exit_code == 0
    monkeypatch.chdir(ws)
    shutil.copy(labs / "adder" / "solution" / "adder.py", ws / "adder.py")
    return ws


def _refused(result, path: Path) -> None:
    assert result.exit_code == 4, result
    assert result.stderr.strip().splitlines() == [f"error: grader file changed since install: {path} {REPAIR}"], result
    assert result.stdout == ""


def test_an_untouched_install_grades(install: Path, run_cli, tmp_path: Path, monkeypatch) -> None:
    _workspace(run_cli, install, tmp_path, monkeypatch)
    result = run_cli("grade", "--part", "add", "--json")
    assert result.exit_code == 0, result
    assert result.json()["data"]["parts"][0]["status"] == "passed"


def test_a_changed_lab_test_refuses_the_grade(install: Path, run_cli, tmp_path: Path, monkeypatch) -> None:
    _workspace(run_cli, install, tmp_path, monkeypatch)
    test_add = install / "adder" / "tests" / "test_add.py"
    test_add.write_text(test_add.read_text().replace("== 5", "== 5 or True"))
    _refused(run_cli("grade", "--part", "add"), test_add)
    assert run_cli("lab", "history", "adder", "--json").json()["data"]["total"] == 0  # nothing recorded

    # A new file in tests/ (pytest would collect it) is a change too.
    test_add.write_text(test_add.read_text().replace("== 5 or True", "== 5"))
    extra = install / "adder" / "tests" / "test_extra.py"
    extra.write_text("def test_free():\n    pass\n")
    _refused(run_cli("grade"), extra)
    extra.unlink()
    assert run_cli("grade", "--part", "add").exit_code == 0


def test_a_changed_grading_kit_file_refuses_the_grade(install: Path, run_cli, tmp_path: Path, monkeypatch) -> None:
    # The engine as installed, copied: the copy is what the check reads (the real package is shared).
    pkg = tmp_path / "site" / "roadmap_cli"
    for rel in manifest.ENGINE:
        source = manifest.PKG / rel
        if source.is_dir():
            shutil.copytree(source, pkg / rel, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(source, pkg / rel)
    manifest.MANIFEST_FILE.write_text(json.dumps(manifest.build(install, pkg)))
    monkeypatch.setattr(manifest, "PKG", pkg)
    _workspace(run_cli, install, tmp_path, monkeypatch)
    assert run_cli("grade", "--part", "add").exit_code == 0

    compare = pkg / "grading_kit" / "compare.py"
    compare.write_text(compare.read_text() + "\nassert_close = lambda *a, **k: None\n")
    _refused(run_cli("grade", "--part", "add"), compare)
    doctor = run_cli("doctor", "--json").json()["data"]
    assert doctor["manifest"]["ok"] is False and doctor["manifest"]["changed"] == str(compare)
    text = run_cli("doctor").stdout
    assert "grader file changed since install" in text and "reinstall" in text


def test_a_source_checkout_is_checked_against_git_head(tmp_path: Path, run_cli, monkeypatch) -> None:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = tmp_path / "repo"
    pkg = repo / "src" / "roadmap_cli"
    for rel in manifest.ENGINE:
        source = manifest.PKG / rel
        if source.is_dir():
            shutil.copytree(source, pkg / rel, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(source, pkg / rel)
    shutil.copytree(FIXTURES / "labs", repo / "labs")
    shutil.copytree(FIXTURES / "kernels", repo / "kernels")
    git = ["git", "-C", str(repo), "-c", "user.email=t@example.org", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "install"], check=True)
    monkeypatch.setenv("ROADMAP_LABS_DIR", str(repo / "labs"))
    monkeypatch.setattr(manifest, "PKG", pkg)
    monkeypatch.setattr(manifest, "MANIFEST_FILE", tmp_path / "no-manifest.json")
    monkeypatch.delenv("ROADMAP_DEV_UNLOCKED", raising=False)

    lab = repo / "labs" / "adder"
    assert manifest.verify(lab).ok and manifest.verify(lab).source == "git"
    _workspace(run_cli, repo / "labs", tmp_path, monkeypatch)
    assert run_cli("grade", "--part", "add").exit_code == 0
    conftest = lab / "tests" / "conftest.py"
    conftest.write_text(conftest.read_text() + "\n# edited\n")
    _refused(run_cli("grade", "--part", "add"), conftest)
    channel = pkg / "grading" / "channel.py"
    subprocess.run([*git, "checkout", "--", "labs"], check=True)
    channel.write_text(channel.read_text() + "\n# edited\n")
    assert manifest.verify(lab).changed == str(channel)

    # The authors' escape hatch: the grade runs on changed files.
    monkeypatch.setenv("ROADMAP_DEV_UNLOCKED", "1")
    assert run_cli("grade", "--part", "add").exit_code == 0


def test_the_grader_never_reads_bytecode_planted_beside_its_modules(run_cli, tmp_path: Path, monkeypatch) -> None:
    labs = tmp_path / "labs"
    shutil.copytree(FIXTURES / "labs", labs)
    shutil.copytree(FIXTURES / "kernels", tmp_path / "kernels")
    monkeypatch.setenv("ROADMAP_LABS_DIR", str(labs))
    tests = labs / "adder" / "tests"
    # A module only the grader process imports, and a valid .pyc for it in tests/__pycache__
    # (its header matches the source's mtime and size) whose code fails.
    helper = tests / "grader_helper.py"
    helper.write_text("VALUE = 1\n")
    with (tests / "test_add.py").open("a") as f:
        f.write("\n\ndef test_helper():\n    import grader_helper\n    assert grader_helper.VALUE == 1\n")
    st = helper.stat()
    planted = Path(importlib.util.cache_from_source(str(helper)))
    if sys.pycache_prefix:  # the test process's own prefix would place it elsewhere
        planted = helper.parent / "__pycache__" / f"grader_helper.{sys.implementation.cache_tag}.pyc"
    planted.parent.mkdir(exist_ok=True)
    from importlib._bootstrap_external import _code_to_timestamp_pyc

    code = compile("raise RuntimeError('planted bytecode ran')\n", str(helper), "exec")
    planted.write_bytes(_code_to_timestamp_pyc(code, int(st.st_mtime), st.st_size))
    _workspace(run_cli, labs, tmp_path, monkeypatch)

    data = run_cli("grade", "--part", "add", "--json").json()["data"]
    assert data["parts"][0]["status"] == "passed", data["parts"][0]

    # Without the private prefix (the grader's old `-B`), the planted file is what runs: the test above can fail.
    from roadmap_cli.grading import launch

    monkeypatch.setattr(launch, "pycache_args", lambda: ["-B"])
    data = run_cli("grade", "--part", "add", "--json").json()["data"]
    assert data["parts"][0]["status"] == "failed" and "planted bytecode ran" in data["parts"][0]["message"]
