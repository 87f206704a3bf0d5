"""Attempts numbered per lab, interrupted/timeout attempts recorded as such and
never "best", `lab history`, `lab diff`, and hints chosen by the failing part."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures_labs"
ADDER = FIXTURES / "labs" / "adder"


@pytest.fixture(autouse=True)
def fake_labs(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("ROADMAP_LABS_DIR", str(FIXTURES / "labs"))
    monkeypatch.setenv("ROADMAP_DEVICE", "cpu")
    from roadmap_cli.labs.device import detect_device

    detect_device.cache_clear()
    yield
    detect_device.cache_clear()


def _start(run_cli, tmp_path: Path, lab: str) -> Path:
    ws = tmp_path / lab
    assert run_cli("lab", "start", lab, "--dir", str(ws)).exit_code == 0
    return ws


def test_attempts_are_numbered_per_lab_and_diffed(run_cli, tmp_path: Path, monkeypatch) -> None:
    leaky = _start(run_cli, tmp_path, "leaky")
    adder = _start(run_cli, tmp_path, "adder")
    monkeypatch.chdir(leaky)
    run_cli("grade")  # leaky's attempt #1 (database id 1)
    monkeypatch.chdir(adder)
    first = run_cli("grade", "--json").json()["data"]
    assert first["attempt_number"] == 1 and first["attempt_id"] == 2
    shutil.copy(ADDER / "solution" / "adder.py", adder / "adder.py")
    second = run_cli("grade", "--json").json()["data"]
    assert second["attempt_number"] == 2

    history = run_cli("lab", "history", "--json").json()["data"]
    assert [a["number"] for a in history["attempts"]] == [2, 1] and history["total"] == 2
    assert {p["id"]: p["status"] for p in history["attempts"][0]["parts"]}["add"] == "passed"
    assert "attempt #3 of adder" in run_cli("grade", "--part", "add").stdout

    diff = run_cli("lab", "diff", "1", "2", "--json").json()["data"]
    fixed = {c["test"] for c in diff["changed"] if c["kind"] == "fixed"}
    assert "test_add.py::test_add_small" in fixed and diff["summary"]["broken"] == 0
    assert "test_add.py::test_add_small: failed → passed" in run_cli("lab", "diff", "1", "2").stdout
    missing = run_cli("lab", "diff", "1", "9")
    assert missing.exit_code == 2 and "no attempt #9" in missing.stderr


def test_timeout_is_recorded_as_such_and_not_best(run_cli, tmp_path: Path, monkeypatch) -> None:
    ws = _start(run_cli, tmp_path, "adder")
    monkeypatch.chdir(ws)
    shutil.copy(ADDER / "solution" / "adder.py", ws / "adder.py")
    # add passes quickly, then mul hangs past the limit.
    (ws / "mul.py").write_text("import time\n\ndef mul(a, b):\n    time.sleep(60)\n")
    timed_out = run_cli("grade", "--timeout", "4", "--json").json()["data"]
    assert timed_out["outcome"] == "timeout"
    row = run_cli("lab", "status", "--json").json()["data"]["labs"][0]
    assert row["history"][0]["outcome"] == "timeout"
    assert row["best_score"] == 0 and row["state"] == "in-progress"  # a killed run proves nothing
    assert "timeout (not counted)" in run_cli("lab", "history").stdout


def test_interrupted_run_is_recorded_as_interrupted(tmp_path: Path, run_cli, monkeypatch) -> None:
    import threading

    from roadmap_cli import context
    from roadmap_cli.grading.grade import grade

    ws = _start(run_cli, tmp_path, "adder")
    cancel = threading.Event()
    ctx = context.current()
    # Two failures of mul first: a grade would now offer a hint, an interrupted one must not.
    monkeypatch.chdir(ws)
    shutil.copy(ADDER / "solution" / "adder.py", ws / "adder.py")
    (ws / "mul.py").write_text("def mul(a, b):\n    return a + b\n")
    run_cli("grade", "--part", "mul")
    assert "failed twice in a row" in run_cli("grade", "--part", "mul").stdout
    (ws / "mul.py").write_text("import time\n\ndef mul(a, b):\n    time.sleep(60)\n")
    threading.Timer(3.0, cancel.set).start()
    outcome = grade(ctx.store, ctx.home, "adder", ws, part="mul", cancel=cancel)
    assert outcome.run.outcome == "interrupted" and outcome.run.exit_code == 130 and outcome.run.score == 0
    assert outcome.hint_offer is None
    history = run_cli("lab", "history", "adder", "--json").json()["data"]["attempts"]
    assert history[0]["outcome"] == "interrupted" and history[0]["counted"] is False


def test_hint_follows_the_part_that_failed_and_is_offered_after_two_failures(run_cli, tmp_path, monkeypatch) -> None:
    ws = _start(run_cli, tmp_path, "adder")
    monkeypatch.chdir(ws)
    shutil.copy(ADDER / "solution" / "adder.py", ws / "adder.py")
    once = run_cli("grade", "--part", "mul")
    assert "roadmap lab hint" not in once.stdout
    twice = run_cli("grade", "--part", "mul")
    assert "mul failed twice in a row: `roadmap lab hint` has a hint for it" in twice.stdout
    hint = run_cli("lab", "hint", "--json").json()["data"]
    # Hint 2 is the one for `mul`; in file order it would have been hint 1 (about add).
    assert hint["index"] == 2 and hint["for_part"] == "mul" and hint["new"] is True
    assert "hints seen: 1/2" in run_cli("lab", "status").stdout
    assert "roadmap lab hint" not in run_cli("grade", "--part", "mul").stdout  # nothing left for mul
    # mul's only hint is used up: the next `lab hint` says so, then gives add's, naming add.
    more = run_cli("lab", "hint")
    assert "mul: its hint is used up." in more.stdout
    assert "Hint 2/2, for part add (not mul): Use the + operator." in more.stdout  # numbered as shown
    again = run_cli("lab", "hint", "--json").json()["data"]
    assert again["new"] is False and again["part_used_up"] and again["index"] == 2  # mul's, repeated
    asked = run_cli("lab", "hint", "--part", "add", "--json").json()["data"]
    assert asked["for_part"] == "add" and asked["index"] == 1 and not asked["other_part"]
    wrong = run_cli("lab", "hint", "--part", "nope")
    assert wrong.exit_code == 2 and "add" in wrong.stderr and "Traceback" not in wrong.stderr


def test_a_lab_never_graded_says_so_not_best_zero(run_cli, tmp_path: Path) -> None:
    _start(run_cli, tmp_path, "adder")
    for args in (("status",), ("lab", "status", "adder")):
        out = run_cli(*args).stdout
        assert "not graded yet" in out and "best 0/" not in out, (args, out)
    assert "0/" not in next(line for line in run_cli("lab", "list").stdout.splitlines() if "adder" in line)
    run_cli("grade", "adder")
    assert "best 0/" in run_cli("lab", "status", "adder").stdout  # graded and failed: now a 0 means something


def test_the_first_hint_goes_to_a_part_not_passed_yet_and_is_numbered_one(run_cli, tmp_path, monkeypatch) -> None:
    """mul failed, then passed: the next hint is for add (still open), not mul, and reads "Hint 1/2"."""
    ws = _start(run_cli, tmp_path, "adder")
    monkeypatch.chdir(ws)
    run_cli("grade", "--part", "mul")  # the starter's mul fails
    (ws / "mul.py").write_text("def mul(a, b):\n    return a * b\n")
    assert run_cli("grade", "--part", "mul").exit_code == 0
    shown = run_cli("lab", "hint")
    assert shown.stdout.startswith("Hint 1/2 (add): Use the + operator."), shown.stdout
    nxt = run_cli("lab", "hint", "--json").json()["data"]
    # add's only hint is used up; mul passed, so its hint is the last one left (named, numbered 2)
    assert nxt["number"] == 2 and nxt["index"] == 2 and nxt["other_part"] and nxt["for_part"] == "add"


def test_the_triton_interpreter_is_named_only_for_labs_that_use_triton(run_cli, tmp_path, monkeypatch) -> None:
    """A CPU grade of a lab without Triton (adder) says `cpu`, never "(Triton interpreter)"."""
    ws = _start(run_cli, tmp_path, "adder")
    monkeypatch.chdir(ws)
    footer = run_cli("grade").stdout.strip().splitlines()[-1]
    assert footer.startswith("attempt #1 of adder") and "· cpu ·" in footer and "interpreter" not in footer, footer
    assert "(interpreter)" not in run_cli("lab", "history", "adder").stdout
    assert "(interpreter)" not in run_cli("lab", "status", "adder").stdout
    monkeypatch.delenv("ROADMAP_LABS_DIR")  # the shipped labs: which ones import triton, read from their files
    from roadmap_cli.labs.device import device_label, uses_triton

    assert {lab for lab in ("cuda-matmul", "flash-attention", "minigpt", "profiling") if uses_triton(lab)} == {
        "cuda-matmul",
        "flash-attention",
    }
    assert device_label("cpu", True, "flash-attention") == "cpu (Triton interpreter)"
    assert device_label("cpu", True, "minigpt") == device_label("cpu", False, "flash-attention") == "cpu"


def test_one_attempt_numbering_per_learner_per_lab(run_cli, tmp_path, monkeypatch) -> None:
    """Another learner's attempt takes database id 1; mine is still "attempt #1 of adder" in the grade's
    footer, in `lab history` and in the evidence of the checkpoint it marked (what `stage show` prints)."""
    monkeypatch.setenv("ROADMAP_LEARNER", "someone-else")
    monkeypatch.chdir(_start(run_cli, tmp_path / "other", "adder"))
    assert run_cli("grade").exit_code == 1
    monkeypatch.setenv("ROADMAP_LEARNER", "me")
    ws = _start(run_cli, tmp_path, "adder")
    monkeypatch.chdir(ws)
    shutil.copy(ADDER / "solution" / "adder.py", ws / "adder.py")
    graded = run_cli("grade", "--json").json()["data"]
    assert graded["attempt_id"] == 2 and graded["attempt_number"] == 1
    assert "attempt #2 of adder" in run_cli("grade", "--part", "add").stdout  # database id 3: numbered per learner
    numbers = [a["number"] for a in run_cli("lab", "history", "adder", "--json").json()["data"]["attempts"]]
    assert sorted(numbers) == [1, 2]
    from sqlmodel import select

    from roadmap_cli import context
    from roadmap_cli.store.tables import CheckpointProgress

    with context.current().store().session() as s:
        evidence = {
            row.checkpoint_id: row.evidence for row in s.exec(select(CheckpointProgress)) if row.learner == "me"
        }
    assert evidence["fake-add"] == "grade attempt #1 of adder", evidence


def test_after_several_failures_the_hint_goes_to_the_first_part_still_failing_in_part_order(
    run_cli, tmp_path, monkeypatch
) -> None:
    """Whole grades fail add and mul; the learner then grades mul alone, twice, and it fails: the next hint
    is for add (the first part still failing, in part order), and the offer names the exact command for
    mul's. Once add passes, the hint goes to mul, never to the part that just passed."""
    ws = _start(run_cli, tmp_path, "adder")
    monkeypatch.chdir(ws)
    run_cli("grade")
    run_cli("grade")
    run_cli("grade", "--part", "mul")
    offer = run_cli("grade", "--part", "mul").stdout
    assert "mul failed twice in a row: `roadmap lab hint --part mul` has a hint for it" in offer, offer
    hint = run_cli("lab", "hint", "--json").json()["data"]
    assert hint["for_part"] == "add" and hint["index"] == 1 and not hint["other_part"], hint
    shutil.copy(ADDER / "solution" / "adder.py", ws / "adder.py")
    assert run_cli("grade", "--part", "add").exit_code == 0  # add just passed
    after = run_cli("lab", "hint", "--json").json()["data"]
    assert after["for_part"] == "mul" and after["index"] == 2, after


def test_watch_h_gives_the_hint_for_the_part_watch_is_on(run_cli, tmp_path, monkeypatch) -> None:
    """`watch --part mul`, `h`: mul's hint, though add (earlier in part order) is failing too."""
    import io

    from roadmap_cli import context
    from roadmap_cli.grading.watch import Watcher

    ws = _start(run_cli, tmp_path, "adder")
    monkeypatch.chdir(ws)
    run_cli("grade")  # add and mul fail
    context.reset()
    out = io.StringIO()
    watcher = Watcher(context.current(), None, ws, part="mul", out=out)
    watcher._hint()
    assert "Hint 1/2 (mul)" in out.getvalue(), out.getvalue()
