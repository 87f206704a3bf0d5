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
        # BEGIN SOLUTION
        self.chars: list[str] = sorted(set(text))
        self.stoi: dict[str, int] = {ch: i for i, ch in enumerate(self.chars)}
        # STARTER
        # # TODO (README.md, section 1.1): the vocabulary is the SORTED set of characters of text.
        # # self.chars: list[str]        id -> character
        # # self.stoi: dict[str, int]    character -> id
        # raise NotImplementedError("CharTokenizer.__init__: see README.md, section 1.1")
        # END SOLUTION

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> list[int]:
        # BEGIN SOLUTION
        try:
            return [self.stoi[ch] for ch in text]
        except KeyError as exc:
            raise ValueError(f"character {exc.args[0]!r} is not in the vocabulary") from None
        # STARTER
        # # TODO: one id per character; an unknown character raises ValueError.
        # raise NotImplementedError("CharTokenizer.encode: see README.md, section 1.1")
        # END SOLUTION

    def decode(self, ids) -> str:
        # BEGIN SOLUTION
        return "".join(self.chars[int(i)] for i in ids)
        # STARTER
        # raise NotImplementedError("CharTokenizer.decode: see README.md, section 1.1")
        # END SOLUTION


def merge_pair(ids: list[int], pair: tuple[int, int], new_id: int) -> list[int]:
    """Replace every non-overlapping occurrence of `pair` in ids (left to right) by new_id."""
    # BEGIN SOLUTION
    out: list[int] = []
    i = 0
    while i < len(ids):
        if i + 1 < len(ids) and ids[i] == pair[0] and ids[i + 1] == pair[1]:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out
    # STARTER
    # # TODO (README.md, section 1.2): scan left to right; when ids[i], ids[i+1] == pair,
    # # emit new_id and skip both, otherwise emit ids[i]. Example:
    # # merge_pair([5, 6, 5, 6, 6], (5, 6), 300) == [300, 300, 6]
    # raise NotImplementedError("merge_pair: see README.md, section 1.2")
    # END SOLUTION


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
        # BEGIN SOLUTION
        num_merges = vocab_size - 256 - len(special_tokens)
        if num_merges < 0:
            raise ValueError(f"vocab_size must be at least {256 + len(special_tokens)}")
        # Work on distinct chunks only: "the" appearing 5000 times is one sequence with weight 5000.
        chunk_counts = Counter(pretokenize(text))
        words = [list(chunk.encode("utf-8")) for chunk in chunk_counts]
        weights = list(chunk_counts.values())

        # Pair counts, plus for each pair the words that contain it, so a merge only
        # revisits the words it changes (instead of recounting everything each step).
        pair_counts: Counter[tuple[int, int]] = Counter()
        where: dict[tuple[int, int], set[int]] = defaultdict(set)
        for w, (ids, weight) in enumerate(zip(words, weights)):
            for pair in zip(ids, ids[1:]):
                pair_counts[pair] += weight
                where[pair].add(w)

        self.merges, self.vocab = [], {i: bytes([i]) for i in range(256)}
        for step in range(num_merges):
            if not pair_counts:
                break  # every chunk is a single token: nothing left to merge
            # Most frequent pair; on a tie the smallest (a, b) wins, so the result is deterministic.
            best = max(pair_counts, key=lambda p: (pair_counts[p], -p[0], -p[1]))
            new_id = 256 + step
            for w in where.pop(best):
                old = words[w]
                for pair in zip(old, old[1:]):  # take the word's old pairs out...
                    pair_counts[pair] -= weights[w]
                    if pair_counts[pair] == 0:
                        del pair_counts[pair]
                new = merge_pair(old, best, new_id)
                words[w] = new
                for pair in zip(new, new[1:]):  # ...and put its new pairs in
                    pair_counts[pair] += weights[w]
                    where[pair].add(w)
            pair_counts.pop(best, None)
            self.merges.append(best)
            self.vocab[new_id] = self.vocab[best[0]] + self.vocab[best[1]]

        first_special = 256 + len(self.merges)
        self.special_tokens = {s: first_special + i for i, s in enumerate(special_tokens)}
        for s, i in self.special_tokens.items():
            self.vocab[i] = s.encode("utf-8")
        self._ranks = {pair: rank for rank, pair in enumerate(self.merges)}
        self._cache = {}
        return self
        # STARTER
        # # TODO (README.md, section 1.2):
        # # 1. num_merges = vocab_size - 256 - len(special_tokens)
        # # 2. count the chunks: Counter(pretokenize(text)); each distinct chunk is a list of its UTF-8 bytes
        # # 3. repeat num_merges times (stop early if no pair is left):
        # #      count adjacent pairs inside every chunk, weighted by the chunk's count;
        # #      best = the most frequent pair; on a tie the SMALLEST pair (a, b);
        # #      new id = 256 + len(self.merges); replace best everywhere (merge_pair);
        # #      self.merges.append(best); self.vocab[new_id] = self.vocab[a] + self.vocab[b]
        # # 4. special tokens get the ids right after the last merge, in the order given:
        # #      self.special_tokens[s] = id, self.vocab[id] = s.encode("utf-8")
        # # 5. self._ranks = {pair: rank}, clear self._cache; return self
        # # Tip: recounting every pair after every merge is fine for a small text; README 1.2
        # # shows how to update only the chunks a merge touches (needed for the time budget).
        # raise NotImplementedError("BPETokenizer.train: see README.md, section 1.2")
        # END SOLUTION

    def _encode_chunk(self, chunk: str) -> list[int]:
        # BEGIN SOLUTION
        cached = self._cache.get(chunk)
        if cached is not None:
            return cached
        ids = list(chunk.encode("utf-8"))
        while len(ids) >= 2:
            # Apply merges in the order they were learned: the adjacent pair with the lowest rank first.
            pair = min(zip(ids, ids[1:]), key=lambda p: self._ranks.get(p, float("inf")))
            if pair not in self._ranks:
                break
            ids = merge_pair(ids, pair, 256 + self._ranks[pair])
        self._cache[chunk] = ids
        return ids
        # STARTER
        # # TODO (README.md, section 1.3): start from the chunk's UTF-8 bytes; while two or more
        # # ids remain, find the adjacent pair with the LOWEST rank (the earliest merge) and merge
        # # it; stop when no adjacent pair is a known merge. (Cache results in self._cache.)
        # raise NotImplementedError("BPETokenizer._encode_chunk: see README.md, section 1.3")
        # END SOLUTION

    def encode(self, text: str) -> list[int]:
        # BEGIN SOLUTION
        ids: list[int] = []
        if self.special_tokens:
            # Longest first, so a special token that contains another one wins.
            alternatives = sorted(self.special_tokens, key=len, reverse=True)
            parts = re.split("(" + "|".join(re.escape(s) for s in alternatives) + ")", text)
        else:
            parts = [text]
        for i, part in enumerate(parts):
            if i % 2 == 1:  # re.split puts the captured separators at odd positions
                ids.append(self.special_tokens[part])
                continue
            for chunk in pretokenize(part):
                ids.extend(self._encode_chunk(chunk))
        return ids
        # STARTER
        # # TODO (README.md, section 1.3): split text on the special tokens first (longest first,
        # # e.g. re.split with a capturing group); each special token becomes its one id, every
        # # other piece is pretokenize()d and each chunk encoded with _encode_chunk.
        # raise NotImplementedError("BPETokenizer.encode: see README.md, section 1.3")
        # END SOLUTION

    def decode(self, ids) -> str:
        # Join the bytes first: one character may be split across several tokens.
        # BEGIN SOLUTION
        data = b"".join(self.vocab[int(i)] for i in ids)
        return data.decode("utf-8", errors="replace")
        # STARTER
        # # TODO (README.md, section 1.3): concatenate the bytes of every id, then decode as UTF-8
        # # with errors="replace" (a truncated id list may end inside a character).
        # raise NotImplementedError("BPETokenizer.decode: see README.md, section 1.3")
        # END SOLUTION
