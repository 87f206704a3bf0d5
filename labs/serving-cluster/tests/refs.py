"""The grader's references (grader process only: never learner-side)."""

from __future__ import annotations

import math
import random

from roadmap_cli import grading_kit as kit

from stub_replica import hash_block


def rng(name: str) -> random.Random:
    return random.Random(kit.seeded(f"serving-cluster-{name}"))


def where(section: str) -> str:
    return f"(README.md, section \"{section}\")"


def block_hashes(tokens, bs):
    out, parent = [], 0
    for k in range(len(tokens) // bs):
        parent = hash_block(parent, tokens[k * bs:(k + 1) * bs])
        out.append(parent)
    return out


class Router:
    """The grader's router: the handout's rules, written plainly."""

    def __init__(self, n, policy, block_size=8, imbalance=4):
        self.n, self.policy, self.bs, self.imbalance = n, policy, block_size, imbalance
        self.outstanding = [0] * n
        self.healthy = [True] * n
        self.prefixes = [set() for _ in range(n)]
        self.next = 0

    def match(self, i, hashes):
        k = 0
        for j, h in enumerate(hashes):
            if h in self.prefixes[i]:
                k = j + 1
        return k

    def least(self, cands):
        return min(cands, key=lambda i: (self.outstanding[i], i))

    def pick(self, tokens, exclude=()):
        cands = [i for i in range(self.n) if self.healthy[i] and i not in exclude]
        if not cands:
            return None
        hashes = block_hashes(tokens, self.bs)
        if self.policy == "round_robin":
            c = next(i % self.n for i in range(self.next, self.next + self.n) if i % self.n in cands)
            self.next = (c + 1) % self.n
        elif self.policy == "least_outstanding":
            c = self.least(cands)
        else:
            lo = min(self.outstanding[i] for i in cands)
            best = max(self.match(i, hashes) for i in cands)
            tied = [i for i in cands if self.match(i, hashes) == best]
            b = self.least(tied)
            c = self.least(cands) if best == 0 or self.outstanding[b] > lo + self.imbalance else b
        self.outstanding[c] += 1
        self.prefixes[c].update(hashes)
        return c


def autoscale(params, steps):
    target, lo, hi, cooldown, tol = (params["target"], params["min"], params["max"], params["cooldown"],
                                     params["tolerance"])
    last = -math.inf
    current = params["start"]
    out = []
    for now, q, *given in steps:                # a third item: the caller runs that many replicas now
        current = given[0] if given else current
        wanted = current * target
        desired = current if abs(q - wanted) <= tol * wanted else -(-q // target)
        desired = max(lo, min(hi, desired))
        if desired < current and now - last < cooldown:
            desired = current
        if desired != current:
            last = now
        current = desired
        out.append(desired)
    return out


def arrivals(r: random.Random, n, rate_on, rate_off, on_s, off_s):
    out, t, on, end = [], 0.0, True, on_s
    while len(out) < n:
        rate = rate_on if on else rate_off
        if rate > 0:
            gap = r.expovariate(rate)
            if t + gap < end:
                t += gap
                out.append(t)
                continue
        t, on = end, not on
        end += on_s if on else off_s
    return out


def percentile(values, q):
    s = sorted(values)
    return float(s[max(math.ceil(q / 100 * len(s)), 1) - 1])


def summarize(records, stats):
    ok = [r for r in records if r["ok"]]
    ttft = [(r["first_token"] - r["sent"]) * 1000.0 for r in ok]
    prompt = sum(s["prompt_tokens"] for s in stats)
    cached = sum(s["cached_tokens"] for s in stats)
    return {"requests": len(records), "ok": len(ok), "errors": len(records) - len(ok),
            "p50_ttft_ms": percentile(ttft, 50) if ttft else None,
            "p99_ttft_ms": percentile(ttft, 99) if ttft else None,
            "hit_rate": cached / prompt if prompt else 0.0}


