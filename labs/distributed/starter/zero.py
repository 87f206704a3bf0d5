"""Part 3: ZeRO stage 1, AdamW whose moments are sharded over the ranks
(README.md, section "Part 3: ZeRO-1 optimizer sharding").

`comm` offers the given collectives: `comm.reduce_scatter(tensor)` (the sum
over ranks of the flattened tensor, chunk `comm.rank` of
`torch.tensor_split(flat, p)`, a new tensor) and
`comm.all_gather(chunk, numel)` (the flat tensor of `numel` elements whose
chunk i comes from rank i).
"""

from __future__ import annotations

import torch


class ZeroAdamW:
    """AdamW (decoupled weight decay) over `params`, every rank holding the
    moments of its own shard of the flattened parameters only."""

    def __init__(self, params, comm, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 1e-2):
        self.params = [p for p in params]
        self.comm = comm
        self.lr, self.betas, self.eps, self.weight_decay = lr, betas, eps, weight_decay
        self.numel = sum(p.numel() for p in self.params)
        # self.shard = (start, end): this rank's slice of the flattened parameters
        # self.exp_avg, self.exp_avg_sq: flat tensors of end - start elements
        raise NotImplementedError("ZeroAdamW: see README.md, section \"Part 3: ZeRO-1 optimizer sharding\"")

    @torch.no_grad()
    def step(self) -> None:
        """One AdamW step with gradients averaged over ranks; afterwards every
        rank holds the full updated parameters."""
        raise NotImplementedError("ZeroAdamW.step: see README.md, section \"Part 3: ZeRO-1 optimizer sharding\"")
