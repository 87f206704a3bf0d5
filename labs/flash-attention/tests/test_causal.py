"""Part 4: causal attention; the K/V blocks above the diagonal are skipped, not just masked."""

import pytest
import torch
from roadmap_cli import grading_kit as kit

import adapter
import references as ref

CASES = [(2, 2, 1, 16), (1, 2, 17, 64), (1, 2, 64, 32), (1, 2, 129, 64)]  # (batch, heads, seq, head_dim)
DTYPES = [torch.float16, torch.float32]
if ref.ON_GPU:
    CASES += [(2, 4, 1000, 128)]
    DTYPES += [torch.bfloat16]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).replace("torch.", ""))
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"b{c[0]}h{c[1]}-n{c[2]}-d{c[3]}")
def test_causal_forward(case, dtype):
    batch, heads, seq, head_dim = case
    for trial in range(ref.TRIALS):
        dist = ref.DISTRIBUTIONS[trial % 2]
        q, k, v = ref.make_qkv(kit.seeded(f"causal-{case}-{dtype}-{trial}"), batch, heads, heads, seq, head_dim,
                               dtype, dist)
        o, lse = adapter.flash_forward(q, k, v, True, None)
        ref.check_forward(o, lse, q, k, v, True, None)


def _elements_loaded(run) -> int:
    """Interpreter only: how many elements `run()` asks tl.load for (masked lanes included)."""
    from triton.runtime import interpreter

    builder = interpreter.interpreter_builder
    original = builder.create_masked_load
    total = [0]

    def counting(ptrs, *args, **kwargs):
        total[0] += int(ptrs.data.size)
        return original(ptrs, *args, **kwargs)

    builder.create_masked_load = counting
    try:
        run()
    finally:
        builder.create_masked_load = original
    return total[0]


def test_causal_skips_blocks_above_the_diagonal():
    """Causal needs only about half of the K/V blocks; a kernel that visits them all
    and masks loads (or, on a GPU, takes) as much as the full one."""
    seq = 512 if not ref.ON_GPU else 4096
    heads = 1 if not ref.ON_GPU else 16
    q, k, v = ref.make_qkv(kit.seeded("causal-skip"), 1, heads, heads, seq, 16 if not ref.ON_GPU else 64,
                           torch.float16, "normal")
    if kit.interpret_mode():
        full = _elements_loaded(lambda: adapter.flash_forward(q, k, v, False, None))
        causal = _elements_loaded(lambda: adapter.flash_forward(q, k, v, True, None))
        assert full > 0, "no tl.load seen in the forward kernel"
        assert causal < 0.75 * full, (
            f"the causal forward loaded {causal} elements, the full one {full} ({causal / full:.0%}); "
            "skip the K/V blocks that lie entirely above the diagonal")
    elif ref.ON_GPU:
        from roadmap_cli.grading_kit import timing

        rule = timing.StopRule(time_cap_s=1.0)
        full = timing.benchmark(lambda: adapter.flash_forward_plain(q, k, v, False, None), rule=rule)
        causal = timing.benchmark(lambda: adapter.flash_forward_plain(q, k, v, True, None), rule=rule)
        assert causal.median_ms < 0.75 * full.median_ms, (
            f"causal {causal.median_ms:.3f} ms vs full {full.median_ms:.3f} ms: "
            "skip the K/V blocks that lie entirely above the diagonal")
    else:
        pytest.skip("needs the Triton interpreter or a CUDA GPU")
