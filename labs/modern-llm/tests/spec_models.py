"""Small models for the speculative-decoding part: next-token distributions
from a table, either the same at every position (i.i.d.: the maths of the
paper is exact there) or depending on the previous token (a bigram)."""

from __future__ import annotations

import torch


class TableModel:
    """probs(tokens, n) -> (n, V). `table` is (V,) for i.i.d. or (V, V) for a bigram."""

    def __init__(self, table: torch.Tensor) -> None:
        self.table = table.double() / table.double().sum(-1, keepdim=True)
        self.calls = 0

    def probs(self, tokens: list[int], n: int) -> torch.Tensor:
        self.calls += 1
        rows = []
        for j in range(n):
            context = tokens[: len(tokens) - n + 1 + j]
            rows.append(self.table if self.table.dim() == 1 else self.table[context[-1]])
        return torch.stack(rows)
