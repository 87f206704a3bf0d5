"""`roadmap quiz` and `roadmap review` through the real CLI: answers from a
file, from piped stdin, and at a real pseudo-terminal."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from roadmap_cli.curriculum import load_curriculum
from roadmap_cli.paths import default_curriculum_path
from roadmap_cli.quiz.checking import LETTERS, shown_order

CP = "s1-explain-query-key-value"


def right_answer(question) -> str:
    """The right answer as a learner would type it (computed, never hard-coded)."""
    if question.kind == "numeric":
        return repr(question.answer)
    if question.kind == "choice":
        return LETTERS[shown_order(question).index(question.correct_index)]
    if question.kind == "ordering":
        order = shown_order(question)
        return " ".join(LETTERS[order.index(i)] for i in range(len(order)))
    return "good"


@pytest.fixture(scope="module")
def cur():
    return load_curriculum(default_curriculum_path())


def answers_file(tmp_path: Path, answers: dict) -> str:
    path = tmp_path / "answers.json"
    path.write_text(json.dumps(answers))
    return str(path)


def test_quiz_passed_is_evidence_in_stage_show(run_cli, cur, tmp_path):
    questions = cur.quiz_for(CP).questions
    result = run_cli(
        "quiz", CP, "--answers", answers_file(tmp_path, {q.id: right_answer(q) for q in questions}), "--json"
    )
    assert result.exit_code == 0, result
    [res] = result.json()["data"]["results"]
    assert (res["checkpoint"], res["correct"], res["total"], res["passed"]) == (
        CP,
        len(questions),
        len(questions),
        True,
    )
    shown = run_cli("stage", "show", "1", "--json").json()["data"]["checkpoints"]
    assert next(c for c in shown if c["id"] == CP)["quiz"]["passed"] is True
    text = run_cli("stage", "show", "1").stdout
    assert f"{CP}  quiz {len(questions)}/{len(questions)}" in text


def test_quiz_below_80_percent_is_recorded_but_not_passed(run_cli, cur, tmp_path):
    questions = cur.quiz_for(CP).questions
    answers = {q.id: right_answer(q) for q in questions}
    numeric = next(q for q in questions if q.kind == "numeric")
    answers[numeric.id] = str(numeric.answer * 2)
    result = run_cli("quiz", CP, "--answers", answers_file(tmp_path, answers))
    assert result.exit_code == 0, result
    assert f"quiz {len(questions) - 1}/{len(questions)}  not passed" in result.stdout
    assert "✗" in result.stdout and "100.0% off" in result.stdout


def test_quiz_stage_answers_from_stdin(run_cli, cur):
    questions = [q for quiz in cur.quizzes if cur.stage_of(quiz.checkpoint).number == 9 for q in quiz.questions]
    answers = json.dumps({q.id: right_answer(q) for q in questions})
    result = run_cli("quiz", "9", "--answers", "-", "--json", input=answers)
    assert result.exit_code == 0, result
    assert all(r["passed"] for r in result.json()["data"]["results"])


def test_quiz_mistakes_are_one_line_and_record_nothing(run_cli, cur, tmp_path):
    questions = cur.quiz_for(CP).questions
    partial = answers_file(tmp_path, {questions[0].id: right_answer(questions[0])})
    result = run_cli("quiz", CP, "--answers", partial)
    assert result.exit_code == 2 and "no answer for" in result.stderr and "Traceback" not in result.stderr
    unreadable = answers_file(tmp_path, {q.id: "banana" if q.kind == "numeric" else right_answer(q) for q in questions})
    result = run_cli("quiz", CP, "--answers", unreadable)
    assert result.exit_code == 2 and "nothing was recorded" in result.stderr
    result = run_cli("quiz", "s1-explain-query-kye-value")
    assert result.exit_code == 2 and "s1-explain-query-key-value" in result.stderr  # did you mean
    result = run_cli("quiz", "s5-understand-continuous-batching")
    assert result.exit_code == 2 and "has no quiz questions (stages with quizzes: 1, 5, 6, 7, 9, 10)" in result.stderr
    assert run_cli("stage", "show", "1", "--json").json()["data"]["checkpoints"][2]["quiz"] is None


def test_quiz_json_lists_questions_without_answers(run_cli):
    data = run_cli("quiz", CP, "--json").json()["data"]
    [entry] = data["checkpoints"]
    text = json.dumps(entry)
    assert entry["checkpoint"] == CP and len(entry["questions"]) >= 3
    assert "correct" not in text and "formula" not in text and "model_answer" not in text


def test_quiz_interactive_from_piped_stdin(run_cli, cur):
    questions = cur.quiz_for(CP).questions
    lines = []
    for q in questions:
        if q.kind == "recall":
            lines += ["my own answer", "hard"]
        else:
            lines += ["not a number at all"] if q.kind == "numeric" else []  # asked again, not counted
            lines.append(right_answer(q))
    result = run_cli("quiz", CP, input="\n".join(lines) + "\n")
    assert result.exit_code == 0, result
    assert "is not a number" in result.stdout and "model answer" in result.stdout
    assert f"quiz {len(questions)}/{len(questions)}  passed" in result.stdout
    result = run_cli("quiz", CP, input="1\n")  # input ends early
    assert result.exit_code == 2 and "nothing was recorded" in result.stderr


def test_review_after_check_and_status_count(run_cli, cur, tmp_path):
    assert run_cli("check", "s1-draw-transformer-block").exit_code == 0
    status = run_cli("status", "--json").json()["data"]
    assert status["reviews"] == {"due": 0, "new": 1}
    assert "Reviews 1 due today (1 never reviewed)" in run_cli("status").stdout
    listing = run_cli("review", "--json").json()["data"]["due"]
    assert [d["item"] for d in listing] == ["checkpoint:s1-draw-transformer-block"] and listing[0]["new"]
    result = run_cli(
        "review",
        "--answers",
        answers_file(tmp_path, {"s1-draw-transformer-block": "good", "s1-qkv-scale-factor": "11.3"}),
        "--json",
    )
    assert result.exit_code == 0, result
    data = result.json()["data"]
    assert [r["item"] for r in data["reviewed"]] == ["checkpoint:s1-draw-transformer-block"]
    assert data["reviewed"][0]["next"].startswith("in 2 days") and data["not_due"] == ["s1-qkv-scale-factor"]
    assert run_cli("status", "--json").json()["data"]["reviews"] == {"due": 0, "new": 0}
    assert "Nothing due for review" in run_cli("review").stdout


def test_review_and_status_do_not_import_fsrs_or_torch(tmp_path):
    probe = (
        "import sys\nfrom roadmap_cli.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
        "sys.stderr.write('PROBE' + ','.join(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('fsrs', 'torch', 'triton', 'numpy'))) + '\\n')"
    )
    env = {"ROADMAP_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
    for args in (["status"], ["review", "--json"], ["review"]):
        proc = subprocess.run(
            [sys.executable, "-c", probe, *args], capture_output=True, text=True, env=env, timeout=120
        )
        line = [ln for ln in proc.stderr.splitlines() if ln.startswith("PROBE")]
        assert line == ["PROBE"], (args, proc.stderr[-2000:])


def test_quiz_at_a_real_terminal(tmp_path, cur):
    pexpect = pytest.importorskip("pexpect")
    env = dict(os.environ, ROADMAP_HOME=str(tmp_path / "home"), ROADMAP_LANG="en", COLUMNS="100")
    child = pexpect.spawn(
        sys.executable,
        ["-c", "from roadmap_cli.cli import main; main()", "quiz", CP],
        env=env,
        encoding="utf-8",
        timeout=60,
    )
    for q in cur.quiz_for(CP).questions:
        if q.kind == "recall":
            child.expect("Enter shows the model answer")
            child.sendline("")
            child.expect("again / hard / good / easy")
            child.sendline("easy")
        else:
            child.expect("answer: ")
            child.sendline(right_answer(q))
            child.expect("right")
    child.expect("passed")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


def test_quiz_and_review_rows_belong_to_the_current_learner(run_cli, cur, tmp_path, monkeypatch):
    questions = cur.quiz_for(CP).questions
    answers = answers_file(tmp_path, {q.id: right_answer(q) for q in questions})
    monkeypatch.setenv("ROADMAP_LEARNER", "ada@example.org")
    assert run_cli("quiz", CP, "--answers", answers).exit_code == 0
    assert run_cli("check", "s1-draw-transformer-block").exit_code == 0
    assert run_cli("status", "--json").json()["data"]["reviews"] == {"due": 0, "new": 1}
    monkeypatch.setenv("ROADMAP_LEARNER", "bob@example.org")
    assert run_cli("stage", "show", "1", "--json").json()["data"]["checkpoints"][2]["quiz"] is None
    assert run_cli("status", "--json").json()["data"]["reviews"] == {"due": 0, "new": 0}
    assert run_cli("review", "--json").json()["data"]["due"] == []
    monkeypatch.setenv("ROADMAP_LEARNER", "ada@example.org")
    assert run_cli("stage", "show", "1", "--json").json()["data"]["checkpoints"][2]["quiz"]["passed"] is True


def test_quiz_without_ref_uses_the_latest_stage_with_quizzes(run_cli, cur):
    for cp in cur.stage(1).checkpoints:  # stage 1 done: stage 2 (build only, no quizzes) is current
        assert run_cli("check", cp.id).exit_code == 0
    data = run_cli("quiz", "--json").json()["data"]
    assert [c["checkpoint"] for c in data["checkpoints"]] == [cp.id for cp in cur.stage(1).checkpoints]


def test_quiz_unreadable_unit_is_refused_and_asked_again_never_scored(run_cli, cur, tmp_path):
    cp = "s10-design-multi-gpu-inference"
    questions = cur.quiz_for(cp).questions
    weights = "s10-multigpu-70b-weights"  # 140 GB
    answers = {q.id: right_answer(q) for q in questions}
    answers[weights] = "140 gb"
    result = run_cli("quiz", cp, "--answers", answers_file(tmp_path, answers))
    assert result.exit_code == 2 and "Traceback" not in result.stderr
    assert weights in result.stderr and "'gb' is ambiguous" in result.stderr and "nothing was recorded" in result.stderr
    assert not any(c["quiz"] for c in run_cli("stage", "show", "10", "--json").json()["data"]["checkpoints"])
    # At the prompt: the same answer is asked again, then the right one counts.
    lines = []
    for q in questions:
        if q.kind == "recall":
            lines += ["my own answer", "good"]
        else:
            lines += ["140 gb"] if q.id == weights else []
            lines.append(right_answer(q))
    result = run_cli("quiz", cp, input="\n".join(lines) + "\n")
    assert result.exit_code == 0, result
    assert "'gb' is ambiguous" in result.stdout and "expected 140" not in result.stdout
    assert f"quiz {len(questions)}/{len(questions)}  passed" in result.stdout


def test_quiz_text_wraps_at_the_terminal_width_with_indented_continuations(cur):
    """At a 40-column terminal, the question, its options and the verdict's feedback wrap at 40 columns
    (between words), and an option's or a feedback line's continuation stays under its own indent."""
    import io

    from roadmap_cli.cli.quiz_render import show_question, show_verdict
    from roadmap_cli.formats.output import AdaptiveConsole
    from roadmap_cli.quiz.checking import Verdict

    out = io.StringIO()
    console = AdaptiveConsole(file=out, force_terminal=True, width=40, color_system=None, highlight=False)
    question = next(q for q in cur.quiz_for(CP).questions if q.kind == "choice")
    show_question(console, question, "en", "[1/3]")
    long = "the scaled dot product divides by the square root of the key dimension so that softmax stays soft"
    show_verdict(console, Verdict(question.id, "choice", "B", False, 1, "C", [long, long]))
    lines = out.getvalue().splitlines()
    assert lines and max(len(line) for line in lines) <= 40, [line for line in lines if len(line) > 40]
    feedback = lines[lines.index(next(line for line in lines if line.startswith("✗"))) + 1 :]
    assert len(feedback) > 2 and all(line.startswith("  ") for line in feedback), feedback
    options = [line for line in lines if line[:5].strip().endswith(")")]
    assert options and all(line.startswith("  ") for line in options)
