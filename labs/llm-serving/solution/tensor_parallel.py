"""Part 3: Megatron-style tensor parallelism for the lab's model (README "Part 3").

Each of `world_size` processes holds 1/world_size of every layer:

  attention: Wq, Wk, Wv are split by OUTPUT rows (column-parallel): rank r
    keeps heads [r*H/p, (r+1)*H/p) and computes attention for them alone
    (heads are independent). Wo is split by INPUT columns (row-parallel): rank r
    multiplies its heads' outputs by its column slice of Wo and gets a partial
    sum of the full (T, d) output. One all-reduce (sum) completes it.
  MLP: W1 (d_ff, d) column-parallel (rows), gelu is elementwise so each rank
    applies it to its own slice, W2 (d, d_ff) row-parallel (columns) -> a
    partial sum; one all-reduce.

So a layer needs exactly 2 all-reduces in the forward pass (one per block),
each of T * d_model fp32 values. Embeddings, norms and lm_head are
replicated: every rank computes them the same.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F

import engine as eng


def shard_weights(weights: dict[str, torch.Tensor], cfg: eng.ModelConfig, rank: int,
                  world_size: int) -> dict[str, torch.Tensor]:
    """Rank `rank`'s shard of every weight (same names). Linear weights are
    (out_features, in_features): column-parallel keeps a slice of rows,
    row-parallel a slice of columns. Contiguous slices, rank r gets the r-th."""
    # BEGIN SOLUTION
    if cfg.n_heads % world_size or cfg.d_ff % world_size:
        raise ValueError(f"world_size {world_size} must divide n_heads {cfg.n_heads} and d_ff {cfg.d_ff}")
    d_part = cfg.d_model // world_size          # = heads per rank * head_dim
    f_part = cfg.d_ff // world_size
    shard = {}
    for name, w in weights.items():
        kind = name.rsplit(".", 1)[-1]
        if kind in ("wq", "wk", "wv"):
            shard[name] = w[rank * d_part:(rank + 1) * d_part].clone()
        elif kind == "wo":
            shard[name] = w[:, rank * d_part:(rank + 1) * d_part].clone()
        elif kind == "w1":
            shard[name] = w[rank * f_part:(rank + 1) * f_part].clone()
        elif kind == "w2":
            shard[name] = w[:, rank * f_part:(rank + 1) * f_part].clone()
        else:
            shard[name] = w                      # embed, pos, lm_head: replicated
    return shard
    # STARTER
    # raise NotImplementedError("shard_weights: see README.md, section \"Part 3\"")
    # END SOLUTION


def tp_forward(shard: dict[str, torch.Tensor], cfg: eng.ModelConfig, ids: torch.Tensor, world_size: int) -> torch.Tensor:
    """Logits (T, vocab) of the whole model, computed from this rank's shard
    with torch.distributed.all_reduce (the process group is initialised by the
    caller). Must equal eng.forward(full weights) on every rank."""
    # BEGIN SOLUTION
    heads = cfg.n_heads // world_size
    x = eng.embed(shard, torch.as_tensor(ids, dtype=torch.long))
    for i in range(cfg.n_layers):
        h = eng.rms_norm(x)
        q, k, v = (h @ shard[f"layers.{i}.{n}"].T for n in ("wq", "wk", "wv"))   # (T, d/p) each
        partial = eng.attention(q, k, v, heads) @ shard[f"layers.{i}.wo"].T        # (T, d), a partial sum
        dist.all_reduce(partial)                                                    # sum over ranks
        x = x + partial
        partial = F.gelu(eng.rms_norm(x) @ shard[f"layers.{i}.w1"].T) @ shard[f"layers.{i}.w2"].T
        dist.all_reduce(partial)
        x = x + partial
    return eng.rms_norm(x) @ shard["lm_head"].T
    # STARTER
    # raise NotImplementedError("tp_forward: see README.md, section \"Part 3\"")
    # END SOLUTION


def allreduce_bytes_per_token(cfg: eng.ModelConfig, dtype_bytes: int = 4) -> int:
    """Bytes each forward all-reduces per token (the payload, before the ring's
    2(p-1)/p factor): 2 all-reduces per layer of d_model values each."""
    # BEGIN SOLUTION
    return 2 * cfg.n_layers * cfg.d_model * dtype_bytes
    # STARTER
    # raise NotImplementedError("allreduce_bytes_per_token: see README.md, section \"Part 3\"")
    # END SOLUTION
