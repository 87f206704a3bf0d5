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
    raise NotImplementedError("assign_buckets: see README.md, section \"Part 2: DDP gradient bucketing\"")


class BucketedDDP:
    """Wraps `model` for data parallelism over `comm`. Usage, every iteration:
    `loss.backward(); ddp.finish()`; afterwards every parameter's .grad is the
    average over ranks."""

    def __init__(self, model: torch.nn.Module, comm, bucket_cap_bytes: int):
        self.model = model
        self.comm = comm
        self.params = [p for p in model.parameters() if p.requires_grad]
        raise NotImplementedError("BucketedDDP: see README.md, section \"Part 2: DDP gradient bucketing\"")


    def finish(self) -> None:
        """Wait for every bucket's all-reduce and write the averaged gradients
        back into .grad; get ready for the next iteration."""
        raise NotImplementedError("BucketedDDP.finish: see README.md, section \"Part 2: DDP gradient bucketing\"")
