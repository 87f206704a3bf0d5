"""grading_kit.bounds: NaN guard bands and the interpreter's out-of-bounds checks.

Each test builds a tiny @triton.jit kernel under TRITON_INTERPRET=1 and checks the
facts check_bounds() reports: masked lanes are fine, unmasked lanes past an edge
(read or write, before the start or past the end, in padding between rows) are
reported with the tensor's name and an index, and never touch memory.
"""

from __future__ import annotations

import os
import sys

import pytest

torch = pytest.importorskip("torch")
# The interpreter must be on BEFORE triton is first imported (triton.language builds its
# own @jit helpers at import time); in a full-suite run another file may have imported it.
_TRITON_IMPORTED_EARLY = "triton" in sys.modules and os.environ.get("TRITON_INTERPRET") != "1"
os.environ["TRITON_INTERPRET"] = "1"
pytest.importorskip("triton")


@pytest.fixture(autouse=True)
def interpreter():
    if _TRITON_IMPORTED_EARLY:
        pytest.skip("triton was imported before TRITON_INTERPRET=1 was set; run this file on its own")


def _kernels():
    import triton
    import triton.language as tl

    @triton.jit
    def copy_1d(X, Y, N, START, BLOCK: tl.constexpr, MASK_LOAD: tl.constexpr, MASK_STORE: tl.constexpr):
        offs = START + tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        ok = (offs < N) & (offs >= 0)
        if MASK_LOAD:
            x = tl.load(X + offs, mask=ok, other=0.0)
        else:
            x = tl.load(X + offs)
        if MASK_STORE:
            tl.store(Y + offs, x, mask=ok)
        else:
            tl.store(Y + offs, x)

    @triton.jit
    def copy_2d(X, Y, R, C, sxr, sxc, syr, syc, BR: tl.constexpr, BC: tl.constexpr, MASK_COLS: tl.constexpr):
        r = tl.arange(0, BR)
        c = tl.arange(0, BC)
        mask = r[:, None] < R
        if MASK_COLS:
            mask = mask & (c[None, :] < C)
        x = tl.load(X + r[:, None] * sxr + c[None, :] * sxc, mask=mask, other=0.0)
        tl.store(Y + r[:, None] * syr + c[None, :] * syc, x, mask=(r[:, None] < R) & (c[None, :] < C))

    return copy_1d, copy_2d


def test_nan_guarded_keeps_values_shape_and_layout():
    from roadmap_cli.grading_kit import bounds

    for t in (torch.randn(3, 5), torch.randn(4, 6).t(), torch.randn(2, 7, 3, 16).transpose(1, 2)):
        g = bounds.nan_guarded(t, guard=100, row_pad=4)
        assert torch.equal(g, t) and g.shape == t.shape
        # Same order of dims in memory (largest stride first).
        order = lambda x: sorted(range(x.dim()), key=lambda d: -x.stride(d))  # noqa: E731
        assert order(g) == order(t)
        storage = torch.empty(0, dtype=t.dtype).set_(g.untyped_storage())
        assert int(torch.isnan(storage).sum()) == storage.numel() - t.numel()
        assert g.storage_offset() >= 100  # guard band before the first element
        assert storage.numel() - (g.storage_offset() + t.numel()) >= 100


def test_masked_accesses_are_not_violations():
    from roadmap_cli.grading_kit import bounds

    copy_1d, _ = _kernels()
    x = bounds.nan_guarded(torch.randn(10))
    y = torch.zeros(10)
    with bounds.check_bounds(bounds.storage_labels(x=x)) as report:
        copy_1d[(2,)](x, y, 10, 0, BLOCK=8, MASK_LOAD=True, MASK_STORE=True)
    assert report.violations == [] and report.launches == 1 and report.checked_accesses == 20
    assert torch.equal(y, x)


def test_unmasked_read_and_write_past_the_end_are_reported_and_never_done():
    from roadmap_cli.grading_kit import bounds

    copy_1d, _ = _kernels()
    x = bounds.nan_guarded(torch.randn(10))
    y_storage = torch.full((16,), -7.0)
    y = y_storage[:10]
    with bounds.check_bounds(bounds.storage_labels(x=x)) as report:
        copy_1d[(2,)](x, y, 10, 0, BLOCK=8, MASK_LOAD=False, MASK_STORE=False)
    read, wrote = report.violations
    assert "read past the edge of x" in read and "[10+0]" in read and "6 unmasked lanes" in read
    assert "wrote past the edge of Y" in wrote  # named after the kernel parameter
    assert torch.equal(y, x)
    assert bool((y_storage[10:] == -7.0).all()), "the out-of-bounds store must not happen"


def test_read_before_the_start_is_reported():
    from roadmap_cli.grading_kit import bounds

    copy_1d, _ = _kernels()
    x = bounds.nan_guarded(torch.randn(8))
    y = torch.zeros(8)
    with bounds.check_bounds() as report:
        copy_1d[(1,)](x, y, 8, -2, BLOCK=8, MASK_LOAD=False, MASK_STORE=True)
    assert len(report.violations) == 1
    assert "read before the start of X" in report.violations[0] and "[-2]" in report.violations[0]


@pytest.mark.parametrize("transposed", [False, True])
def test_padding_between_rows_is_out_of_bounds(transposed):
    """A row read past its last column lands in the NaN padding: reported as column C+k."""
    from roadmap_cli.grading_kit import bounds

    _, copy_2d = _kernels()
    values = torch.randn(6, 5).t() if transposed else torch.randn(5, 6)
    x = bounds.nan_guarded(values, row_pad=8)
    y = torch.zeros(5, 6)
    with bounds.check_bounds(bounds.storage_labels(A=x)) as report:
        copy_2d[(1,)](x, y, 5, 6, x.stride(0), x.stride(1), y.stride(0), y.stride(1), BR=8, BC=8, MASK_COLS=False)
    assert len(report.violations) == 1, report.violations
    text = report.violations[0]
    assert "read past the edge of A" in text and "[0, 6+0]" in text, text  # column 6 of a 6-column A
    assert torch.equal(y, values)
    with bounds.check_bounds() as report:
        copy_2d[(1,)](x, y, 5, 6, x.stride(0), x.stride(1), y.stride(0), y.stride(1), BR=8, BC=8, MASK_COLS=True)
    assert report.violations == []


def test_patches_are_undone():
    from triton.runtime import interpreter

    from roadmap_cli.grading_kit import bounds

    builder = interpreter.interpreter_builder
    before = (builder.create_masked_load, builder.create_masked_store, interpreter.GridExecutor._init_args_hst)
    with bounds.check_bounds():
        assert builder.create_masked_load is not before[0]
    assert (builder.create_masked_load, builder.create_masked_store, interpreter.GridExecutor._init_args_hst) == before
