"""Quiz questions in curriculum.yaml: coverage, numeric answers recomputed
independently, the safe formula evaluator, and file:line:col validation."""

from __future__ import annotations

import ast
import math
from pathlib import Path

import pytest

from roadmap_cli.curriculum import load_curriculum, validate_curriculum
from roadmap_cli.curriculum.formula import FormulaError, evaluate, names_in
from roadmap_cli.paths import default_curriculum_path

# The stage-10 checkpoints are explain in the seed; helper "serving" makes them
# build checkpoints. Either way they keep their quizzes (useful for review).
STAGE_10 = [
    "s10-design-inference-service",
    "s10-analyze-production-performance",
    "s10-design-multi-gpu-inference",
    "s10-design-production-llm-platform",
]


@pytest.fixture(scope="module")
def cur():
    return load_curriculum(default_curriculum_path())


def _questions(cur):
    return [q for quiz in cur.quizzes for q in quiz.questions]


def test_every_explain_checkpoint_has_three_questions_in_both_languages(cur):
    explain = [c.id for c in cur.all_checkpoints() if c.kind == "explain"]
    assert len(explain) >= 12
    for cid in explain + STAGE_10:
        quiz = cur.quiz_for(cid)
        assert quiz is not None and len(quiz.questions) >= 3, cid
        for q in quiz.questions:
            assert q.prompt.zh != q.prompt.en, q.id  # zh really is Chinese, not a copy
    kinds = {q.kind for q in _questions(cur)}
    assert kinds == {"numeric", "choice", "ordering", "recall"}


def _independent(formula: str, inputs: dict) -> float:
    """Python itself on the formula (trusted: our own file), with math's
    functions: a second path to the answer, not the loader's evaluator."""
    code = compile(ast.parse(formula, mode="eval"), "<formula>", "eval")
    names = {"sqrt": math.sqrt, "ceil": math.ceil, "floor": math.floor, "log2": math.log2, "min": min, "max": max}
    return eval(code, {"__builtins__": {}}, {**names, **inputs})  # noqa: S307 - test-only, trusted input


def test_every_numeric_answer_recomputed_independently(cur):
    numeric = [q for q in _questions(cur) if q.kind == "numeric"]
    assert len(numeric) >= 20
    for q in numeric:
        assert q.answer == pytest.approx(_independent(q.formula, q.inputs), rel=1e-12), q.id
        assert names_in(q.formula) == set(q.inputs), q.id


def test_numeric_answers_agree_with_published_figures(cur):
    """Cross-checks against numbers published elsewhere (not typed into the curriculum)."""
    answer = {q.id: q.answer for q in _questions(cur) if q.kind == "numeric"}
    # GPT-2 small has 124,439,808 parameters: 12 blocks + token and position embeddings + ln_f.
    gpt2 = 12 * answer["s1-block-params-gpt2-small"] + answer["s1-lay-embedding-params"] + 1024 * 768 + 2 * 768
    assert gpt2 == 124_439_808
    assert answer["s5-vllm-kv-bytes-per-token"] == 512 * 1024  # Llama-2-7B: 0.5 MiB per token in fp16
    assert answer["s10-platform-kv-capacity"] * 128 * 1024 == 56 * 2**30  # Llama-3-8B: 128 KiB per token
    assert answer["s7-cuda-occupancy-registers-sm90"] == 50  # CUDA occupancy calculator, 64 regs x 256 threads
    assert answer["s9-flash-standard-hbm-traffic"] == 128 * 2**20


@pytest.mark.parametrize(
    "formula",
    [
        "__import__('os').system('true')",
        "x.__class__",
        "(1).real",
        "[1, 2]",
        "'a' * 3",
        "open('f')",
        "lambda: 1",
        "9 ** 9 ** 9",
        "10 ** 200",
        "1 / 0",
        "nope + 1",
        "max(*[1])",
        "True + 1",
    ],
)
def test_formula_evaluator_refuses(formula):
    with pytest.raises(FormulaError):
        evaluate(formula, {"x": 1.0})


