"""Part 3 — your own `torch.autograd.Function`: a fused, stable softmax cross-entropy.

`F.cross_entropy` is log_softmax + nll_loss: two ops, and autograd keeps the
intermediate log-probabilities alive for backward. A fused op saves only its
inputs — `ctx.save_for_backward(logits, targets)`, nothing else — and
recomputes the softmax in backward (README.md, "Part 3: a custom autograd
Function"), because

    d loss / d logits[i, j] = (softmax(logits)[i, j] - [j == target_i]) * w_i

with w_i = 1/N_valid for reduction "mean", 1 for "sum", and 0 for rows whose
target is `ignore_index`. Backward must itself be written in differentiable
torch ops so that double backward (`gradgradcheck`) works.
"""

from __future__ import annotations

import torch


class SoftmaxCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits: torch.Tensor, targets: torch.Tensor, reduction: str, ignore_index: int) -> torch.Tensor:
        """logits (N, C) floating, targets (N,) int64 -> a scalar loss."""
        # BEGIN SOLUTION
        valid = targets != ignore_index
        safe_targets = torch.where(valid, targets, torch.zeros_like(targets))
        shifted = logits - logits.max(dim=1, keepdim=True).values
        log_probs = shifted - shifted.exp().sum(dim=1, keepdim=True).log()
        picked = log_probs.gather(1, safe_targets.unsqueeze(1)).squeeze(1)
        losses = -picked * valid.to(logits.dtype)
        if reduction == "mean":
            # no clamp: with every target ignored this is 0 / 0 = NaN, as F.cross_entropy gives
            loss = losses.sum() / valid.sum().to(logits.dtype)
        else:
            loss = losses.sum()
        ctx.save_for_backward(logits, targets)
        ctx.reduction, ctx.ignore_index = reduction, ignore_index
        return loss
        # STARTER
        # raise NotImplementedError("forward: see README.md, section \"Part 3: a custom autograd Function\"")
        # END SOLUTION

    @staticmethod
    def backward(ctx, grad_loss: torch.Tensor):
        # BEGIN SOLUTION
        logits, targets = ctx.saved_tensors
        # Recomputed with differentiable ops: double backward flows through probs.
        probs = torch.softmax(logits, dim=1)
        valid = targets != ctx.ignore_index
        safe_targets = torch.where(valid, targets, torch.zeros_like(targets))
        onehot = torch.zeros_like(probs).scatter(1, safe_targets.unsqueeze(1), 1.0)
        weight = valid.to(probs.dtype)
        if ctx.reduction == "mean":
            weight = weight / valid.sum().clamp_min(1).to(probs.dtype)
        grad_logits = (probs - onehot) * weight.unsqueeze(1) * grad_loss
        return grad_logits, None, None, None
        # STARTER
        # raise NotImplementedError("backward: see README.md, section \"Part 3: a custom autograd Function\"")
        # END SOLUTION


def softmax_cross_entropy(logits: torch.Tensor, targets: torch.Tensor, reduction: str = "mean",
                          ignore_index: int = -100) -> torch.Tensor:
    """Like F.cross_entropy(logits, targets, reduction=..., ignore_index=...) for 2-D logits.
    reduction is "mean" (over the rows whose target is not ignore_index) or "sum"."""
    if reduction not in ("mean", "sum"):
        raise ValueError(f"reduction must be 'mean' or 'sum', got {reduction!r}")
    if logits.dim() != 2 or targets.dim() != 1 or targets.shape[0] != logits.shape[0]:
        raise ValueError(f"expected logits (N, C) and targets (N,), got {tuple(logits.shape)} and {tuple(targets.shape)}")
    return SoftmaxCrossEntropy.apply(logits, targets, reduction, ignore_index)
