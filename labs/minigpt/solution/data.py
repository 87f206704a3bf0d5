"""The dataset: one long sequence of token ids, a train/validation split, and
random (x, y) batches where y is x shifted one position to the left
(README.md, section 2).

What you will learn: a language model is trained on every prefix at once. A
window of T+1 tokens gives T examples: x[t] predicts y[t] = the token after it.
"""

from __future__ import annotations

import torch


def split_train_val(data: torch.Tensor, val_fraction: float = 0.1) -> tuple[torch.Tensor, torch.Tensor]:
    """The first (1 - val_fraction) of the tokens train, the rest validate.

    n = int(len(data) * (1 - val_fraction)); no shuffling: a contiguous tail keeps
    validation text unseen (shuffled windows would overlap the training text).
    """
    # BEGIN SOLUTION
    n = int(len(data) * (1 - val_fraction))
    return data[:n], data[n:]
    # STARTER
    # # TODO (README.md, section 2): return (train, val) as two slices of data.
    # raise NotImplementedError("split_train_val: see README.md, section 2")
    # END SOLUTION


def get_batch(
    data: torch.Tensor,
    block_size: int,
    batch_size: int,
    generator: torch.Generator | None = None,
    device: str | torch.device = "cpu",
) -> tuple[torch.Tensor, torch.Tensor]:
    """batch_size random windows of data: x (B, T) and the targets y (B, T), int64.

    A window starts at any i in 0..len(data) - block_size - 1 (so that y, which
    reaches one token further, still fits). Randomness comes from `generator`.
    """
    # BEGIN SOLUTION
    # torch.randint's upper bound is exclusive: i in [0, len(data) - block_size).
    ix = torch.randint(len(data) - block_size, (batch_size,), generator=generator)  # (B,)
    x = torch.stack([data[i : i + block_size] for i in ix.tolist()])  # (B, T)
    y = torch.stack([data[i + 1 : i + 1 + block_size] for i in ix.tolist()])  # (B, T): x shifted by one
    return x.long().to(device), y.long().to(device)
    # STARTER
    # # TODO (README.md, section 2):
    # #   ix = batch_size random start offsets, drawn with torch.randint(..., generator=generator)  # (B,)
    # #   x  = the windows data[i : i + block_size], stacked                                     # (B, T)
    # #   y  = the same windows one token later, data[i + 1 : i + 1 + block_size]                # (B, T)
    # # Return both as int64 (torch.long) on `device`.
    # raise NotImplementedError("get_batch: see README.md, section 2")
    # END SOLUTION