def test_formula_evaluator_computes():
    assert (
        evaluate(
            "2 * layers * kv_heads * head_dim * bytes", {"layers": 32, "kv_heads": 32, "head_dim": 128, "bytes": 2}
        )
        == 524288
    )
    assert (
        evaluate(
            "ceil(a / b) + floor(2.5) - -1 + 7 // 2 + 7 % 4 + sqrt(16) + log2(8) + min(1, 2) + max(1, 2)",
            {"a": 1000, "b": 16},
        )
        == 63 + 2 + 1 + 3 + 3 + 4 + 3 + 1 + 2
    )
    assert names_in("ceil(a / b) * c") == {"a", "b", "c"}


BAD_QUIZZES = """
quizzes:
  - checkpoint: s1-a
    questions:
      - id: q-two-right
        kind: choice
        prompt: {zh: 问, en: ask}
        options:
          - {text: {zh: 一, en: one}, correct: true}
          - {text: {zh: 二, en: two}, correct: true}
      - id: q-no-why
        kind: choice
        prompt: {zh: 问, en: ask}
        options:
          - {text: {zh: 一, en: one}, correct: true}
          - {text: {zh: 二, en: two}}
      - id: q-evil
        kind: numeric
        prompt: {zh: 问, en: ask}
        formula: "__import__('os').getcwd()"
        explanation: {zh: 因, en: because}
      - id: q-typo
        kind: numeric
        prompt: {zh: 问, en: ask}
        formula: "a * b"
        inputs: {a: 2, b: 3}
        tolerence: 0.1
        explanation: {zh: 因, en: because}
      - id: q-two-right
        kind: recall
        prompt: {zh: 问, en: ask}
        model_answer: {zh: 答, en: answer}
  - checkpoint: s9-nowhere
    questions:
      - id: q-unused
        kind: numeric
        prompt: {zh: 问, en: ask}
        formula: "a * 2"
        inputs: {a: 2, spare: 3}
        unit: furlongs per fortnight and more words here
        explanation: {zh: 因, en: because}
"""

BASE = """format_version: 1
title: {zh: 标题, en: Title}
final_goal: {zh: 目标, en: Goal}
cadence: {weekly_hours: {min: 10, max: 15}}
stages:
  - number: 1
    id: one
    title: {zh: 一, en: One}
    goal: {zh: 目标, en: Goal}
    planned_weeks: 1
    checkpoints:
      - {id: s1-a, kind: explain, text: {zh: 甲, en: A}}
"""


def _line_of(text: str, needle: str, nth: int = 1) -> int:
    lines = [i + 1 for i, line in enumerate(text.splitlines()) if needle in line]
    return lines[nth - 1]


def test_bad_quizzes_are_reported_with_file_line_col(tmp_path: Path):
    path = tmp_path / "c.yaml"
    text = BASE + BAD_QUIZZES
    path.write_text(text, encoding="utf-8")
    problems = validate_curriculum(path)
    joined = "\n".join(problems)
    # pydantic's error (unknown key) is reported alone, at the key, with a did-you-mean
    assert (
        f"{path}:{_line_of(text, 'tolerence')}:9: quizzes[0].questions[3]: unknown key 'tolerence' (did you mean 'tolerance'?)"
        in joined
    ), joined
    path.write_text(text.replace("        tolerence: 0.1\n", ""), encoding="utf-8")
    text = path.read_text(encoding="utf-8")
    joined = "\n".join(validate_curriculum(path))
    assert (
        f":{_line_of(text, '- {text: {zh: 一, en: one}, correct: true}')}:" in joined
        and "exactly one option must be correct (found 2)" in joined
    )
    assert f":{_line_of(text, '- {text: {zh: 二, en: two}}')}:" in joined and "wrong option 2 needs a `why`" in joined
    assert f":{_line_of(text, '__import__')}:" in joined and "not allowed" in joined
    assert f":{_line_of(text, 'id: q-two-right', 2)}:" in joined and "duplicate question id 'q-two-right'" in joined
    assert f":{_line_of(text, 'checkpoint: s9-nowhere')}:" in joined and "unknown checkpoint 's9-nowhere'" in joined
    assert "input(s) spare not used" in joined
    assert "unit 'furlongs per fortnight and more words here' is neither" in joined
