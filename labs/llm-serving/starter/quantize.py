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
    raise NotImplementedError("quantize_int8: see README.md, section \"int8 per channel\"")


def dequantize_int8(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    raise NotImplementedError("dequantize_int8: see README.md, section \"int8 per channel\"")


def int8_linear(x: torch.Tensor, q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """x (..., in) @ dequant(q).T without materialising dequant(q): the scale is
    per output column of the result, so (x @ q.T) * scale."""
    raise NotImplementedError("int8_linear: see README.md, section \"Dequant on the fly\"")


def quantize_int4(w: torch.Tensor, group_size: int = 128) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """w (out, in) fp32, in % group_size == 0 -> (packed uint8 (out, in // 2),
    scales fp32 (out, in // group_size), zeros uint8 (out, in // group_size))."""
    raise NotImplementedError("quantize_int4: see README.md, section \"int4 groups\"")


def unpack_int4(packed: torch.Tensor) -> torch.Tensor:
    """(out, in // 2) uint8 -> (out, in) uint8 values 0..15 (low nibble first)."""
    raise NotImplementedError("unpack_int4: see README.md, section \"int4 groups\"")


def dequantize_int4(packed: torch.Tensor, scales: torch.Tensor, zeros: torch.Tensor,
                    group_size: int = 128) -> torch.Tensor:
    raise NotImplementedError("dequantize_int4: see README.md, section \"int4 groups\"")


def int4_linear(x: torch.Tensor, packed: torch.Tensor, scales: torch.Tensor, zeros: torch.Tensor,
                group_size: int = 128) -> torch.Tensor:
    """x (..., in) @ dequant(W).T, one group of input columns at a time: only a
    (out, group_size) tile is ever dequantized (what a fused kernel keeps in registers)."""
    raise NotImplementedError("int4_linear: see README.md, section \"Dequant on the fly\"")


def quantized_bytes(out_features: int, in_features: int, scheme: str, group_size: int = 128) -> int:
    """Bytes of the stored tensors: "fp32" (4 per weight), "int8" (1 per weight +
    a 4-byte scale per row), "int4" (half a byte per weight + per group a 4-byte
    scale and a 1-byte zero)."""
    raise NotImplementedError("quantized_bytes: see README.md, section \"Memory\"")
