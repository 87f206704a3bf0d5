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
    raise NotImplementedError("awq_search: see README.md, section \"Part 4: AWQ\"")


def awq_model(model: tiny_gpt.TinyGPT, calib_idx: torch.Tensor, group_size: int, n_grid: int = 20
              ) -> tiny_gpt.TinyGPT:
    """In place, every block: awq_search on attn.c_attn (its calibration input, read from ln_1) and
    on mlp.c_fc (read from ln_2), fold each s as SmoothQuant does (ln /= s, W *= s), then every
    QUANTIZED_LINEAR becomes a W4A16Linear (attn.c_proj and mlp.c_proj unscaled). Inputs come
    from ONE forward pass of the model as given. Returns model."""
    raise NotImplementedError("awq_model: see README.md, section \"Part 4: AWQ\"")
