"""Part 4: AWQ (README.md, "Part 4: AWQ").

Per-input-channel scales s = mean|X|^alpha, alpha searched on a grid for the
smallest OUTPUT error of the int4 layer on calibration activations, folded
into the LayerNorms like SmoothQuant's, then every Linear becomes W4A16.
"""

from __future__ import annotations

import torch

import tiny_gpt
from int4 import W4A16Linear, fake_quant_int4
from smoothquant import collect_inputs, fold_smoothing


def awq_search(x: torch.Tensor, w: torch.Tensor, group_size: int, n_grid: int = 20
               ) -> tuple[float, torch.Tensor, list[float]]:
    """x (n, in) calibration inputs of the Linear, w (out, in) its weight -> (alpha, s (in,), losses).
    For i = 0 .. n_grid, alpha = i / n_grid:
        s = (mean over tokens of |x|) ** alpha, clamped to >= 1e-4, then s = s / sqrt(max(s) * min(s));
        loss = mean((x @ (Q(w * s) / s)^T - x @ w^T) ** 2), Q = fake_quant_int4.
    losses[i] is alpha = i / n_grid's loss; the smallest loss wins, the smallest alpha on a tie."""
    # BEGIN SOLUTION
    x_mean = x.abs().mean(dim=0)
    ref = x @ w.t()
    best, losses = None, []
    for i in range(n_grid + 1):
        alpha = i / n_grid
        s = x_mean.pow(alpha).clamp(min=1e-4)
        s = s / (s.max() * s.min()).sqrt()
        wq = fake_quant_int4(w * s[None, :], group_size) / s[None, :]
        loss = float(((x @ wq.t() - ref) ** 2).mean())
        losses.append(loss)
        if best is None or loss < best[0]:       # strict <: on a tie the earlier (smaller) alpha stays
            best = (loss, alpha, s)
    return best[1], best[2], losses
    # STARTER
    # raise NotImplementedError("awq_search: see README.md, section \"Part 4: AWQ\"")
    # END SOLUTION


def awq_model(model: tiny_gpt.TinyGPT, calib_idx: torch.Tensor, group_size: int, n_grid: int = 20
              ) -> tiny_gpt.TinyGPT:
    """In place, every block: awq_search on attn.c_attn (its calibration input, read from ln_1) and
    on mlp.c_fc (read from ln_2), fold each s as SmoothQuant does (ln /= s, W *= s), then every
    QUANTIZED_LINEAR becomes a W4A16Linear (attn.c_proj and mlp.c_proj unscaled). Inputs come
    from ONE forward pass of the model as given. Returns model."""
    # BEGIN SOLUTION
    inputs = collect_inputs(model, calib_idx)
    for i, block in enumerate(model.blocks):
        for ln, name, lin in ((block.ln_1, "attn.c_attn", block.attn.c_attn), (block.ln_2, "mlp.c_fc", block.mlp.c_fc)):
            _, s, _ = awq_search(inputs[f"blocks.{i}.{name}"], lin.weight.detach(), group_size, n_grid)
            fold_smoothing(ln, [lin], s)
    return tiny_gpt.replace_linears(model, lambda name, lin: W4A16Linear.from_float(lin, group_size))
    # STARTER
    # raise NotImplementedError("awq_model: see README.md, section \"Part 4: AWQ\"")
    # END SOLUTION
