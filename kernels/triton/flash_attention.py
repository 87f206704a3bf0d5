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
    # BEGIN SOLUTION
    # Program (pid_m, pid_bh) owns query rows [pid_m * BLOCK_M, +BLOCK_M) of one (batch, head).
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = pid_bh // H
    h = pid_bh % H
    kv_h = h // GROUP_SIZE  # GQA: query heads [kv_h*G, kv_h*G + G) all read K/V head kv_h

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # (BLOCK_M,) query rows
    offs_d = tl.arange(0, BLOCK_D)  # (BLOCK_D,) head_dim padded to a power of two
    d_ok = offs_d < HEAD_DIM

    # Q block stays in SRAM/registers for the whole loop: (BLOCK_M, BLOCK_D).
    q_ptrs = Q + b * stride_qb + h * stride_qh + offs_m[:, None] * stride_qn + offs_d[None, :] * stride_qd
    q = tl.load(q_ptrs, mask=(offs_m[:, None] < N) & d_ok[None, :], other=0.0)

    k_base = K + b * stride_kb + kv_h * stride_kh
    v_base = V + b * stride_vb + kv_h * stride_vh

    # Online-softmax state per query row (all in log2 units):
    #   m_i = max of the scores seen so far, l_i = sum_j exp2(s_j - m_i),
    #   acc = sum_j exp2(s_j - m_i) * v_j   (the unnormalised output).
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)

    # Causal: key n is visible to row m only if n <= m, so blocks that start after
    # this program's last row are entirely masked. We never visit them (that is
    # half the work saved), instead of visiting and masking them.
    if CAUSAL:
        hi = tl.minimum(N, (pid_m + 1) * BLOCK_M)
    else:
        hi = N
    for start_n in range(0, hi, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)  # (BLOCK_N,) key positions
        kv_mask = (offs_n[:, None] < N) & d_ok[None, :]
        k = tl.load(k_base + offs_n[:, None] * stride_kn + offs_d[None, :] * stride_kd, mask=kv_mask, other=0.0)
        # Scores of this tile, S = Q K^T * scale, in log2 units: (BLOCK_M, BLOCK_N).
        s = tl.dot(q, tl.trans(k), input_precision=DOT_PRECISION) * qk_scale
        # Keys past the end (the ragged tail) and future keys (causal) get -inf,
        # i.e. probability exactly 0. This must happen BEFORE the max and the sum.
        valid = offs_n[None, :] < N
        if CAUSAL:
            valid = valid & (offs_m[:, None] >= offs_n[None, :])
        s = tl.where(valid, s, float("-inf"))

        # Online softmax update. With the new max m_new:
        #   l_new   = l_i * exp2(m_i - m_new) + sum_j exp2(s_j - m_new)
        #   acc_new = acc * exp2(m_i - m_new) + P_tile @ V_tile
        # alpha = exp2(m_i - m_new) <= 1 rescales everything accumulated under the
        # old max, so no exponent is ever taken of a positive number (no overflow).
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.math.exp2(m_i - m_new)
        p = tl.math.exp2(s - m_new[:, None])  # (BLOCK_M, BLOCK_N), entries in [0, 1]
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        v = tl.load(v_base + offs_n[:, None] * stride_vn + offs_d[None, :] * stride_vd, mask=kv_mask, other=0.0)
        # P is cast to V's dtype (fp16/bf16 tensor cores); accumulation stays fp32.
        acc = tl.dot(p.to(v.dtype), v, acc, input_precision=DOT_PRECISION)
        m_i = m_new

    # Normalise once at the end (FlashAttention-2 defers the division).
    acc = acc / l_i[:, None]
    # log-sum-exp of the scaled scores, natural log: ln(sum_j e^{x_j}) = ln2 * (m + log2(l)).
    lse = (m_i + tl.math.log2(l_i)) * 0.6931471805599453
    row_ok = offs_m < N
    tl.store(LSE + pid_bh * N + offs_m, lse, mask=row_ok)
    o_ptrs = O + b * stride_ob + h * stride_oh + offs_m[:, None] * stride_on + offs_d[None, :] * stride_od
    tl.store(o_ptrs, acc.to(O.dtype.element_ty), mask=row_ok[:, None] & d_ok[None, :])
    # STARTER
    # # TODO (README.md, 'Part 3: triton-forward'); this signature is a suggestion, change it freely.
    # #  1. pid_m = tl.program_id(0) picks BLOCK_M query rows, pid_bh = tl.program_id(1) picks
    # #     (batch, head); GQA (Part 5): the K/V head is head // GROUP_SIZE.
    # #  2. load the Q block (BLOCK_M, BLOCK_D) once, masking rows >= N and columns >= HEAD_DIM.
    # #  3. m_i = -inf, l_i = 0, acc = 0 (fp32); loop start_n over the keys in steps of BLOCK_N
    # #     (Part 4: causal programs stop after the diagonal block):
    # #       s = tl.dot(q, tl.trans(k)) * qk_scale; set s = -inf where the key is past N
    # #       (and, causal, where key > query) BEFORE the max and sum;
    # #       m_new = max(m_i, rowmax(s)); alpha = exp2(m_i - m_new); p = exp2(s - m_new)
    # #       l_i = l_i * alpha + rowsum(p); acc = acc * alpha + p @ v; m_i = m_new
    # #  4. O = acc / l_i; LSE = (m_i + log2(l_i)) * ln(2)  (natural log); store both, masked.
    # pass
    # END SOLUTION


