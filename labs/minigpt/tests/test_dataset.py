"""Part `dataset`: the train/validation split and (x, y) batches with y = x shifted by one."""

from __future__ import annotations

import pytest
import torch

import adapter
import ref_train
from roadmap_cli.grading_kit import seeded

SECTION = "README.md, section 2"


def _state(name: str) -> torch.Tensor:
    return torch.Generator().manual_seed(seeded(name) % (2**31)).get_state()


@pytest.mark.parametrize("n,fraction", [(1003, 0.1), (1000, 0.25), (97, 0.05), (10, 0.5)])
def test_split_is_first_part_train_last_part_val(n, fraction):
    data = torch.arange(n) * 3 + 1
    train, val = adapter.split_train_val(data, fraction)
    cut = int(n * (1 - fraction))
    assert torch.equal(train, data[:cut]), (
        f"split_train_val(len {n}, val_fraction={fraction}): train must be the first int({n} * (1 - {fraction})) = "
        f"{cut} tokens, got {len(train)} ({SECTION})")
    assert torch.equal(val, data[cut:]), f"val must be the remaining {n - cut} tokens (the tail), got {len(val)} ({SECTION})"


def test_split_of_a_non_contiguous_tensor():
    data = (torch.arange(600) * 7)[::3]  # a strided view
    train, val = adapter.split_train_val(data, 0.2)
    cut = int(200 * 0.8)
    assert torch.equal(train, data[:cut]) and torch.equal(val, data[cut:]), f"split of a strided tensor ({SECTION})"


@pytest.mark.parametrize("T,B", [(16, 64), (1, 5), (7, 3)])
def test_batches_are_windows_and_targets_are_shifted_by_one(T, B):
    # With data = arange(N) every value names its own position, so each row tells where it came from.
    N = 500
    data = torch.arange(N) * 1  # a fresh tensor; the learner must not modify it
    x, y, _ = adapter.get_batch(data, T, B, _state(f"dataset-windows-{T}"))
    assert tuple(x.shape) == (B, T) and tuple(y.shape) == (B, T), (
        f"x, y must be (batch_size, block_size) = ({B}, {T}), got {tuple(x.shape)}, {tuple(y.shape)} ({SECTION})")
    assert x.dtype == torch.long and y.dtype == torch.long, f"token ids must be int64 (torch.long), got {x.dtype} ({SECTION})"
    starts = x[:, :1]
    assert torch.equal(x, starts + torch.arange(T)), f"each row of x must be a contiguous window of data ({SECTION})"
    assert torch.equal(y, x + 1), f"y must be x shifted by one position: y[b, t] = data[i + t + 1] ({SECTION})"


def test_batches_equal_the_handouts_draw_on_int32_strided_data():
    # The handout fixes the draw: i = torch.randint(len(data) - block_size, (batch_size,), generator=generator).
    base = torch.randint(0, 1000, (3000,), generator=torch.Generator().manual_seed(5), dtype=torch.int32)
    data = base[::2]  # strided and int32: x and y must still be int64 windows of it
    state = _state("dataset-exact")
    x, y, after = adapter.get_batch(data, 9, 6, state)
    gen = torch.Generator()
    gen.set_state(state)
    want_x, want_y = ref_train.get_batch(data, 9, 6, generator=gen)
    assert x.dtype == torch.long, f"x must be int64 even when data is {data.dtype} ({SECTION})"
    assert torch.equal(x, want_x) and torch.equal(y, want_y), (
        f"the windows differ from the handout's draw torch.randint(len(data) - block_size, (batch_size,), "
        f"generator=generator) ({SECTION})")
    assert torch.equal(after, gen.get_state()), (
        f"get_batch must draw exactly one torch.randint(..., (batch_size,)) from the generator ({SECTION})")


def test_every_window_start_is_possible_and_none_overflows():
    # Offsets must cover 0 .. N - T - 1 exactly (the last window's target still fits).
    N, T = 20, 5
    x, y, _ = adapter.get_batch(torch.arange(N), T, 3000, _state("dataset-range"))
    starts = set(x[:, 0].tolist())
    assert starts == set(range(N - T)), (
        f"window starts must be exactly 0..{N - T - 1}, got {sorted(starts)} ({SECTION})")
    assert int(y.max()) == N - 1, f"the last window's target must be the last token ({SECTION})"


def test_batches_follow_the_generator():
    data = torch.arange(10_000)
    seed = seeded("dataset-generator") % (2**31)
    a = adapter.get_batch(data, 8, 4, torch.Generator().manual_seed(seed).get_state())
    b = adapter.get_batch(data, 8, 4, torch.Generator().manual_seed(seed).get_state())
    c = adapter.get_batch(data, 8, 4, torch.Generator().manual_seed(seed + 1).get_state())
    assert torch.equal(a[0], b[0]), f"the same generator state must give the same batch ({SECTION})"
    assert not torch.equal(a[0], c[0]), f"a different generator state must give a different batch ({SECTION})"
