"""Random paged-attention inputs shared by the torch and Triton parts.

Every argument of `paged_attention` varies (issue 10): batch, heads and the GQA
ratio (MQA included), head_dim, block size, ragged context lengths (1, block
boundaries and the maximum are drawn on purpose with p = 0.4 per sequence),
`scale` (the default head_dim ** -0.5 only on some trials), the int dtype of
block_tables/context_lens, and the memory layout of every tensor (K and V drawn
independently, so they differ).

Cache slots that no sequence's context covers are filled with a poison value:
NaN for the Triton kernel (any unmasked read poisons the output), a large finite
value for the torch part (where a padded gather followed by a masked softmax is
a fine design: 0 * NaN would be NaN, 0 * 1000 is 0).
"""

from __future__ import annotations

import random

import torch


def random_scale(rng: random.Random, head_dim: int) -> float:
    """Non-default softmax scale: 0.3-0.75x or 1.3-2.5x of head_dim ** -0.5 (never close to it)."""
    factor = rng.uniform(0.3, 0.75) if rng.random() < 0.5 else rng.uniform(1.3, 2.5)
    return factor * head_dim ** -0.5


def paged_case(rng: random.Random, *, num_seqs: int, num_heads: int, num_kv_heads: int, head_dim: int,
               block_size: int, max_len: int, dtype=torch.float32, distribution: str = "normal",
               scale: float | None = None, poison: float | None = None, pad_columns: int = 1):
    """Ragged context lengths, block tables that are a random permutation of a pool
    larger than needed, padding = -1 (`pad_columns` columns past the longest
    sequence's blocks: with 0, reading one more table entry for the longest
    sequence reads past the table's end). Returns (q, kc, vc, tables, lens, scale)."""
    gen = torch.Generator().manual_seed(rng.randrange(2**31))
    special = [1, block_size, block_size + 1, max(1, block_size - 1), max_len]
    lens = [rng.choice(special) if rng.random() < 0.4 else rng.randrange(1, max_len + 1) for _ in range(num_seqs)]
    lens = [min(n, max_len) for n in lens]
    blocks_per_seq = [-(-n // block_size) for n in lens]
    width = max(blocks_per_seq) + pad_columns
    num_blocks = sum(blocks_per_seq) + 3                              # a few blocks no one uses
    perm = torch.randperm(num_blocks, generator=gen).tolist()
    tables = torch.full((num_seqs, width), -1, dtype=torch.int32)
    covered = torch.zeros(num_blocks, block_size, dtype=torch.bool)  # slots inside some context
    at = 0
    for s, nb in enumerate(blocks_per_seq):
        tables[s, :nb] = torch.tensor(perm[at:at + nb], dtype=torch.int32)
        for p in range(lens[s]):
            covered[perm[at + p // block_size], p % block_size] = True
        at += nb

    def sample(*shape):
        x = torch.randn(*shape, generator=gen, dtype=torch.float32)
        if distribution == "shifted":                                 # large logits: tests softmax stability
            x = 3.0 * x + 1.0
        return x.to(dtype)

    q = sample(num_seqs, num_heads, head_dim)
    kc = sample(num_blocks, block_size, num_kv_heads, head_dim)
    vc = sample(num_blocks, block_size, num_kv_heads, head_dim)
    if poison is not None:
        kc[~covered] = poison
        vc[~covered] = poison
    scale = head_dim ** -0.5 if scale is None else scale
    return q, kc, vc, tables, torch.tensor(lens, dtype=torch.int32), scale


# ---------------------------------------------------------------- layouts

def cache_layout(t: torch.Tensor, kind: str) -> torch.Tensor:
    """The same values as a (num_blocks, block_size, kv_heads, D) cache, another memory layout:
    'contiguous'; 'heads-outer' (stored as (num_blocks, kv_heads, block_size, D), vLLM-like);
    'padded-rows' (each D-row followed by 8 unused elements)."""
    if kind == "contiguous":
        return t.contiguous()
    if kind == "heads-outer":
        return t.permute(0, 2, 1, 3).contiguous().permute(0, 2, 1, 3)
    if kind == "padded-rows":
        wide = torch.zeros(*t.shape[:-1], t.shape[-1] + 8, dtype=t.dtype)
        wide[..., :t.shape[-1]] = t
        return wide[..., :t.shape[-1]]
    raise ValueError(kind)


def query_layout(q: torch.Tensor, kind: str) -> torch.Tensor:
    """'contiguous'; 'heads-outer' (stored (H, S, D)); 'padded-rows' (a slice of a fused qkv-like row)."""
    if kind == "contiguous":
        return q.contiguous()
    if kind == "heads-outer":
        return q.permute(1, 0, 2).contiguous().permute(1, 0, 2)
    if kind == "padded-rows":
        wide = torch.zeros(q.shape[0], q.shape[1], q.shape[2] + 8, dtype=q.dtype)
        wide[..., :q.shape[2]] = q
        return wide[..., :q.shape[2]]
    raise ValueError(kind)


def table_layout(tables: torch.Tensor, lens: torch.Tensor, kind: str):
    """'int32'; 'int64'; 'int64-sliced' (int64 columns sliced out of a wider -1 padded table)."""
    if kind == "int32":
        return tables.to(torch.int32).contiguous(), lens.to(torch.int32)
    if kind == "int64":
        return tables.to(torch.int64), lens.to(torch.int64)
    if kind == "int64-sliced":
        wide = torch.full((tables.shape[0], tables.shape[1] + 3), -1, dtype=torch.int64)
        wide[:, :tables.shape[1]] = tables
        return wide[:, :tables.shape[1]], lens.to(torch.int64)
    raise ValueError(kind)


CACHE_LAYOUTS = ["contiguous", "heads-outer", "padded-rows"]
QUERY_LAYOUTS = ["contiguous", "heads-outer", "padded-rows"]
TABLE_LAYOUTS = ["int32", "int64", "int64-sliced"]


def random_layouts(rng: random.Random, q, kc, vc, tables, lens):
    """Each of q, K, V and the tables is non-contiguous/another dtype with p = 1/2
    (independently: K and V differ with p = 1/2)."""
    def pick(options):
        return options[0] if rng.random() < 0.5 else rng.choice(options[1:])

    kinds = {"query": pick(QUERY_LAYOUTS), "key_cache": pick(CACHE_LAYOUTS), "value_cache": pick(CACHE_LAYOUTS),
             "tables": pick(TABLE_LAYOUTS)}
    tables, lens = table_layout(tables, lens, kinds["tables"])
    return (query_layout(q, kinds["query"]), cache_layout(kc, kinds["key_cache"]),
            cache_layout(vc, kinds["value_cache"]), tables, lens, kinds)


def offset_view(t: torch.Tensor, offset: int = 5, fill: float = float("nan")) -> torch.Tensor:
    """The same values, `t`'s strides, starting `offset` elements into a larger storage
    whose other elements hold `fill` (a slice of a bigger buffer: storage_offset() > 0).
    Reading it as if it began at its storage's start reads `fill` and shifted values."""
    size = t.storage_offset() + 1 + sum((n - 1) * s for n, s in zip(t.shape, t.stride()))
    fill = fill if t.dtype.is_floating_point else -1
    storage = torch.full((offset + size + offset,), fill, dtype=t.dtype)
    view = storage.as_strided(t.shape, t.stride(), offset + t.storage_offset())
    view.copy_(t)
    return view


# Every layout of every input at least once, K and V different in most rows; the last
# column says whether each tensor is then moved into a larger buffer at an offset.
# (query, key_cache, value_cache, tables, offset views)
FIXED_LAYOUTS = [
    ("heads-outer", "padded-rows", "heads-outer", "int64-sliced", False),
    ("padded-rows", "heads-outer", "contiguous", "int64", False),
    ("contiguous", "contiguous", "padded-rows", "int32", False),
    ("contiguous", "contiguous", "contiguous", "int32", True),
    ("padded-rows", "heads-outer", "padded-rows", "int64-sliced", True),
]


def fixed_layout(q, kc, vc, tables, lens, kinds):
    """Apply one FIXED_LAYOUTS row. Returns (q, kc, vc, tables, lens, description)."""
    qk, kk, vk, tk, offset = kinds
    tables, lens = table_layout(tables, lens, tk)
    q, kc, vc = query_layout(q, qk), cache_layout(kc, kk), cache_layout(vc, vk)
    if offset:
        q, kc, vc, tables = offset_view(q), offset_view(kc), offset_view(vc), offset_view(tables)
    what = {"query": qk, "key_cache": kk, "value_cache": vk, "tables": tk, "offset views": offset}
    return q, kc, vc, tables, lens, what
