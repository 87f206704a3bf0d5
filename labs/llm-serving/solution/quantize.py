"""Part 4: weight-only quantization (README "Part 4").

int8 per-channel (absmax, symmetric): one fp32 scale per OUTPUT row,
    scale[o] = max_i |W[o, i]| / 127,  q = round(W / scale) in [-127, 127] (int8).
int4 group-wise (asymmetric, as GPTQ/AWQ checkpoints store it): every run of
`group_size` consecutive input columns of a row is one group g with
    lo = min(min(g), 0), hi = max(max(g), 0)   (the range always holds 0, as in GPTQ)
    scale = (hi - lo) / 15,  zero = round(-lo / scale)  (in [0, 15]),
    q = clamp(round(W / scale) + zero, 0, 15),  W ~= (q - zero) * scale,
and two 4-bit values per byte: column 2j in the LOW nibble, 2j+1 in the high one.
Scales are fp32 (real checkpoints use fp16: README "Memory").

The matmuls never build the full-precision weight: they dequantize on the fly.
"""

from __future__ import annotations

import torch

# A row or group whose values are all equal would get scale 0: use this floor.
MIN_SCALE = 1e-8


def quantize_int8(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """w (out, in) fp32 -> (q int8 (out, in), scale fp32 (out,))."""
    # BEGIN SOLUTION
    scale = (w.abs().amax(dim=1) / 127.0).clamp(min=MIN_SCALE)
    q = torch.round(w / scale[:, None]).clamp(-127, 127).to(torch.int8)
    return q, scale.to(torch.float32)
    # STARTER
    # raise NotImplementedError("quantize_int8: see README.md, section \"int8 per channel\"")
    # END SOLUTION


def dequantize_int8(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    # BEGIN SOLUTION
    return q.to(torch.float32) * scale[:, None]
    # STARTER
    # raise NotImplementedError("dequantize_int8: see README.md, section \"int8 per channel\"")
    # END SOLUTION


def int8_linear(x: torch.Tensor, q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """x (..., in) @ dequant(q).T without materialising dequant(q): the scale is
    per output column of the result, so (x @ q.T) * scale."""
    # BEGIN SOLUTION
    return (x @ q.to(x.dtype).T) * scale
    # STARTER
    # raise NotImplementedError("int8_linear: see README.md, section \"Dequant on the fly\"")
    # END SOLUTION


def quantize_int4(w: torch.Tensor, group_size: int = 128) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """w (out, in) fp32, in % group_size == 0 -> (packed uint8 (out, in // 2),
    scales fp32 (out, in // group_size), zeros uint8 (out, in // group_size))."""
    # BEGIN SOLUTION
    out_f, in_f = w.shape
    if in_f % group_size or group_size % 2:
        raise ValueError(f"in_features {in_f} must be a multiple of the (even) group size {group_size}")
    groups = w.reshape(out_f, in_f // group_size, group_size)
    # The range always includes 0 (as GPTQ does): zero = round(-lo / scale) lands in [0, 15]
    # and every weight is within scale / 2 of the grid, even in an all-positive group.
    lo = groups.amin(dim=-1).clamp(max=0.0)
    hi = groups.amax(dim=-1).clamp(min=0.0)
    scales = ((hi - lo) / 15.0).clamp(min=MIN_SCALE)
    zeros = torch.round(-lo / scales)
    q = (torch.round(groups / scales[..., None]) + zeros[..., None]).clamp(0, 15)
    q = q.reshape(out_f, in_f).to(torch.uint8)
    packed = q[:, 0::2] | (q[:, 1::2] << 4)
    return packed, scales, zeros.to(torch.uint8)
    # STARTER
    # raise NotImplementedError("quantize_int4: see README.md, section \"int4 groups\"")
    # END SOLUTION


def unpack_int4(packed: torch.Tensor) -> torch.Tensor:
    """(out, in // 2) uint8 -> (out, in) uint8 values 0..15 (low nibble first)."""
    # BEGIN SOLUTION
    out = torch.empty(packed.shape[0], packed.shape[1] * 2, dtype=torch.uint8)
    out[:, 0::2] = packed & 0x0F
    out[:, 1::2] = packed >> 4
    return out
    # STARTER
    # raise NotImplementedError("unpack_int4: see README.md, section \"int4 groups\"")
    # END SOLUTION


def dequantize_int4(packed: torch.Tensor, scales: torch.Tensor, zeros: torch.Tensor,
                    group_size: int = 128) -> torch.Tensor:
    # BEGIN SOLUTION
    q = unpack_int4(packed).to(torch.float32)
    out_f, in_f = q.shape
    groups = q.reshape(out_f, in_f // group_size, group_size)
    return ((groups - zeros[..., None].to(torch.float32)) * scales[..., None]).reshape(out_f, in_f)
    # STARTER
    # raise NotImplementedError("dequantize_int4: see README.md, section \"int4 groups\"")
    # END SOLUTION


def int4_linear(x: torch.Tensor, packed: torch.Tensor, scales: torch.Tensor, zeros: torch.Tensor,
                group_size: int = 128) -> torch.Tensor:
    """x (..., in) @ dequant(W).T, one group of input columns at a time: only a
    (out, group_size) tile is ever dequantized (what a fused kernel keeps in registers)."""
    # BEGIN SOLUTION
    out_f = packed.shape[0]
    acc = torch.zeros(*x.shape[:-1], out_f, dtype=torch.float32)
    for g in range(scales.shape[1]):
        cols = slice(g * group_size // 2, (g + 1) * group_size // 2)
        tile = unpack_int4(packed[:, cols]).to(torch.float32)              # (out, group_size)
        tile = (tile - zeros[:, g:g + 1].to(torch.float32)) * scales[:, g:g + 1]
        acc += x[..., g * group_size:(g + 1) * group_size] @ tile.T
    return acc
    # STARTER
    # raise NotImplementedError("int4_linear: see README.md, section \"Dequant on the fly\"")
    # END SOLUTION


def quantized_bytes(out_features: int, in_features: int, scheme: str, group_size: int = 128) -> int:
    """Bytes of the stored tensors: "fp32" (4 per weight), "int8" (1 per weight +
    a 4-byte scale per row), "int4" (half a byte per weight + per group a 4-byte
    scale and a 1-byte zero)."""
    # BEGIN SOLUTION
    n = out_features * in_features
    if scheme == "fp32":
        return 4 * n
    if scheme == "int8":
        return n + 4 * out_features
    if scheme == "int4":
        return n // 2 + out_features * (in_features // group_size) * (4 + 1)
    raise ValueError(f"unknown scheme {scheme!r}")
    # STARTER
    # raise NotImplementedError("quantized_bytes: see README.md, section \"Memory\"")
    # END SOLUTION
