"""Part 5: capacity planning (README "Part 5" derives every formula).

All sizes in bytes, times in seconds, rates per second. Integers stay
integers: round down what must fit (tokens, sequences), round up what must
be provisioned (replicas).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

TP_DEGREES = (1, 2, 4, 8)
LN_100 = math.log(100.0)   # p99 of an exponential distribution = mean * ln(100)


@dataclass(frozen=True)
class ModelSpec:
    n_params: int
    n_layers: int
    n_kv_heads: int
    head_dim: int
    weight_bytes: int = 2     # bytes per parameter (bf16)
    kv_bytes: int = 2         # bytes per K/V element


@dataclass(frozen=True)
class GpuSpec:
    memory_bytes: int
    peak_flops: float         # dense FLOP/s
    mem_util: float = 0.9     # fraction of memory the server may use
    activation_bytes: int = 0  # reserved per GPU for activations / workspace


@dataclass(frozen=True)
class Traffic:
    rate: float               # requests / s (Poisson)
    prompt_tokens: int
    output_tokens: int
    tpot_s: float             # time per output token during decode
    mfu: float = 0.5          # fraction of peak the prefill reaches


def kv_bytes_per_token(m: ModelSpec, tp: int = 1) -> int:
    """K and V of every layer for one token, on ONE GPU of a TP group: the KV
    heads are split across ranks (replicated when tp > n_kv_heads)."""
    # BEGIN SOLUTION
    return 2 * m.n_layers * math.ceil(m.n_kv_heads / tp) * m.head_dim * m.kv_bytes
    # STARTER
    # raise NotImplementedError("kv_bytes_per_token: see README.md, section \"Part 5\"")
    # END SOLUTION


def kv_capacity_tokens(m: ModelSpec, gpu: GpuSpec, tp: int, block_size: int = 16) -> int:
    """Tokens of KV cache one TP group holds: per GPU, floor(memory * mem_util)
    minus its weight shard ceil(n_params * weight_bytes / tp) minus
    activation_bytes, divided by kv_bytes_per_token(m, tp), rounded down to
    whole blocks. 0 when the weights do not fit."""
    # BEGIN SOLUTION
    budget = math.floor(gpu.memory_bytes * gpu.mem_util) - math.ceil(m.n_params * m.weight_bytes / tp) \
        - gpu.activation_bytes
    if budget <= 0:
        return 0
    tokens = budget // kv_bytes_per_token(m, tp)
    return tokens // block_size * block_size
    # STARTER
    # raise NotImplementedError("kv_capacity_tokens: see README.md, section \"Part 5\"")
    # END SOLUTION


def max_concurrent_seqs(capacity_tokens: int, seq_len: int, block_size: int = 16) -> int:
    """Sequences of seq_len tokens that fit at once: each holds ceil(seq_len / block_size) blocks."""
    # BEGIN SOLUTION
    return capacity_tokens // (math.ceil(seq_len / block_size) * block_size)
    # STARTER
    # raise NotImplementedError("max_concurrent_seqs: see README.md, section \"Part 5\"")
    # END SOLUTION


def prefill_time_s(m: ModelSpec, gpu: GpuSpec, traffic: Traffic, tp: int) -> float:
    """2 * n_params * prompt_tokens FLOPs over tp GPUs at mfu * peak."""
    # BEGIN SOLUTION
    return 2.0 * m.n_params * traffic.prompt_tokens / (tp * gpu.peak_flops * traffic.mfu)
    # STARTER
    # raise NotImplementedError("prefill_time_s: see README.md, section \"Part 5\"")
    # END SOLUTION


def p99_ttft_s(service_s: float, rate_per_replica: float) -> float:
    """M/M/1 queue of prefills: utilisation rho = rate * service; the time in
    the system is exponential with mean service / (1 - rho), so its p99 is
    mean * ln(100). math.inf when rho >= 1."""
    # BEGIN SOLUTION
    rho = rate_per_replica * service_s
    if rho >= 1.0:
        return math.inf
    return service_s / (1.0 - rho) * LN_100
    # STARTER
    # raise NotImplementedError("p99_ttft_s: see README.md, section \"Part 5\"")
    # END SOLUTION


def replicas_needed(m: ModelSpec, gpu: GpuSpec, traffic: Traffic, tp: int, target_p99_ttft_s: float,
                    block_size: int = 16) -> int | None:
    """Fewest replicas (TP groups of `tp` GPUs) meeting both limits, None if no
    number can (the weights do not fit, one sequence does not fit, or even an
    idle replica misses the target):
      TTFT: S * ln(100) / (1 - rate / r * S) <= target
            <=> r >= rate * S / (1 - S * ln(100) / target)
      KV (Little's law): r * max_seqs >= rate * (output_tokens * tpot_s)
            <=> r >= rate * output_tokens * tpot_s / max_seqs
    with S = prefill_time_s and max_seqs for prompt + output tokens; r >= 1."""
    # BEGIN SOLUTION
    seqs = max_concurrent_seqs(kv_capacity_tokens(m, gpu, tp, block_size),
                               traffic.prompt_tokens + traffic.output_tokens, block_size)
    service = prefill_time_s(m, gpu, traffic, tp)
    headroom = 1.0 - service * LN_100 / target_p99_ttft_s
    if seqs < 1 or headroom <= 0.0:
        return None
    by_ttft = math.ceil(traffic.rate * service / headroom)
    by_kv = math.ceil(traffic.rate * traffic.output_tokens * traffic.tpot_s / seqs)
    return max(1, by_ttft, by_kv)
    # STARTER
    # raise NotImplementedError("replicas_needed: see README.md, section \"Part 5\"")
    # END SOLUTION


def plan(m: ModelSpec, gpu: GpuSpec, traffic: Traffic, target_p99_ttft_s: float,
         max_tp: int = 8, block_size: int = 16) -> dict | None:
    """Over tp in TP_DEGREES (<= max_tp): the plan with the fewest GPUs
    (tp * replicas), the smaller tp on a tie. Returns {"tp", "replicas",
    "gpus", "kv_tokens", "max_seqs"} or None when no tp works."""
    # BEGIN SOLUTION
    best = None
    for tp in TP_DEGREES:
        if tp > max_tp:
            break
        replicas = replicas_needed(m, gpu, traffic, tp, target_p99_ttft_s, block_size)
        if replicas is None:
            continue
        if best is None or tp * replicas < best["gpus"]:
            kv = kv_capacity_tokens(m, gpu, tp, block_size)
            best = {"tp": tp, "replicas": replicas, "gpus": tp * replicas, "kv_tokens": kv,
                    "max_seqs": max_concurrent_seqs(kv, traffic.prompt_tokens + traffic.output_tokens, block_size)}
    return best
    # STARTER
    # raise NotImplementedError("plan: see README.md, section \"Part 5\"")
    # END SOLUTION
