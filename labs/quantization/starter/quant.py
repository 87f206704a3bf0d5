"""Activation-aware quantization of a small GPT: W8A8, SmoothQuant, W4A16 and AWQ
(README.md, Parts 1-5).

What you will learn: why int8 activations break on outlier channels and how
SmoothQuant moves that difficulty into the weights with a per-channel scale the
float model never notices; how a 4-bit group-wise weight is stored (scales, zero
points, eight nibbles per int32); how AWQ picks per-channel scales by searching
for the one that minimises the quantized layer's output error on real
activations; and how to tell, with perplexity on held-out text, whether any of
it worked.

Conventions (every function): weights are nn.Linear's (out, in) float32; inputs
x are (..., in) float32; nothing you are given is modified unless the function
says "in place". Rounding is torch.round (half to even).
"""

from __future__ import annotations

import torch
import torch.nn as nn

import tiny_gpt

QMAX8 = 127          # symmetric int8: values -127..127 (never -128, so -q is always representable)
QMAX4 = 15           # asymmetric int4: values 0..15


# ---------------------------------------------------------------- Part 1: W8A8

def quantize_weight_per_channel(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(out, in) float32 -> (q (out, in) int8, scale (out,) float32), one scale per OUTPUT row:
    scale = max|w[row]| / 127 (1.0 for an all-zero row), q = clamp(round(w / scale), -127, 127)."""
    raise NotImplementedError("quantize_weight_per_channel: see README.md, section \"Part 1: W8A8\"")


def quantize_activation_per_token(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(..., in) float32 -> (q (..., in) int8, scale (..., 1) float32), one scale per TOKEN (row),
    computed from this x at run time ("dynamic"): scale = max|x[token]| / 127 (1.0 for an
    all-zero token), q = clamp(round(x / scale), -127, 127)."""
    raise NotImplementedError("quantize_activation_per_token: see README.md, section \"Part 1: W8A8\"")


def int8_gemm(qx: torch.Tensor, qw: torch.Tensor) -> torch.Tensor:
    """qx (n, in) int8, qw (out, in) int8 -> (n, out) int32 = qx @ qw^T, accumulated EXACTLY in
    integers (a float32 accumulator loses exactness past 2**24)."""
    raise NotImplementedError("int8_gemm: see README.md, section \"Part 1: W8A8\"")


def w8a8_linear(x: torch.Tensor, qw: torch.Tensor, w_scale: torch.Tensor,
                bias: torch.Tensor | None = None) -> torch.Tensor:
    """x (..., in) float32 -> (..., out) float32: quantize x per token, int8_gemm with qw, then
    y = (acc.float() * x_scale) * w_scale (+ bias): the int32 sum first, the two scales after."""
    raise NotImplementedError("w8a8_linear: see README.md, section \"Part 1: W8A8\"")


class W8A8Linear(nn.Module):
    """An nn.Linear with an int8 per-channel weight and int8 per-token activations."""

    def __init__(self, qweight: torch.Tensor, w_scale: torch.Tensor, bias: torch.Tensor | None):
        super().__init__()
        self.register_buffer("qweight", qweight)     # (out, in) int8
        self.register_buffer("w_scale", w_scale)     # (out,) float32
        self.register_buffer("bias", None if bias is None else bias.detach().clone())

    @classmethod
    def from_float(cls, linear: nn.Linear) -> "W8A8Linear":
        q, s = quantize_weight_per_channel(linear.weight.detach())
        return cls(q, s, linear.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return w8a8_linear(x, self.qweight, self.w_scale, self.bias)


def replace_linears(model: tiny_gpt.TinyGPT, make) -> tiny_gpt.TinyGPT:
    """In place: every block's QUANTIZED_LINEARS (attn.c_attn, attn.c_proj, mlp.c_fc,
    mlp.c_proj) becomes make(name, linear), name such as "blocks.1.mlp.c_fc". Returns model."""
    for i, block in enumerate(model.blocks):
        for sub in tiny_gpt.QUANTIZED_LINEARS:
            owner_name, attr = sub.split(".")
            owner = getattr(block, owner_name)
            setattr(owner, attr, make(f"blocks.{i}.{sub}", getattr(owner, attr)))
    return model


# ---------------------------------------------------------------- Part 2: SmoothQuant

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


# ---------------------------------------------------------------- Part 3: W4A16

def quantize_int4_groups(w: torch.Tensor, group_size: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(out, in) float32 -> (q (out, in) uint8 in 0..15, scale (out, in // g) float32,
    zero (out, in // g) uint8). For each row's group of g consecutive columns:
        lo = min(0, min(group)), hi = max(0, max(group)), scale = (hi - lo) / 15 (1.0 if 0),
        zero = round(-lo / scale), q = clamp(round(w / scale) + zero, 0, 15).
    group_size < 1 or in % group_size != 0 -> ValueError."""
    raise NotImplementedError("quantize_int4_groups: see README.md, section \"Part 3: W4A16\"")


def dequantize_int4_groups(q: torch.Tensor, scale: torch.Tensor, zero: torch.Tensor, group_size: int) -> torch.Tensor:
    """(out, in) uint8 codes -> (out, in) float32: w = (q - zero) * scale, per group."""
    raise NotImplementedError("dequantize_int4_groups: see README.md, section \"Part 3: W4A16\"")


def pack_int4(q: torch.Tensor) -> torch.Tensor:
    """(out, in) uint8 codes 0..15 -> (out, in // 8) int32: word k of a row holds columns
    8k .. 8k+7, column 8k+i in bits 4i .. 4i+3 (column 8k in the LOWEST nibble). Bits are
    bits: a word whose top nibble is >= 8 is a negative int32. in % 8 != 0 -> ValueError."""
    raise NotImplementedError("pack_int4: see README.md, section \"Part 3: W4A16\"")


def unpack_int4(packed: torch.Tensor) -> torch.Tensor:
    """(out, n) int32 -> (out, 8 n) uint8 codes: the inverse of pack_int4."""
    raise NotImplementedError("unpack_int4: see README.md, section \"Part 3: W4A16\"")


class W4A16Linear(nn.Module):
    """An nn.Linear whose weight is stored as packed int4 groups and dequantized to float32 at
    run time; activations stay float ("A16": here float32)."""

    def __init__(self, packed, scale, zero, bias, group_size: int):
        super().__init__()
        self.group_size = group_size
        self.register_buffer("packed", packed)   # (out, in // 8) int32
        self.register_buffer("scale", scale)     # (out, in // g) float32
        self.register_buffer("zero", zero)       # (out, in // g) uint8
        self.register_buffer("bias", None if bias is None else bias.detach().clone())

    @classmethod
    def from_float(cls, linear: nn.Linear, group_size: int) -> "W4A16Linear":
        q, scale, zero = quantize_int4_groups(linear.weight.detach(), group_size)
        return cls(pack_int4(q), scale, zero, linear.bias, group_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = dequantize_int4_groups(unpack_int4(self.packed), self.scale, self.zero, self.group_size)
        y = x @ w.t()
        return y if self.bias is None else y + self.bias


# ---------------------------------------------------------------- Part 4: AWQ

def fake_quant_int4(w: torch.Tensor, group_size: int) -> torch.Tensor:
    """w -> dequantize(quantize_int4_groups(w)): the weight W4A16 really multiplies by."""
    return dequantize_int4_groups(*quantize_int4_groups(w, group_size), group_size)


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


# ---------------------------------------------------------------- Part 5: evaluation

def quantize_model(model: tiny_gpt.TinyGPT, method: str, calib_idx: torch.Tensor, *,
                   alpha: float = 0.5, group_size: int = 32, n_grid: int = 20) -> tiny_gpt.TinyGPT:
    """In place; returns model. method:
      "w8a8"             every QUANTIZED_LINEAR -> W8A8Linear
      "smoothquant-w8a8" smooth_model(alpha), then as "w8a8"
      "w4a16"            every QUANTIZED_LINEAR -> W4A16Linear(group_size) (round to nearest, no scales)
      "awq-w4a16"        awq_model(group_size, n_grid)
    anything else -> ValueError."""
    raise NotImplementedError("quantize_model: see README.md, section \"Part 5: perplexity\"")


def perplexity(logits: torch.Tensor, targets: torch.Tensor) -> float:
    """logits (B, T, V) float32, targets (B, T) int64 -> exp(mean cross-entropy over all B*T
    positions), the mean taken in float64."""
    raise NotImplementedError("perplexity: see README.md, section \"Part 5: perplexity\"")
