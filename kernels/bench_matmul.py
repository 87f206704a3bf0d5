"""Benchmark the reference kernels against torch on a CUDA GPU, with the
shared timing harness (roadmap_cli.grading_kit.timing): L2 flushed before
every timed call, learner and baseline alternating on the same fresh inputs.

    python kernels/bench_matmul.py            # all benchmarks
    python kernels/bench_matmul.py --quick    # fewer shapes

Prints, per shape: time of the kernel and of torch, the ratio (torch time /
kernel time; 1.0 = as fast as torch), TFLOP/s (or GB/s) and % of the
device's peak. On a machine without a CUDA GPU it says so and exits 0.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _load(path: Path, name: str):
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _row(label: str, cmp, unit: str = "TFLOP/s", amount: float | None = None) -> str:
    if unit == "TFLOP/s":
        throughput = f"{cmp.tflops:8.1f} vs {cmp.baseline_tflops:8.1f} TFLOP/s"
    else:
        gbps = amount / (cmp.learner.median_ms * 1e-3) / 1e9
        base = amount / (cmp.baseline.median_ms * 1e-3) / 1e9
        throughput = f"{gbps:8.0f} vs {base:8.0f} GB/s    "
    peak = "   n/a" if cmp.pct_of_peak is None else f"{cmp.pct_of_peak:5.1f}%"
    flags = ("  " + "; ".join(cmp.warnings)) if cmp.warnings else ""
    return (
        f"{label:<34} {cmp.learner.median_ms:9.4f} ms {cmp.baseline.median_ms:9.4f} ms "
        f"{cmp.ratio:6.2f}x  {throughput}  {peak}{flags}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer shapes")
    parser.add_argument("--no-cuda-c", action="store_true", help="skip the CUDA C kernels (no nvcc build)")
    args = parser.parse_args(argv)

    import torch

    if not torch.cuda.is_available():
        print("bench_matmul: needs a CUDA GPU (none found); nothing to measure.")
        return 0

    from roadmap_cli.grading_kit import timing
    from roadmap_cli.grading_kit.gpu_peaks import current_device_peak

    triton_matmul = _load(HERE / "triton" / "matmul.py", "bench_triton_matmul").matmul
    triton_add = _load(HERE / "triton" / "vector_add.py", "bench_triton_vector_add").vector_add
    peak = current_device_peak()
    print(f"device: {torch.cuda.get_device_name()} (peak table: {peak.name if peak else 'unknown'})")
    print(f"{'kernel / shape':<34} {'kernel':>12} {'torch':>12} {'ratio':>7}  throughput (kernel vs torch)   % peak")

    gen = torch.Generator(device="cuda").manual_seed(0)

    def matrices(M, N, K, dtype):
        return lambda: (
            torch.randn((M, K), device="cuda", dtype=dtype, generator=gen),
            torch.randn((K, N), device="cuda", dtype=dtype, generator=gen),
        )

    shapes = [(4096, 4096, 4096), (8192, 8192, 1024), (2048, 11008, 4096)]
    if not args.quick:
        shapes += [(1024, 1024, 1024), (8192, 8192, 8192), (3000, 5000, 1000)]
    for M, N, K in shapes:
        cmp = timing.compare_to_baseline(
            triton_matmul,
            torch.matmul,
            matrices(M, N, K, torch.float16),
            flops=2.0 * M * N * K,
            bytes_moved=2.0 * (M * K + K * N + M * N),
            dtype=torch.float16,
            peak=peak,
        )
        print(_row(f"triton matmul fp16 {M}x{N}x{K}", cmp))

    for n in [1 << 20, 1 << 26]:
        make = lambda n=n: (torch.randn(n, device="cuda", generator=gen), torch.randn(n, device="cuda", generator=gen))  # noqa: E731
        cmp = timing.compare_to_baseline(
            triton_add, torch.add, make, bytes_moved=12.0 * n, dtype=torch.float32, peak=peak
        )
        print(_row(f"triton vector_add fp32 n={n}", cmp, unit="GB/s", amount=12.0 * n))

    if not args.no_cuda_c:
        cuda = _load(HERE / "cuda" / "cuda_kernels.py", "bench_cuda_kernels")
        ext_add, ext_mm = cuda.load_vector_add(), cuda.load_matmul()
        n = 1 << 26
        make = lambda: (torch.randn(n, device="cuda", generator=gen), torch.randn(n, device="cuda", generator=gen))  # noqa: E731
        cmp = timing.compare_to_baseline(
            ext_add.vector_add, torch.add, make, bytes_moved=12.0 * n, dtype=torch.float32, peak=peak
        )
        print(_row(f"cuda vector_add fp32 n={n}", cmp, unit="GB/s", amount=12.0 * n))
        # fp32 baseline without TF32, so both sides do the same fp32 math.
        torch.backends.cuda.matmul.allow_tf32 = False
        for M in [2048] if args.quick else [1024, 2048, 4096]:
            for name in ("matmul_naive", "matmul_tiled"):
                cmp = timing.compare_to_baseline(
                    getattr(ext_mm, name),
                    torch.matmul,
                    matrices(M, M, M, torch.float32),
                    flops=2.0 * M**3,
                    dtype="fp32-simt",
                    peak=peak,
                    rule=timing.StopRule(time_cap_s=5.0),
                )
                print(_row(f"cuda {name} fp32 {M}^3", cmp))
    print("ratio = torch time / kernel time (medians); % peak = roofline time / kernel time")
    return 0


if __name__ == "__main__":
    sys.exit(main())
