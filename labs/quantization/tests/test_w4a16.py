"""Part 3: W4A16: asymmetric int4 in groups of consecutive input columns, eight
codes packed into one int32 (lowest nibble first), checked bit for bit."""

from __future__ import annotations

import pytest
import torch

import adapter
import refs

SECTION = "Part 3: W4A16"
W = refs.where(SECTION)
CASES = [(1, 8, 8), (3, 48, 16), (5, 64, 32), (7, 96, 32), (2, 64, 64), (2, 8, 1)]   # (out, in, group); g = 1 is legal


def _w(name, shape):
    g = refs.gen(refs.rng(name))
    w = torch.randn(shape, generator=g) * (0.05 + torch.rand(shape[0], 1, generator=g))
    w[0, : min(8, shape[1])] = torch.rand(min(8, shape[1]), generator=g)      # a group (part) all positive: lo = 0
    return w


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}x{c[1]}-g{c[2]}")
def test_quantize_groups_match(case):
    out_f, in_f, g = case
    w = _w(f"q4-{case}", (out_f, in_f))
    if in_f >= 2 * g:
        w[-1, g:2 * g] = -torch.rand(g, generator=refs.gen(refs.rng("neg"))) - 0.1   # a group all negative: hi = 0
    q, scale, zero = adapter.call("quantize_int4_groups", w, g)
    wq, ws, wz = refs.quant_int4(w, g)
    assert (q.dtype, zero.dtype, scale.dtype) == (torch.uint8, torch.uint8, torch.float32), (
        f"quantize_int4_groups: want q uint8, scale float32, zero uint8; got {q.dtype}, {scale.dtype}, {zero.dtype} {W}")
    assert tuple(scale.shape) == (out_f, in_f // g) == tuple(zero.shape), (
        f"quantize_int4_groups(w {(out_f, in_f)}, group_size={g}): scale and zero are {(out_f, in_f // g)}; "
        f"got {tuple(scale.shape)}, {tuple(zero.shape)} {W}")
    assert torch.allclose(scale, ws, rtol=1e-6, atol=0), (
        f"quantize_int4_groups(w {(out_f, in_f)}, group_size={g}): scale = (max(0, max) - min(0, min)) / 15 over "
        f"columns k*g .. k*g+g-1 of a row; {refs.worst(scale, ws)} {W}")
    assert torch.equal(zero, wz), (
        f"quantize_int4_groups(w {(out_f, in_f)}, group_size={g}): zero = round(-lo / scale); {refs.worst(zero, wz)} {W}")
    assert torch.equal(q, wq), (
        f"quantize_int4_groups(w {(out_f, in_f)}, group_size={g}): q = clamp(round(w / scale) + zero, 0, 15); "
        f"{refs.worst(q, wq)} {W}")


def test_ties_round_before_the_zero_point():
    # One group with lo = -5.5, hi = 11 (x 1.1... in float32): scale = 1.1, zero = 5 (odd). Every other weight is an
    # exact .5 tie of w / scale: round(w / scale) + zero (half to even, then the integer zero point) differs from
    # round(w / scale + zero) at every tie, and t * (1 / scale) turns the ties 7.5 and 9.5 the other way.
    s = torch.tensor(1.1)
    ks = torch.tensor([-5.0, 10.0, 7.5, 9.5, -0.5, 2.5, -3.5, 0.5])
    w = (ks * s)[None, :]
    assert torch.equal(w / s, ks[None, :])
    q, scale, zero = adapter.call("quantize_int4_groups", w.clone(), 8)
    want = (torch.round(ks) + 5).to(torch.uint8)[None, :]
    assert float(scale[0, 0]) == float(s) and int(zero[0, 0]) == 5, (
        f"quantize_int4_groups: scale = (hi - lo) / 15 = {float(s)!r}, zero = round(-lo / scale) = 5; "
        f"got {float(scale[0, 0])!r}, {int(zero[0, 0])} {W}")
    assert torch.equal(q, want), (
        f"quantize_int4_groups(w / scale = {ks.tolist()}): q = clamp(round(w / scale) + zero, 0, 15): round first "
        f"(half to even), then add the zero point, and divide by the scale (not * (1 / scale)); want {want.tolist()}, "
        f"got {q.tolist()} {W}")


