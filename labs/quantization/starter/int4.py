"""Part 3: W4A16 (README.md, "Part 3: W4A16").

Asymmetric int4 weights in groups of consecutive input columns (a scale and a
zero point per group), eight 4-bit codes packed into one int32, lowest nibble
first; activations stay float.
"""

from __future__ import annotations

import torch
import torch.nn as nn

QMAX4 = 15           # asymmetric int4: values 0..15


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


def fake_quant_int4(w: torch.Tensor, group_size: int) -> torch.Tensor:
    """w -> dequantize(quantize_int4_groups(w)): the weight W4A16 really multiplies by."""
    return dequantize_int4_groups(*quantize_int4_groups(w, group_size), group_size)
