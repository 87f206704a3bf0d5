"""Peak throughput of known GPUs, for "% of peak" and for rejecting times that
are physically impossible (faster than the roofline allows).

All figures are *dense* (no 2:4 sparsity) vendor numbers at boost clock, from
NVIDIA's public datasheets / architecture whitepapers:

- H100 SXM5 / PCIe / NVL: "NVIDIA H100 Tensor Core GPU" datasheet (2023):
  SXM 989 TFLOP/s bf16/fp16 dense (1,979 with sparsity), 67 fp32, 3.35 TB/s;
  PCIe 756 / 51 / 2.0 TB/s; NVL 835 / 60 / 3.9 TB/s. L2 = 50 MB.
- H200 SXM / NVL: "NVIDIA H200 Tensor Core GPU" datasheet (2024): same compute
  as H100 SXM (989 / 67), 4.8 TB/s HBM3e; NVL 835 / 60 / 4.8 TB/s.
- A100 SXM4 / PCIe: "NVIDIA A100 Tensor Core GPU" datasheet: 312 fp16 dense,
  19.5 fp32; 80 GB SXM 2.039 TB/s, 80 GB PCIe 1.935 TB/s, 40 GB 1.555 TB/s. L2 = 40 MB.
- L4: "NVIDIA L4 Tensor Core GPU" datasheet: 121 fp16 dense (242 sparse), 30.3 fp32, 300 GB/s, L2 48 MB.
- L40S: "NVIDIA L40S" datasheet: 362 fp16 dense (733 sparse), 91.6 fp32, 864 GB/s, L2 96 MB.
- RTX 4090: "NVIDIA Ada GPU Architecture" whitepaper, table 2: 165.2 fp16 tensor
  with fp32 accumulate (dense), 82.6 fp32, 1,008 GB/s, L2 72 MB.
- RTX A6000: "NVIDIA RTX A6000" datasheet / Ampere GA102 whitepaper: 154.8 fp16
  tensor dense, 38.7 fp32, 768 GB/s, L2 6 MB.
- A10: datasheet: 125 fp16 dense, 31.2 fp32, 600 GB/s. T4: 65 fp16, 8.1 fp32,
  320 GB/s. V100 SXM2: 125 fp16 tensor, 15.7 fp32, 900 GB/s.
- RTX 3090: GA102 whitepaper: 71 fp16 tensor with fp32 accumulate (dense), 35.6 fp32, 936 GB/s.
- B200 / GB200: "NVIDIA HGX B200" datasheet, per GPU: 2.25 PFLOP/s fp16 dense
  (36 PFLOP/s sparse for 8 GPUs), 75 fp32, 1.1 PFLOP/s tf32 dense, 8 TB/s.

A learner's fp16 matmul is judged against the fp16-with-fp32-accumulate tensor
peak, so consumer cards list that (half of the fp16-accumulate figure).
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class DevicePeak:
    """What one GPU can do at most (dense, boost clock)."""

    name: str
    fp16_tflops: float  # tensor cores, fp16/bf16 inputs, fp32 accumulate
    fp32_tflops: float  # CUDA cores, plain fp32 FMA (no TF32)
    tf32_tflops: float  # tensor cores, TF32 (what fp32 tl.dot uses by default)
    hbm_gbps: float  # DRAM bandwidth in GB/s (1e9 bytes/s)
    l2_bytes: int

    def tflops_for(self, dtype: object) -> float:
        """The compute peak for inputs of `dtype` (a torch dtype or a name;
        "fp32-simt" for fp32 math on CUDA cores, without tensor cores).

        fp32 uses the TF32 tensor-core peak: that is the fastest a fp32 matmul
        can legally run (Triton's tl.dot uses TF32 by default on GPUs), so it
        is the right bound for rejecting impossible times.
        """
        key = str(dtype).replace("torch.", "").lower()
        if key in {"float16", "half", "fp16", "bfloat16", "bf16"}:
            return self.fp16_tflops
        if key == "fp32-simt":  # plain fp32 FMAs on CUDA cores (a hand-written CUDA C kernel)
            return self.fp32_tflops
        if key in {"float32", "float", "fp32", "tf32"}:
            return self.tf32_tflops
        raise ValueError(f"no peak listed for dtype {dtype!r}")


_MB = 1024 * 1024

# (tokens that must all appear in the normalized device name, peak).
# Ordered most specific first: "h100 pcie" must win over plain "h100".
_TABLE: list[tuple[tuple[str, ...], DevicePeak]] = [
    (("gb200",), DevicePeak("GB200", 2250.0, 75.0, 1100.0, 8000.0, 126 * _MB)),
    (("b200",), DevicePeak("B200", 2250.0, 75.0, 1100.0, 8000.0, 126 * _MB)),
    (("h200", "nvl"), DevicePeak("H200 NVL", 835.0, 60.0, 418.0, 4800.0, 50 * _MB)),
    (("h200",), DevicePeak("H200 SXM", 989.4, 66.9, 494.7, 4800.0, 50 * _MB)),
    (("h100", "pcie"), DevicePeak("H100 PCIe", 756.5, 51.2, 378.0, 2000.0, 50 * _MB)),
    (("h100", "nvl"), DevicePeak("H100 NVL", 835.0, 60.0, 418.0, 3900.0, 50 * _MB)),
    (("h100",), DevicePeak("H100 SXM", 989.4, 66.9, 494.7, 3350.0, 50 * _MB)),
    (("a100", "pcie", "40gb"), DevicePeak("A100 PCIe 40GB", 312.0, 19.5, 156.0, 1555.0, 40 * _MB)),
    (("a100", "pcie"), DevicePeak("A100 PCIe 80GB", 312.0, 19.5, 156.0, 1935.0, 40 * _MB)),
    (("a100", "40gb"), DevicePeak("A100 SXM 40GB", 312.0, 19.5, 156.0, 1555.0, 40 * _MB)),
    (("a100",), DevicePeak("A100 SXM 80GB", 312.0, 19.5, 156.0, 2039.0, 40 * _MB)),
    (("l40s",), DevicePeak("L40S", 362.05, 91.6, 183.0, 864.0, 96 * _MB)),
    (("l4",), DevicePeak("L4", 121.0, 30.3, 60.0, 300.0, 48 * _MB)),
    (("rtx", "4090"), DevicePeak("RTX 4090", 165.2, 82.6, 82.6, 1008.0, 72 * _MB)),
    (("rtx", "3090"), DevicePeak("RTX 3090", 71.0, 35.6, 35.6, 936.0, 6 * _MB)),
    (("a6000",), DevicePeak("RTX A6000", 154.8, 38.7, 77.4, 768.0, 6 * _MB)),
    (("a10",), DevicePeak("A10", 125.0, 31.2, 62.5, 600.0, 6 * _MB)),
    (("t4",), DevicePeak("T4", 65.0, 8.1, 8.1, 320.0, 4 * _MB)),
    (("v100",), DevicePeak("V100", 125.0, 15.7, 15.7, 900.0, 6 * _MB)),
]

# An upper bound for any GPU we do not know: twice the fastest listed card
# (room for a newer generation). Used only to reject times, never for scores.
UNKNOWN_DEVICE_BOUND = DevicePeak(
    "unknown GPU (2x the fastest known)",
    fp16_tflops=2 * max(p.fp16_tflops for _, p in _TABLE),
    fp32_tflops=2 * max(p.fp32_tflops for _, p in _TABLE),
    tf32_tflops=2 * max(p.tf32_tflops for _, p in _TABLE),
    hbm_gbps=2 * max(p.hbm_gbps for _, p in _TABLE),
    l2_bytes=max(p.l2_bytes for _, p in _TABLE),
)


def _tokens(name: str) -> set[str]:
    # "NVIDIA A100-SXM4-80GB" -> {"nvidia", "a100", "sxm4", "80gb"}; token
    # matching keeps "l4" from matching "NVIDIA L40S".
    return set(re.split(r"[^a-z0-9]+", name.lower())) - {""}


def device_peak(name: str) -> DevicePeak | None:
    """Look up a GPU by the name torch reports (`torch.cuda.get_device_name()`).

    Returns None for a GPU that is not in the table.
    """
    tokens = _tokens(name)
    for needed, peak in _TABLE:
        if all(t in tokens for t in needed):
            return peak
    return None


def known_devices() -> list[str]:
    return [peak.name for _, peak in _TABLE]


def current_device_peak() -> DevicePeak | None:
    """The peak of the current CUDA device, or None (no GPU, or unknown GPU)."""
    import torch

    if not torch.cuda.is_available():
        return None
    return device_peak(torch.cuda.get_device_name())


def roofline_ms(peak: DevicePeak, *, flops: float = 0.0, bytes_moved: float = 0.0, dtype: object = "fp16") -> float:
    """The least time (ms) any kernel needs for `flops` and `bytes_moved` on `peak`.

    Roofline: time >= max(flops / compute peak, bytes / bandwidth).
    """
    compute_s = flops / (peak.tflops_for(dtype) * 1e12) if flops else 0.0
    memory_s = bytes_moved / (peak.hbm_gbps * 1e9) if bytes_moved else 0.0
    return 1e3 * max(compute_s, memory_s)


def is_impossible(
    time_ms: float,
    peak: DevicePeak | None,
    *,
    flops: float = 0.0,
    bytes_moved: float = 0.0,
    dtype: object = "fp16",
    slack: float = 1.15,
) -> bool:
    """True when `time_ms` beats the roofline by more than `slack` (15% by default,
    for clocks above spec and rounding). An unknown GPU is held to UNKNOWN_DEVICE_BOUND.

    Such a time means the work was not done (cached output, hidden stream,
    skipped computation) or was not measured.
    """
    if not time_ms > 0:
        return True
    bound = roofline_ms(peak or UNKNOWN_DEVICE_BOUND, flops=flops, bytes_moved=bytes_moved, dtype=dtype)
    return time_ms * slack < bound
