"""Part 6: the backward in Triton (dQ, dK, dV from the saved LSE) inside a torch.autograd.Function."""

import pytest
import torch
from roadmap_cli import grading_kit as kit

import adapter
import references as ref
from test_triton_forward import _context, tiles_for

SECTION = "Part 6: backward"
# (batch, heads, kv_heads, seq, head_dim, causal, scale, layout, dtype): size 1, tile-1 / tile+1
# around 32, batch 2 with GQA, non-default scales, transposed and mixed K/V layouts.
CASES = [
    (2, 2, 2, 1, 16, False, None, "bhnd", torch.float32),
    (1, 2, 2, 17, 64, False, 0.1, ("bhnd", "bnhd", "bhnd"), torch.float16),
    (2, 2, 1, 33, 32, True, None, "bnhd", torch.float32),
    (1, 2, 2, 129, 64, True, None, "bhnd", torch.float16),
    (1, 4, 2, 31, 32, True, 0.9, ("bnhd", "bhnd", "bnhd"), torch.float32),
    (1, 4, 2, 48, 16, False, None, "bhnd", torch.float16),
]
if ref.ON_GPU:
    CASES += [(2, 8, 2, 1000, 128, True, None, "bhnd", torch.float16),
              (2, 4, 4, 257, 64, False, 0.2, "bnhd", torch.bfloat16 if ref.BF16 else torch.float16)]


def check_backward(facts, q, k, v, do, causal, scale, loose=False, tiles=None):
    what = "flash_attention" + (f" with INTERPRETER_BLOCKS={tiles}" if tiles else "")
    ref.check_kernel_facts(facts, SECTION, f"{what} (forward)", "launches_fwd")
    if not facts["has_grad_fn"]:
        raise AssertionError(f"{what} returned an O without a grad_fn: wrap it in a torch.autograd.Function "
                             f"(README.md, '{SECTION}')")
    if facts["lse_requires_grad"]:
        raise AssertionError(f"{what} returned an LSE that requires grad: mark it non-differentiable "
                             f"(ctx.mark_non_differentiable) (README.md, '{SECTION}')")
    ref.check_kernel_facts(facts, SECTION, f"{what} (backward)", "launches_bwd")
    context = _context(q, k, v, causal, scale, tiles)
    ref.check_forward(facts["o"], facts["lse"], q, k, v, causal, scale, SECTION, loose=loose, context=context)
    atol = ref.tolerance(q.dtype)
    wants = ref.reference_grads(q, k, v, do, causal, scale)
    # loose: adversarial magnitudes; one atol for all three, scaled by the largest gradient RMS
    # (a gradient that is ~0 in exact arithmetic keeps fp16 noise far below it; inf never passes).
    scale_rms = max(float(w.pow(2).mean().sqrt()) for w in wants)
    for name, want in zip(("dQ", "dK", "dV"), wants):
        got = facts[name.lower()]
        if got is None:
            raise AssertionError(f"no gradient reached {name[1:].lower()} (README.md, '{SECTION}')")
        atol_g = atol * scale_rms if loose else atol
        if not loose and (q.shape[2] > 1 or name == "dV"):  # one key: softmax is constant, dQ = dK = 0
            kit.assert_nontrivial(want, atol, f"reference {name}")
        ref._with_section(SECTION, kit.assert_close, got, want, atol=atol_g, rtol=atol, what=name + context)


@pytest.mark.parametrize(
    "case", CASES,
    ids=lambda c: (f"b{c[0]}h{c[1]}kv{c[2]}-n{c[3]}-d{c[4]}-{'causal' if c[5] else 'full'}-s{c[6]}-"
                   f"{str(c[8]).replace('torch.', '')}"))
def test_backward(case):
    batch, heads, kv_heads, seq, head_dim, causal, scale, layout, dtype = case
    for trial in range(ref.TRIALS):
        dist = ref.DISTRIBUTIONS[trial % 2]
        seed = kit.seeded(f"bwd-{case}-{trial}")
        q, k, v = ref.make_qkv(seed, batch, heads, kv_heads, seq, head_dim, dtype, dist, layout, scale)
        do = ref.make_do(seed, q)
        tiles = tiles_for(trial, CASES.index(case))
        facts = adapter.flash_forward_backward(q, k, v, do, causal, scale, trial % 2 == 1, tiles)
        check_backward(facts, q, k, v, do, causal, scale, tiles=tiles)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_backward_fp16_accumulators(causal):
    """Every query attends (almost) only to key 0 and two query heads share it; dO is +1500
    on the first half of the rows, -750 on the second: dV[key 0] = sum of dO over both
    heads peaks near 72000 on the way to 48000. An fp16 dV accumulator overflows to inf;
    fp32 does not."""
    q, k, v = ref.make_qkv_concentrated(kit.seeded(f"bwd-overflow-{causal}"), 1, 2, 1, 64, 32, torch.float16)
    do = ref.make_do(kit.seeded(f"bwd-overflow-do-{causal}"), q, "overflow")
    facts = adapter.flash_forward_backward(q, k, v, do, causal, None)
    check_backward(facts, q, k, v, do, causal, None, loose=True)
