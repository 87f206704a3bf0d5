"""Test inputs that make mistakes show up deterministically.

Every input is a view into a bigger buffer whose extra rows and columns hold
NaN. A kernel that forgets a mask reads NaN past the edge (instead of
whatever happens to lie in memory, or crashing), and NaN poisons the output.
Seeds come from grading_kit.seeded(), mixed with the per-run secret seed.

The buffers are built on the CPU: the grader process never holds a CUDA
tensor. `to_device` hands the view to the learner process, which moves the
whole buffer (the NaN around the view included) to the lab's device.
"""

from __future__ import annotations

import torch

from roadmap_cli.grading_kit import seeded, to_device

PAD = 256  # NaN elements after each row and after the last row: more than any sane 2-D block
PAD_1D = 4096  # after a vector: more than any sane 1-D block


def generator(name: str) -> torch.Generator:
    return torch.Generator(device="cpu").manual_seed(seeded(name))


def random_values(shape, dtype, gen: torch.Generator, distribution: str = "normal") -> torch.Tensor:
    """fp32 values on the CPU: "normal" N(0, 1) or "uniform" U(-1, 1)."""
    if distribution == "normal":
        values = torch.randn(shape, generator=gen)
    else:
        values = torch.rand(shape, generator=gen) * 2 - 1
    return values.to(dtype)


def nan_padded(values: torch.Tensor, transposed: bool = False) -> torch.Tensor:
    """`values` as a view whose neighbours in memory are NaN, for the lab's device.

    Row-major: the view's rows are PAD elements longer than its width.
    transposed=True: stored column-major (the view is a .t() of a padded matrix),
    which catches kernels that assume contiguous inputs or swap strides.
    """
    if values.dim() == 1:
        storage = torch.full((values.shape[0] + PAD_1D,), float("nan"), dtype=values.dtype)
        view = storage[: values.shape[0]]
    elif not transposed:
        rows, cols = values.shape
        storage = torch.full((rows + PAD, cols + PAD), float("nan"), dtype=values.dtype)
        view = storage[:rows, :cols]
    else:
        rows, cols = values.shape
        storage = torch.full((cols + PAD, rows + PAD), float("nan"), dtype=values.dtype)
        view = storage[:cols, :rows].t()
    view.copy_(values)
    return to_device(view)


def nan_strided(values: torch.Tensor, step: int = 2, offset: int = 64) -> torch.Tensor:
    """The 1-D `values`, for the lab's device, as every `step`-th element of a NaN buffer,
    `offset` elements in: a non-contiguous view at an offset. A kernel handed its data_ptr
    without .contiguous() reads the NaN in between."""
    n = values.shape[0]
    storage = torch.full((offset + step * n + PAD_1D,), float("nan"), dtype=values.dtype)
    view = storage[offset:offset + step * n:step]
    view.copy_(values)
    return to_device(view)
