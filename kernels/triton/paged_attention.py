# BEGIN SOLUTION
"""Paged attention for decoding, in Triton.

What you will learn
-------------------
* How a kernel reads a KV cache that is scattered over fixed-size blocks: the
  block table turns "token p of sequence s" into "block table[s, p // BLOCK]
  at offset p % BLOCK" (vLLM's PagedAttention).
* Online softmax (as in FlashAttention): walk the context one block at a time,
  keeping a running max `m`, a running sum `l` and an un-normalised output
  `acc`, so the whole score row never has to be stored.
* Grouped-query attention: query head h reads kv head h // GROUP.

Layouts (the same as the torch reference in the paged-kv-cache lab):
    query:        (num_seqs, num_heads, head_dim)
    key_cache:    (num_blocks, block_size, num_kv_heads, head_dim), same for value_cache
    block_tables: (num_seqs, max_blocks_per_seq) int32, padding past the last block is never read
    context_lens: (num_seqs,) int32, >= 1
    out:          (num_seqs, num_heads, head_dim), query's dtype

The grid is (num_heads, num_seqs): one program computes one output row of
head_dim values, streaming one whole cache block (BLOCK_SIZE x HEAD_DIM of K,
then of V) per loop iteration. Decode attention is memory-bound: each cached
element feeds only 2 flops per query head, so what matters is bytes moved. The
GROUP programs of one kv head read the same blocks; launched side by side, they
mostly hit L2. (Serving the whole group in one program reads HBM once, but the
(GROUP, BLOCK_SIZE, HEAD_DIM) products cost registers: 148 per thread for a
group of 4 at head_dim 128, against 72 here - try it and measure.)

Run the correctness check on a CPU with the interpreter:
    TRITON_INTERPRET=1 python kernels/triton/paged_attention.py
"""
# STARTER
# """Paged attention for decoding, in Triton.
#
# What you will learn
# -------------------
# * How a kernel reads a KV cache that is scattered over fixed-size blocks: the
  # block table turns "token p of sequence s" into "block table[s, p // BLOCK]
  # at offset p % BLOCK" (vLLM's PagedAttention).
# * Online softmax (as in FlashAttention): walk the context one block at a time,
  # keeping a running max `m`, a running sum `l` and an un-normalised output
  # `acc`, so the whole score row never has to be stored.
# * Grouped-query attention: query head h reads kv head h // GROUP.
#
# Layouts (the same as the torch reference in the paged-kv-cache lab):
    # query:        (num_seqs, num_heads, head_dim)
    # key_cache:    (num_blocks, block_size, num_kv_heads, head_dim), same for value_cache
    # block_tables: (num_seqs, max_blocks_per_seq) int32, padding past the last block is never read
    # context_lens: (num_seqs,) int32, >= 1
    # out:          (num_seqs, num_heads, head_dim), query's dtype
#
# The grid is (num_heads, num_seqs): one program computes one output row of
# head_dim values, streaming one whole cache block (BLOCK_SIZE x HEAD_DIM of K,
# then of V) per loop iteration. Decode attention is memory-bound: each cached
# element feeds only 2 flops per query head, so what matters is bytes moved. The
# GROUP programs of one kv head read the same blocks; launched side by side, they
# mostly hit L2. (Serving the whole group in one program reads HBM once, but the
# (GROUP, BLOCK_SIZE, HEAD_DIM) products cost registers: 148 per thread for a
# group of 4 at head_dim 128, against 72 here - try it and measure.)
#
# Run the correctness check on a CPU with the interpreter:
    # TRITON_INTERPRET=1 python triton_paged_attention.py
