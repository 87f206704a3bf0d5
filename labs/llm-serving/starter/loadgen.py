"""Part 2: a load generator with Poisson arrivals, and the SLO statistics.

    python loadgen.py --url http://127.0.0.1:8000 --rates 2 4 8 --n 40 --out result.json --plot result.svg

README.md, section "Part 2". Every time below is in seconds, relative to the
moment the load started (t0 = time.perf_counter() when run_load begins).

One record per request (the raw timings the grader recomputes everything from):
    {"index": i, "start": when the request was sent, "first_token": when the
     first chunk carrying text arrived, "end": when the stream ended,
     "num_tokens": tokens received (one character = one token for this model),
     "text": the concatenated text}
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import time

import httpx


def poisson_arrivals(rate: float, n: int, seed: int) -> list[float]:
    """n arrival times of a Poisson process with `rate` requests/s: the gaps are
    independent exponential draws with mean 1/rate (random.Random(seed))."""
    raise NotImplementedError("poisson_arrivals: see README.md, section \"Poisson arrivals\"")


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile with linear interpolation (numpy's default): sort,
    position (n - 1) * q / 100, interpolate between the two neighbours."""
    raise NotImplementedError("percentile: see README.md, section \"Statistics\"")


def summarize(records: list[dict]) -> dict:
    """TTFT, TPOT and end-to-end latency (p50/p90/p99 and mean) and throughput.

    ttft = first_token - start; e2e = end - start;
    tpot = (end - first_token) / (num_tokens - 1), only for requests with >= 2 tokens;
    throughput_tok_s = sum(num_tokens) / (max(end) - min(start))."""
    raise NotImplementedError("summarize: see README.md, section \"Statistics\"")


async def _one(client: httpx.AsyncClient, url: str, body: dict, index: int, t0: float) -> dict:
    """Send one streaming request and time it."""
    raise NotImplementedError("_one: see README.md, section \"Measuring TTFT\"")


async def run_load_async(base_url: str, requests: list[tuple[str, int]], arrivals: list[float],
                         concurrency: int | None = None, model: str = "tiny-char-lm",
                         temperature: float = 0.0) -> list[dict]:
    """Send requests[i] = (prompt, max_tokens) at time arrivals[i] (s after the
    start) to /v1/completions with stream=true; with `concurrency`, at most
    that many are in flight (a request that arrives when all slots are busy
    waits for one). Returns the records sorted by index."""
    raise NotImplementedError("run_load_async: see README.md, section \"Part 2\"")


def run_load(base_url: str, requests: list[tuple[str, int]], arrivals: list[float], concurrency: int | None = None,
             model: str = "tiny-char-lm", temperature: float = 0.0) -> list[dict]:
    return asyncio.run(run_load_async(base_url, requests, arrivals, concurrency, model, temperature))


def svg_line_plot(series: dict[str, list[tuple[float, float]]], title: str) -> str:
    """Given: an SVG document with one <polyline id=NAME> per series of (x, y)
    points (x and y scaled into a 480 x 320 canvas)."""
    width, height, pad = 480, 320, 40
    xs = [x for pts in series.values() for x, _ in pts]
    x_lo, x_hi = min(xs), max(xs)
    y_hi = max(y for pts in series.values() for _, y in pts) or 1.0

    def point(x, y):
        px = pad + (width - 2 * pad) * ((x - x_lo) / (x_hi - x_lo) if x_hi > x_lo else 0.5)
        py = height - pad - (height - 2 * pad) * y / y_hi
        return f"{px:.1f},{py:.1f}"

    colours = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"]
    lines = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}">',
             f'<text x="{pad}" y="20">{title}</text>']
    for i, (name, pts) in enumerate(series.items()):
        lines.append(f'<polyline id="{name}" fill="none" stroke="{colours[i % len(colours)]}" '
                     f'points="{" ".join(point(x, y) for x, y in pts)}"/>')
    lines.append("</svg>")
    return "\n".join(lines) + "\n"


def write_report(results: list[dict], json_path: str, svg_path: str) -> None:
    """results[i] = {"load": x (rate or concurrency), "summary": summarize(...)}.
    Writes the JSON as given, and (with svg_line_plot) an SVG plot of the p50
    and p99 end-to-end latency (y) against load (x): series "p50" and "p99",
    one point per result, in the order given."""
    raise NotImplementedError("write_report: see README.md, section \"Report\"")


def main() -> None:
    ap = argparse.ArgumentParser(description="Poisson load against an OpenAI-compatible server")
    ap.add_argument("--url", default="http://127.0.0.1:8000")
    ap.add_argument("--rates", type=float, nargs="+", default=[2.0, 4.0, 8.0])
    ap.add_argument("--n", type=int, default=40)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="result.json")
    ap.add_argument("--plot", default="result.svg")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    results = []
    for rate in args.rates:
        reqs = [("user: " + "".join(rng.choice("abcdefgh ") for _ in range(rng.randint(5, 40))),
                 rng.randint(1, args.max_tokens)) for _ in range(args.n)]
        records = run_load(args.url, reqs, poisson_arrivals(rate, args.n, args.seed))
        results.append({"load": rate, "summary": summarize(records)})
        print(rate, json.dumps(results[-1]["summary"]))
    write_report(results, args.out, args.plot)


if __name__ == "__main__":
    main()
