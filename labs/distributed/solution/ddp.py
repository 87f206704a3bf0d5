"""Part 2: data-parallel gradients with buckets that all-reduce during backward
(README.md, section "Part 2: DDP gradient bucketing").

`comm` here also offers the given collectives: `comm.broadcast(tensor, src)`
(in place, blocking) and `comm.all_reduce(tensor)` (sums in place in the
background and returns a handle; `handle.wait()` blocks until it is done).
"""

from __future__ import annotations

import torch


def assign_buckets(sizes_bytes: list[int], cap_bytes: int) -> list[list[int]]:
    """Group parameter indices into buckets: walk the parameters in REVERSE order
    (the order backward produces their gradients), add each to the open bucket,
    and close the bucket as soon as it holds cap_bytes or more."""
    # BEGIN SOLUTION
    buckets: list[list[int]] = []
    current: list[int] = []
    size = 0
    for i in reversed(range(len(sizes_bytes))):
        current.append(i)
        size += sizes_bytes[i]
        if size >= cap_bytes:
            buckets.append(current)
            current, size = [], 0
    if current:
        buckets.append(current)
    return buckets
    # STARTER
    # raise NotImplementedError("assign_buckets: see README.md, section \"Part 2: DDP gradient bucketing\"")
    # END SOLUTION


class BucketedDDP:
    """Wraps `model` for data parallelism over `comm`. Usage, every iteration:
    `loss.backward(); ddp.finish()`; afterwards every parameter's .grad is the
    average over ranks."""

    def __init__(self, model: torch.nn.Module, comm, bucket_cap_bytes: int):
        self.model = model
        self.comm = comm
        self.params = [p for p in model.parameters() if p.requires_grad]
        # BEGIN SOLUTION
        with torch.no_grad():
            for p in self.params:
                comm.broadcast(p.data, 0)
        sizes = [p.numel() * p.element_size() for p in self.params]
        self.buckets = assign_buckets(sizes, bucket_cap_bytes)
        self.bucket_of = {i: b for b, bucket in enumerate(self.buckets) for i in bucket}
        self._reset()
        for i, p in enumerate(self.params):
            p.register_post_accumulate_grad_hook(lambda _p, i=i: self._ready(i))
        # STARTER
        # raise NotImplementedError("BucketedDDP: see README.md, section \"Part 2: DDP gradient bucketing\"")
        # END SOLUTION

    # BEGIN SOLUTION
    def _reset(self) -> None:
        self.pending = [len(bucket) for bucket in self.buckets]
        self.next_launch = 0
        self.work: list[tuple[object, torch.Tensor]] = []

    def _ready(self, i: int) -> None:
        self.pending[self.bucket_of[i]] -= 1
        # Launch in bucket order: a bucket whose gradients are ready waits for the ones before it.
        while self.next_launch < len(self.buckets) and self.pending[self.next_launch] == 0:
            bucket = self.buckets[self.next_launch]
            flat = torch.cat([self.params[j].grad.reshape(-1) for j in bucket])
            self.work.append((self.comm.all_reduce(flat), flat))
            self.next_launch += 1
    # END SOLUTION

    def finish(self) -> None:
        """Wait for every bucket's all-reduce and write the averaged gradients
        back into .grad; get ready for the next iteration."""
        # BEGIN SOLUTION
        world = self.comm.world_size
        for (handle, flat), bucket in zip(self.work, self.buckets):
            handle.wait()
            flat /= world
            offset = 0
            for j in bucket:
                g = self.params[j].grad
                g.copy_(flat[offset:offset + g.numel()].view_as(g))
                offset += g.numel()
        self._reset()
        # STARTER
        # raise NotImplementedError("BucketedDDP.finish: see README.md, section \"Part 2: DDP gradient bucketing\"")
        # END SOLUTION
