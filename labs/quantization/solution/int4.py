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
    # BEGIN SOLUTION
    out_f, in_f = w.shape
    if group_size < 1 or in_f % group_size != 0:
        raise ValueError(f"quantize_int4_groups: in_features {in_f} is not a multiple of group_size {group_size}")
    g = w.reshape(out_f, in_f // group_size, group_size)
    lo = g.amin(dim=-1).clamp(max=0.0)
    hi = g.amax(dim=-1).clamp(min=0.0)
    scale = (hi - lo) / QMAX4
    scale = torch.where(scale == 0, torch.ones_like(scale), scale)
    zero = torch.round(-lo / scale)
    q = (torch.round(g / scale[..., None]) + zero[..., None]).clamp(0, QMAX4)
    return q.reshape(out_f, in_f).to(torch.uint8), scale, zero.to(torch.uint8)
    # STARTER
    # raise NotImplementedError("quantize_int4_groups: see README.md, section \"Part 3: W4A16\"")
    # END SOLUTION


def dequantize_int4_groups(q: torch.Tensor, scale: torch.Tensor, zero: torch.Tensor, group_size: int) -> torch.Tensor:
    """(out, in) uint8 codes -> (out, in) float32: w = (q - zero) * scale, per group."""
    # BEGIN SOLUTION
    out_f, in_f = q.shape
    g = q.reshape(out_f, in_f // group_size, group_size).to(torch.float32)
    return ((g - zero[..., None].to(torch.float32)) * scale[..., None]).reshape(out_f, in_f)
    # STARTER
    # raise NotImplementedError("dequantize_int4_groups: see README.md, section \"Part 3: W4A16\"")
    # END SOLUTION


def pack_int4(q: torch.Tensor) -> torch.Tensor:
    """(out, in) uint8 codes 0..15 -> (out, in // 8) int32: word k of a row holds columns
    8k .. 8k+7, column 8k+i in bits 4i .. 4i+3 (column 8k in the LOWEST nibble). Bits are
    bits: a word whose top nibble is >= 8 is a negative int32. in % 8 != 0 -> ValueError."""
    # BEGIN SOLUTION
    out_f, in_f = q.shape
    if in_f % 8 != 0:
        raise ValueError(f"pack_int4: in_features {in_f} is not a multiple of 8")
    nib = q.to(torch.int64).reshape(out_f, in_f // 8, 8)
    shifts = torch.arange(0, 32, 4, dtype=torch.int64)
    words = (nib << shifts).sum(dim=-1)                      # 0 .. 2**32 - 1, exact in int64
    words = torch.where(words >= 2**31, words - 2**32, words)  # the same 32 bits as a signed int32
    return words.to(torch.int32)
    # STARTER
    # raise NotImplementedError("pack_int4: see README.md, section \"Part 3: W4A16\"")
    # END SOLUTION


def unpack_int4(packed: torch.Tensor) -> torch.Tensor:
    """(out, n) int32 -> (out, 8 n) uint8 codes: the inverse of pack_int4."""
    # BEGIN SOLUTION
    shifts = torch.arange(0, 32, 4, dtype=torch.int32)
    nib = (packed[..., None] >> shifts) & 0xF               # arithmetic shift, then mask: sign bits gone
    return nib.reshape(packed.shape[0], -1).to(torch.uint8)
    # STARTER
    # raise NotImplementedError("unpack_int4: see README.md, section \"Part 3: W4A16\"")
    # END SOLUTION


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
