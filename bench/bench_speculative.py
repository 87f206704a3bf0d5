"""Speculative decoding, measured against the paper's formulas.

For position-independent draft and target distributions q and p over a small
vocabulary, Leviathan et al. (2023) give the acceptance rate
a = sum_x min(p(x), q(x)) and the expected tokens per target forward
(1 - a^(k+1)) / (1 - a). This runs the modern-llm lab's reference
`speculative_generate` for several (p, q) pairs and k, and prints measured /
formula ratios (1.00 = the formula), plus the first-token distribution's
largest deviation from p.

    python bench/bench_speculative.py [--trials 3000]
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=3000, help="speculative runs per configuration")
    args = parser.parse_args()
    spec = _load("speculative", ROOT / "labs/modern-llm/solution/speculative.py")
    models = _load("spec_models", ROOT / "labs/modern-llm/tests/spec_models.py")
    g = torch.Generator().manual_seed(1234)
    print(
        f"{'pair':>10} {'k':>2} {'a (formula)':>12} {'a (measured)':>13} {'ratio':>6} "
        f"{'tok/fwd formula':>16} {'measured':>9} {'ratio':>6} {'max |freq-p|':>13}"
    )
    for pair in ("close", "medium", "far"):
        noise = {"close": 0.1, "medium": 0.6, "far": 2.0}[pair]
        p = torch.rand(6, generator=g, dtype=torch.float64) + 0.05
        q = (p + noise * torch.rand(6, generator=g, dtype=torch.float64)).clamp_min(1e-3)
        target, draft = models.TableModel(p), models.TableModel(q)
        p, q = target.table, draft.table
        alpha = float(torch.minimum(p, q).sum())
        for k in (1, 2, 4, 8):
            proposed = accepted = calls = 0
            first = torch.zeros(6)
            for _ in range(args.trials):
                out = spec.speculative_generate(target, draft, [0], 16, k, generator=g)
                proposed, accepted, calls = (
                    proposed + out["proposed"],
                    accepted + out["accepted"],
                    calls + out["target_calls"],
                )
                first[out["tokens"][0]] += 1
            rate = accepted / proposed
            per_call = (accepted + calls) / calls
            formula = spec.expected_tokens_per_target_call(alpha, k)
            deviation = float((first / args.trials - p).abs().max())
            print(
                f"{pair:>10} {k:>2} {alpha:>12.4f} {rate:>13.4f} {rate / alpha:>6.3f} "
                f"{formula:>16.3f} {per_call:>9.3f} {per_call / formula:>6.3f} {deviation:>13.4f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
