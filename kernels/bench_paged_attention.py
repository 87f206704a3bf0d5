"""Benchmark the reference paged-attention decode kernel against SDPA over a contiguous cache.

    python kernels/bench_paged_attention.py [--quick]

One decode step (one query per sequence) in fp16 over a paged KV cache whose
blocks are shuffled, against F.scaled_dot_product_attention over the same
tokens laid out contiguously ((seqs, kv_heads, context, head_dim), GQA by SDPA).
Both are timed in the same run with the shared harness
(roadmap_cli.grading_kit.timing: L2 flushed outside the CUDA events, warm-up,
interleaved calls, median). Prints ms, GB/s, % of the device's bandwidth peak
(decode attention is memory-bound: every cached byte is read once) and the
ratio SDPA time / our time (1.0 = as fast as the contiguous baseline).
Needs a CUDA GPU; on a CPU it says so and exits 0.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

# (num_seqs, num_heads, num_kv_heads, head_dim, context_len, block_size)
SHAPES = [
    (32, 32, 8, 128, 1024, 16),
    (64, 32, 8, 128, 2048, 16),
    (16, 32, 32, 128, 4096, 32),
    (128, 16, 2, 64, 512, 16),
    (8, 32, 8, 128, 8192, 16),
    (256, 32, 8, 128, 256, 8),
]


def _load_kernel():
    path = Path(__file__).resolve().parent / "triton" / "paged_attention.py"
    spec = importlib.util.spec_from_file_location("reference_paged_attention", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the first three shapes, shorter timing cap")
    args = parser.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("bench_paged_attention: needs a CUDA GPU (nothing to measure on this machine)")
        return 0
    import torch.nn.functional as F

    from roadmap_cli.grading_kit import timing

    pa = _load_kernel()
    dtype = torch.float16
    rule = timing.StopRule(time_cap_s=1.0 if args.quick else 3.0)
    shapes = SHAPES[:3] if args.quick else SHAPES
    print(f"device: {torch.cuda.get_device_name()}  dtype: fp16  (one decode step)")
    header = (
        f"{'seqs':>4} {'H/KVH':>6} {'D':>4} {'ctx':>5} {'blk':>3} | {'ours ms':>8} {'sdpa ms':>8} | "
        f"{'ours GB/s':>9} {'% peak':>6} | {'sdpa/ours':>9}"
    )
    print(header)
    print("-" * len(header))
    ratios = []
    for num_seqs, num_heads, num_kv_heads, head_dim, ctx, block_size in shapes:
        blocks_per_seq = ctx // block_size
        num_blocks = num_seqs * blocks_per_seq
        kc = torch.randn(num_blocks, block_size, num_kv_heads, head_dim, device="cuda", dtype=dtype)
        vc = torch.randn_like(kc)
        tables = torch.randperm(num_blocks, device="cuda").view(num_seqs, blocks_per_seq).to(torch.int32)
        lens = torch.full((num_seqs,), ctx, device="cuda", dtype=torch.int32)
        k = kc[tables.long()].reshape(num_seqs, ctx, num_kv_heads, head_dim).transpose(1, 2).contiguous()
        v = vc[tables.long()].reshape(num_seqs, ctx, num_kv_heads, head_dim).transpose(1, 2).contiguous()
        scale = head_dim**-0.5
        gqa = num_heads != num_kv_heads

        def ours(q):
            return pa.paged_attention(q, kc, vc, tables, lens, scale)

        def sdpa(q):
            return F.scaled_dot_product_attention(q.unsqueeze(2), k, v, scale=scale, enable_gqa=gqa).squeeze(2)

        def check(out, call_args):
            torch.testing.assert_close(out, sdpa(*call_args), atol=2e-2, rtol=2e-2)

        bytes_moved = 2 * kc.numel() * kc.element_size() + 2 * num_seqs * num_heads * head_dim * 2
        cmp = timing.compare_to_baseline(
            ours,
            sdpa,
            lambda: torch.randn(num_seqs, num_heads, head_dim, device="cuda", dtype=dtype),
            flops=4.0 * num_seqs * num_heads * ctx * head_dim,
            bytes_moved=bytes_moved,
            dtype=dtype,
            rule=rule,
            check=check,
        )
        gbps = bytes_moved / (cmp.learner.median_ms * 1e-3) / 1e9
        pct = f"{cmp.pct_of_peak:6.1f}" if cmp.pct_of_peak is not None else "     ?"
        print(
            f"{num_seqs:4d} {num_heads:>3}/{num_kv_heads:<2} {head_dim:4d} {ctx:5d} {block_size:3d} | "
            f"{cmp.learner.median_ms:8.3f} {cmp.baseline.median_ms:8.3f} | {gbps:9.1f} {pct} | {cmp.ratio:9.2f}"
            + ("  " + "; ".join(cmp.warnings) if cmp.warnings else "")
        )
        ratios.append(cmp.ratio)
        sys.stdout.flush()
    print(f"geometric mean of sdpa/ours over {len(ratios)} shapes: {timing.geometric_mean(ratios):.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
