"""The grader's references for parts 2 and 4 (written from the handout's
formulas; the grader process computes them, never the learner's code)."""

from __future__ import annotations

import math
import random

import torch


# ---------------------------------------------------------------- part 2: statistics

def poisson_arrivals(rate: float, n: int, seed: int) -> list[float]:
    rng = random.Random(seed)
    t, out = 0.0, []
    for _ in range(n):
        t += rng.expovariate(rate)
        out.append(t)
    return out


def percentile(values, q: float) -> float:
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def _stats(values) -> dict:
    if not values:
        return {"p50": None, "p90": None, "p99": None, "mean": None}
    return {"p50": percentile(values, 50), "p90": percentile(values, 90), "p99": percentile(values, 99),
            "mean": sum(values) / len(values)}


def summarize(records) -> dict:
    ttft = [r["first_token"] - r["start"] for r in records]
    e2e = [r["end"] - r["start"] for r in records]
    tpot = [(r["end"] - r["first_token"]) / (r["num_tokens"] - 1) for r in records if r["num_tokens"] >= 2]
    tokens = sum(r["num_tokens"] for r in records)
    span = max(r["end"] for r in records) - min(r["start"] for r in records)
    return {"num_requests": len(records), "num_tokens": tokens, "ttft": _stats(ttft), "tpot": _stats(tpot),
            "e2e": _stats(e2e), "throughput_tok_s": tokens / span}


def throughput(records) -> float:
    return sum(r["num_tokens"] for r in records) / (max(r["end"] for r in records) - min(r["start"] for r in records))


def close(a, b, rel: float = 1e-9) -> bool:
    """Recursive comparison of summaries: numbers within `rel`, the rest equal."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(close(a[k], b[k], rel) for k in a)
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool) \
            and not isinstance(b, bool):
        return math.isclose(a, b, rel_tol=rel, abs_tol=1e-12)
    return a == b


def svg_line_plot(series: dict[str, list[tuple[float, float]]], title: str) -> str:
    """The given plot helper of loadgen.py (a copy): an SVG document with one <polyline id=NAME> per series of (x, y)
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


def stop_holdback(text: str, stops) -> int:
    best = 0
    for s in stops:
        for k in range(min(len(s) - 1, len(text)), 0, -1):
            if text.endswith(s[:k]):
                best = max(best, k)
                break
    return best


# ---------------------------------------------------------------- part 4: quantization

MIN_SCALE = 1e-8


def quantize_int8(w: torch.Tensor):
    scale = (w.abs().amax(dim=1) / 127.0).clamp(min=MIN_SCALE)
    q = torch.round(w / scale[:, None]).clamp(-127, 127).to(torch.int8)
    return q, scale


def quantize_int4(w: torch.Tensor, group_size: int):
    out_f, in_f = w.shape
    groups = w.reshape(out_f, in_f // group_size, group_size)
    # The range always includes 0 (as GPTQ does): zero = round(-lo / scale) lands in [0, 15]
    # and every weight is within scale / 2 of the grid, even in an all-positive group.
    lo = groups.amin(dim=-1).clamp(max=0.0)
    hi = groups.amax(dim=-1).clamp(min=0.0)
    scales = ((hi - lo) / 15.0).clamp(min=MIN_SCALE)
    zeros = torch.round(-lo / scales)
    q = (torch.round(groups / scales[..., None]) + zeros[..., None]).clamp(0, 15)
    return q.reshape(out_f, in_f).to(torch.uint8), scales, zeros.to(torch.uint8)


def unpack_int4(packed: torch.Tensor) -> torch.Tensor:
    """Low nibble = even column, high nibble = odd column (README "int4 groups")."""
    out = torch.empty(packed.shape[0], packed.shape[1] * 2, dtype=torch.uint8)
    out[:, 0::2] = packed & 0x0F
    out[:, 1::2] = packed >> 4
    return out


def dequantize_int4(q: torch.Tensor, scales: torch.Tensor, zeros: torch.Tensor, group_size: int) -> torch.Tensor:
    out_f, in_f = q.shape
    groups = q.to(torch.float32).reshape(out_f, in_f // group_size, group_size)
    return ((groups - zeros[..., None].to(torch.float32)) * scales[..., None]).reshape(out_f, in_f)


def quantized_bytes(out_f: int, in_f: int, scheme: str, group_size: int = 128) -> int:
    n = out_f * in_f
    return {"fp32": 4 * n, "int8": n + 4 * out_f, "int4": n // 2 + out_f * (in_f // group_size) * 5}[scheme]


HELD_OUT_TEXT = (
    "The scheduler admits a request when a batch slot and its KV blocks are free.\n"
    "Tokens stream back as server-sent events; the client measures time to first token.\n"
    "Quantized weights are read from memory four times faster than fp32 ones.\n"
)
