"""Random paged-attention inputs shared by the torch and Triton parts."""

from __future__ import annotations

import random

import torch


def paged_case(rng: random.Random, *, num_seqs: int, num_heads: int, num_kv_heads: int, head_dim: int,
               block_size: int, max_len: int, dtype=torch.float32, distribution: str = "normal"):
    """Ragged context lengths (including 1 and block-boundary lengths), block tables
    that are a random permutation of a pool larger than needed, padding = -1."""
    gen = torch.Generator().manual_seed(rng.randrange(2**31))
    special = [1, block_size, block_size + 1, max(1, block_size - 1), max_len]
    lens = [rng.choice(special) if rng.random() < 0.4 else rng.randrange(1, max_len + 1) for _ in range(num_seqs)]
    blocks_per_seq = [-(-n // block_size) for n in lens]
    width = max(blocks_per_seq) + 1                                   # at least one padding column
    num_blocks = sum(blocks_per_seq) + 3                              # a few blocks no one uses
    perm = torch.randperm(num_blocks, generator=gen).tolist()
    tables = torch.full((num_seqs, width), -1, dtype=torch.int32)
    at = 0
    for s, nb in enumerate(blocks_per_seq):
        tables[s, :nb] = torch.tensor(perm[at:at + nb], dtype=torch.int32)
        at += nb

    def sample(*shape):
        x = torch.randn(*shape, generator=gen, dtype=torch.float32)
        if distribution == "shifted":                                 # large logits: tests softmax stability
            x = 3.0 * x + 1.0
        return x.to(dtype)

    q = sample(num_seqs, num_heads, head_dim)
    kc = sample(num_blocks, block_size, num_kv_heads, head_dim)
    vc = sample(num_blocks, block_size, num_kv_heads, head_dim)
    return q, kc, vc, tables, torch.tensor(lens, dtype=torch.int32), head_dim ** -0.5
