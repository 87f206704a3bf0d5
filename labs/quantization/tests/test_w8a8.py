"""Part 1: W8A8: int8 weights per output channel, int8 activations per token
(dynamic), an exact int32 accumulate, then the two scales."""

from __future__ import annotations

import pytest
import torch

import adapter
import refs

SECTION = "Part 1: W8A8"
W = refs.where(SECTION)
# (out, in): a single row, odd widths, a wide one
SHAPES = [(1, 7), (5, 33), (16, 64), (3, 129)]


def _w(shape, name):
    g = refs.gen(refs.rng(name))
    w = torch.randn(shape, generator=g) * torch.rand(shape[0], 1, generator=g) * 3
    return w


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_weight_per_channel(shape):
    w = _w(shape, f"w-{shape}")
    q, scale = adapter.call("quantize_weight_per_channel", w)
    want_q, want_s = refs.quant_weight(w)
    assert scale.dtype == torch.float32 and tuple(scale.shape) == (shape[0],), (
        f"quantize_weight_per_channel(w {tuple(shape)}): scale must be ({shape[0]},) float32, one per OUTPUT row; "
        f"got {tuple(scale.shape)} {scale.dtype} {W}")
    assert torch.allclose(scale, want_s, rtol=1e-6, atol=0), (
        f"quantize_weight_per_channel(w {tuple(shape)}): scale = max|w[row]| / 127, {refs.worst(scale, want_s)} {W}")
    assert q.dtype == torch.int8 and torch.equal(q, want_q), (
        f"quantize_weight_per_channel(w {tuple(shape)}): q = clamp(round(w / scale), -127, 127) as int8; "
        f"got dtype {q.dtype}, {refs.worst(q, want_q)} {W}")


def test_weight_zero_row():
    w = _w((4, 9), "w-zero")
    w[2] = 0
    q, scale = adapter.call("quantize_weight_per_channel", w)
    assert float(scale[2]) == 1.0 and int(q[2].abs().max()) == 0, (
        f"quantize_weight_per_channel: an all-zero row gets scale 1.0 and q = 0; got scale {float(scale[2])!r}, "
        f"q {q[2].tolist()} {W}")


def test_rounding_half_to_even():
    # max|row| = 127 makes the scale exactly 1.0, so w / scale hits the .5 ties exactly.
    w = torch.tensor([[127.0, 2.5, 3.5, -0.5, -1.5, 0.5, 126.5, -2.5]])
    q, _ = adapter.call("quantize_weight_per_channel", w)
    want = torch.tensor([[127, 2, 4, 0, -2, 0, 126, -2]], dtype=torch.int8)
    assert torch.equal(q, want), (
        f"quantize_weight_per_channel({w.tolist()}): torch.round rounds half to even: want {want.tolist()}, "
        f"got {q.tolist()} {W}")
    qa, _ = adapter.call("quantize_activation_per_token", w)
    assert torch.equal(qa, want), (
        f"quantize_activation_per_token({w.tolist()}): torch.round rounds half to even: want {want.tolist()}, "
        f"got {qa.tolist()} {W}")


def test_codes_divide_by_the_scale():
    # max|row| = 139.7 makes the scale 1.1 (float32), whose reciprocal is inexact: each t below is an exact
    # .5 tie of t / scale, but t * (1 / scale) lands a hair off it and rounds the other way.
    scale = torch.tensor(139.7) / 127
    ties = torch.tensor([-117.5, -107.5, -93.5, -83.5, 83.5, 93.5, 107.5, 117.5])
    w = torch.cat([torch.tensor([139.7]), ties * scale])[None, :]
    assert torch.equal(w[0, 1:] / scale, ties)
    want = torch.round(torch.cat([torch.tensor([127.0]), ties])).to(torch.int8)[None, :]
    for name in ("quantize_weight_per_channel", "quantize_activation_per_token"):
        q, _ = adapter.call(name, w.clone())
        assert torch.equal(q, want), (
            f"{name}(t): codes are round(t / scale), a division: t * (1 / scale) is off by one rounding step and "
            f"turns exact .5 ties the other way; want {want.tolist()}, got {q.tolist()} {W}")


