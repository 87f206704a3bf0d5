"""Part 4: a 1F1B pipeline schedule (README.md, section "Part 4: 1F1B pipeline").

Stage s of p runs on rank s; micro-batches are numbered 0 .. m-1.
`comm.send(tensor, dst)` never blocks; `comm.recv(tensor, src)` fills `tensor`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def one_f_one_b(num_stages: int, num_microbatches: int, stage: int) -> list[tuple[str, int]]:
    """The order in which `stage` runs its forwards ("F", i) and backwards ("B", i)."""
    raise NotImplementedError("one_f_one_b: see README.md, section \"Part 4: 1F1B pipeline\"")


def timeline(num_stages: int, num_microbatches: int) -> list[tuple[int, int, str, int]]:
    """Every operation of the 1F1B schedule as (stage, micro-batch, "F"/"B", tick)
    when each one takes one tick and starts as early as its stage and its input allow."""
    raise NotImplementedError("timeline: see README.md, section \"Part 4: 1F1B pipeline\"")


def bubble_fraction(events: list[tuple[int, int, str, int]], num_stages: int) -> float:
    """The idle share of num_stages x (makespan in ticks) in a timeline of unit-time operations."""
    raise NotImplementedError("bubble_fraction: see README.md, section \"Part 4: 1F1B pipeline\"")


def run_1f1b(stage_module, comm, num_microbatches: int, inputs, targets, activation_shape, dtype):
    """Run this rank's stage through one training step in 1F1B order. Stage 0
    gets `inputs` (a list of micro-batches), the last stage `targets`; the others
    get None. Returns the batch's loss on the last stage, None elsewhere."""
    raise NotImplementedError("run_1f1b: see README.md, section \"Part 4: 1F1B pipeline\"")
