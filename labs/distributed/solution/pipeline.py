"""Part 4: a 1F1B pipeline schedule (README.md, section "Part 4: 1F1B pipeline").

Stage s of p runs on rank s; micro-batches are numbered 0 .. m-1.
`comm.send(tensor, dst)` never blocks; `comm.recv(tensor, src)` fills `tensor`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def one_f_one_b(num_stages: int, num_microbatches: int, stage: int) -> list[tuple[str, int]]:
    """The order in which `stage` runs its forwards ("F", i) and backwards ("B", i)."""
    # BEGIN SOLUTION
    m = num_microbatches
    warmup = min(num_stages - stage - 1, m)
    order = [("F", i) for i in range(warmup)]
    f, b = warmup, 0
    while f < m:
        order.append(("F", f))
        f += 1
        order.append(("B", b))
        b += 1
    while b < m:
        order.append(("B", b))
        b += 1
    return order
    # STARTER
    # raise NotImplementedError("one_f_one_b: see README.md, section \"Part 4: 1F1B pipeline\"")
    # END SOLUTION


def timeline(num_stages: int, num_microbatches: int) -> list[tuple[int, int, str, int]]:
    """Every operation of the 1F1B schedule as (stage, micro-batch, "F"/"B", tick)
    when each one takes one tick and starts as early as its stage and its input allow."""
    # BEGIN SOLUTION
    p = num_stages
    orders = [one_f_one_b(p, num_microbatches, s) for s in range(p)]
    ends: dict[tuple[int, str, int], int] = {}
    position, free, events = [0] * p, [0] * p, []
    while any(position[s] < len(orders[s]) for s in range(p)):
        progressed = False
        for s in range(p):
            if position[s] == len(orders[s]):
                continue
            kind, i = orders[s][position[s]]
            if kind == "F":
                dep = (s - 1, "F", i) if s > 0 else None
            else:
                dep = (s + 1, "B", i) if s < p - 1 else (s, "F", i)
            if dep is not None and dep not in ends:
                continue
            start = max(free[s], ends[dep] if dep is not None else 0)
            events.append((s, i, kind, start))
            ends[(s, kind, i)] = free[s] = start + 1
            position[s] += 1
            progressed = True
        if not progressed:
            raise RuntimeError("the schedule deadlocks")
    return sorted(events, key=lambda e: (e[3], e[0]))
    # STARTER
    # raise NotImplementedError("timeline: see README.md, section \"Part 4: 1F1B pipeline\"")
    # END SOLUTION


def bubble_fraction(events: list[tuple[int, int, str, int]], num_stages: int) -> float:
    """The idle share of num_stages x (makespan in ticks) in a timeline of unit-time operations."""
    # BEGIN SOLUTION
    makespan = max(tick for *_, tick in events) + 1
    return 1.0 - len(events) / (num_stages * makespan)
    # STARTER
    # raise NotImplementedError("bubble_fraction: see README.md, section \"Part 4: 1F1B pipeline\"")
    # END SOLUTION


def run_1f1b(stage_module, comm, num_microbatches: int, inputs, targets, activation_shape, dtype):
    """Run this rank's stage through one training step in 1F1B order. Stage 0
    gets `inputs` (a list of micro-batches), the last stage `targets`; the others
    get None. Returns the batch's loss on the last stage, None elsewhere."""
    # BEGIN SOLUTION
    p, s, m = comm.world_size, comm.rank, num_microbatches
    saved_in, saved_out = {}, {}
    total = 0.0
    for kind, i in one_f_one_b(p, m, s):
        if kind == "F":
            if s == 0:
                x = inputs[i]
            else:
                x = torch.empty(activation_shape, dtype=dtype)
                comm.recv(x, s - 1)
                x.requires_grad_()
            out = stage_module(x)
            if s == p - 1:
                loss = F.mse_loss(out, targets[i]) / m
                total += loss.item()
                saved_out[i] = loss
            else:
                comm.send(out.detach(), s + 1)
                saved_out[i] = out
            saved_in[i] = x
        else:
            out, x = saved_out.pop(i), saved_in.pop(i)
            if s == p - 1:
                out.backward()
            else:
                grad = torch.empty(activation_shape, dtype=dtype)
                comm.recv(grad, s + 1)
                out.backward(grad)
            if s > 0:
                comm.send(x.grad, s - 1)
    return total if s == p - 1 else None
    # STARTER
    # raise NotImplementedError("run_1f1b: see README.md, section \"Part 4: 1F1B pipeline\"")
    # END SOLUTION