@triton.jit
def _attn_bwd_preprocess(O, DO, DELTA, stride_on, stride_dn, N, HEAD_DIM,
                         BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr):
    # BEGIN SOLUTION
    # delta_i = sum_d dO_i,d * O_i,d = rowsum(dO * O). It appears in dS = P * (dP - delta)
    # because d softmax: dS_ij = P_ij (dP_ij - sum_k P_ik dP_ik) and sum_k P_ik dP_ik = dO_i . O_i.
    # O and dO are [batch*heads, seq, head_dim] contiguous here; DELTA is [batch*heads, seq].
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    mask = (offs_m[:, None] < N) & (offs_d[None, :] < HEAD_DIM)
    o = tl.load(O + pid_bh * N * HEAD_DIM + offs_m[:, None] * stride_on + offs_d[None, :], mask=mask, other=0.0)
    do = tl.load(DO + pid_bh * N * HEAD_DIM + offs_m[:, None] * stride_dn + offs_d[None, :], mask=mask, other=0.0)
    delta = tl.sum(o.to(tl.float32) * do.to(tl.float32), 1)
    tl.store(DELTA + pid_bh * N + offs_m, delta, mask=offs_m < N)
    # STARTER
    # # TODO (README.md, 'Part 6: backward'): delta_i = rowsum(dO_i * O_i), fp32, [batch*heads, seq].
    # pass
    # END SOLUTION


