"""Part 4: causal attention; the K/V blocks above the diagonal are skipped, not just masked."""

import pytest
import torch
from roadmap_cli import grading_kit as kit

import adapter
import references as ref
from test_triton_forward import NEGATIVE_ROW_PROB, run_forward, tiles_for

SECTION = "Part 4: causal"
# (batch, heads, seq, head_dim, scale, layout): size 1, tile-1 / tile+1 around 32, 64, 129;
# batch and heads > 1 in the transposed layout; K and V in different layouts; a non-default scale.
CASES = [
    (2, 2, 1, 16, None, "bhnd"),
    (2, 3, 31, 32, 0.4, "bnhd"),
    (1, 2, 33, 64, None, ("bhnd", "bnhd", "bhnd")),
    (1, 2, 64, 32, None, "bhnd"),
    (1, 2, 129, 64, 0.11, ("bnhd", "bhnd", "bhnd")),
]
DTYPES = [torch.float16, torch.float32]
if ref.ON_GPU:
    CASES += [(2, 4, 1000, 128, None, "bhnd")]
    DTYPES += [torch.bfloat16] if ref.BF16 else []


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).replace("torch.", ""))
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"b{c[0]}h{c[1]}-n{c[2]}-d{c[3]}-s{c[4]}")
def test_causal_forward(case, dtype):
    batch, heads, seq, head_dim, scale, layout = case
    for trial in range(ref.TRIALS):
        dist = ref.DISTRIBUTIONS[trial % 2]
        q, k, v = ref.make_qkv(kit.seeded(f"causal-{case}-{dtype}-{trial}"), batch, heads, heads, seq, head_dim,
                               dtype, dist, layout, scale, NEGATIVE_ROW_PROB)
        run_forward(q, k, v, True, scale, SECTION, pad_rows=trial % 2 == 0, tiles=tiles_for(trial, CASES.index(case)))


def test_causal_very_negative_rows():
    """Rows whose every visible score is near -250; row 0 sees only key 0."""
    q, k, v = ref.make_qkv(kit.seeded("causal-negative"), 1, 2, 2, 40, 32, torch.float32, "negative", "bhnd")
    run_forward(q, k, v, True, None, SECTION, tiles=adapter.TILE_SETS[0])


def test_causal_skips_blocks_above_the_diagonal():
    """Causal needs only about half of the K/V blocks; a kernel that visits them all
    and masks loads (or, on a GPU, takes) as much as the full one."""
    seq = 512 if not ref.ON_GPU else 4096
    heads = 1 if not ref.ON_GPU else 16
    q, k, v = ref.make_qkv(kit.seeded("causal-skip"), 1, heads, heads, seq, 16 if not ref.ON_GPU else 64,
                           torch.float16, "normal")
    if kit.interpret_mode():
        full = adapter.elements_loaded(q, k, v, False)
        causal = adapter.elements_loaded(q, k, v, True)
        assert full > 0, f"no tl.load seen in the forward kernel (README.md, '{SECTION}')"
        assert causal < 0.75 * full, (
            f"elements loaded by the causal forward at N={seq}: expected < 75% of the full forward's {full}, "
            f"got {causal} ({causal / full:.0%}); skip the K/V blocks that lie entirely above the diagonal "
            f"(README.md, '{SECTION}')")
    elif ref.ON_GPU:
        timed = adapter.causal_and_full_forward_ms(1, heads, seq, 64, kit.seeded("causal-skip-gpu"))
        if not timed["causal_ms"] < 0.75 * timed["full_ms"]:
            raise AssertionError(
                f"time of the causal forward at N={seq}: expected < 75% of the full one's {timed['full_ms']:.3f} "
                f"ms, got {timed['causal_ms']:.3f} ms; skip the K/V blocks that lie entirely above the diagonal "
                f"(README.md, '{SECTION}')")
    else:
        pytest.skip("needs the Triton interpreter or a CUDA GPU")
