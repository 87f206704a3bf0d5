"""Part 5: perplexity (README.md, "Part 5: perplexity").

The four pipelines on the trained model, and perplexity on held-out text.
"""

from __future__ import annotations

import torch

import tiny_gpt
from awq import awq_model
from int4 import W4A16Linear
from smoothquant import smooth_model
from w8a8 import W8A8Linear


def quantize_model(model: tiny_gpt.TinyGPT, method: str, calib_idx: torch.Tensor, *,
                   alpha: float = 0.5, group_size: int = 32, n_grid: int = 20) -> tiny_gpt.TinyGPT:
    """In place; returns model. method:
      "w8a8"             every QUANTIZED_LINEAR -> W8A8Linear
      "smoothquant-w8a8" smooth_model(alpha), then as "w8a8"
      "w4a16"            every QUANTIZED_LINEAR -> W4A16Linear(group_size) (round to nearest, no scales)
      "awq-w4a16"        awq_model(group_size, n_grid)
    anything else -> ValueError."""
    raise NotImplementedError("quantize_model: see README.md, section \"Part 5: perplexity\"")


def perplexity(logits: torch.Tensor, targets: torch.Tensor) -> float:
    """logits (B, T, V) float32, targets (B, T) int64 -> exp(mean cross-entropy over all B*T
    positions), the mean taken in float64."""
    raise NotImplementedError("perplexity: see README.md, section \"Part 5: perplexity\"")


def main() -> None:
    """python evaluate.py: Part 5's table on the shipped checkpoint (fp32 and the four methods)."""
    checkpoint, calib, inputs, targets = tiny_gpt.load_shipped()
    with torch.no_grad():
        fp = perplexity(tiny_gpt.load_tiny_gpt(checkpoint)(inputs), targets)
        print(f"{'fp32':18s} {fp:8.4f}")
        for method in ("w8a8", "smoothquant-w8a8", "w4a16", "awq-w4a16"):
            model = quantize_model(tiny_gpt.load_tiny_gpt(checkpoint), method, calib)
            ppl = perplexity(model(inputs), targets)
            print(f"{method:18s} {ppl:8.4f}  ({ppl / fp - 1:+.2%})")


if __name__ == "__main__":
    main()