# """
# END SOLUTION

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def paged_attention_kernel(
    out_ptr, q_ptr, k_cache_ptr, v_cache_ptr, block_tables_ptr, context_lens_ptr,
    scale,
    stride_qs, stride_qh,                      # query strides (seq, head); head_dim stride is 1
    stride_os, stride_oh,                      # output strides
    stride_kb, stride_kt, stride_kh,           # cache strides (block, token in block, kv head)
    stride_bt,                                 # block table row stride
    GROUP: tl.constexpr,                       # query heads per kv head
    BLOCK_SIZE: tl.constexpr,                  # tokens per cache block (a power of two)
    HEAD_DIM: tl.constexpr,                    # real head_dim
    HEAD_DIM_PAD: tl.constexpr,                # next power of two >= HEAD_DIM (tl.arange needs one)
):
    # Heads vary fastest across the grid, so the GROUP programs that read the same
    # kv head of the same sequence run side by side and share its blocks in L2.
    head = tl.program_id(0)
    seq = tl.program_id(1)
    kv_head = head // GROUP

    offs_d = tl.arange(0, HEAD_DIM_PAD)                 # (D,)
    mask_d = offs_d < HEAD_DIM
    offs_t = tl.arange(0, BLOCK_SIZE)                   # (T,) token offsets inside a block

    # The query row, in fp32, pre-multiplied by the softmax scale.
    q = tl.load(q_ptr + seq * stride_qs + head * stride_qh + offs_d, mask=mask_d, other=0.0)
    q = q.to(tl.float32) * scale

    context_len = tl.load(context_lens_ptr + seq)
    num_blocks = (context_len + BLOCK_SIZE - 1) // BLOCK_SIZE       # blocks this sequence uses

    # Online-softmax state: running max, running denominator, running numerator.
    # (Shape-[1] tensors rather than Python floats: a loop-carried value must keep one type.)
    m_i = tl.full([1], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([1], dtype=tl.float32)
    acc = tl.zeros([HEAD_DIM_PAD], dtype=tl.float32)

    # BEGIN SOLUTION
    for b in range(0, num_blocks):
        # Which physical block holds logical block b of this sequence?
        block_id = tl.load(block_tables_ptr + seq * stride_bt + b).to(tl.int64)
        token_pos = b * BLOCK_SIZE + offs_t                      # (T,) positions in the sequence
        mask_t = token_pos < context_len                         # the last block may be partial
        base = block_id * stride_kb + kv_head * stride_kh
        kv_offs = base + offs_t[:, None] * stride_kt + offs_d[None, :]   # (T, D)
        kv_mask = mask_t[:, None] & mask_d[None, :]
        k = tl.load(k_cache_ptr + kv_offs, mask=kv_mask, other=0.0).to(tl.float32)
        v = tl.load(v_cache_ptr + kv_offs, mask=kv_mask, other=0.0).to(tl.float32)

        # scores[t] = q . k[t]   (one query row: an elementwise product and a sum,
        # no tl.dot, which needs tiles of at least 16 x 16)
        s = tl.sum(q[None, :] * k, axis=1)                        # (T,)
        s = tl.where(mask_t, s, -float("inf"))

        # Online softmax: rescale what we have by exp(m_old - m_new).
        m_new = tl.maximum(m_i, tl.max(s, axis=0))               # (1,)
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(s - m_new)                                     # (T,), 0 where masked
        l_i = l_i * alpha + tl.sum(p, axis=0)
        acc = acc * alpha + tl.sum(p[:, None] * v, axis=0)        # (D,)
        m_i = m_new
    # STARTER
    # # TODO (README.md, section "Paged attention in Triton"): for b in range(0, num_blocks):
    # #   1. block_id = the b-th entry of this sequence's block table (load it; cast to tl.int64)
    # #   2. token_pos = b * BLOCK_SIZE + offs_t; mask_t = token_pos < context_len (the last block may be partial)
    # #   3. load K and V tiles (BLOCK_SIZE, HEAD_DIM_PAD) of kv_head from that block, masked, as fp32
    # #   4. s = q . k for each token (an elementwise product and tl.sum over axis 1); masked tokens -> -inf
    # #   5. online softmax: m_new = max(m_i, max(s)); alpha = exp(m_i - m_new); p = exp(s - m_new)
    # #      l_i = l_i * alpha + sum(p); acc = acc * alpha + sum(p[:, None] * v, axis=0); m_i = m_new
    # END SOLUTION

    out = acc / l_i
    tl.store(out_ptr + seq * stride_os + head * stride_oh + offs_d,
             out.to(out_ptr.dtype.element_ty), mask=mask_d)


def paged_attention(query: torch.Tensor, key_cache: torch.Tensor, value_cache: torch.Tensor,
                    block_tables: torch.Tensor, context_lens: torch.Tensor, scale: float) -> torch.Tensor:
    """Decode attention over a paged KV cache (see the module docstring for shapes)."""
    num_seqs, num_heads, head_dim = query.shape
    num_blocks, block_size, num_kv_heads, kv_dim = key_cache.shape
    if kv_dim != head_dim or value_cache.shape != key_cache.shape:
        raise ValueError("key/value cache must be (num_blocks, block_size, num_kv_heads, head_dim)")
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    if block_size & (block_size - 1):
        raise ValueError(f"block_size={block_size} must be a power of two")
    if block_tables.shape[0] != num_seqs or context_lens.shape[0] != num_seqs:
        raise ValueError("block_tables and context_lens need one row per sequence")
    # The kernel assumes unit stride along head_dim in every tensor.
    query = query.contiguous()
    key_cache = key_cache.contiguous()
    value_cache = value_cache.contiguous()
    block_tables = block_tables.to(torch.int32).contiguous()
    context_lens = context_lens.to(torch.int32).contiguous()
    # BEGIN SOLUTION
    # STARTER
    # # Delete the next line once paged_attention_kernel has its loop.
    # raise NotImplementedError("paged_attention_kernel: see README.md, section \"Paged attention in Triton\"")
    # END SOLUTION
    out = torch.empty_like(query)
    grid = (num_heads, num_seqs)
    paged_attention_kernel[grid](
        out, query, key_cache, value_cache, block_tables, context_lens,
        scale,
        query.stride(0), query.stride(1),
        out.stride(0), out.stride(1),
        key_cache.stride(0), key_cache.stride(1), key_cache.stride(2),
        block_tables.stride(0),
        GROUP=num_heads // num_kv_heads,
        BLOCK_SIZE=block_size,
        HEAD_DIM=head_dim,
        HEAD_DIM_PAD=triton.next_power_of_2(head_dim),
    )
    return out


def gather_then_attend(query, key_cache, value_cache, block_tables, context_lens, scale):
    """The obvious reference: copy each sequence's tokens out of the blocks into a
    contiguous (n, kv_heads, D) tensor, then ordinary attention in fp32."""
    num_seqs, num_heads, _ = query.shape
    block_size, num_kv_heads = key_cache.shape[1], key_cache.shape[2]
    group = num_heads // num_kv_heads
    out = torch.empty_like(query)
    for s in range(num_seqs):
        n = int(context_lens[s])
        pos = torch.arange(n, device=query.device)
        blocks = block_tables[s, pos // block_size].long()
        k = key_cache[blocks, pos % block_size].float().repeat_interleave(group, dim=1)  # (n, H, D)
        v = value_cache[blocks, pos % block_size].float().repeat_interleave(group, dim=1)
        scores = torch.einsum("hd,nhd->hn", query[s].float(), k) * scale
        out[s] = torch.einsum("hn,nhd->hd", torch.softmax(scores, dim=-1), v).to(query.dtype)
    return out


if __name__ == "__main__":
    # A small self-check: ragged lengths, GQA 4:1, shuffled block ids.
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    num_seqs, num_heads, num_kv_heads, head_dim, block_size, num_blocks = 3, 8, 2, 32, 16, 12
    q = torch.randn(num_seqs, num_heads, head_dim, device=device)
    kc = torch.randn(num_blocks, block_size, num_kv_heads, head_dim, device=device)
    vc = torch.randn_like(kc)
    tables = torch.randperm(num_blocks, device=device)[:num_seqs * 4].view(num_seqs, 4).to(torch.int32)
    lens = torch.tensor([1, 37, 64], device=device, dtype=torch.int32)
    got = paged_attention(q, kc, vc, tables, lens, head_dim ** -0.5)
    want = gather_then_attend(q, kc, vc, tables, lens, head_dim ** -0.5)
    print("max |diff| =", (got - want).abs().max().item())