@triton.jit
def _attn_bwd_dkdv_kernel(
    Q, K, V, DO, LSE, DELTA, DK, DV,  # Q, DO: [B, H, N, D]; K, V, DK, DV: [B, H_kv, N, D]; all contiguous
    H, H_KV, N, HEAD_DIM, GROUP_SIZE, sm_scale, qk_scale,
    CAUSAL: tl.constexpr, DOT_PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
):
    # BEGIN SOLUTION
    # One program per block of BLOCK_N keys of one (batch, kv head). It keeps K_j, V_j and
    # their gradients on chip and streams every query block of every query head in the
    # GQA group past them:  dV_j = sum_i P_ij^T dO_i,   dK_j = scale * sum_i dS_ij^T Q_i.
    # P is recomputed from the saved LSE: P_ij = exp(scale * q_i . k_j - lse_i).
    pid_n = tl.program_id(0)
    pid_bkv = tl.program_id(1)
    b = pid_bkv // H_KV
    kv_h = pid_bkv % H_KV
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    d_ok = offs_d < HEAD_DIM
    kv_off = pid_bkv * N * HEAD_DIM + offs_n[:, None] * HEAD_DIM + offs_d[None, :]
    kv_mask = (offs_n[:, None] < N) & d_ok[None, :]
    k = tl.load(K + kv_off, mask=kv_mask, other=0.0)  # (BLOCK_N, BLOCK_D)
    v = tl.load(V + kv_off, mask=kv_mask, other=0.0)
    dk = tl.zeros([BLOCK_N, BLOCK_D], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N, BLOCK_D], dtype=tl.float32)

    # Causal: query rows before this key block cannot see it; start at the query
    # block that contains the first key of this block.
    if CAUSAL:
        lo = (pid_n * BLOCK_N // BLOCK_M) * BLOCK_M
    else:
        lo = 0
    for g in range(0, GROUP_SIZE):
        bh = b * H + kv_h * GROUP_SIZE + g  # the query head (flattened with batch)
        for start_m in range(lo, N, BLOCK_M):
            offs_m = start_m + tl.arange(0, BLOCK_M)
            m_ok = offs_m < N
            q_off = bh * N * HEAD_DIM + offs_m[:, None] * HEAD_DIM + offs_d[None, :]
            q_mask = m_ok[:, None] & d_ok[None, :]
            q = tl.load(Q + q_off, mask=q_mask, other=0.0)  # (BLOCK_M, BLOCK_D)
            do = tl.load(DO + q_off, mask=q_mask, other=0.0)
            lse2 = tl.load(LSE + bh * N + offs_m, mask=m_ok, other=0.0) * 1.4426950408889634
            delta = tl.load(DELTA + bh * N + offs_m, mask=m_ok, other=0.0)
            # Work with transposed tiles (keys along rows) so dK, dV need no transposes.
            s_t = tl.dot(k, tl.trans(q), input_precision=DOT_PRECISION) * qk_scale  # (BLOCK_N, BLOCK_M)
            p_t = tl.math.exp2(s_t - lse2[None, :])
            valid = m_ok[None, :] & (offs_n[:, None] < N)
            if CAUSAL:
                valid = valid & (offs_m[None, :] >= offs_n[:, None])
            p_t = tl.where(valid, p_t, 0.0)
            dv = tl.dot(p_t.to(do.dtype), do, dv, input_precision=DOT_PRECISION)
            dp_t = tl.dot(v, tl.trans(do), input_precision=DOT_PRECISION)  # (BLOCK_N, BLOCK_M) = (dO V^T)^T
            ds_t = p_t * (dp_t - delta[None, :])
            dk = tl.dot(ds_t.to(q.dtype), q, dk, input_precision=DOT_PRECISION)
    dk = dk * sm_scale  # S = scale * Q K^T, so dK = scale * dS^T Q
    tl.store(DK + kv_off, dk.to(DK.dtype.element_ty), mask=kv_mask)
    tl.store(DV + kv_off, dv.to(DV.dtype.element_ty), mask=kv_mask)
    # STARTER
    # # TODO (README.md, 'Part 6: backward'): one program per BLOCK_N keys of one (batch, kv head).
    # # For every query head of the group and every query block: recompute
    # # P = exp(scale * Q K^T - LSE) (masked like the forward), dV += P^T dO,
    # # dP = dO V^T, dS = P * (dP - delta), dK += dS^T Q. Finally dK *= scale.
    # pass
    # END SOLUTION


@triton.jit
def _attn_bwd_dq_kernel(
    Q, K, V, DO, LSE, DELTA, DQ,  # same layouts as the dK/dV kernel; DQ like Q
    H, N, HEAD_DIM, GROUP_SIZE, sm_scale, qk_scale,
    CAUSAL: tl.constexpr, DOT_PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
):
    # BEGIN SOLUTION
    # One program per block of query rows: dQ_i = scale * sum_j dS_ij K_j, looping over
    # K/V blocks exactly like the forward (and skipping the same causal blocks).
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = pid_bh // H
    kv_bh = b * (H // GROUP_SIZE) + (pid_bh % H) // GROUP_SIZE
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    d_ok = offs_d < HEAD_DIM
    m_ok = offs_m < N
    q_off = pid_bh * N * HEAD_DIM + offs_m[:, None] * HEAD_DIM + offs_d[None, :]
    q_mask = m_ok[:, None] & d_ok[None, :]
    q = tl.load(Q + q_off, mask=q_mask, other=0.0)
    do = tl.load(DO + q_off, mask=q_mask, other=0.0)
    lse2 = tl.load(LSE + pid_bh * N + offs_m, mask=m_ok, other=0.0) * 1.4426950408889634
    delta = tl.load(DELTA + pid_bh * N + offs_m, mask=m_ok, other=0.0)
    dq = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
    if CAUSAL:
        hi = tl.minimum(N, (pid_m + 1) * BLOCK_M)
    else:
        hi = N
    for start_n in range(0, hi, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        kv_off = kv_bh * N * HEAD_DIM + offs_n[:, None] * HEAD_DIM + offs_d[None, :]
        kv_mask = (offs_n[:, None] < N) & d_ok[None, :]
        k = tl.load(K + kv_off, mask=kv_mask, other=0.0)
        v = tl.load(V + kv_off, mask=kv_mask, other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision=DOT_PRECISION) * qk_scale
        p = tl.math.exp2(s - lse2[:, None])  # (BLOCK_M, BLOCK_N), the forward's P, recomputed
        valid = offs_n[None, :] < N
        if CAUSAL:
            valid = valid & (offs_m[:, None] >= offs_n[None, :])
        p = tl.where(valid, p, 0.0)
        dp = tl.dot(do, tl.trans(v), input_precision=DOT_PRECISION)  # dP = dO V^T
        ds = p * (dp - delta[:, None])
        dq = tl.dot(ds.to(k.dtype), k, dq, input_precision=DOT_PRECISION)
    dq = dq * sm_scale
    tl.store(DQ + q_off, dq.to(DQ.dtype.element_ty), mask=q_mask)
    # STARTER
    # # TODO (README.md, 'Part 6: backward'): one program per BLOCK_M query rows; loop over the
    # # K/V blocks like the forward: recompute P, dS = P * (dO V^T - delta), dQ += dS K; dQ *= scale.
    # pass
    # END SOLUTION


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


# BEGIN SOLUTION
# GPU tile candidates (BLOCK_M, BLOCK_N, num_warps, num_stages), after the Triton tutorial
# 06-fused-attention. Compiled for sm_90 (H100/H200), each list avoids register spills at
# head_dim 64 and 128 where it matters: the fp32 accumulator of a (128, 128) tile alone takes
# 128 registers per thread with 4 warps. The dK/dV kernel wants a wide block of keys on chip
# and narrow query blocks streaming past; the dQ kernel the opposite. The first entry is the
# default; from AUTOTUNE_MIN_SEQ keys on, triton.autotune times all of them once per
# (seq, head_dim, causal, dtype) and keeps the fastest (short sequences are not worth the
# compile time of every candidate).
_GPU_TILES = {
    "fwd": [(128, 64, 8, 3), (128, 128, 8, 3), (64, 64, 4, 3)],
    "dkdv": [(32, 64, 8, 3), (32, 128, 8, 3), (64, 128, 8, 3), (32, 64, 8, 2)],
    "dq": [(128, 32, 8, 3), (64, 32, 8, 3), (128, 64, 8, 3)],
}
# fp32 inputs (exact IEEE dots, no tensor cores: for checking, not for speed) need 2x the
# shared memory per tile; these small tiles fit every recent GPU.
_GPU_TILES_FP32 = {"fwd": (32, 32, 4, 2), "dkdv": (16, 32, 4, 2), "dq": (64, 32, 8, 2)}
AUTOTUNE_MIN_SEQ = 1024
_TUNED: dict = {}
_SMALLEST_TILE = (16, 16, 4, 1)  # fits any GPU Triton supports


def _shared_memory_per_block(device) -> int:
    """The most shared memory one program may use on `device`: Triton's own figure (what it checks
    a compiled kernel against), else torch's. sm_80: 163 KB, sm_90: 227 KB, sm_86/sm_89: 99 KB."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    try:
        return int(triton.runtime.driver.active.utils.get_device_properties(index)["max_shared_mem"])
    except Exception:  # noqa: BLE001 - an older Triton: ask torch
        props = torch.cuda.get_device_properties(index)
        return int(getattr(props, "shared_memory_per_block_optin", 0) or getattr(props, "shared_memory_per_block", 49152))


def _tile_bytes(kind: str, block_m: int, block_n: int, block_d: int, stages: int, elem: int) -> int:
    """Shared memory a tile configuration needs, estimated: the operand tiles streamed through the
    loop are buffered `stages` times, the tiles a program keeps (and P or dS, staged for the second
    dot) once. An estimate on the safe side; a config that still does not fit raises OutOfResources
    at launch and the next one is tried."""
    streamed = block_n if kind in ("fwd", "dq") else block_m  # K, V past Q's rows; Q, dO past K/V's (dK/dV)
    kept = {"fwd": block_m, "dq": 2 * block_m, "dkdv": 2 * block_n}[kind]  # Q; Q and dO; K and V
    return elem * (2 * stages * streamed * block_d + kept * block_d + block_m * block_n)


def _fitting_tiles(kind: str, candidates, block_d: int, elem: int, device) -> list:
    """`candidates` that fit this device's shared memory, each with as many pipeline stages as fit
    (at least 1); the smallest tile when none does. The order (the default first) is kept."""
    limit = _shared_memory_per_block(device)
    fitting = []
    for block_m, block_n, warps, stages in candidates:
        while stages > 1 and _tile_bytes(kind, block_m, block_n, block_d, stages, elem) > limit:
            stages -= 1
        if _tile_bytes(kind, block_m, block_n, block_d, stages, elem) <= limit:
            fitting.append((block_m, block_n, warps, stages))
    return list(dict.fromkeys(fitting)) or [_SMALLEST_TILE]


def _check_gpu_dtype(t: torch.Tensor) -> None:
    """bf16 tl.dot compiles only for compute capability 8.0 and newer (a T4 is 7.5)."""
    if t.dtype == torch.bfloat16 and t.is_cuda and torch.cuda.get_device_capability(t.device)[0] < 8:
        raise ValueError(f"bfloat16 needs a GPU of compute capability 8.0 or newer; "
                         f"{torch.cuda.get_device_name(t.device)} has "
                         f"{'.'.join(map(str, torch.cuda.get_device_capability(t.device)))}")
# STARTER
# def _launch_config(head_dim: int, kernel: str, interpret: bool) -> dict:
    # """Tile sizes and launch settings for kernel "fwd", "dkdv" or "dq" (a starting point:
    # for part 8, try triton.autotune over a few of these).
# END SOLUTION

    # BEGIN SOLUTION

def _launch(kind: str, grid, *args, seq: int, interpret: bool, **kwargs) -> None:
    """Launch kernel `kind` ("fwd", "dkdv", "dq"); grid(BLOCK_M, BLOCK_N) -> launch grid.

    The interpreter runs one program at a time, so CPU runs use one small tile size.
    """
    kernel = {"fwd": _attn_fwd_kernel, "dkdv": _attn_bwd_dkdv_kernel, "dq": _attn_bwd_dq_kernel}[kind]
    # STARTER
    # The interpreter runs one program at a time, so small tiles keep CPU runs quick.
    # On a GPU larger tiles reuse each load more (values after the Triton tutorial
    # 06-fused-attention): the dK/dV kernel keeps a wide block of keys on chip and
    # streams narrow query blocks; the dQ kernel does the opposite.
    # """
    # END SOLUTION
    if interpret:
        # BEGIN SOLUTION
        block_m, block_n = INTERPRETER_BLOCKS[kind]
        kernel[grid(block_m, block_n)](*args, BLOCK_M=block_m, BLOCK_N=block_n, num_warps=1, num_stages=1,
                                       **kwargs)
        return
    q = args[0]
    _check_gpu_dtype(q)
    fp32 = kwargs["DOT_PRECISION"] == "ieee"
    # Tiles sized for an H100 need more shared memory than sm_86/sm_89 (RTX, A10, L4, L40S) give a block.
    tiles = _fitting_tiles(kind, [_GPU_TILES_FP32[kind]] if fp32 else _GPU_TILES[kind], kwargs["BLOCK_D"],
                           q.element_size(), q.device)
    if fp32 or seq < AUTOTUNE_MIN_SEQ:
        for i, (block_m, block_n, warps, stages) in enumerate(tiles):
            try:
                kernel[grid(block_m, block_n)](*args, BLOCK_M=block_m, BLOCK_N=block_n, num_warps=warps,
                                               num_stages=stages, **kwargs)
                return
            except triton.runtime.errors.OutOfResources:
                if i == len(tiles) - 1:
                    raise
    key = (kind, q.device.index, kwargs["BLOCK_D"], q.element_size())
    if key not in _TUNED:
        configs = [triton.Config({"BLOCK_M": m, "BLOCK_N": n}, num_warps=w, num_stages=st) for m, n, w, st in tiles]
        _TUNED[key] = triton.autotune(configs=configs, key=["N", "HEAD_DIM", "CAUSAL", "DOT_PRECISION"])(kernel)
    _TUNED[key][lambda meta: grid(meta["BLOCK_M"], meta["BLOCK_N"])](*args, **kwargs)
        # STARTER
        # block_m, block_n = INTERPRETER_BLOCKS[kernel]
        # return dict(BLOCK_M=block_m, BLOCK_N=block_n, num_warps=1, num_stages=1)
    # # Chosen so that, compiled for an H100/H200 (sm_90), no tile spills registers.
    # if kernel == "dkdv":
        # return dict(BLOCK_M=32, BLOCK_N=128 if head_dim <= 64 else 64, num_warps=8, num_stages=3)
    # if kernel == "dq":
        # return dict(BLOCK_M=128, BLOCK_N=32, num_warps=8, num_stages=3)
    # return dict(BLOCK_M=128, BLOCK_N=64, num_warps=8, num_stages=3)
        # END SOLUTION


def _interpreting(t: torch.Tensor) -> bool:
    import os

    return os.environ.get("TRITON_INTERPRET") == "1" or t.device.type == "cpu"


def flash_attention_forward(q, k, v, causal: bool = False, scale: float | None = None):
    """O = softmax(scale * Q K^T [+ causal mask]) V, and LSE = logsumexp of the scaled,
    masked scores per query row (natural log, fp32, [batch, heads, seq]).
    scale defaults to 1/sqrt(head_dim). No autograd; see `flash_attention`."""
    # BEGIN SOLUTION
    batch, heads, kv_heads, seq, head_dim = _check_inputs(q, k, v)
    scale = 1.0 / math.sqrt(head_dim) if scale is None else float(scale)
    o = torch.empty_like(q)
    lse = torch.empty((batch, heads, seq), device=q.device, dtype=torch.float32)
    _launch(
        "fwd", lambda block_m, block_n: (triton.cdiv(seq, block_m), batch * heads),
        q, k, v, o, lse,
        *q.stride(), *k.stride(), *v.stride(), *o.stride(),
        heads, seq, head_dim, heads // kv_heads, scale * LOG2E,
        CAUSAL=bool(causal), DOT_PRECISION="ieee" if q.dtype == torch.float32 else "tf32",
        BLOCK_D=max(16, triton.next_power_of_2(head_dim)), seq=seq, interpret=_interpreting(q),
    )
    return o, lse
    # STARTER
    # # TODO (README.md, 'Part 3: triton-forward'): check inputs (_check_inputs), allocate
    # # O like q and LSE as fp32 [batch, heads, seq], launch _attn_fwd_kernel on the grid
    # # (cdiv(seq, BLOCK_M), batch * heads), return (o, lse). No torch matmul/softmax here.
    # raise NotImplementedError("flash_attention_forward: see README.md, section 'Part 3: triton-forward'")
    # END SOLUTION


def flash_attention_backward(q, k, v, o, lse, do, causal: bool = False, scale: float | None = None):
    """Gradients (dq, dk, dv) of sum(O * dO), recomputing P from the saved LSE."""
    # BEGIN SOLUTION
    batch, heads, kv_heads, seq, head_dim = _check_inputs(q, k, v)
    scale = 1.0 / math.sqrt(head_dim) if scale is None else float(scale)
    q, k, v, o, do = (t.contiguous() for t in (q, k, v, o, do))
    lse = lse.contiguous()
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    delta = torch.empty_like(lse)
    interpret = _interpreting(q)
    block_d = max(16, triton.next_power_of_2(head_dim))
    precision = "ieee" if q.dtype == torch.float32 else "tf32"
    # delta first (one row sum per query), then the two gradient kernels; neither needs atomics.
    pre_block = 32 if interpret else 64
    _attn_bwd_preprocess[(triton.cdiv(seq, pre_block), batch * heads)](
        o, do, delta, o.stride(2), do.stride(2), seq, head_dim, BLOCK_M=pre_block, BLOCK_D=block_d)
    common = dict(CAUSAL=bool(causal), DOT_PRECISION=precision, BLOCK_D=block_d, seq=seq, interpret=interpret)
    _launch("dq", lambda block_m, block_n: (triton.cdiv(seq, block_m), batch * heads),
            q, k, v, do, lse, delta, dq, heads, seq, head_dim, heads // kv_heads, scale, scale * LOG2E, **common)
    _launch("dkdv", lambda block_m, block_n: (triton.cdiv(seq, block_n), batch * kv_heads),
            q, k, v, do, lse, delta, dk, dv, heads, kv_heads, seq, head_dim, heads // kv_heads, scale,
            scale * LOG2E, **common)
    return dq, dk, dv
    # STARTER
    # # TODO (README.md, 'Part 6: backward'): delta = rowsum(dO * O), then the dK/dV kernel and
    # # the dQ kernel. dk, dv have K/V's shape: with GQA, sum over the query heads of a group.
    # raise NotImplementedError("flash_attention_backward: see README.md, section 'Part 6: backward'")
    # END SOLUTION


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
