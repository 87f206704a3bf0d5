"""Part paged-attention: slot mapping and KV writes exact; torch paged attention
vs gather-then-attend in fp32 within 1e-3.

Every argument varies (cases.py): batch 1-5, GQA 1:1, 2:1, 3:1, 4:1 and MQA 8:1,
block sizes 1-16 including ones that are not powers of two, ragged lengths,
two input distributions, `scale` away from its default on 4 of 5 trials, float32
and float64 queries, and non-contiguous / differently laid out q, K, V and block
tables (int32 or int64). Slots outside every context hold a large poison value,
so reading one without masking it changes the output."""

import random

import pytest
import torch
from roadmap_cli.grading_kit import assert_close, assert_nontrivial, seeded

import adapter
from cases import FIXED_LAYOUTS, fixed_layout, paged_case, random_layouts, random_scale
from reference import gather_then_attend
from report import expect, require

ATOL = 1e-3  # GRADING.md: paged attention vs the fp32 gather reference
SLOTS = "Block tables and slots"
PAGED = "Paged attention"
POISON = 1000.0


@pytest.mark.parametrize("block_size", [1, 2, 3, 4, 5, 16])
def test_slot_mapping_is_exact(block_size):
    rng = random.Random(seeded(f"slots-{block_size}"))
    for trial in range(6):
        n = rng.randrange(1, 5 * block_size + 3)
        table = rng.sample(range(100), -(-n // block_size))
        # start = 0 (a whole prompt), n - 1 (one decode token) and random starts (a cached prefix).
        start = [0, n - 1][trial] if trial < 2 else rng.randrange(0, n)
        want = [table[p // block_size] * block_size + p % block_size for p in range(start, n)]
        got = adapter.compute_slot_mapping(table, start, n, block_size)
        expect(f"slots of positions {start}..{n - 1} with table {table}, block_size {block_size}", want, got, SLOTS)


@pytest.mark.parametrize("block_size", [1, 3, 4, 16])
def test_write_kv_is_exact(block_size):
    rng = random.Random(seeded(f"write-{block_size}"))
    gen = torch.Generator().manual_seed(rng.randrange(2**31))
    num_blocks, head_dim = 7, 8
    for trial in range(5):
        kv_heads = [1, 2, 3][trial % 3]
        kc = torch.randn(num_blocks, block_size, kv_heads, head_dim, generator=gen)
        vc = torch.randn(num_blocks, block_size, kv_heads, head_dim, generator=gen)
        want_k, want_v = kc.clone(), vc.clone()
        n = rng.randrange(2, num_blocks * block_size + 2)
        slots = torch.tensor(rng.sample(range(num_blocks * block_size), min(n, num_blocks * block_size)), dtype=torch.long)
        n = len(slots)
        # Negative slots mean "do not store": -1 (padding) and other negatives, 1 to 3 of them.
        for i in rng.sample(range(n), min(n, rng.randrange(1, 4))):
            slots[i] = rng.choice([-1, -1, -2, -block_size - 1])
        k = torch.randn(n, kv_heads, head_dim, generator=gen)
        v = torch.randn(n, kv_heads, head_dim, generator=gen)
        for i, slot in enumerate(slots.tolist()):
            if slot >= 0:
                want_k[slot // block_size, slot % block_size] = k[i]
                want_v[slot // block_size, slot % block_size] = v[i]
        got_k, got_v, changed, rebound = adapter.write_kv(k, v, kc, vc, slots)
        expect("inputs write_kv modified (key, value and slot_mapping must stay unchanged)", [], changed, SLOTS)
        expect("caches write_kv gave new storage instead of writing into theirs (in place: a view of the cache "
               "taken before the call must see the write)", [], rebound, SLOTS)
        for name, got, want in (("key_cache", got_k, want_k), ("value_cache", got_v, want_v)):
            wrong = (got != want).any(dim=-1).any(dim=-1).nonzero().tolist()
            require(not wrong, f"write_kv: {name} differs from storing row i at slot_mapping[i] (negative slots "
                               f"skipped) at (block, offset) {wrong[:4]}; slots {slots.tolist()[:16]}, "
                               f"block_size {block_size}", SLOTS)


@pytest.mark.parametrize("block_size", [2, 3, 4])
def test_write_kv_into_non_contiguous_caches(block_size):
    """Caches that are slices of larger buffers (padded rows, a heads-outer layout):
    a write through `reshape` lands in a copy here, and the buffer never sees it."""
    rng = random.Random(seeded(f"write-strided-{block_size}"))
    gen = torch.Generator().manual_seed(rng.randrange(2**31))
    num_blocks, kv_heads, head_dim = 5, 2, 8
    padded = torch.randn(num_blocks, block_size, kv_heads, head_dim + 3, generator=gen)
    heads_outer = torch.randn(num_blocks, kv_heads, block_size, head_dim, generator=gen)
    want_padded, want_outer = padded.clone(), heads_outer.clone()
    n = num_blocks * block_size - 1
    slots = torch.tensor(rng.sample(range(num_blocks * block_size), n), dtype=torch.long)
    slots[rng.randrange(n)] = -1
    k = torch.randn(n, kv_heads, head_dim, generator=gen)
    v = torch.randn(n, kv_heads, head_dim, generator=gen)
    for i, slot in enumerate(slots.tolist()):
        if slot >= 0:
            want_padded[slot // block_size, slot % block_size, :, :head_dim] = k[i]
            want_outer[slot // block_size, :, slot % block_size] = v[i]
    # key_cache = padded[..., :head_dim], value_cache = heads_outer.transpose(1, 2): neither is contiguous.
    padded, heads_outer, changed, rebound = adapter.write_kv_into_buffers(k, v, padded, heads_outer, slots)
    expect("inputs write_kv modified (key, value and slot_mapping must stay unchanged)", [], changed, SLOTS)
    expect("caches write_kv gave new storage instead of writing into theirs", [], rebound, SLOTS)
    for name, got, want in (("key_cache (a slice of a buffer with padded rows)", padded, want_padded),
                            ("value_cache (a transposed heads-outer buffer)", heads_outer, want_outer)):
        require(torch.equal(got, want),
                f"write_kv on a non-contiguous {name}: the buffer it is a view of does not hold the written "
                f"rows ({int((got != want).sum())} elements differ): write in place, into the caches' own "
                f"storage, never into a copy such as `reshape` makes of a non-contiguous tensor", SLOTS)


HALF_TOLERANCE = {torch.float16: 1e-2, torch.bfloat16: 6e-2}  # a few ulps of the rounded output, |out| < 4


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["float16", "bfloat16"])
def test_paged_attention_half_queries_return_their_dtype(dtype):
    """Every float dtype a query may have: float32/float64 are drawn above; here
    float16 and bfloat16 queries and caches, computed in fp32, returned in the query's dtype."""
    rng = random.Random(seeded(f"paged-half-{dtype}"))
    for trial in range(3):
        q, kc, vc, tables, lens, scale = paged_case(
            rng, num_seqs=rng.randrange(1, 5), num_heads=4, num_kv_heads=[4, 2, 1][trial], head_dim=16,
            block_size=[1, 3, 16][trial], max_len=30, dtype=dtype, scale=random_scale(rng, 16), poison=POISON)
        want = gather_then_attend(q, kc, vc, tables, lens, scale)
        got, changed = adapter.paged_attention(q, kc, vc, tables, lens, scale)
        what = f"paged_attention ({dtype} query and caches, lens {lens.tolist()})"
        expect(f"{what}: inputs modified in place", [], changed, PAGED)
        expect(f"{what}: output dtype", q.dtype, got.dtype, PAGED, "the output has the query's dtype")
        _assert_attention_close(got.float(), want, what, atol=HALF_TOLERANCE[dtype])


@pytest.mark.parametrize("distribution", ["normal", "shifted"])
@pytest.mark.parametrize("num_heads,num_kv_heads", [(4, 4), (4, 2), (6, 2), (8, 1)])
@pytest.mark.parametrize("block_size", [1, 3, 4, 16])
def test_paged_attention_matches_gather_then_attend(block_size, num_heads, num_kv_heads, distribution):
    rng = random.Random(seeded(f"paged-{block_size}-{num_heads}-{num_kv_heads}-{distribution}"))
    for trial in range(5):
        head_dim = rng.choice([8, 16, 24])
        scale = None if trial == 0 else random_scale(rng, head_dim)
        q, kc, vc, tables, lens, scale = paged_case(
            rng, num_seqs=rng.randrange(2, 6) if trial else 1, num_heads=num_heads, num_kv_heads=num_kv_heads,
            head_dim=head_dim, block_size=block_size, max_len=40, distribution=distribution, scale=scale,
            poison=POISON)
        if trial == 4:                                                # the engine's dtype
            q, kc, vc = q.double(), kc.double(), vc.double()
        want = gather_then_attend(q, kc, vc, tables, lens, scale)
        assert_nontrivial(want, ATOL)
        q, kc, vc, tables, lens, layouts = random_layouts(rng, q, kc, vc, tables, lens)
        got, changed = adapter.paged_attention(q, kc, vc, tables, lens, scale)
        what = (f"paged_attention (batch {q.shape[0]}, {num_heads}/{num_kv_heads} heads, head_dim {head_dim}, "
                f"block_size {block_size}, scale {scale:.4g}, lens {lens.tolist()}, layouts {layouts})")
        expect(f"{what}: inputs modified in place", [], changed, PAGED)
        expect(f"{what}: output dtype", q.dtype, got.dtype, PAGED, "the output has the query's dtype")
        _assert_attention_close(got, want, what)
        if q.dtype == torch.float64:
            # float64 in, float64 math: fp32 anywhere in between costs ~1e-7, far above this.
            require(bool(((got.double() - want).abs() <= 1e-9).all()),
                    f"{what}: float64 query, max |error| {float((got.double() - want).abs().max()):.3g} vs the "
                    f"float64 reference, expected <= 1e-9 (compute in the query's dtype when it is wider than fp32)",
                    PAGED)


@pytest.mark.parametrize("layout", range(len(FIXED_LAYOUTS)))
def test_paged_attention_layouts_and_offset_views(layout):
    """Each memory layout of q, K, V and the tables at least once, K and V laid out
    differently, and views that start inside a larger buffer (storage_offset > 0, NaN
    around them): nothing may assume contiguous inputs or a zero storage offset."""
    rng = random.Random(seeded(f"paged-layout-{layout}"))
    q, kc, vc, tables, lens, scale = paged_case(
        rng, num_seqs=3, num_heads=4, num_kv_heads=2, head_dim=8, block_size=3, max_len=14,
        scale=random_scale(rng, 8), poison=POISON)
    want = gather_then_attend(q, kc, vc, tables, lens, scale)
    q, kc, vc, tables, lens, layouts = fixed_layout(q, kc, vc, tables, lens, FIXED_LAYOUTS[layout])
    got, changed = adapter.paged_attention(q, kc, vc, tables, lens, scale)
    what = f"paged_attention (lens {lens.tolist()}, layouts {layouts})"
    expect(f"{what}: inputs modified in place", [], changed, PAGED)
    _assert_attention_close(got, want, what)


def _assert_attention_close(got, want, what, atol=ATOL):
    try:
        assert_close(got, want, atol=atol, what=what)
    except AssertionError as exc:
        # Name the likely cause only where the evidence points at it.
        hint = ""
        if got.shape == want.shape and bool((got.abs() > 100).any()):
            hint = (f"; |output| reaches {float(got.abs().max()):.4g}: slots outside the contexts hold "
                    f"{POISON:g}, so a position >= context_len (or a padding block) was read unmasked")
        raise AssertionError(f"{exc}{hint} ({'README.md, section ' + repr(PAGED)})") from None
