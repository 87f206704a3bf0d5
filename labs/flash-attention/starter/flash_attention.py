"""FlashAttention forward and backward in Triton.

What you will learn here:
- why attention is limited by memory traffic (HBM), not by arithmetic, and how
  tiling keeps the N x N score matrix in on-chip SRAM and never writes it out;
- the online softmax: one pass over blocks of K/V with a running max `m` and a
  running sum `l`, rescaling the output accumulator when the max grows;
- why the forward saves the log-sum-exp (LSE): the backward recomputes the
  probabilities from it instead of storing the N x N matrix P;
- causal attention that *skips* the K/V blocks above the diagonal, and
  grouped-query attention (GQA), where several query heads share one K/V head.

Layout: q is [batch, heads, seq, head_dim]; k and v are [batch, kv_heads, seq,
head_dim] with heads % kv_heads == 0 (kv_heads == heads is ordinary multi-head
attention). Any sequence length works (the ragged last block is masked), any
head_dim from 16 to 128, fp16 / bf16 / fp32. Queries and keys have the same
length (self-attention), so "causal" means query i sees keys 0..i.

The algorithm is FlashAttention-2 (Dao, 2023): one program per block of query
rows, the loop over K/V blocks inside. Ideas follow the Triton tutorial
06-fused-attention and the FlashAttention papers; the code is our own.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634  # log2(e): exp(x) == exp2(x * LOG2E); exp2 is one fast instruction


@triton.jit
def _attn_fwd_kernel(
    Q, K, V, O, LSE,  # pointers; LSE is [batch, heads, seq] fp32, contiguous
    stride_qb, stride_qh, stride_qn, stride_qd,
    stride_kb, stride_kh, stride_kn, stride_kd,
    stride_vb, stride_vh, stride_vn, stride_vd,
    stride_ob, stride_oh, stride_on, stride_od,
    H, N, HEAD_DIM, GROUP_SIZE,  # heads, seq length, real head_dim, heads per kv head
    qk_scale,  # softmax scale * log2(e): scores come out in log2 units
    CAUSAL: tl.constexpr, DOT_PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
):
    # TODO (README.md, 'Part 3: triton-forward'); this signature is a suggestion, change it freely.
    #  1. pid_m = tl.program_id(0) picks BLOCK_M query rows, pid_bh = tl.program_id(1) picks
    #     (batch, head); GQA (Part 5): the K/V head is head // GROUP_SIZE.
    #  2. load the Q block (BLOCK_M, BLOCK_D) once, masking rows >= N and columns >= HEAD_DIM.
    #  3. m_i = -inf, l_i = 0, acc = 0 (fp32); loop start_n over the keys in steps of BLOCK_N
    #     (Part 4: causal programs stop after the diagonal block):
    #       s = tl.dot(q, tl.trans(k)) * qk_scale; set s = -inf where the key is past N
    #       (and, causal, where key > query) BEFORE the max and sum;
    #       m_new = max(m_i, rowmax(s)); alpha = exp2(m_i - m_new); p = exp2(s - m_new)
    #       l_i = l_i * alpha + rowsum(p); acc = acc * alpha + p @ v; m_i = m_new
    #  4. O = acc / l_i; LSE = (m_i + log2(l_i)) * ln(2)  (natural log); store both, masked.
    pass


@triton.jit
def _attn_bwd_preprocess(O, DO, DELTA, stride_on, stride_dn, N, HEAD_DIM,
                         BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr):
    # TODO (README.md, 'Part 6: backward'): delta_i = rowsum(dO_i * O_i), fp32, [batch*heads, seq].
    pass


@triton.jit
def _attn_bwd_dkdv_kernel(
    Q, K, V, DO, LSE, DELTA, DK, DV,  # Q, DO: [B, H, N, D]; K, V, DK, DV: [B, H_kv, N, D]; all contiguous
    H, H_KV, N, HEAD_DIM, GROUP_SIZE, sm_scale, qk_scale,
    CAUSAL: tl.constexpr, DOT_PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
):
    # TODO (README.md, 'Part 6: backward'): one program per BLOCK_N keys of one (batch, kv head).
    # For every query head of the group and every query block: recompute
    # P = exp(scale * Q K^T - LSE) (masked like the forward), dV += P^T dO,
    # dP = dO V^T, dS = P * (dP - delta), dK += dS^T Q. Finally dK *= scale.
    pass


@triton.jit
def _attn_bwd_dq_kernel(
    Q, K, V, DO, LSE, DELTA, DQ,  # same layouts as the dK/dV kernel; DQ like Q
    H, N, HEAD_DIM, GROUP_SIZE, sm_scale, qk_scale,
    CAUSAL: tl.constexpr, DOT_PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
):
    # TODO (README.md, 'Part 6: backward'): one program per BLOCK_M query rows; loop over the
    # K/V blocks like the forward: recompute P, dS = P * (dO V^T - delta), dQ += dS K; dQ *= scale.
    pass


def _check_inputs(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[int, int, int, int, int]:
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        raise ValueError("q, k, v must be [batch, heads, seq, head_dim]")
    batch, heads, seq, head_dim = q.shape
    if k.shape != v.shape or k.shape[0] != batch or k.shape[2] != seq or k.shape[3] != head_dim:
        raise ValueError(f"k and v must be [batch, kv_heads, seq, head_dim]; got q {tuple(q.shape)}, "
                         f"k {tuple(k.shape)}, v {tuple(v.shape)}")
    kv_heads = k.shape[1]
    if heads % kv_heads:
        raise ValueError(f"heads ({heads}) must be a multiple of kv_heads ({kv_heads})")
    if not 16 <= head_dim <= 128:
        raise ValueError(f"head_dim must be between 16 and 128, got {head_dim}")
    if not (q.dtype == k.dtype == v.dtype) or q.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        raise ValueError("q, k, v must share one dtype: float16, bfloat16 or float32")
    return batch, heads, kv_heads, seq, head_dim


# Tile sizes (BLOCK_M, BLOCK_N) of each kernel under the interpreter (TRITON_INTERPRET=1). It
# runs one program at a time, so small tiles keep CPU runs quick. The grader replaces this dict
# with tiles of its own choice, unequal ones included (e.g. "fwd": (16, 32)): look it up when a
# kernel is launched, and never assume BLOCK_M == BLOCK_N in a loop bound or a mask.
INTERPRETER_BLOCKS = {"fwd": (32, 32), "dkdv": (32, 32), "dq": (32, 32)}


def _launch_config(head_dim: int, kernel: str, interpret: bool) -> dict:
    """Tile sizes and launch settings for kernel "fwd", "dkdv" or "dq" (a starting point:
    for part 8, try triton.autotune over a few of these).

    The interpreter runs one program at a time, so small tiles keep CPU runs quick.
    On a GPU larger tiles reuse each load more (values after the Triton tutorial
    06-fused-attention): the dK/dV kernel keeps a wide block of keys on chip and
    streams narrow query blocks; the dQ kernel does the opposite.
    """
    if interpret:
        block_m, block_n = INTERPRETER_BLOCKS[kernel]
        return dict(BLOCK_M=block_m, BLOCK_N=block_n, num_warps=1, num_stages=1)
    # Chosen so that, compiled for an H100/H200 (sm_90), no tile spills registers.
    if kernel == "dkdv":
        return dict(BLOCK_M=32, BLOCK_N=128 if head_dim <= 64 else 64, num_warps=8, num_stages=3)
    if kernel == "dq":
        return dict(BLOCK_M=128, BLOCK_N=32, num_warps=8, num_stages=3)
    return dict(BLOCK_M=128, BLOCK_N=64, num_warps=8, num_stages=3)


def _interpreting(t: torch.Tensor) -> bool:
    import os

    return os.environ.get("TRITON_INTERPRET") == "1" or t.device.type == "cpu"


def flash_attention_forward(q, k, v, causal: bool = False, scale: float | None = None):
    """O = softmax(scale * Q K^T [+ causal mask]) V, and LSE = logsumexp of the scaled,
    masked scores per query row (natural log, fp32, [batch, heads, seq]).
    scale defaults to 1/sqrt(head_dim). No autograd; see `flash_attention`."""
    # TODO (README.md, 'Part 3: triton-forward'): check inputs (_check_inputs), allocate
    # O like q and LSE as fp32 [batch, heads, seq], launch _attn_fwd_kernel on the grid
    # (cdiv(seq, BLOCK_M), batch * heads), return (o, lse). No torch matmul/softmax here.
    raise NotImplementedError("flash_attention_forward: see README.md, section 'Part 3: triton-forward'")


def flash_attention_backward(q, k, v, o, lse, do, causal: bool = False, scale: float | None = None):
    """Gradients (dq, dk, dv) of sum(O * dO), recomputing P from the saved LSE."""
    # TODO (README.md, 'Part 6: backward'): delta = rowsum(dO * O), then the dK/dV kernel and
    # the dQ kernel. dk, dv have K/V's shape: with GQA, sum over the query heads of a group.
    raise NotImplementedError("flash_attention_backward: see README.md, section 'Part 6: backward'")


class FlashAttentionFunction(torch.autograd.Function):
    """Autograd wrapper: saves q, k, v, O and LSE (O(N) extra memory, not O(N^2))."""

    @staticmethod
    def forward(ctx, q, k, v, causal: bool, scale: float | None):
        o, lse = flash_attention_forward(q, k, v, causal, scale)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.causal, ctx.scale = causal, scale
        ctx.mark_non_differentiable(lse)
        return o, lse

    @staticmethod
    def backward(ctx, do, _dlse):
        q, k, v, o, lse = ctx.saved_tensors
        dq, dk, dv = flash_attention_backward(q, k, v, o, lse, do, ctx.causal, ctx.scale)
        return dq, dk, dv, None, None


def flash_attention(q, k, v, causal: bool = False, scale: float | None = None):
    """Differentiable FlashAttention: returns (O, LSE); gradients flow to q, k, v through O."""
    return FlashAttentionFunction.apply(q, k, v, causal, scale)
