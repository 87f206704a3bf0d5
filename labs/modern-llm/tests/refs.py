"""The grader's own references, written differently from the reference
solution so that one mistake cannot hide in both."""

from __future__ import annotations

import math
import random

import torch

from roadmap_cli import grading_kit as kit


def rng(name: str) -> random.Random:
    return random.Random(kit.seeded(name))


def gen(r: random.Random) -> torch.Generator:
    return torch.Generator().manual_seed(r.randrange(2**62))


def rmsnorm(x, weight, eps):
    xd = x.double()
    return (xd / torch.sqrt((xd * xd).mean(-1, keepdim=True) + eps) * weight.double())


def swiglu(x, w1, w3, w2):
    a = x.double() @ w1.double().t()
    return ((a * torch.sigmoid(a)) * (x.double() @ w3.double().t())) @ w2.double().t()


def rope_complex(x, positions, theta):
    """Rotate-half RoPE as complex multiplication: pair (i, i + d/2) is the
    complex number x_i + j x_{i+d/2}, multiplied by e^{j m theta^(-2i/d)}."""
    d = x.shape[-1]
    half = d // 2
    xd = x.double()
    z = torch.complex(xd[..., :half], xd[..., half:])
    freqs = theta ** (-2.0 * torch.arange(half, dtype=torch.float64) / d)
    rot = torch.polar(torch.ones(len(positions), half, dtype=torch.float64),
                      torch.tensor(positions, dtype=torch.float64)[:, None] * freqs[None, :])
    out = z * rot
    return torch.cat([out.real, out.imag], dim=-1)


def attention_per_head(q, k, v, causal, mask=None):
    """Loop over query heads; head h reads kv head h // (H / KVH)."""
    b, h, t, d = q.shape
    kvh, s = k.shape[1], k.shape[2]
    out = torch.empty(b, h, t, d, dtype=torch.float64)
    for hh in range(h):
        kk, vv = k[:, hh // (h // kvh)].double(), v[:, hh // (h // kvh)].double()
        scores = q[:, hh].double() @ kk.transpose(-1, -2) / math.sqrt(d)
        for i in range(t):
            for j in range(s):
                if causal and j > s - t + i:
                    scores[:, i, j] = -math.inf
        if mask is not None:
            scores = scores.masked_fill(~mask[:, None, :], -math.inf)
        out[:, hh] = torch.softmax(scores, -1) @ vv
    return out


def moe_dense(x, router_weight, experts, top_k, normalize, capacity_factor):
    """Every expert on every token, then combined by the (kept) gates."""
    n, e = x.shape[0], router_weight.shape[0]
    probs = torch.softmax((x.double() @ router_weight.double().t()), -1)
    order = [sorted(range(e), key=lambda j: (-float(probs[t, j]), j))[:top_k] for t in range(n)]
    gates = [[float(probs[t, j]) for j in order[t]] for t in range(n)]
    if normalize:
        gates = [[g / sum(row) for g in row] for row in gates]
    cap = None if capacity_factor is None else math.ceil(capacity_factor * n * top_k / e)
    kept = [[True] * top_k for _ in range(n)]
    load = [0] * e
    for rank in range(top_k):
        for t in range(n):
            j = order[t][rank]
            if cap is not None and load[j] >= cap:
                kept[t][rank] = False
            else:
                load[j] += 1
    outs = [swiglu(x, w1, w3, w2) for (w1, w3, w2) in experts]           # every expert, every token
    y = torch.zeros(n, x.shape[1], dtype=torch.float64)
    for t in range(n):
        for rank in range(top_k):
            if kept[t][rank]:
                y[t] += gates[t][rank] * outs[order[t][rank]][t]
    counts = [0] * e
    for t in range(n):
        for j in order[t]:
            counts[j] += 1
    f = torch.tensor(counts, dtype=torch.float64) / (n * top_k)
    aux = e * float((f * probs.mean(0)).sum())
    return y, kept, aux, order
