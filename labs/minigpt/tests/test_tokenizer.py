"""Part `tokenizer`: character tokenizer, byte-level BPE merges (exact, in
order), encoding, round-trips of any UTF-8 text, and a training time budget."""

from __future__ import annotations

import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import adapter
import reference
from conftest import CORPUS

SPECIAL = "<|endoftext|>"
# Original Chinese text (multi-byte UTF-8: 3 bytes per character), repeated so merges form.
CHINESE = ("我们从零开始实现一个小型的语言模型。分词器把文本切成词元，词元再变成向量。"
           "注意力让每个位置看见它前面的位置，模型因此学会预测下一个词元。"
           "训练之后，我们用它生成新的文本，看看它学会了多少。") * 3
BUDGET_VOCAB = 256 + 100
BUDGET_FACTOR = 5.0  # your training may take 5x the grader's own (incremental) trainer, measured in the same run


def _fixed_corpus() -> str:
    return CORPUS.read_text(encoding="utf-8")[:12000] + "\n" + CHINESE


@pytest.fixture(scope="module")
def fixed_corpus() -> str:
    return _fixed_corpus()


@pytest.fixture(scope="module")
def bpe(fixed_corpus):
    return adapter.train_bpe(fixed_corpus, 256 + 120 + 1, [SPECIAL])


def test_char_tokenizer_vocab_and_roundtrip(corpus_text):
    sample = corpus_text[1000:1400]
    facts = adapter.char_tokenizer(corpus_text, sample)
    vocab = reference.char_vocab(corpus_text)
    assert facts["vocab_size"] == len(vocab), (
        f"vocab_size is {facts['vocab_size']}, expected {len(vocab)}: the number of distinct characters (README.md, "
        "section 1.1)")
    expected = [vocab.index(ch) for ch in sample]
    assert facts["ids"] == expected, "ids must be positions in the sorted set of characters (README.md, section 1.1)"
    assert facts["decoded"] == sample, "decode(encode(text)) must give the text back (README.md, section 1.1)"


def test_char_tokenizer_refuses_characters_outside_the_vocabulary():
    text = "to be or not to be"
    for outside in ("Z", "to beé", "\n"):
        with pytest.raises(ValueError):
            adapter.char_encode(text, outside)


def test_merge_pair_is_left_to_right_and_non_overlapping():
    cases = [([5, 6, 5, 6, 6], (5, 6), 300, [300, 300, 6]), ([1, 1, 1], (1, 1), 256, [256, 1]),
             ([1, 1, 1, 1], (1, 1), 256, [256, 256]), ([7], (7, 7), 300, [7]), ([], (1, 2), 300, []),
             ([2, 1, 2, 1, 2], (1, 2), 999, [2, 999, 999])]
    for ids, pair, new, want in cases:
        got = adapter.merge_pair(ids, pair, new)
        assert got == want, f"merge_pair({ids}, {pair}, {new}) = {got}, expected {want} (README.md, section 1.2)"


def test_bpe_merges_equal_reference_in_order(bpe, fixed_corpus):
    expected = reference.bpe_train(fixed_corpus, 256 + 120 + 1, [SPECIAL])
    got = adapter.merges(bpe)
    for i, (g, e) in enumerate(zip(got, expected)):
        assert g == e, f"merge #{i} (token {256 + i}) is {g}, expected {e} (README.md, section 1.2)"
    assert len(got) == len(expected), f"{len(got)} merges, expected {len(expected)}"


def test_bpe_ties_go_to_the_smallest_pair():
    # Every pair occurs exactly once: the order is decided by the tie-break alone.
    text = "ab cd xy"
    expected = reference.bpe_train(text, 256 + 4)
    got = adapter.merges(adapter.train_bpe(text, 256 + 4))
    assert got == expected, f"with equal counts the smallest pair (a, b) must win: got {got}, expected {expected}"


def test_bpe_special_tokens_and_vocab_size(bpe):
    facts = adapter.bpe_facts(bpe)
    assert facts["vocab_size"] == 256 + 120 + 1, f"vocab_size {facts['vocab_size']}, expected {256 + 120 + 1}"
    ids = adapter.encode(bpe, f"to be{SPECIAL}or not")
    assert 256 + 120 in ids, f"{SPECIAL!r} must encode to the single id {256 + 120} (after the merges)"
    assert ids.count(256 + 120) == 1
    assert adapter.decode(bpe, [256 + 120]) == SPECIAL


SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|im_start|>user"]


def test_several_special_tokens_longest_first(fixed_corpus):
    vocab_size = 256 + 40 + len(SPECIALS)
    tok = adapter.train_bpe(fixed_corpus, vocab_size, SPECIALS)
    facts = adapter.bpe_facts(tok)
    merges = reference.bpe_train(fixed_corpus, vocab_size, SPECIALS)
    want_ids = {s: 256 + len(merges) + i for i, s in enumerate(SPECIALS)}
    assert facts["merges"] == merges, "merges with 4 special tokens differ from the reference (README.md, section 1.2)"
    assert facts["special_tokens"] == want_ids, (
        f"special token ids {facts['special_tokens']}, expected {want_ids}: in the order given, right after the last "
        "merge (README.md, section 1.2)")
    text = "<|im_start|>user hi<|im_end|><|im_start|>assistant to be<|endoftext|><|im_end|>"
    expected = reference.bpe_encode(text, merges, want_ids)
    got = adapter.encode(tok, text)
    assert got == expected, (f"encode with several special tokens: {got}, expected {expected} (a special token that "
                             "contains another must win: split longest first; README.md, section 1.3)")
    assert adapter.decode(tok, got) == text


