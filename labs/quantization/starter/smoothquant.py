"""Part 2: SmoothQuant (README.md, "Part 2: SmoothQuant").

Per-channel smoothing scales s_j = max|X_j|^alpha / max|W_j|^(1-alpha) that move
the activations' outlier channels into the weights, folded into the LayerNorm
in front so the float model computes the same function.
"""

from __future__ import annotations

import torch
import torch.nn as nn

import tiny_gpt


def smooth_scales(act_amax: torch.Tensor, weights: list[torch.Tensor], alpha: float) -> torch.Tensor:
    """act_amax (in,) = max |X[:, j]| over calibration tokens; weights: the (out_i, in) weights of
    every Linear that reads X -> s (in,) float32 with
        s_j = act_amax_j ** alpha / w_amax_j ** (1 - alpha),  w_amax_j = max over all weights' column j;
    s_j = 1 where act_amax_j == 0 or w_amax_j == 0. alpha outside [0, 1] -> ValueError."""
    raise NotImplementedError("smooth_scales: see README.md, section \"Part 2: SmoothQuant\"")


def fold_smoothing(ln: nn.LayerNorm, linears: list[nn.Linear], s: torch.Tensor) -> None:
    """In place: X' = X / s and W' = W * s, so X' @ W'^T = X @ W^T. X comes out of the LayerNorm
    `ln`, so dividing its weight and bias by s divides X; each Linear's column j is multiplied by s_j."""
    raise NotImplementedError("fold_smoothing: see README.md, section \"Part 2: SmoothQuant\"")


def collect_inputs(model: tiny_gpt.TinyGPT, idx: torch.Tensor) -> dict[str, torch.Tensor]:
    """Run model(idx) once (no grad) and return, for every block's QUANTIZED_LINEARS, the input it
    saw flattened to (B*T, in) float32, keyed "blocks.{i}.attn.c_attn" etc. Hooks are removed after."""
    raise NotImplementedError("collect_inputs: see README.md, section \"Part 2: SmoothQuant\"")


def smooth_model(model: tiny_gpt.TinyGPT, calib_idx: torch.Tensor, alpha: float) -> tiny_gpt.TinyGPT:
    """In place, every block: s from the calibration inputs of attn.c_attn (read from ln_1) and of
    mlp.c_fc (read from ln_2), folded into ln_1/c_attn and ln_2/c_fc. Every input is collected
    from ONE forward pass of the model as given, before any folding. Returns model."""
    raise NotImplementedError("smooth_model: see README.md, section \"Part 2: SmoothQuant\"")
