"""The only door from the grader to the learner's code (workspace modules
gpu_specs, occupancy, memory_access, simt, roofline).

Every function here runs in the learner's process under the sandbox and
returns plain data (numbers, strings, lists, dicts); the tests compare that
data with the grader's own models in reference.py.
"""

from __future__ import annotations

from roadmap_cli import grading_kit as kit

learner_side = getattr(kit, "learner_side", lambda fn: fn)


def _module(name: str):
    return kit.learner_module(name)


@learner_side
def occupancy(arch: str, threads: int, regs: int, smem: int, carveout_kb=None) -> dict:
    sm = _module("gpu_specs").spec(arch)
    if carveout_kb is None:
        return dict(_module("occupancy").occupancy(threads, regs, smem, sm))
    return dict(_module("occupancy").occupancy(threads, regs, smem, sm, carveout_kb=carveout_kb))


@learner_side
def best_block_size(arch: str, regs: int, smem_per_thread: int, candidates=None) -> int:
    sm = _module("gpu_specs").spec(arch)
    if candidates is None:
        return _module("occupancy").best_block_size(regs, smem_per_thread, sm)
    return _module("occupancy").best_block_size(regs, smem_per_thread, sm, candidates=tuple(candidates))


@learner_side
def coalescing(base: int, stride: int, size: int, active=None) -> dict:
    if active is None:
        return dict(_module("memory_access").coalescing(base, stride, size))
    return dict(_module("memory_access").coalescing(base, stride, size, active=list(active)))


@learner_side
def bank_conflict_degree(addresses, size=None) -> int:
    mod = _module("memory_access")
    if size is None:
        return mod.bank_conflict_degree(list(addresses))
    return mod.bank_conflict_degree(list(addresses), element_bytes=size)


@learner_side
def transpose_padding(cols: int, size=None, rows=None, max_padding=None) -> int:
    mod = _module("memory_access")
    kwargs = {} if max_padding is None else {"max_padding": max_padding}
    if size is not None:
        kwargs["element_bytes"] = size
    if rows is not None:
        kwargs["rows"] = rows
    return mod.transpose_padding(cols, **kwargs)


@learner_side
def simt_cost(program, n_threads: int) -> list:
    return [dict(w) for w in _module("simt").simt_cost(program, n_threads)]


@learner_side
def simt_efficiency(program, n_threads: int) -> float:
    return float(_module("simt").simt_efficiency(program, n_threads))


@learner_side
def roofline(name: str, *args, **kwargs):
    """ridge_point, attainable_tflops, bound, matmul_traffic, flash_attention_traffic, paged_decode_traffic."""
    result = getattr(_module("roofline"), name)(*args, **kwargs)
    return dict(result) if isinstance(result, dict) else result


# ---------------------------------------------------------------- GPU measurements (need CUDA)
# Timed inside the learner's process (the GPU context lives there); only the
# numbers come back.

@learner_side
def gpu_kernel_resources() -> list:
    return [dict(f) for f in _module("gpu_probes").kernel_resources()]


@learner_side
def gpu_strided_copy_gbps(strides, n: int) -> dict:
    import torch

    probes = _module("gpu_probes")
    src = torch.randn(n * max(strides), device="cuda")
    out = {}
    for stride in strides:
        timing = kit.benchmark(lambda s=stride: probes.strided_copy(src, s, n))
        out[stride] = 2 * 4 * n / (timing.median_ms * 1e-3) / 1e9  # useful bytes read + written
    return out


@learner_side
def gpu_transpose_ms(size: int) -> dict:
    import torch

    probes = _module("gpu_probes")
    x = torch.randn(size, size, device="cuda")
    correct = bool(torch.equal(probes.transpose(x, True), x.t())) and bool(torch.equal(probes.transpose(x, False), x.t()))
    plain = kit.benchmark(lambda: probes.transpose(x, False))
    padded = kit.benchmark(lambda: probes.transpose(x, True))
    return {"correct": correct, "plain_ms": plain.median_ms, "padded_ms": padded.median_ms}


@learner_side
def gpu_matmul_and_copy(n_elements: int, size: int) -> dict:
    import torch

    probes = _module("gpu_probes")
    src = torch.randn(n_elements, device="cuda")
    copy = kit.benchmark(lambda: probes.strided_copy(src, 1, n_elements))
    a = torch.randn(size, size, device="cuda", dtype=torch.float16)
    mm = kit.benchmark(lambda: a @ a)
    return {"copy_ms": copy.median_ms, "matmul_ms": mm.median_ms, "device": torch.cuda.get_device_name()}


@learner_side
def gpu_roofline_svg(peak_tflops: float, bandwidth_gbps: float, points) -> str:
    return str(_module("gpu_probes").roofline_svg(peak_tflops, bandwidth_gbps, [tuple(p) for p in points]))
