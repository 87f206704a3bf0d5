"""Part 1: W8A8 (README.md, "Part 1: W8A8").

int8 weights with one scale per output channel, int8 activations with one scale
per token computed at run time, an exact int32 matrix product, then the two
scales. Conventions of every file of this lab: weights are nn.Linear's (out, in)
float32, inputs x are (..., in) float32, rounding is torch.round (half to even),
and no function modifies its tensor arguments unless it says "in place".
"""

from __future__ import annotations

import torch
import torch.nn as nn

QMAX8 = 127          # symmetric int8: values -127..127 (never -128, so -q is always representable)


def quantize_weight_per_channel(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(out, in) float32 -> (q (out, in) int8, scale (out,) float32), one scale per OUTPUT row:
    scale = max|w[row]| / 127 (1.0 for an all-zero row), q = clamp(round(w / scale), -127, 127)."""
    # BEGIN SOLUTION
    scale = w.abs().amax(dim=1) / QMAX8
    scale = torch.where(scale == 0, torch.ones_like(scale), scale)
    q = torch.round(w / scale[:, None]).clamp(-QMAX8, QMAX8).to(torch.int8)
    return q, scale
    # STARTER
    # raise NotImplementedError("quantize_weight_per_channel: see README.md, section \"Part 1: W8A8\"")
    # END SOLUTION


def quantize_activation_per_token(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(..., in) float32 -> (q (..., in) int8, scale (..., 1) float32), one scale per TOKEN (row),
    computed from this x at run time ("dynamic"): scale = max|x[token]| / 127 (1.0 for an
    all-zero token), q = clamp(round(x / scale), -127, 127)."""
    # BEGIN SOLUTION
    scale = x.abs().amax(dim=-1, keepdim=True) / QMAX8
    scale = torch.where(scale == 0, torch.ones_like(scale), scale)
    q = torch.round(x / scale).clamp(-QMAX8, QMAX8).to(torch.int8)
    return q, scale
    # STARTER
    # raise NotImplementedError("quantize_activation_per_token: see README.md, section \"Part 1: W8A8\"")
    # END SOLUTION


def int8_gemm(qx: torch.Tensor, qw: torch.Tensor) -> torch.Tensor:
    """qx (n, in) int8, qw (out, in) int8 -> (n, out) int32 = qx @ qw^T, accumulated EXACTLY in
    integers (a float32 accumulator loses exactness past 2**24)."""
    # BEGIN SOLUTION
    return qx.to(torch.int32) @ qw.to(torch.int32).t()
    # STARTER
    # raise NotImplementedError("int8_gemm: see README.md, section \"Part 1: W8A8\"")
    # END SOLUTION


def w8a8_linear(x: torch.Tensor, qw: torch.Tensor, w_scale: torch.Tensor,
                bias: torch.Tensor | None = None) -> torch.Tensor:
    """x (..., in) float32 -> (..., out) float32: quantize x per token, int8_gemm with qw, then
    y = (acc.float() * x_scale) * w_scale (+ bias): the int32 sum first, the two scales after."""
    # BEGIN SOLUTION
    lead = x.shape[:-1]
    qx, sx = quantize_activation_per_token(x.reshape(-1, x.shape[-1]))
    acc = int8_gemm(qx, qw)                              # (n, out) int32, exact
    y = (acc.to(torch.float32) * sx) * w_scale[None, :]  # sx (n, 1): per row; w_scale (out,): per column
    if bias is not None:
        y = y + bias
    return y.reshape(*lead, qw.shape[0])
    # STARTER
    # raise NotImplementedError("w8a8_linear: see README.md, section \"Part 1: W8A8\"")
    # END SOLUTION


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
