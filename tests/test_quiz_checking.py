"""Checking answers: numeric tolerance and units, choice explanations,
ordering, recall ratings (the FSRS rating each answer maps to)."""

from __future__ import annotations

import pytest

from roadmap_cli.curriculum import load_curriculum
from roadmap_cli.paths import default_curriculum_path
from roadmap_cli.quiz.checking import AGAIN, EASY, GOOD, HARD, LETTERS, AnswerProblem, check, shown_order
from roadmap_cli.curriculum.units import UnitProblem, convert, split_answer


@pytest.fixture(scope="module")
def cur():
    return load_curriculum(default_curriculum_path())


def q(cur, qid):
    return cur.question(qid)[0]


# ---------------------------------------------------------------- numeric


@pytest.mark.parametrize(
    "answer",
    [
        "524288",
        "524288 B",
        "524,288",
        "512 KiB",
        "512KiB",
        "0.5 MiB",
        "524.288 KB",
        "2*32*32*128*2",
        "2 * 32 * 32 * 128 * 2 B",
        "5.24288e5",
        "2**19 B",
        "520000",  # 0.8% off: inside the 1% tolerance
    ],
)
def test_numeric_right_answers_in_any_unit_of_the_quantity(cur, answer):
    verdict = check(q(cur, "s5-vllm-kv-bytes-per-token"), answer)
    assert verdict.correct and verdict.rating == GOOD, (answer, verdict.feedback)
    assert verdict.expected == "524,288 B (512 KiB)"


def test_numeric_outside_tolerance_is_wrong_and_says_by_how_much(cur):
    verdict = check(q(cur, "s5-vllm-kv-bytes-per-token"), "510000")
    assert not verdict.correct and verdict.rating == AGAIN
    assert "2.7% off (tolerance 1%)" in verdict.feedback[0]
    assert "2 * layers * kv_heads * head_dim * bytes = 524,288 B" in verdict.feedback[-1]


def test_numeric_decimal_prefix_for_binary_quantity_gets_a_hint(cur):
    verdict = check(q(cur, "s5-vllm-kv-bytes-per-token"), "512 KB")
    assert not verdict.correct
    assert any("KB is 1,000 bytes; KiB is 1024-based" in line for line in verdict.feedback), verdict.feedback


def test_numeric_unit_of_another_quantity_is_a_miss_that_says_so(cur):
    verdict = check(q(cur, "s5-vllm-kv-bytes-per-token"), "512 ms")
    assert not verdict.correct and verdict.rating == AGAIN
    assert "'ms' is a unit of time, but the question asks for a size in bytes (B)" in verdict.feedback[0]


@pytest.mark.parametrize(
    "qid, answer, unit, meant",
    [
        ("s5-vllm-kv-bytes-per-token", "512 kb", "kb", "write KB for 1,000 bytes or KiB for 1,024"),
        ("s5-vllm-kv-bytes-per-token", "512 Kb", "Kb", "write KB for 1,000 bytes or KiB for 1,024"),
        ("s5-vllm-kv-bytes-per-token", "0.5 mB", "mB", "write MB for 1,000,000 bytes or MiB for 1,048,576"),
        ("s5-vllm-kv-bytes-per-token", "512 KIB", "KIB", "write KiB for 1,024 bytes"),
        ("s10-multigpu-70b-weights", "140 gb", "gb", "write GB for 1,000,000,000 bytes or GiB for 1,073,741,824"),
        ("s10-multigpu-70b-weights", "140 Gb", "Gb", "GB for 1,000,000,000"),
        ("s5-vllm-kv-bytes-per-token", "512 furlongs", "furlongs", "the question asks for B"),
        ("s5-ttft-prefill-time", "70 MS", "MS", "did you mean ms?"),
        ("s5-vllm-blocks-for-sequence", "63 warps", "warps", "counted in blocks"),
    ],
)
def test_numeric_unreadable_units_are_refused_never_scored(cur, qid, answer, unit, meant):
    # Refused (asked again, an answers file refused whole), never a miss that reveals the answer.
    with pytest.raises(AnswerProblem) as refused:
        check(q(cur, qid), answer)
    message = str(refused.value)
    assert f"{unit!r}" in message and meant in message, message
    assert "KB" not in message or unit.lower() in ("kb", "kib"), message  # the gb message once talked about KB


def test_numeric_si_kilobyte_is_read_and_other_quantities_are_misses(cur):
    verdict = check(q(cur, "s5-vllm-kv-bytes-per-token"), "524.288 kB")  # SI's lower-case k
    assert verdict.correct, verdict.feedback
    verdict = check(q(cur, "s5-vllm-kv-bytes-per-token"), "512 kB")
    assert not verdict.correct and any("kB is 1,000 bytes; KiB is 1024-based" in f for f in verdict.feedback)
    verdict = check(q(cur, "s5-vllm-blocks-for-sequence"), "63 ms")  # readable, but a time: a miss
    assert not verdict.correct and "'ms' is a unit of time, but the question counts blocks" in verdict.feedback[0]


