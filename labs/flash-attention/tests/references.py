"""Grader-side helpers: inputs, the fp32 reference, tolerances. Never touches learner code
(that goes through adapter.py) and always runs outside the guards."""

from __future__ import annotations

import math

import torch
from roadmap_cli import grading_kit as kit

ON_GPU = kit.has_cuda()
# bf16 tl.dot compiles only from compute capability 8.0 (Ampere) on: a T4 (7.5) grades fp16 and fp32 only.
# The capability comes from the engine: the grader process never asks CUDA (grading_kit/placement.py).
BF16 = ON_GPU and (kit.cuda_capability() or (0, 0))[0] >= 8
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


LAYOUTS = ("bhnd", "bnhd")


def _effective_scale(scale, head_dim: int) -> float:
    return 1.0 / math.sqrt(head_dim) if scale is None else float(scale)


def make_qkv(seed: int, batch: int, heads: int, kv_heads: int, seq: int, head_dim: int,
             dtype: torch.dtype, dist: str, layout="bhnd", scale=None, negative_row_prob: float = 0.0):
    """Random q [B, H, N, D], k, v [B, H_kv, N, D].

    dist:
    - "normal": N(0, 1) entries;
    - "rising": key norms grow along the sequence, so each row's max score keeps
      moving to later K/V blocks (a kernel that forgets to rescale its accumulator shows);
    - "negative": about half of the query rows (each row with probability 1/2, and
      always row 0) have scores near -250 for EVERY key: a running max initialised
      to 0 instead of -inf makes exp(s - 0) underflow to 0 there, and O = 0/0;
    - "overflow": near-uniform attention over values of about 3000 (fp16) or
      1e5 (fp32, with keys of 1e5 and queries of 1e-5): the unnormalised accumulator
      sum_j p_j v_j passes fp16's 65504 after ~22 keys although O itself fits, so
      an fp16 accumulator (or fp32 inputs cast to fp16 before tl.dot) gives inf.
    layout: "bhnd" (contiguous [B, H, N, D]) or "bnhd" (transposed views of [B, N, H, D]
    storage), or a tuple of three layouts for q, k, v (K and V may differ).
    negative_row_prob (normal / rising only): every key gets a shared component of 4 along
    the first axis, and each query row, with this probability, a large negative one there,
    so that ALL its scores sit near -250 (the shared component shifts every score of the row
    by the same amount: softmax and O keep their meaning, LSE moves by -250). The forward
    tests use 1/8, so random trials reach the "running max starts at 0" bug too.
    The adapter copies every tensor into a NaN-guarded buffer in the same layout.
    """
    gen = torch.Generator().manual_seed(seed)
    layouts = (layout,) * 3 if isinstance(layout, str) else tuple(layout)

    def rand(h: int, which: int) -> torch.Tensor:
        if layouts[which] == "bnhd":
            return torch.randn(batch, seq, h, head_dim, generator=gen).transpose(1, 2)
        return torch.randn(batch, h, seq, head_dim, generator=gen)

    q, k, v = rand(heads, 0), rand(kv_heads, 1), rand(kv_heads, 2)
    if dist == "rising":
        k = k * torch.linspace(0.5, 3.0, seq)[:, None]
    elif dist == "negative":
        # k ~ 1 + 0.1 noise (all positive), q row = -c + 0.5 noise: score ~ -c * D * scale = -250.
        c = 250.0 / (_effective_scale(scale, head_dim) * head_dim)
        k = 1.0 + 0.1 * k
        rows = torch.rand(batch, heads, seq, 1, generator=gen) < 0.5
        rows[:, :, 0] = True
        q = torch.where(rows, -c + 0.5 * q, q)
    elif dist == "overflow":
        if dtype == torch.float32:
            q, k, v = q * 1e-5, k * 1e5, (1.0 + 0.1 * v) * 1e5
        else:
            q, v = q * 0.01, (1.0 + 0.1 * v) * 3000.0
    elif dist != "normal":
        raise ValueError(f"unknown distribution {dist!r}")
    if negative_row_prob and dist in ("normal", "rising"):
        beta = 4.0
        gamma = 250.0 / (beta * _effective_scale(scale, head_dim))
        k, q = k.clone(), q.clone()
        k[..., 0] += beta
        rows = torch.rand(q.shape[:-1], generator=gen) < negative_row_prob
        q[..., 0] -= gamma * rows
    # CPU tensors here; the learner process receives them on the lab's device (kit.to_device).
    return tuple(kit.to_device(t.to(dtype)) for t in (q, k, v))


