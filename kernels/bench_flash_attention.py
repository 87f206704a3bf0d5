"""Benchmark the reference FlashAttention kernel against F.scaled_dot_product_attention.

    python kernels/bench_flash_attention.py [--quick]

Forward and backward (fp16, batch 4, 32 heads, seq 1k-8k, head_dim 64 and 128,
causal and not), both timed in the same run with the shared harness
(roadmap_cli.grading_kit.timing: L2 flushed outside the CUDA events, warm-up,
interleaved calls, median). Prints ms, TFLOP/s, % of the device's peak and the
ratio SDPA time / our time (1.0 = as fast as SDPA). Needs a CUDA GPU; on a CPU
it says so and exits 0.
FLOPs: forward 4*B*H*N^2*D (halved when causal), backward 2.5x the forward.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

BATCH, HEADS = 4, 32


def _load_kernel():
    path = Path(__file__).resolve().parent / "triton" / "flash_attention.py"
    spec = importlib.util.spec_from_file_location("reference_flash_attention", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _flops(seq: int, head_dim: int, causal: bool, backward: bool) -> float:
    flops = 4.0 * BATCH * HEADS * seq * seq * head_dim * (0.5 if causal else 1.0)
    return flops * (2.5 if backward else 1.0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="seq 1024 and 4096 only, shorter timing cap")
    args = parser.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("bench_flash_attention: needs a CUDA GPU (nothing to measure on this machine)")
        return 0
    import torch.nn.functional as F

    from roadmap_cli.grading_kit import timing

    fa = _load_kernel()
    dtype = torch.float16
    rule = timing.StopRule(time_cap_s=1.0 if args.quick else 3.0)
    seqs = (1024, 4096) if args.quick else (1024, 2048, 4096, 8192)
    print(f"device: {torch.cuda.get_device_name()}  dtype: fp16  batch {BATCH}  heads {HEADS}")
    header = (
        f"{'pass':4} {'seq':>5} {'d':>4} {'causal':>6} | {'ours ms':>8} {'sdpa ms':>8} | "
        f"{'ours TF/s':>9} {'sdpa TF/s':>9} {'% peak':>6} | {'sdpa/ours':>9}"
    )
    print(header)
    print("-" * len(header))
    ratios = []

    def fresh(seq, head_dim, grad=False):
        return tuple(
            torch.randn(BATCH, HEADS, seq, head_dim, device="cuda", dtype=dtype).requires_grad_(grad) for _ in range(3)
        )

    for head_dim in (64, 128):
        for causal in (False, True):
            for seq in seqs:
                fwd = timing.compare_to_baseline(
                    lambda q, k, v: fa.flash_attention_forward(q, k, v, causal=causal),
                    lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal),
                    lambda: fresh(seq, head_dim),
                    flops=_flops(seq, head_dim, causal, False),
                    dtype=dtype,
                    rule=rule,
                )

                def make_bwd():
                    q, k, v = fresh(seq, head_dim, grad=True)
                    ours = fa.flash_attention(q, k, v, causal=causal)[0]
                    sdpa = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                    return ours, sdpa, q, k, v, torch.randn_like(sdpa)

                bwd = timing.compare_to_baseline(
                    lambda o, s, q, k, v, do: torch.autograd.grad(o, (q, k, v), do, retain_graph=True),
                    lambda o, s, q, k, v, do: torch.autograd.grad(s, (q, k, v), do, retain_graph=True),
                    make_bwd,
                    flops=_flops(seq, head_dim, causal, True),
                    dtype=dtype,
                    rule=rule,
                )
                for name, cmp in (("fwd", fwd), ("bwd", bwd)):
                    pct = f"{cmp.pct_of_peak:6.1f}" if cmp.pct_of_peak is not None else "     ?"
                    print(
                        f"{name:4} {seq:5d} {head_dim:4d} {str(causal):>6} | {cmp.learner.median_ms:8.3f} "
                        f"{cmp.baseline.median_ms:8.3f} | {cmp.tflops:9.1f} {cmp.baseline_tflops:9.1f} {pct} | "
                        f"{cmp.ratio:9.2f}" + ("  " + "; ".join(cmp.warnings) if cmp.warnings else "")
                    )
                    ratios.append(cmp.ratio)
                    sys.stdout.flush()
    print(f"geometric mean of sdpa/ours over {len(ratios)} measurements: {timing.geometric_mean(ratios):.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
