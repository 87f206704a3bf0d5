"""QA of the learner journey through the real CLI, on the fake `adder` lab:
text that looks like rich markup, workspaces that vanish or lose git, files
the workspace ignores, and mistakes that must stay one clean line."""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures_labs"


@pytest.fixture(autouse=True)
def fake_labs(monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ROADMAP_LABS_DIR", str(FIXTURES / "labs"))
    monkeypatch.setenv("ROADMAP_DEVICE", "cpu")
    from roadmap_cli.labs.device import detect_device

    detect_device.cache_clear()
    yield FIXTURES / "labs"
    detect_device.cache_clear()


def start(run_cli, ws: Path) -> Path:
    result = run_cli("lab", "start", "adder", "--dir", str(ws))
    assert result.exit_code == 0, result
    return ws


# ------------------------------------------------------------------ text is data, not markup


def test_hint_text_is_shown_verbatim(run_cli) -> None:
    run_cli("lab", "hint", "adder")
    second = run_cli("lab", "hint", "adder")
    assert second.exit_code == 0, second
    assert "C[m, n] sums A[m, k] * B[k, n] over k." in second.stdout.replace("\n", " ")


def test_failure_messages_and_paths_with_brackets_are_shown_verbatim(
    run_cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = tmp_path / "ws [bold]1 ü"
    started = run_cli("lab", "start", "adder", "--dir", str(ws))
    assert started.exit_code == 0, started
    assert "ws [bold]1 ü" in started.stdout
    # A learner message that rich would read as markup: `[/]` closes nothing (a MarkupError).
    (ws / "adder.py").write_text("def add(a, b):\n    raise AssertionError('out[i, j] is wrong [/]')\n")
    monkeypatch.chdir(ws)
    result = run_cli("grade", "--part", "add")
    assert result.exception is None, result
    assert result.exit_code == 1
    assert "out[i, j] is wrong [/]" in result.stderr  # the live progress line
    assert "out[i, j] is wrong [/]" in result.stdout  # the report below the table


def test_lab_list_never_breaks_an_id(run_cli) -> None:
    from rich.console import Console

    from roadmap_cli.cli import lab_render

    row = {
        "id": "paged-kv-cache",
        "stage": 5,
        "title": {"en": "Paged KV cache, prefix caching and batching"},
        "state": "in-progress",
        "best_score": 0,
        "max_score": 95,
        "gradable_here": False,
        "parts_not_gradable_here": ["performance"],
    }
    console = Console(width=60, record=True, color_system=None)
    lab_render.lab_list(console, {"device": "cpu", "labs": [row], "invalid": {}})
    assert "paged-kv-cache" in console.export_text()


# ------------------------------------------------------------------ nothing a learner wrote is lost


def test_reset_keeps_files_the_workspace_ignores(run_cli, tmp_path: Path) -> None:
    ws = start(run_cli, tmp_path / "ws")
    (ws / ".gitignore").write_text("out/\n")
    (ws / "out").mkdir()
    (ws / "out" / "ckpt.pt").write_bytes(b"hours of training")
    (ws / "adder.py").write_text("def add(a, b):\n    return a + b  # mine\n")
    result = run_cli("lab", "reset", "adder")
    assert result.exit_code == 0, result
    assert (ws / "out" / "ckpt.pt").read_bytes() == b"hours of training"  # not in git: kept in place
    assert "NotImplementedError" in (ws / "adder.py").read_text()  # back to the starter
    from git import Repo

    saved = Repo(ws).commit(result.stdout.split("commit ")[1].split()[0])
    assert "# mine" in (saved.tree / "adder.py").data_stream.read().decode()


def test_start_force_keeps_files_the_workspace_ignores(run_cli, tmp_path: Path) -> None:
    ws = start(run_cli, tmp_path / "ws")
    (ws / ".gitignore").write_text("*.log\n")
    (ws / "train.log").write_text("epoch 1\n")
    result = run_cli("lab", "start", "adder", "--dir", str(ws), "--force")
    assert result.exit_code == 0, result
    assert (ws / "train.log").read_text() == "epoch 1\n"
    assert "NotImplementedError" in (ws / "adder.py").read_text()


# ------------------------------------------------------------------ vanished workspaces


def test_grade_inside_a_deleted_workspace_says_how_to_recreate_it(
    run_cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = start(run_cli, tmp_path / "ws")
    monkeypatch.chdir(ws)
    monkeypatch.setenv("PWD", str(ws))  # what the shell keeps when the folder is deleted under it
    shutil.rmtree(ws)
    for args in (["grade"], ["grade", "adder"], ["lab", "reset"]):
        result = run_cli(*args)
        assert result.exception is None, (args, result)
        assert result.exit_code == 2, (args, result)
        assert f"roadmap lab start adder --dir {shlex.quote(str(ws.resolve()))}`" in result.stderr, (args, result)
    status = run_cli("lab", "status")
    assert status.exit_code == 0 and status.exception is None, status
    path = run_cli("lab", "path", "adder")
    assert path.exit_code == 2 and path.stdout == "" and "is gone" in path.stderr, path
    monkeypatch.delenv("PWD")
    result = run_cli("grade")
    assert result.exit_code == 2 and "current directory no longer exists" in result.stderr, result


def test_reset_without_git_names_the_start_command_for_that_folder(run_cli, tmp_path: Path) -> None:
    ws = start(run_cli, tmp_path / "my ws")
    shutil.rmtree(ws / ".git")
    result = run_cli("lab", "reset", "adder")
    assert result.exit_code == 2, result
    assert f"roadmap lab start adder --dir {shlex.quote(str(ws.resolve()))} --force" in result.stderr


# ------------------------------------------------------------------ mistakes are one line


def test_grade_mistakes_are_exactly_one_line(run_cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = start(run_cli, tmp_path / "ws")
    monkeypatch.chdir(ws)
    result = run_cli("grade", "--part", "zzz")
    assert result.exit_code == 2
    assert result.stderr == "error: unknown part of adder 'zzz' (its parts: add, mul, speed, gpu)\n"
    result = run_cli("grade", "nope")
    assert result.exit_code == 2 and result.stderr == "error: unknown lab 'nope' (see `roadmap lab list`)\n"


def test_status_lists_cuda_only_parts_once_not_in_every_attempt(
    run_cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = start(run_cli, tmp_path / "ws")
    monkeypatch.chdir(ws)
    for _ in range(2):
        run_cli("grade", "--part", "add")
    status = run_cli("lab", "status")
    assert status.exit_code == 0, status
    assert status.stdout.count("gpu") == 1  # in "not graded here (needs a CUDA GPU): gpu"


def test_reset_keeps_a_git_repository_cloned_inside_the_workspace(run_cli, tmp_path: Path) -> None:
    """The outer commit holds only a link to a nested repository, not its
    files: deleting the folder would lose whatever was in it."""
    from git import Actor, Repo

    ws = start(run_cli, tmp_path / "ws")
    nested = Repo.init(ws / "reference")
    (ws / "reference" / "notes.md").write_text("my notes\n")
    nested.index.add(["notes.md"])
    nested.index.commit("notes", author=Actor("me", "me@x"), committer=Actor("me", "me@x"))
    (ws / "reference" / "draft.md").write_text("not committed anywhere\n")
    result = run_cli("lab", "reset", "adder")
    assert result.exit_code == 0, result
    assert (ws / "reference" / "draft.md").read_text() == "not committed anywhere\n"
    assert (ws / "reference" / "notes.md").read_text() == "my notes\n"


def test_lab_show_in_chinese_starts_with_the_chinese_title_and_summary(run_cli) -> None:
    result = run_cli("--lang", "zh", "lab", "show", "adder")
    assert result.exit_code == 0, result
    assert result.stdout.startswith("加法器（引擎测试实验）\n引擎测试用的小实验。")
    english = run_cli("--lang", "en", "lab", "show", "adder")
    assert "加法器" not in english.stdout
    assert run_cli("lab", "show", "adder", "--json").json()["data"]["summary"]["zh"] == "引擎测试用的小实验。"


def test_crash_report_shows_a_unicode_workspace_path_as_written(
    run_cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = start(run_cli, tmp_path / "练习 ü")
    shutil.copy(FIXTURES / "variants" / "abort_adder.py", ws / "adder.py")
    monkeypatch.chdir(ws)
    result = run_cli("grade", "--part", "add", "--json")
    data = result.json()["data"]
    assert data["outcome"] == "failed", result  # a learner crash fails its tests, not the grade
    crashed = next(t for t in data["tests"] if t["outcome"] == "crashed")
    assert f'{ws.resolve() / "adder.py"}", line 5 in add' in crashed["message"]


def test_a_syntax_error_names_the_learners_file_not_pythons_import_machinery(
    run_cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = start(run_cli, tmp_path / "ws")
    (ws / "adder.py").write_text("def add(a, b):\n    return a +\n")
    monkeypatch.chdir(ws)
    result = run_cli("grade", "--part", "add", "--json")
    assert result.exit_code == 1, result
    # Found by the pre-check (grading/precheck.py) before pytest starts: no test ran.
    data = result.json()["data"]
    failed = next(p for p in data["parts"] if p["status"] == "failed")
    assert data["tests"] == [] and data["precheck"]["file"] == "adder.py"
    assert "SyntaxError" in failed["message"] and "adder.py:2:" in failed["message"]
    assert "<frozen" not in failed["message"]


def test_lab_start_without_git_is_one_line(tmp_path: Path) -> None:
    """gitpython raises a long ImportError on import when git cannot be found;
    a subprocess, because this test process has imported gitpython already."""
    import os
    import subprocess
    import sys

    env = dict(
        os.environ,
        ROADMAP_HOME=str(tmp_path / "home"),
        ROADMAP_LABS_DIR=str(FIXTURES / "labs"),
        GIT_PYTHON_GIT_EXECUTABLE=str(tmp_path / "no-such-git"),
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "from roadmap_cli.cli import main; main()",
            "lab",
            "start",
            "adder",
            "--dir",
            str(tmp_path / "ws"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("error: git is not installed") and proc.stderr.count("\n") == 1, proc.stderr
    assert not (tmp_path / "ws").exists()


def test_start_force_in_the_current_folder_says_the_shell_is_left_in_the_old_copy(
    run_cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = tmp_path / "mylab"
    ws.mkdir()
    (ws / "notes.txt").write_text("mine\n")  # not a git repository: moved aside
    monkeypatch.chdir(ws)
    result = run_cli("lab", "start", "adder", "--dir", ".", "--force")
    assert result.exit_code == 0, result
    moved = next(tmp_path.glob("mylab.old-*"))
    assert (moved / "notes.txt").read_text() == "mine\n"
    assert f"Your shell is still in the old folder: cd {ws.resolve()}" in result.stdout
    elsewhere = run_cli("lab", "start", "adder", "--dir", str(tmp_path / "other"))
    assert "still in the old folder" not in elsewhere.stdout


def test_git_hooks_from_a_template_do_not_block_start_or_reset(
    run_cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    template = tmp_path / "template"
    (template / "hooks").mkdir(parents=True)
    hook = template / "hooks" / "pre-commit"
    hook.write_text("#!/bin/sh\necho 'lint failed' >&2\nexit 1\n")
    hook.chmod(0o755)
    monkeypatch.setenv("GIT_TEMPLATE_DIR", str(template))  # what `git config init.templateDir` does
    ws = start(run_cli, tmp_path / "ws")
    assert (ws / ".git" / "hooks" / "pre-commit").exists()
    (ws / "adder.py").write_text("def add(a, b):\n    return a + b\n")
    result = run_cli("lab", "reset", "adder")
    assert result.exit_code == 0 and result.exception is None, result


def test_reset_when_git_cannot_save_the_work_is_one_line_and_changes_nothing(run_cli, tmp_path: Path) -> None:
    ws = start(run_cli, tmp_path / "ws")
    from git import Repo

    Repo.init(ws / "reference")  # a repository without commits: `git add -A` refuses it
    (ws / "reference" / "a.txt").write_text("x\n")
    (ws / "adder.py").write_text("def add(a, b):\n    return a + b  # mine\n")
    result = run_cli("lab", "reset", "adder")
    assert result.exception is None and result.exit_code == 2, result
    assert "does not have a commit checked out" in result.stderr and "nothing was changed" in result.stderr
    assert "# mine" in (ws / "adder.py").read_text()


def test_grade_in_a_workspace_with_a_damaged_git_repository_still_grades(
    run_cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = start(run_cli, tmp_path / "ws")
    (ws / ".git" / "index").write_text("garbage")  # `git diff --cached` now fails
    monkeypatch.chdir(ws)
    result = run_cli("grade", "--part", "add", "--json")
    assert result.exception is None and result.exit_code == 1, result  # the starter fails: graded
    data = result.json()["data"]
    assert len(data["commit_sha"]) == 40 and data["dirty"] is None


def test_reset_with_a_damaged_git_repository_is_one_line_and_changes_nothing(run_cli, tmp_path: Path) -> None:
    ws = start(run_cli, tmp_path / "ws")
    (ws / "adder.py").write_text("def add(a, b):\n    return a + b  # mine\n")
    (ws / ".git" / "index").write_text("garbage")
    for args in (["lab", "reset", "adder"], ["lab", "start", "adder", "--dir", str(ws), "--force"]):
        result = run_cli(*args)
        assert result.exception is None and result.exit_code == 2, (args, result)
        assert "cannot read the git repository" in result.stderr and "index file" in result.stderr, result
        assert "# mine" in (ws / "adder.py").read_text()


def test_hint_and_solution_infer_the_lab_inside_a_workspace(
    run_cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    outside = run_cli("lab", "hint")
    assert outside.exit_code == 2 and "not inside a lab workspace" in outside.stderr, outside
    ws = start(run_cli, tmp_path / "ws")
    monkeypatch.chdir(ws)
    hint = run_cli("lab", "hint", "--json")
    assert hint.exit_code == 0 and hint.json()["data"]["lab"] == "adder", hint
    solution = run_cli("lab", "solution")
    assert solution.exit_code == 2 and "solution of adder" in solution.stderr, solution


def test_start_in_a_folder_that_cannot_be_created_is_one_line(run_cli, tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("x")
    result = run_cli("lab", "start", "adder", "--dir", str(tmp_path / "a-file" / "ws"))
    assert result.exception is None and result.exit_code == 2, result
    assert result.stderr.startswith("error: cannot create the workspace") and result.stderr.count("\n") == 1


def test_training_outputs_stay_out_of_git_and_survive_reset(run_cli, tmp_path):
    """A checkpoint under out/ is ignored by the default .gitignore, so a reset
    keeps it in place instead of committing (or deleting) hundreds of MB."""
    import git

    ws = tmp_path / "ws"
    assert run_cli("lab", "start", "adder", "--dir", str(ws)).exit_code == 0
    (ws / "out").mkdir()
    (ws / "out" / "ckpt.pt").write_bytes(b"weights")
    assert run_cli("lab", "reset", "adder").exit_code == 0
    assert (ws / "out" / "ckpt.pt").read_bytes() == b"weights"
    tracked = git.Repo(ws).git.ls_files()
    assert "out/ckpt.pt" not in tracked
