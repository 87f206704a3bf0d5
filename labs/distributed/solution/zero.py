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
        # BEGIN SOLUTION
        p, r = comm.world_size, comm.rank
        sizes = [len(c) for c in torch.arange(self.numel).tensor_split(p)]
        start = sum(sizes[:r])
        self.shard = (start, start + sizes[r])
        dtype = self.params[0].dtype
        self.exp_avg = torch.zeros(sizes[r], dtype=dtype)
        self.exp_avg_sq = torch.zeros(sizes[r], dtype=dtype)
        self.step_count = 0
        # STARTER
        # # self.shard = (start, end): this rank's slice of the flattened parameters
        # # self.exp_avg, self.exp_avg_sq: flat tensors of end - start elements
        # raise NotImplementedError("ZeroAdamW: see README.md, section \"Part 3: ZeRO-1 optimizer sharding\"")
        # END SOLUTION

    @torch.no_grad()
    def step(self) -> None:
        """One AdamW step with gradients averaged over ranks; afterwards every
        rank holds the full updated parameters."""
        # BEGIN SOLUTION
        world = self.comm.world_size
        flat_grad = torch.cat([q.grad.reshape(-1) for q in self.params])
        grad = self.comm.reduce_scatter(flat_grad) / world
        start, end = self.shard
        param = torch.cat([q.reshape(-1) for q in self.params])[start:end].clone()
        self.step_count += 1
        beta1, beta2 = self.betas
        param.mul_(1 - self.lr * self.weight_decay)
        self.exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
        self.exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        bias1 = 1 - beta1 ** self.step_count
        bias2 = 1 - beta2 ** self.step_count
        denom = (self.exp_avg_sq / bias2).sqrt().add_(self.eps)
        param.addcdiv_(self.exp_avg, denom, value=-self.lr / bias1)
        full = self.comm.all_gather(param, self.numel)
        offset = 0
        for q in self.params:
            q.copy_(full[offset:offset + q.numel()].view_as(q))
            offset += q.numel()
        # STARTER
        # raise NotImplementedError("ZeroAdamW.step: see README.md, section \"Part 3: ZeRO-1 optimizer sharding\"")
        # END SOLUTION