def test_zero_group():
    w = _w("q4-zero", (2, 32))
    w[1, 8:16] = 0
    q, scale, zero = adapter.call("quantize_int4_groups", w, 8)
    assert float(scale[1, 1]) == 1.0 and int(zero[1, 1]) == 0 and int(q[1, 8:16].max()) == 0, (
        f"quantize_int4_groups: an all-zero group gets scale 1.0, zero 0 and codes 0; got scale {float(scale[1, 1])!r}, "
        f"zero {int(zero[1, 1])}, codes {q[1, 8:16].tolist()} {W}")


@pytest.mark.parametrize("bad", [(4, 40, 16), (4, 32, 0), (4, 30, 7)], ids=lambda c: f"in{c[1]}-g{c[2]}")
def test_refuses_bad_group(bad):
    out_f, in_f, g = bad
    w = _w(f"bad-{bad}", (out_f, in_f))
    with pytest.raises(ValueError):
        adapter.call("quantize_int4_groups", w, g)


@pytest.mark.parametrize("case", CASES[1:3], ids=lambda c: f"{c[0]}x{c[1]}-g{c[2]}")
def test_dequantize(case):
    out_f, in_f, g = case
    q, scale, zero = refs.quant_int4(_w(f"dq-{case}", (out_f, in_f)), g)
    got = adapter.call("dequantize_int4_groups", q, scale, zero, g)
    want = refs.dequant_int4(q, scale, zero, g)
    assert got.dtype == torch.float32 and torch.allclose(got, want, rtol=1e-6, atol=1e-7), (
        f"dequantize_int4_groups(group_size={g}): w = (q - zero) * scale per group; {refs.worst(got, want)} {W}")


def test_pack_bits():
    q = torch.tensor([[1, 2, 3, 4, 5, 6, 7, 0, 15, 0, 0, 0, 0, 0, 0, 0]], dtype=torch.uint8)
    got = adapter.call("pack_int4", q)
    want = torch.tensor([[0x07654321, 0x0000000F]], dtype=torch.int32)
    assert got.dtype == torch.int32 and torch.equal(got, want), (
        f"pack_int4({q.tolist()}): column 8k+i goes to bits 4i..4i+3 of word k (column 8k lowest); want "
        f"{[hex(v) for v in want[0].tolist()]}, got {got.dtype} {[hex(v & 0xFFFFFFFF) for v in got.reshape(-1).tolist()]} {W}")


def test_pack_high_nibble_is_the_sign_bit():
    q = torch.tensor([[0, 0, 0, 0, 0, 0, 0, 8], [15] * 8], dtype=torch.uint8)
    got = adapter.call("pack_int4", q)
    want = torch.tensor([[-(2**31)], [-1]], dtype=torch.int32)
    assert got.dtype == torch.int32 and torch.equal(got, want), (
        f"pack_int4({q.tolist()}): the words are the bits 0x80000000 and 0xFFFFFFFF read as int32, i.e. "
        f"{want.reshape(-1).tolist()}; got {got.dtype} {got.reshape(-1).tolist()} {W}")


@pytest.mark.parametrize("shape", [(1, 8), (3, 40), (6, 128)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_pack_random_bit_for_bit(shape):
    q = torch.randint(0, 16, shape, generator=refs.gen(refs.rng(f"pack-{shape}")), dtype=torch.uint8)
    got = adapter.call("pack_int4", q)
    want = refs.pack_int4(q)
    assert tuple(got.shape) == (shape[0], shape[1] // 8) and torch.equal(got, want), (
        f"pack_int4(random codes {shape}): want {(shape[0], shape[1] // 8)} int32 bit for bit; got {tuple(got.shape)}, "
        f"{refs.worst(got, want) if got.shape == want.shape else ''} {W}")


@pytest.mark.parametrize("in_f", [4, 12])
def test_pack_refuses_partial_words(in_f):
    with pytest.raises(ValueError):
        adapter.call("pack_int4", torch.zeros(2, in_f, dtype=torch.uint8))


def test_unpack_arbitrary_words():
    g = refs.gen(refs.rng("unpack"))
    p = torch.randint(-(2**31), 2**31 - 1, (4, 5), generator=g, dtype=torch.int64).to(torch.int32)
    p[0, 0] = -1
    p[0, 1] = -(2**31)
    got = adapter.call("unpack_int4", p)
    want = refs.unpack_int4(p)
    assert got.dtype == torch.uint8 and tuple(got.shape) == (4, 40), (
        f"unpack_int4(int32 (4, 5)): want (4, 40) uint8 codes; got {tuple(got.shape)} {got.dtype} {W}")
    assert torch.equal(got, want), (
        f"unpack_int4: code 8k+i = bits 4i..4i+3 of word k, negative words included; {refs.worst(got, want)} {W}")
