"""Part 3: find the bottlenecks planted in slow_model.py from a trace, and fix them.

`find_bottlenecks(trace)` reads only the trace (the parsed Chrome-trace JSON
of a CPU or CUDA profile, made with record_shapes=True) and names what it
finds; `fast_forward(weights, x)` is slow_forward without the three planted
costs: the same outputs, much less time.
"""

from __future__ import annotations

import torch

from trace_analysis import events

# The labels find_bottlenecks returns (README.md, Part 3: the thresholds).
HOST_SYNC = "host-sync"
NONCONTIGUOUS_COPY = "noncontiguous-copy"
SMALL_MATMUL_LOOP = "small-matmul-loop"


def find_bottlenecks(trace: dict) -> list[str]:
    """The labels of the planted bottlenecks this trace shows, sorted alphabetically."""
    raise NotImplementedError("find_bottlenecks: see README.md, section \"Part 3: the planted bottlenecks\"")


def fast_forward(weights: list[tuple[torch.Tensor, torch.Tensor]], x: torch.Tensor) -> torch.Tensor:
    """slow_model.slow_forward without its three planted costs: the same (B, D) float32 output."""
    raise NotImplementedError("fast_forward: see README.md, section \"Part 3: the planted bottlenecks\"")