def test_vocab_size_larger_than_the_possible_merges():
    text = "aaa ab ba"  # only a few pairs exist: training must stop when none is left
    tok = adapter.train_bpe(text, 256 + 50, ["<|endoftext|>", "<|pad|>"])
    facts = adapter.bpe_facts(tok)
    merges = reference.bpe_train(text, 256 + 50, ["<|endoftext|>", "<|pad|>"])
    assert facts["merges"] == merges, f"merges {facts['merges']}, expected {merges}: stop early when no pair is left"
    first = 256 + len(merges)
    assert facts["special_tokens"] == {"<|endoftext|>": first, "<|pad|>": first + 1}, (
        f"special tokens {facts['special_tokens']}: they take the ids right after the LAST LEARNED merge, "
        f"{first} and {first + 1}, even when fewer merges than asked were possible (README.md, section 1.2)")
    assert facts["vocab_size"] == first + 2, (
        f"vocab_size {facts['vocab_size']}, expected {first + 2} (256 bytes + {len(merges)} merges + 2 specials)")
    assert adapter.roundtrip(tok, "abba<|pad|>🙂 z") == "abba<|pad|>🙂 z"


def test_vocab_size_bounds():
    text = "hello hello world"
    tok = adapter.train_bpe(text, 256 + 1, ["<|endoftext|>"])  # room for the special token only: no merge
    facts = adapter.bpe_facts(tok)
    assert facts["merges"] == [] and facts["special_tokens"] == {"<|endoftext|>": 256}, (
        f"vocab_size = 256 + number of specials means no merge: got {facts} (README.md, section 1.2)")
    with pytest.raises(ValueError):
        adapter.train_bpe(text, 256, ["<|endoftext|>"])  # no room for the special token


def test_decode_of_a_split_character_replaces_it():
    tok = adapter.train_bpe("abc", 256 + 2)
    ids = list("你".encode("utf-8"))  # three byte tokens; the first alone is not valid UTF-8
    assert adapter.decode(tok, ids[:1]) == "\ufffd", (
        "decode of an incomplete UTF-8 sequence must give U+FFFD: bytes.decode('utf-8', errors='replace') "
        "(README.md, section 1.3)")
    assert adapter.decode(tok, ids) == "你"


def test_characters_never_seen_in_training_encode_as_bytes():
    tok = adapter.train_bpe("the cat sat on the mat " * 5, 256 + 12)
    merges = reference.bpe_train("the cat sat on the mat " * 5, 256 + 12)
    for text in ("über 🙂 ☃", "the 猫 sat", "\x00\t\r\n"):
        want = reference.bpe_encode(text, merges, {})
        assert adapter.encode(tok, text) == want, (
            f"encode({text!r}) = {adapter.encode(tok, text)}, expected {want}: bytes with no merge stay single "
            "byte tokens (README.md, section 1.3)")
        assert adapter.roundtrip(tok, text) == text


def test_bpe_encode_equals_reference(bpe, fixed_corpus):
    merges = reference.bpe_train(fixed_corpus, 256 + 120 + 1, [SPECIAL])
    text = "MACBETH. So foul and fair a day I have not seen." + SPECIAL + CHINESE[:40] + " 1234 __init__ émigré 🙂"
    expected = reference.bpe_encode(text, merges, {SPECIAL: 256 + 120})
    got = adapter.encode(bpe, text)
    first = next((i for i, (g, e) in enumerate(zip(got, expected)) if g != e), min(len(got), len(expected)))
    assert got == expected, (f"encoded ids differ from the reference from position {first}: got {got[first:first + 8]}, "
                             f"expected {expected[first:first + 8]} (apply merges lowest rank first; README.md, section 1.3)")


def test_bpe_compresses_chinese(bpe):
    text = CHINESE[:60]
    ids = adapter.encode(bpe, text)
    assert len(ids) < len(text.encode("utf-8")), "the learned merges should apply to the Chinese text"
    assert adapter.decode(bpe, ids) == text


_pieces = st.one_of(st.text(max_size=24), st.sampled_from([SPECIAL, "你好，世界", " the", "\n\n", "'ll"]))


@settings(max_examples=100, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(st.lists(_pieces, max_size=6).map("".join))
def test_bpe_roundtrips_any_utf8(bpe, text):
    assert adapter.roundtrip(bpe, text) == text, f"decode(encode({text!r})) != the text (README.md, section 1.3)"


@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(max_size=80))
def test_bpe_trained_on_any_text_roundtrips_it(text):
    tok = adapter.train_bpe(text, 256 + 8)
    assert adapter.roundtrip(tok, text) == text, f"decode(encode({text!r})) != the text (README.md, section 1.3)"


def test_bpe_training_time_budget(corpus_text):
    start = time.perf_counter()
    expected = reference.bpe_train_fast(corpus_text, BUDGET_VOCAB, [SPECIAL])
    yardstick = time.perf_counter() - start
    start = time.perf_counter()
    tok = adapter.train_bpe(corpus_text, BUDGET_VOCAB, [SPECIAL])
    seconds = time.perf_counter() - start
    assert adapter.merges(tok) == expected, "merges on the whole lab corpus differ from the reference"
    budget = BUDGET_FACTOR * yardstick + 0.5
    assert seconds <= budget, (
        f"training a {BUDGET_VOCAB}-token vocabulary on the 200 KB lab corpus took {seconds:.1f} s; the budget "
        f"is {budget:.1f} s ({BUDGET_FACTOR:g}x the grader's trainer, {yardstick:.2f} s, + 0.5 s): count pairs "
        "over distinct chunks, and after a merge update only the chunks that contained the pair (README 1.2)")
