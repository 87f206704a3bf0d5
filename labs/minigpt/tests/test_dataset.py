"""Part `dataset`: the train/validation split and (x, y) batches with y = x shifted by one."""

from __future__ import annotations

import torch

import adapter
from roadmap_cli.grading_kit import seeded


def test_split_is_first_part_train_last_part_val():
    data = torch.arange(1003)
    train, val = adapter.split_train_val(data, 0.1)
    n = int(1003 * 0.9)
    assert torch.equal(train, data[:n]), f"train must be the first int(len * 0.9) = {n} tokens"
    assert torch.equal(val, data[n:]), "val must be the remaining tail"


def test_batches_are_windows_and_targets_are_shifted_by_one():
    # With data = arange(N) every value names its own position, so each row tells where it came from.
    N, T, B = 500, 16, 64
    data = torch.arange(N) * 1  # a fresh tensor; the learner must not modify it
    gen = torch.Generator().manual_seed(seeded("dataset-windows") % (2**31))
    x, y = adapter.get_batch(data, T, B, gen)
    assert tuple(x.shape) == (B, T) and tuple(y.shape) == (B, T), f"x, y must be (B, T) = ({B}, {T})"
    assert x.dtype == torch.long and y.dtype == torch.long, "token ids must be int64 (torch.long)"
    starts = x[:, :1]
    assert torch.equal(x, starts + torch.arange(T)), "each row of x must be a contiguous window of data"
    assert torch.equal(y, x + 1), "y must be x shifted by one position: y[b, t] = data[i + t + 1]"


def test_every_window_start_is_possible_and_none_overflows():
    # Offsets must cover 0 .. N - T - 1 exactly (the last window's target still fits).
    N, T = 20, 5
    gen = torch.Generator().manual_seed(seeded("dataset-range") % (2**31))
    x, y = adapter.get_batch(torch.arange(N), T, 3000, gen)
    starts = set(x[:, 0].tolist())
    assert starts == set(range(N - T)), f"window starts must be exactly 0..{N - T - 1}, got {sorted(starts)}"
    assert int(y.max()) == N - 1


def test_batches_follow_the_generator():
    data = torch.arange(10_000)
    seed = seeded("dataset-generator") % (2**31)
    a = adapter.get_batch(data, 8, 4, torch.Generator().manual_seed(seed))
    b = adapter.get_batch(data, 8, 4, torch.Generator().manual_seed(seed))
    c = adapter.get_batch(data, 8, 4, torch.Generator().manual_seed(seed + 1))
    assert torch.equal(a[0], b[0]), "the same generator state must give the same batch"
    assert not torch.equal(a[0], c[0]), "a different generator state must give a different batch"