def test_numeric_time_and_label_units(cur):
    ttft = q(cur, "s5-ttft-prefill-time")  # 70 ms
    assert check(ttft, "70").correct and check(ttft, "0.07 s").correct and check(ttft, "70000 us").correct
    assert not check(ttft, "70 s").correct
    occupancy = q(cur, "s7-cuda-occupancy-registers-sm90")  # 50 %
    assert check(occupancy, "50%").correct and check(occupancy, "50").correct
    assert not check(occupancy, "0.5").correct  # a fraction is not a percentage
    blocks = q(cur, "s5-vllm-blocks-for-sequence")  # 63 blocks
    assert check(blocks, "63 blocks").correct and not check(blocks, "62.5").correct


@pytest.mark.parametrize("answer", ["", "banana", "12 34", "1/0", "__import__('os')"])
def test_numeric_unreadable_answers_are_asked_again(cur, answer):
    with pytest.raises(AnswerProblem):
        check(q(cur, "s5-vllm-kv-bytes-per-token"), answer)


def test_units_conversion_rules():
    assert convert(128, "KiB", "B") == 131072 and convert(131072, "B", "KiB") == 128
    assert convert(1, "GB/s", "B/s") == 1e9 and convert(1, "TFLOP/s", "GFLOP/s") == 1000
    with pytest.raises(UnitProblem):
        convert(1, "GB", "GB/s")
    assert split_answer("1e6") == ("1e6", "") and split_answer("3.35 TB/s") == ("3.35", "TB/s")


# ---------------------------------------------------------------- choice


def test_choice_right_by_letter_or_number(cur):
    question = q(cur, "s5-tps-preemption")
    order = shown_order(question)
    label = LETTERS[order.index(question.correct_index)]
    assert check(question, label).correct and check(question, label.upper() + ")").correct
    assert check(question, str(order.index(question.correct_index) + 1)).rating == GOOD


def test_choice_wrong_pick_explains_that_option(cur):
    question = q(cur, "s5-tps-preemption")
    order = shown_order(question)
    wrong = next(i for i in order if i != question.correct_index)
    verdict = check(question, LETTERS[order.index(wrong)])
    assert not verdict.correct and verdict.rating == AGAIN
    assert question.options[wrong].why.en in verdict.feedback[0]
    assert verdict.expected.startswith(LETTERS[order.index(question.correct_index)] + ") ")
    with pytest.raises(AnswerProblem):
        check(question, "z")


def test_options_are_shuffled_the_same_way_every_time(cur):
    choices = [x for quiz in cur.quizzes for x in quiz.questions if x.kind == "choice"]
    positions = {shown_order(x).index(x.correct_index) for x in choices}
    assert len(positions) >= 3  # the right answer is not always first
    assert all(shown_order(x) == shown_order(x) for x in choices)


# ---------------------------------------------------------------- ordering


def _labels_for(question, written_order):
    order = shown_order(question)
    return " ".join(LETTERS[order.index(i)] for i in written_order)


def test_ordering_exact_one_swap_and_wrong(cur):
    question = q(cur, "s1-attn-steps")
    n = len(question.items)
    assert check(question, _labels_for(question, range(n))).rating == GOOD
    assert check(question, _labels_for(question, range(n)).replace(" ", "")).correct
    swapped = [0, 2, 1] + list(range(3, n))
    verdict = check(question, _labels_for(question, swapped))
    assert not verdict.correct and verdict.rating == HARD
    assert verdict.feedback[0].startswith("step 2 should be")
    assert check(question, _labels_for(question, reversed(range(n)))).rating == AGAIN
    numbers = " ".join(str(shown_order(question).index(i) + 1) for i in range(n))
    assert check(question, numbers).correct
    for bad in ("a b", "a a b c d e", "hello"):
        with pytest.raises(AnswerProblem):
            check(question, bad)


# ---------------------------------------------------------------- recall


@pytest.mark.parametrize(
    "answer,rating,correct", [("again", AGAIN, False), ("h", HARD, True), ("3", GOOD, True), ("Easy", EASY, True)]
)
def test_recall_is_self_rated(cur, answer, rating, correct):
    verdict = check(q(cur, "s1-qkv-why-three-projections"), answer)
    assert (verdict.rating, verdict.correct) == (rating, correct)
    assert verdict.expected.startswith("Q says")
    with pytest.raises(AnswerProblem):
        check(q(cur, "s1-qkv-why-three-projections"), "meh")
