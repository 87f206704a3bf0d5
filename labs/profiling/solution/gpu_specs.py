"""Given code: the peak figures the roofline of part 2 uses.

Each entry is the vendor's dense peak for one precision and its memory
bandwidth, in base SI units: FLOP/s and bytes/s (never TFLOP/s or GB/s, so
that arithmetic intensity = FLOPs / bytes needs no conversion). The figures
are the datasheet numbers (dense, no sparsity); a real kernel reaches a
fraction of either roof.
"""

GPU_SPECS = {
    # name: {"peak_flops": FLOP/s, "mem_bw": bytes/s}
    "H100-SXM-bf16": {"peak_flops": 989e12, "mem_bw": 3.35e12},
    "H200-SXM-bf16": {"peak_flops": 989e12, "mem_bw": 4.8e12},
    "A100-SXM-bf16": {"peak_flops": 312e12, "mem_bw": 2.039e12},
    "A100-SXM-fp32": {"peak_flops": 19.5e12, "mem_bw": 2.039e12},
    "L4-fp16": {"peak_flops": 121e12, "mem_bw": 0.3e12},
}
