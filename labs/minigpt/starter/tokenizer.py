"""Tokenizers: a character-level one for quick experiments and a byte-level BPE
(README.md, section 1).

What you will learn: why byte-level BPE can encode any UTF-8 text (Chinese,
emoji, anything) with no "unknown" token, how merges are learned from pair
counts, and why the order of merges (and how ties are broken) must be exact.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict

# The pre-tokenizer (given, do not change): text is first cut into chunks
# (words with their leading space, numbers, runs of punctuation, whitespace) and
# BPE merges never cross a chunk boundary. It is GPT-2's pattern written with the
# standard `re` module; every character of the input lands in exactly one chunk.
PRETOKENIZE_PATTERN = re.compile(r"'(?:s|t|re|ve|m|ll|d)| ?[^\W\d_]+| ?\d+| ?_+| ?[^\s\w]+|\s+(?!\S)|\s+")


def pretokenize(text: str) -> list[str]:
    """Cut text into chunks; "".join(pretokenize(t)) == t."""
    return PRETOKENIZE_PATTERN.findall(text)


class CharTokenizer:
    """One token per character. The vocabulary is the sorted set of characters of a text."""

    def __init__(self, text: str):
        # TODO (README.md, section 1.1): the vocabulary is the SORTED set of characters of text.
        # self.chars: list[str]        id -> character
        # self.stoi: dict[str, int]    character -> id
        raise NotImplementedError("CharTokenizer.__init__: see README.md, section 1.1")

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> list[int]:
        # TODO: one id per character; an unknown character raises ValueError.
        raise NotImplementedError("CharTokenizer.encode: see README.md, section 1.1")

    def decode(self, ids) -> str:
        raise NotImplementedError("CharTokenizer.decode: see README.md, section 1.1")


def merge_pair(ids: list[int], pair: tuple[int, int], new_id: int) -> list[int]:
    """Replace every non-overlapping occurrence of `pair` in ids (left to right) by new_id."""
    # TODO (README.md, section 1.2): scan left to right; when ids[i], ids[i+1] == pair,
    # emit new_id and skip both, otherwise emit ids[i]. Example:
    # merge_pair([5, 6, 5, 6, 6], (5, 6), 300) == [300, 300, 6]
    raise NotImplementedError("merge_pair: see README.md, section 1.2")


class BPETokenizer:
    """Byte-level BPE. Ids 0..255 are the raw bytes, 256.. are merges in the order
    they were learned, then the special tokens."""

    def __init__(self):
        self.merges: list[tuple[int, int]] = []  # merges[i] made token 256 + i
        self.vocab: dict[int, bytes] = {i: bytes([i]) for i in range(256)}  # id -> the bytes it stands for
        self.special_tokens: dict[str, int] = {}  # special string -> id
        self._ranks: dict[tuple[int, int], int] = {}
        self._cache: dict[str, list[int]] = {}

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def train(self, text: str, vocab_size: int, special_tokens: list[str] | tuple[str, ...] = ()) -> "BPETokenizer":
        """Learn vocab_size - 256 - len(special_tokens) merges from text.

        Each step merges the most frequent adjacent pair (counted inside chunks,
        weighted by how often the chunk occurs); ties go to the smallest pair (a, b).
        """
        # TODO (README.md, section 1.2):
        # 1. num_merges = vocab_size - 256 - len(special_tokens)
        # 2. count the chunks: Counter(pretokenize(text)); each distinct chunk is a list of its UTF-8 bytes
        # 3. repeat num_merges times (stop early if no pair is left):
        #      count adjacent pairs inside every chunk, weighted by the chunk's count;
        #      best = the most frequent pair; on a tie the SMALLEST pair (a, b);
        #      new id = 256 + len(self.merges); replace best everywhere (merge_pair);
        #      self.merges.append(best); self.vocab[new_id] = self.vocab[a] + self.vocab[b]
        # 4. special tokens get the ids right after the last merge, in the order given:
        #      self.special_tokens[s] = id, self.vocab[id] = s.encode("utf-8")
        # 5. self._ranks = {pair: rank}, clear self._cache; return self
        # Tip: recounting every pair after every merge is fine for a small text; README 1.2
        # shows how to update only the chunks a merge touches (needed for the time budget).
        raise NotImplementedError("BPETokenizer.train: see README.md, section 1.2")

    def _encode_chunk(self, chunk: str) -> list[int]:
        # TODO (README.md, section 1.3): start from the chunk's UTF-8 bytes; while two or more
        # ids remain, find the adjacent pair with the LOWEST rank (the earliest merge) and merge
        # it; stop when no adjacent pair is a known merge. (Cache results in self._cache.)
        raise NotImplementedError("BPETokenizer._encode_chunk: see README.md, section 1.3")

    def encode(self, text: str) -> list[int]:
        # TODO (README.md, section 1.3): split text on the special tokens first (longest first,
        # e.g. re.split with a capturing group); each special token becomes its one id, every
        # other piece is pretokenize()d and each chunk encoded with _encode_chunk.
        raise NotImplementedError("BPETokenizer.encode: see README.md, section 1.3")

    def decode(self, ids) -> str:
        # Join the bytes first: one character may be split across several tokens.
        # TODO (README.md, section 1.3): concatenate the bytes of every id, then decode as UTF-8
        # with errors="replace" (a truncated id list may end inside a character).
        raise NotImplementedError("BPETokenizer.decode: see README.md, section 1.3")
