"""The grader's references (grader process only: never learner-side)."""

from __future__ import annotations

import random
from fractions import Fraction

import pytest
import torch

from roadmap_cli import grading_kit as kit


def rng(name: str) -> random.Random:
    return random.Random(kit.seeded(f"distributed-{name}"))


def gen(r: random.Random) -> torch.Generator:
    return torch.Generator().manual_seed(r.randrange(1 << 62))


def chunk_sizes(numel: int, p: int) -> list[int]:
    """torch.tensor_split's sizes: numel // p each, one more for the first numel % p."""
    return [numel // p + (1 if i < numel % p else 0) for i in range(p)]


def ring_sends(op: str, numel: int, p: int, rank: int) -> list[int]:
    """The chunk indices rank `rank` sends, in order (README.md, Part 1's schedule)."""
    rs = [(rank - s - 1) % p for s in range(p - 1)]
    ag = [(rank - s) % p for s in range(p - 1)]
    return {"reduce_scatter": rs, "all_gather": ag, "all_reduce": rs + ag}[op]


def raise_errors(results: dict, section: str) -> None:
    errors = {r: res["error"] for r, res in results.items() if res["error"]}
    if errors:
        # The first rank to fail is usually the cause; the others then lose their peer.
        text = "; ".join(f"rank {r}: {e}" for r, e in sorted(errors.items()))
        if "Timed out" in text:
            text += " -- a comm.recv waited 15 s for a message no rank sent it (every recv needs a matching send)"
        pytest.fail(f"{text} (README.md, section \"{section}\")")


# ---------------------------------------------------------------- models


def mlp(sizes, weights):
    layers = []
    for i, (a, b) in enumerate(zip(sizes, sizes[1:])):
        layers.append(torch.nn.Linear(a, b, dtype=torch.float64))
        if i < len(sizes) - 2:
            layers.append(torch.nn.Tanh())
    model = torch.nn.Sequential(*layers)
    with torch.no_grad():
        for p, w in zip(model.parameters(), weights):
            p.copy_(w)
    return model


def random_weights(sizes, g):
    out = []
    for a, b in zip(sizes, sizes[1:]):
        out += [torch.randn(b, a, generator=g, dtype=torch.float64) / a ** 0.5,
                torch.randn(b, generator=g, dtype=torch.float64) * 0.1]
    return out


def scaled_mlp(sizes, weights):
    """The model of part 2 (adapter._scaled_mlp): mlp(sizes)(x) * scale, scale registered first."""

    class ScaledMLP(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = torch.nn.Parameter(torch.ones(sizes[-1], dtype=torch.float64))
            self.body = mlp(sizes, weights[1:])

        def forward(self, x):
            return self.body(x) * self.scale

    model = ScaledMLP()
    with torch.no_grad():
        model.scale.copy_(weights[0])
    return model


def param_bytes(sizes) -> list[int]:
    out = []
    for a, b in zip(sizes, sizes[1:]):
        out += [a * b * 8, b * 8]
    return out


def buckets(sizes_bytes, cap):
    out, cur, size = [], [], 0
    for i in reversed(range(len(sizes_bytes))):
        cur.append(i)
        size += sizes_bytes[i]
        if size >= cap:
            out.append(cur)
            cur, size = [], 0
    if cur:
        out.append(cur)
    return out


# ---------------------------------------------------------------- pipeline


def one_f_one_b(p: int, m: int, s: int) -> list[tuple[str, int]]:
    warm = min(p - s - 1, m)
    order = [("F", i) for i in range(warm)]
    for k in range(m - warm):
        order += [("F", warm + k), ("B", k)]
    order += [("B", k) for k in range(m - warm, m)]
    return order


def simulate(orders: list[list[tuple[str, int]]]) -> set[tuple[int, int, str, int]]:
    """Unit-time ticks of per-stage orders: each op starts once its stage is free and its input exists."""
    p = len(orders)
    ends: dict = {}
    pos, free, events = [0] * p, [0] * p, set()
    while any(pos[s] < len(orders[s]) for s in range(p)):
        moved = False
        for s in range(p):
            if pos[s] == len(orders[s]):
                continue
            kind, i = orders[s][pos[s]]
            dep = ((s - 1, "F", i) if s > 0 else None) if kind == "F" else ((s + 1, "B", i) if s < p - 1 else (s, "F", i))
            if dep is not None and dep not in ends:
                continue
            t = max(free[s], ends[dep] if dep else 0)
            events.add((s, i, kind, t))
            ends[(s, kind, i)] = free[s] = t + 1
            pos[s] += 1
            moved = True
        if not moved:
            raise AssertionError("these per-stage orders deadlock: a stage waits for an input never produced")
    return events


def bubble(events, p: int) -> Fraction:
    makespan = max(e[3] for e in events) + 1
    return 1 - Fraction(len(events), p * makespan)
