"""Part 4: a bursty load generator and the TTFT report (README.md, "Part 4: bursty load and the per-policy report").

Real traffic is not a steady Poisson stream: it comes in bursts (a batch job
starts, a page goes viral). The generator here alternates ON and OFF periods
of fixed lengths, each a Poisson process of its own rate: a
Markov-modulated Poisson process with deterministic phases, the simplest
model that shows what a burst does to the tail of time-to-first-token.
"""

from __future__ import annotations

import math
import random


def bursty_arrivals(rng: random.Random, n: int, rate_on: float, rate_off: float,
                    on_s: float, off_s: float) -> list[float]:
    """`n` arrival times in seconds (increasing, from t = 0): ON for [0, on_s),
    OFF for [on_s, on_s + off_s), ON again, ...; rate_on / rate_off requests per
    second in each. Gaps are rng.expovariate(rate) of the phase the clock is in;
    a gap that would cross the phase's end is thrown away and the clock jumps to
    that end (the exponential is memoryless, so this is exact). A phase of rate 0
    draws nothing: the clock jumps to its end."""
    raise NotImplementedError("bursty_arrivals: see README.md, section \"Part 4: bursty load and the per-policy report\"")


def percentile(values, q: float) -> float:
    """The nearest-rank q-th percentile (0 < q <= 100): the value at 1-based rank
    ceil(q / 100 * n) of the sorted values. No interpolation."""
    raise NotImplementedError("percentile: see README.md, section \"Part 4: bursty load and the per-policy report\"")


def summarize(records: list[dict], replica_stats: list[dict]) -> dict:
    """One policy's report from one run.

    records: per request {"sent": s, "first_token": f or None, "ok": bool}, clock in seconds.
    replica_stats: per replica {"prompt_tokens": p, "cached_tokens": c} (GET /stats).
    Returns {"requests", "ok", "errors", "p50_ttft_ms", "p99_ttft_ms", "hit_rate"}:
    TTFT = (first_token - sent) * 1000 over the ok requests; hit_rate = total
    cached_tokens / total prompt_tokens (0.0 when no prompt token was seen).
    """
    raise NotImplementedError("summarize: see README.md, section \"Part 4: bursty load and the per-policy report\"")