@pytest.mark.parametrize("shape", [(1, 5), (3, 7, 33), (2, 4, 64)], ids=lambda s: "x".join(map(str, s)))
def test_activation_per_token(shape):
    g = refs.gen(refs.rng(f"a-{shape}"))
    x = torch.randn(shape, generator=g) * torch.rand(*shape[:-1], 1, generator=g) * 5
    x[..., 0] *= 30       # an outlier channel, as real activations have
    q, scale = adapter.call("quantize_activation_per_token", x)
    want_q, want_s = refs.quant_act(x)
    assert tuple(scale.shape) == (*shape[:-1], 1) and scale.dtype == torch.float32, (
        f"quantize_activation_per_token(x {tuple(shape)}): scale must be {(*shape[:-1], 1)} float32, one per token; "
        f"got {tuple(scale.shape)} {scale.dtype} {W}")
    assert torch.allclose(scale, want_s, rtol=1e-6, atol=0), (
        f"quantize_activation_per_token(x {tuple(shape)}): scale = max|x[token]| / 127, {refs.worst(scale, want_s)} {W}")
    assert q.dtype == torch.int8 and torch.equal(q, want_q), (
        f"quantize_activation_per_token(x {tuple(shape)}): q = clamp(round(x / scale), -127, 127) int8; "
        f"got {q.dtype}, {refs.worst(q, want_q)} {W}")


def test_activation_zero_token():
    x = torch.randn(3, 6, generator=refs.gen(refs.rng("a-zero")))
    x[1] = 0
    q, scale = adapter.call("quantize_activation_per_token", x)
    assert float(scale[1, 0]) == 1.0 and int(q[1].abs().max()) == 0, (
        f"quantize_activation_per_token: an all-zero token gets scale 1.0 and q = 0; got scale "
        f"{float(scale[1, 0])!r}, q {q[1].tolist()} {W}")


def test_int8_gemm_exact():
    # 16129 * 1041 = 16,790,289 > 2**24 and odd: no float32 accumulator can hold it.
    r = refs.rng("gemm")
    n, out_f, in_f = 3, 4, 1041
    qx = torch.full((n, in_f), 127, dtype=torch.int8)
    qw = torch.full((out_f, in_f), 127, dtype=torch.int8)
    qw[1, r.randrange(in_f)] = -127
    g = refs.gen(r)
    qx[2] = torch.randint(-127, 128, (in_f,), generator=g, dtype=torch.int8)
    acc = adapter.call("int8_gemm", qx, qw)
    want = refs.int8_gemm(qx, qw)
    assert acc.dtype == torch.int32 and tuple(acc.shape) == (n, out_f), (
        f"int8_gemm(qx ({n}, {in_f}), qw ({out_f}, {in_f})): must return ({n}, {out_f}) int32; "
        f"got {tuple(acc.shape)} {acc.dtype} {W}")
    assert torch.equal(acc, want), (
        f"int8_gemm(qx of 127s, qw of 127s, in = {in_f}): the int32 sum must be exact; {refs.worst(acc, want)} {W}")


@pytest.mark.parametrize("case", ["2d-bias", "3d-bias", "3d-nobias"])
def test_w8a8_linear(case):
    g = refs.gen(refs.rng(f"lin-{case}"))
    out_f, in_f = 12, 40
    w = torch.randn(out_f, in_f, generator=g)
    bias = None if case.endswith("nobias") else torch.randn(out_f, generator=g)
    x = torch.randn((6, in_f) if case.startswith("2d") else (2, 5, in_f), generator=g)
    qw, sw = refs.quant_weight(w)
    y = adapter.call("w8a8_linear", x, qw, sw, bias)
    want = refs.w8a8_linear(x, qw, sw, bias)
    assert tuple(y.shape) == tuple(want.shape) and y.dtype == torch.float32, (
        f"w8a8_linear(x {tuple(x.shape)}, qw ({out_f}, {in_f})): want {tuple(want.shape)} float32, got "
        f"{tuple(y.shape)} {y.dtype} {W}")
    assert torch.allclose(y, want, rtol=1e-5, atol=1e-5), (
        f"w8a8_linear(x {tuple(x.shape)}, bias {'None' if bias is None else 'given'}): y = (acc * x_scale) * w_scale "
        f"+ bias, {refs.worst(y, want)} {W}")
