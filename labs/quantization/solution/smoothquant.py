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
    # BEGIN SOLUTION
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"smooth_scales: alpha must be in [0, 1], got {alpha}")
    w_amax = torch.cat([w.abs() for w in weights], dim=0).amax(dim=0)
    s = act_amax.pow(alpha) / w_amax.pow(1.0 - alpha)
    dead = (act_amax == 0) | (w_amax == 0)
    return torch.where(dead, torch.ones_like(s), s).to(torch.float32)
    # STARTER
    # raise NotImplementedError("smooth_scales: see README.md, section \"Part 2: SmoothQuant\"")
    # END SOLUTION


def fold_smoothing(ln: nn.LayerNorm, linears: list[nn.Linear], s: torch.Tensor) -> None:
    """In place: X' = X / s and W' = W * s, so X' @ W'^T = X @ W^T. X comes out of the LayerNorm
    `ln`, so dividing its weight and bias by s divides X; each Linear's column j is multiplied by s_j."""
    # BEGIN SOLUTION
    with torch.no_grad():
        ln.weight.div_(s)
        ln.bias.div_(s)
        for lin in linears:
            lin.weight.mul_(s[None, :])
    # STARTER
    # raise NotImplementedError("fold_smoothing: see README.md, section \"Part 2: SmoothQuant\"")
    # END SOLUTION


def collect_inputs(model: tiny_gpt.TinyGPT, idx: torch.Tensor) -> dict[str, torch.Tensor]:
    """Run model(idx) once (no grad) and return, for every block's QUANTIZED_LINEARS, the input it
    saw flattened to (B*T, in) float32, keyed "blocks.{i}.attn.c_attn" etc. Hooks are removed after."""
    # BEGIN SOLUTION
    seen: dict[str, torch.Tensor] = {}
    handles = []
    for i, block in enumerate(model.blocks):
        for sub in tiny_gpt.QUANTIZED_LINEARS:
            module = block.get_submodule(sub)

            def hook(mod, args, out, name=f"blocks.{i}.{sub}"):
                seen[name] = args[0].detach().reshape(-1, args[0].shape[-1]).clone()

            handles.append(module.register_forward_hook(hook))
    try:
        with torch.no_grad():
            model(idx)
    finally:
        for h in handles:
            h.remove()
    return seen
    # STARTER
    # raise NotImplementedError("collect_inputs: see README.md, section \"Part 2: SmoothQuant\"")
    # END SOLUTION


def smooth_model(model: tiny_gpt.TinyGPT, calib_idx: torch.Tensor, alpha: float) -> tiny_gpt.TinyGPT:
    """In place, every block: s from the calibration inputs of attn.c_attn (read from ln_1) and of
    mlp.c_fc (read from ln_2), folded into ln_1/c_attn and ln_2/c_fc. Every input is collected
    from ONE forward pass of the model as given, before any folding. Returns model."""
    # BEGIN SOLUTION
    inputs = collect_inputs(model, calib_idx)
    for i, block in enumerate(model.blocks):
        for ln, name, lin in ((block.ln_1, "attn.c_attn", block.attn.c_attn), (block.ln_2, "mlp.c_fc", block.mlp.c_fc)):
            amax = inputs[f"blocks.{i}.{name}"].abs().amax(dim=0)
            fold_smoothing(ln, [lin], smooth_scales(amax, [lin.weight.detach()], alpha))
    return model
    # STARTER
    # raise NotImplementedError("smooth_model: see README.md, section \"Part 2: SmoothQuant\"")
    # END SOLUTION
