"""Grader-side helpers: inputs, the fp32 reference, tolerances. Never touches learner code
(that goes through adapter.py) and always runs outside the guards."""

from __future__ import annotations

import math

import torch
from roadmap_cli import grading_kit as kit

ON_GPU = kit.has_cuda()
DEVICE = kit.device()
# GRADING.md asks for >= 5 trials per shape; the CPU interpreter runs one Triton
# program at a time, so CPU runs use 2 (one per input distribution).
TRIALS = 5 if ON_GPU else 2
DISTRIBUTIONS = ("normal", "rising")


def tolerance(dtype: torch.dtype) -> float:
    """atol = rtol. fp16/bf16: 1e-2 (O, LSE and grads, GRADING.md). fp32: 1e-4 under the
    interpreter (exact IEEE dots); 5e-3 on a GPU, where fp32 tl.dot may use TF32."""
    if dtype in (torch.float16, torch.bfloat16):
        return 1e-2
    return 5e-3 if ON_GPU else 1e-4


def make_qkv(seed: int, batch: int, heads: int, kv_heads: int, seq: int, head_dim: int,
             dtype: torch.dtype, dist: str, layout: str = "bhnd"):
    """Random q [B, H, N, D], k, v [B, H_kv, N, D].

    dist "rising": key norms grow along the sequence, so each row's max score keeps
    moving to later K/V blocks (a kernel that forgets to rescale its accumulator shows).
    layout "bnhd": tensors are transposed views of [B, N, H, D] storage (not contiguous).
    """
    gen = torch.Generator().manual_seed(seed)

    def rand(h: int) -> torch.Tensor:
        if layout == "bnhd":
            return torch.randn(batch, seq, h, head_dim, generator=gen).transpose(1, 2)
        return torch.randn(batch, h, seq, head_dim, generator=gen)

    q, k, v = rand(heads), rand(kv_heads), rand(kv_heads)
    if dist == "rising":
        k = k * torch.linspace(0.5, 3.0, seq)[:, None]
    return tuple(t.to(device=DEVICE, dtype=dtype) for t in (q, k, v))


def _attention_fp32(q, k, v, causal: bool, scale):
    n, d = q.shape[-2], q.shape[-1]
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    s = torch.matmul(q, k.transpose(-2, -1)) * scale  # (B, H, N, N)
    if causal:
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=s.device).triu(1), float("-inf"))
    return torch.matmul(torch.softmax(s, dim=-1), v), torch.logsumexp(s, dim=-1)


def reference(q, k, v, causal: bool, scale):
    """fp32 reference (O, LSE) from clones; plain torch, never the learner's code."""
    with torch.no_grad():
        return _attention_fp32(*(t.detach().clone().float() for t in (q, k, v)), causal, scale)


def reference_grads(q, k, v, do, causal: bool, scale):
    """fp32 reference (dq, dk, dv) by autograd through the plain-torch attention."""
    leaves = [t.detach().clone().float().requires_grad_(True) for t in (q, k, v)]
    o, _ = _attention_fp32(*leaves, causal, scale)
    o.backward(do.detach().float())
    return tuple(t.grad for t in leaves)


def check_forward(o, lse, q, k, v, causal: bool, scale) -> None:
    """O and LSE against the fp32 reference, at the dtype's tolerance."""
    atol = tolerance(q.dtype)
    ref_o, ref_lse = reference(q, k, v, causal, scale)
    kit.assert_nontrivial(ref_o, atol, "reference O")
    if o.dtype != q.dtype:
        raise AssertionError(f"O has dtype {o.dtype}, expected q's dtype {q.dtype}")
    kit.assert_close(o, ref_o, atol=atol, what="O")
    if lse is None:
        raise AssertionError("the log-sum-exp must be returned")
    kit.assert_close(lse, ref_lse, atol=atol, what="LSE (natural log of sum_j exp(scale * q.k_j))")
