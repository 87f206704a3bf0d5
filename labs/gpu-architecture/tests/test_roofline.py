"""Part 5: the roofline of H100, H200 and A100 (from the project's device
table) and the traffic of the project's own kernels: tiled matmul, the
FlashAttention-2 forward and a paged-attention decode step."""

from __future__ import annotations

import pytest

import adapter
import reference
from cases import expect_equal, rng
from roadmap_cli import grading_kit as kit

SECTION = "Part 5: roofline"
DEVICES = ("NVIDIA H100 80GB HBM3", "NVIDIA H200", "NVIDIA A100-SXM4-80GB")


def _peak(name):
    d = kit.device_peak(name)
    return d.fp16_tflops, d.hbm_gbps


@pytest.mark.parametrize("device", DEVICES)
def test_ridge_attainable_and_bound(device):
    peak, bw = _peak(device)
    ridge = reference.ridge(peak, bw)
    expect_equal(f"ridge_point({device}: {peak} TFLOP/s, {bw} GB/s)", adapter.roofline("ridge_point", peak, bw),
                 ridge, SECTION)
    r = rng(f"roofline-{device}")
    points = [ridge, ridge * 0.999, ridge * 1.001, 0.25, 1.0, 4000.0] + [r.uniform(0.1, 3 * ridge) for _ in range(20)]
    for intensity in points:
        expect_equal(f"attainable_tflops({intensity:.4g} FLOP/B on {device})",
                     adapter.roofline("attainable_tflops", intensity, peak, bw),
                     reference.attainable(intensity, peak, bw), SECTION)
        want = "memory" if intensity < ridge else "compute"
        expect_equal(f"bound({intensity:.6g} FLOP/B on {device}, ridge {ridge:.6g})",
                     adapter.roofline("bound", intensity, peak, bw), want, SECTION)


def _check_traffic(call, got, flops, nbytes):
    expect_equal(call, got, {"flops": flops, "bytes": nbytes, "intensity": flops / nbytes}, SECTION)


def test_matmul_traffic():
    r = rng("roofline-matmul")
    cases = [(4096, 4096, 4096, 128, 128, 2), (1000, 129, 77, 64, 32, 4), (1, 1, 1, 16, 16, 2), (512, 256, 64, 32, 128, 2)]
    cases += [(r.randint(1, 3000), r.randint(1, 3000), r.randint(1, 3000), r.choice([16, 32, 64, 128]),
               r.choice([16, 32, 64, 256]), r.choice([1, 2, 4])) for _ in range(30)]
    for m, n, k, bm, bn, e in cases:
        flops, nbytes = reference.matmul_traffic(m, n, k, bm, bn, e)
        _check_traffic(f"matmul_traffic(m={m}, n={n}, k={k}, block_m={bm}, block_n={bn}, element_bytes={e})",
                       adapter.roofline("matmul_traffic", m, n, k, bm, bn, e), flops, nbytes)


def test_flash_attention_traffic():
    r = rng("roofline-flash")
    cases = [(1, 1, 4096, 128, 128, False, 2), (1, 1, 4096, 128, 128, True, 2), (2, 3, 1000, 64, 64, True, 4),
             (4, 8, 129, 32, 16, False, 2), (1, 2, 1, 16, 64, True, 2)]
    cases += [(r.randint(1, 4), r.randint(1, 16), r.randint(1, 5000), r.choice([16, 32, 64, 128]),
               r.choice([16, 32, 64, 128]), r.random() < 0.5, r.choice([2, 4])) for _ in range(30)]
    for b, h, n, d, bm, causal, e in cases:
        flops, nbytes = reference.flash_traffic(b, h, n, d, bm, causal, e)
        _check_traffic(f"flash_attention_traffic(batch={b}, heads={h}, seq_len={n}, head_dim={d}, block_m={bm}, "
                       f"causal={causal}, element_bytes={e})",
                       adapter.roofline("flash_attention_traffic", b, h, n, d, bm, causal, e), flops, nbytes)


def test_paged_decode_traffic():
    r = rng("roofline-paged")
    cases = [([4096], 32, 8, 128, 16, 2), ([1, 17, 300], 8, 8, 64, 16, 2), ([5, 5], 4, 1, 32, 3, 4)]
    cases += [([r.randint(1, 4000) for _ in range(r.randint(1, 6))], 4 * r.randint(1, 8), r.choice([1, 2, 4]),
               r.choice([32, 64, 128]), r.choice([8, 16, 32]), r.choice([1, 2, 4])) for _ in range(30)]
    for lens, nh, nkv, d, bs, e in cases:
        flops, nbytes = reference.paged_traffic(lens, nh, nkv, d, bs, e)
        _check_traffic(f"paged_decode_traffic(context_lens={lens}, n_heads={nh}, n_kv_heads={nkv}, head_dim={d}, "
                       f"block_size={bs}, element_bytes={e})",
                       adapter.roofline("paged_decode_traffic", lens, nh, nkv, d, bs, e), flops, nbytes)


def test_which_bound_applies_to_the_projects_kernels():
    """The handout's three questions: on an H100, is each kernel memory- or compute-bound?"""
    peak, bw = _peak("NVIDIA H100 80GB HBM3")
    kernels = {
        "matmul 4096^3 fp16, 128x128 tiles": reference.matmul_traffic(4096, 4096, 4096, 128, 128, 2),
        "flash forward N=4096 d=128 causal fp16": reference.flash_traffic(1, 32, 4096, 128, 128, True, 2),
        "paged decode, 32 seqs x 2048 tokens": reference.paged_traffic([2048] * 32, 32, 8, 128, 16, 2),
    }
    for name, (flops, nbytes) in kernels.items():
        intensity = flops / nbytes
        want = "memory" if intensity < reference.ridge(peak, bw) else "compute"
        expect_equal(f"bound({name}: {intensity:.1f} FLOP/B)", adapter.roofline("bound", intensity, peak, bw),
                     want, SECTION)