def make_do(seed: int, q: torch.Tensor, dist: str = "normal") -> torch.Tensor:
    """dO like q. dist "overflow": rows of the first half +1500, of the second half -750
    (plus noise). With make_qkv_concentrated and two query heads per K/V head, dV[key 0]
    = sum over both heads and all rows of dO: 24000 after head 0, peaking near 72000
    during head 1, ending at 48000. An fp16 accumulator passes 65504 on the way; the
    final dV fits in fp16."""
    do = torch.randn(q.shape, generator=torch.Generator().manual_seed(seed + 1))
    if dist == "overflow":
        n = q.shape[2]
        sign = torch.where(torch.arange(n) < n // 2, 1500.0, -750.0)[:, None]
        do = sign * (1.0 + 0.05 * do)
    return kit.to_device(do.to(q.dtype))


def make_qkv_concentrated(seed: int, batch: int, heads: int, kv_heads: int, seq: int, head_dim: int,
                          dtype: torch.dtype):
    """q, k, v where every query puts almost all its weight on key 0, so dV[key 0] =
    sum over the group's query heads and rows of dO (see make_do(..., "overflow"))."""
    gen = torch.Generator().manual_seed(seed)
    u = torch.ones(head_dim) / math.sqrt(head_dim)
    q = 4.0 * u + 0.05 * torch.randn(batch, heads, seq, head_dim, generator=gen)
    k = 0.3 * torch.randn(batch, kv_heads, seq, head_dim, generator=gen)
    # q . k_0 = 160, i.e. a score of 160 * scale (20 at head_dim 64) against ~0 for the other keys.
    k[:, :, 0] = 40.0 * u
    v = torch.randn(batch, kv_heads, seq, head_dim, generator=gen)
    return tuple(kit.to_device(t.to(dtype)) for t in (q, k, v))


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
    """Reference (O, LSE) as fp32, from clones; plain torch, never the learner's code.
    Computed in fp64, so that what an fp32 check measures is the learner's rounding alone."""
    with torch.no_grad():
        o, lse = _attention_fp32(*(t.detach().clone().double() for t in (q, k, v)), causal, scale)
        return o.float(), lse.float()


FP32_UNIT_ROUNDOFF = 2.0 ** -24


def fp32_score_rounding(q, k, v, scale) -> torch.Tensor:
    """Per query row [B, H, N]: how far an fp32 kernel's rounding of the scores can move O there.

    A score is a dot of D products; summed in fp32 (in whatever order a kernel's tiles choose),
    it is off by about sqrt(D) * u * |s| (u = 2^-24; rounding errors of the partial sums, each
    about as large as s, add up like a random walk). Softmax turns an error d in the scores into
    at most ~2d of relative error in each weight, and O is a weighted mean of V's rows, so O
    moves by up to ~2d * max|v|. For ordinary rows (|s| of a few units) that is ~1e-6, far
    under the 1e-4 tolerance; the "negative rows" of make_qkv, whose scores all sit near -250
    (so that a running max started at 0 underflows), get ~1e-3: there, two right kernels that
    sum in different orders differ by ~2e-4 (seen once in 50 secret seeds before this bound)."""
    with torch.no_grad():
        qd, kd, vd = (t.detach().double() for t in (q, k, v))
        group = q.shape[1] // k.shape[1]
        kd, vd = kd.repeat_interleave(group, dim=1), vd.repeat_interleave(group, dim=1)
        s_max = (torch.matmul(qd, kd.transpose(-2, -1)) * _effective_scale(scale, q.shape[-1])).abs().amax(-1)
        v_max = vd.abs().amax(dim=(-2, -1))[..., None]  # [B, H, 1]: the largest |v| each head mixes
        return 2 * math.sqrt(q.shape[-1]) * FP32_UNIT_ROUNDOFF * s_max * v_max


def reference_grads(q, k, v, do, causal: bool, scale):
    """fp32 reference (dq, dk, dv) by autograd through the plain-torch attention."""
    leaves = [t.detach().clone().float().requires_grad_(True) for t in (q, k, v)]
    o, _ = _attention_fp32(*leaves, causal, scale)
    o.backward(do.detach().float())
    return tuple(t.grad for t in leaves)


def _with_section(section: str, check, *args, **kwargs) -> None:
    try:
        check(*args, **kwargs)
    except AssertionError as error:
        raise AssertionError(f"{error} (README.md, '{section}')") from None


def check_kernel_facts(facts: dict, section: str, what: str, launches_key: str = "launches") -> None:
    """A Triton kernel ran, and no unmasked lane of any load/store left its tensor."""
    if not facts[launches_key]:
        raise AssertionError(f"{what}: no Triton kernel was launched; the work must happen in a @triton.jit "
                             f"kernel (README.md, '{section}')")
    if facts["violations"]:
        shown = "; ".join(facts["violations"][:4])
        raise AssertionError(
            f"{what}: out-of-bounds memory access: {shown}. Indices are [batch, head, row, column] of the "
            f"named tensor (N+k: k past the last row or column). Every tl.load/tl.store whose block can stick "
            f"out past the tensor needs a mask on the lanes outside, even when the value read would not "
            f"change the result (README.md, '{section}')")


def check_forward(o, lse, q, k, v, causal: bool, scale, section: str = "Part 3: triton-forward",
                  loose: bool = False, context: str = "") -> None:
    """O and LSE against the fp32 reference, at the dtype's tolerance.
    loose: adversarial magnitudes; atol scales with the reference's RMS (an overflow
    still shows as inf/NaN, which never passes)."""
    atol = tolerance(q.dtype)
    ref_o, ref_lse = reference(q, k, v, causal, scale)
    if loose:
        atol_o = atol * float(ref_o.pow(2).mean().sqrt())
    else:
        atol_o = atol
        kit.assert_nontrivial(ref_o, atol, "reference O")
    if o is None or lse is None:
        raise AssertionError(f"flash_attention_forward must return (O, LSE); got O={o!r}, LSE={lse!r} "
                             f"(README.md, '{section}')")
    if o.dtype != q.dtype:
        raise AssertionError(f"O has dtype {o.dtype}, expected q's dtype {q.dtype} (README.md, '{section}')")
    # The handout fixes the LSE's dtype: fp32 whatever q's dtype (an fp16 LSE can pass the tolerance).
    if lse.dtype != torch.float32:
        raise AssertionError(f"LSE has dtype {lse.dtype}, expected torch.float32 (README.md, '{section}')")
    wide = None
    if q.dtype == torch.float32 and not loose and o.shape == ref_o.shape:
        rounding = fp32_score_rounding(q, k, v, scale)
        wide = rounding > 0.1 * atol_o  # rows whose huge scores make fp32 summation order matter
    if wide is not None and bool(wide.any()):
        # Those rows at the tolerance plus their rounding bound; every other row at the tolerance. The mask
        # comes from the grader's tensors and indexes the learner's O: both CPU data in the grader process
        # (the .cpu() only matters when the tests run by hand, in one process, on a GPU).
        wide, rounding, o_here, ref_here = wide.cpu(), rounding.cpu(), o.detach().cpu(), ref_o.cpu()
        _with_section(section, kit.assert_close, o_here[~wide], ref_here[~wide], atol=atol_o, rtol=atol,
                      what="O" + context)
        _with_section(section, kit.assert_close, o_here[wide], ref_here[wide],
                      atol=atol_o + float(rounding[wide].max()),
                      rtol=atol, what="O (rows whose scores are all near -250)" + context)
    else:
        _with_section(section, kit.assert_close, o, ref_o, atol=atol_o, rtol=atol, what="O" + context)
    _with_section(section, kit.assert_close, lse, ref_lse, atol=atol,
                  what="LSE (natural log of sum_j exp(scale * q.k_j))" + context)
