"""Part 1: RMSNorm (default and non-default eps, float64 and float16 inputs,
a loaded weight) and SwiGLU with loaded weights, against the grader's formulas."""

from __future__ import annotations

import pytest
import torch

import adapter
import refs

SECTION = "Part 1: RMSNorm and SwiGLU"


def _check(got, want, atol, what):
    assert got.shape == want.shape, f"{what}: shape {tuple(got.shape)}, expected {tuple(want.shape)}"
    err = float((got.double() - want).abs().max())
    assert err <= atol, f"{what}: max |diff| {err:.3g} > {atol:g} (README.md, section \"{SECTION}\")"


@pytest.mark.parametrize("eps", [None, 1e-2, 0.5])
def test_rmsnorm(eps):
    r = refs.rng(f"rmsnorm-{eps}")
    # every magnitude in every run: at 0.01 the value of eps (and where it is added) dominates
    for scale in (0.01, 1.0, 50.0, r.choice([0.01, 1.0, 50.0])):
        dim = r.choice([1, 3, 8, 33])
        g = refs.gen(r)
        x = torch.randn(r.randint(1, 3), r.randint(1, 4), dim, generator=g, dtype=torch.float64) * scale
        w = torch.randn(dim, generator=g, dtype=torch.float64)
        want = refs.rmsnorm(x, w, 1e-6 if eps is None else eps)
        _check(adapter.rmsnorm(x, w, eps), want, 1e-9, f"RMSNorm(dim={dim}, eps={eps})")


def test_rmsnorm_half_inputs_normalise_in_float32():
    g = torch.Generator().manual_seed(refs.rng("rms-half").randrange(2**62))
    x = (torch.randn(4, 64, generator=g) * 300).half()   # x^2 overflows fp16 (> 65504) unless upcast
    w = torch.ones(64, dtype=torch.float16)
    got = adapter.rmsnorm(x, w, 1e-5)
    assert got.dtype == torch.float16, f"RMSNorm of float16 input returned {got.dtype}, expected float16"
    assert torch.isfinite(got).all(), ("RMSNorm of float16 inputs near 300 gave inf/NaN: compute the mean of squares "
                                       f"in float32 (README.md, section \"{SECTION}\")")
    _check(got, refs.rmsnorm(x.float(), w.float(), 1e-5), 2e-3, "RMSNorm(float16 input)")


def test_rmsnorm_bfloat16_inputs_normalise_in_float32():
    """bfloat16 is the other half-precision dtype the handout names. Normalised in float32, a bf16
    result is at most two bf16 roundings (x * inv_rms, then * weight) from the exact value: relative
    error <= 2 * 2**-8. Squares, mean and rsqrt left in bf16 add roundings of their own and pass that
    bound on some of these 32,768 values (every one of 300 seeds tried; a right solution peaked at 7.7e-3)."""
    g = torch.Generator().manual_seed(refs.rng("rms-bf16").randrange(2**62))
    x = (torch.randn(32, 1024, generator=g) * 3).bfloat16()
    w = (torch.rand(1024, generator=g) + 0.5).bfloat16()
    got = adapter.rmsnorm(x, w, 1e-5)
    assert got.dtype == torch.bfloat16, f"RMSNorm of bfloat16 input returned {got.dtype}, expected bfloat16"
    want = refs.rmsnorm(x.double(), w.double(), 1e-5)
    rel = ((got.double() - want).abs() / want.abs().clamp_min(1e-30))
    bound = 2 * 2.0 ** -8 + 1e-4
    worst = float(rel.max())
    assert worst <= bound, (
        f"RMSNorm(bfloat16 input): relative error {worst:.3g} > {bound:.3g} on {int((rel > bound).sum())} of "
        f"{rel.numel()} values: compute in float32 at least for bfloat16 too, round to bfloat16 at the end "
        f"(README.md, section \"{SECTION}\")")


def test_swiglu():
    r = refs.rng("swiglu")
    for _ in range(5):
        dim, hidden = r.randint(2, 12), r.randint(2, 20)
        g = refs.gen(r)
        x = torch.randn(r.randint(1, 3), r.randint(1, 5), dim, generator=g, dtype=torch.float64)
        w1, w3 = torch.randn(hidden, dim, generator=g, dtype=torch.float64), torch.randn(hidden, dim, generator=g, dtype=torch.float64)
        w2 = torch.randn(dim, hidden, generator=g, dtype=torch.float64)
        _check(adapter.swiglu(x, w1, w3, w2), refs.swiglu(x, w1, w3, w2), 1e-9, f"SwiGLU(dim={dim}, hidden={hidden})")
