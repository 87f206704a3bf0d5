"""Part 4: weight-only int8 / int4 quantization (README.md, "Part 4")."""

from __future__ import annotations

import pytest
import torch

import adapter
import grader_engine as ge
import reference as ref
from roadmap_cli import grading_kit as kit


def _weight(name: str, out_f: int, in_f: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(kit.seeded(name) % (1 << 62))
    w = torch.randn(out_f, in_f, generator=g) * torch.rand(out_f, 1, generator=g) * 3
    w[0] = 0.0                                    # an all-zero row: scale floor, no NaN
    w[1, 3] = 40.0                                # an outlier: only ITS row's scale grows
    w[2] *= 1e-3                                  # a tiny row: per-tensor scales would flatten it
    w[3] = -w[3].abs() - 0.1                      # all negative: the absmax is a negative value
    w[4] = w[4].abs() + 0.1                       # all positive: the int4 range still starts at 0
    # A group from -3.5 to 11.5: scale 1, zero round(3.5) = 4 (half to even), and round(11.5) + 4 = 16
    # must clamp to 15.
    w[5, :32] = torch.linspace(-3.5, 11.5, 32)
    return w


@pytest.mark.parametrize("shape", [(8, 64), (24, 256)])
def test_int8_per_channel(shape):
    w = _weight(f"int8-{shape}", *shape)
    q, scale = adapter.quantize_call("quantize_int8", w)
    want_q, want_scale = ref.quantize_int8(w)
    assert q.dtype == torch.int8 and tuple(q.shape) == shape, f"q: expected int8 {shape}, got {q.dtype} {tuple(q.shape)}"
    assert scale.dtype == torch.float32 and tuple(scale.shape) == (shape[0],), (
        f"scale: expected one fp32 scale per output row, shape ({shape[0]},); got {scale.dtype} {tuple(scale.shape)} "
        "(README.md, section \"int8 per channel\")")
    assert torch.allclose(scale, want_scale, rtol=1e-6, atol=0), (
        f"scales: expected max|row| / 127 per row (row 2 is 1000x smaller than the others), got max rel. error "
        f"{((scale - want_scale).abs() / want_scale).max():.2e} (README.md, section \"int8 per channel\")")
    assert int((q.to(torch.int32) - want_q.to(torch.int32)).abs().max()) <= 1 and int(q.abs().max()) <= 127, (
        "q must be round(w / scale) clamped to [-127, 127]")
    deq = adapter.quantize_call("dequantize_int8", q, scale)
    bound = want_scale[:, None] / 2 * (1 + 1e-5) + 1e-12
    assert bool(((deq - w).abs() <= bound).all()), (
        "dequantize_int8(q, scale) must be within scale/2 of w in every row (README.md, section \"int8 per channel\")")
    x = torch.randn(2, 3, shape[1], generator=torch.Generator().manual_seed(1))   # (batch, T, in)
    y = adapter.quantize_call("int8_linear", x, q, scale)
    want_y = x @ (want_q.to(torch.float32) * want_scale[:, None]).T
    kit.assert_close(y, want_y, atol=1e-4, rtol=1e-4, what="int8_linear(x, q, scale) vs x @ dequant(q).T")


@pytest.mark.parametrize("shape,group_size", [((6, 256), 128), ((10, 128), 32), ((8, 384), 128), ((6, 64), 32)])
def test_int4_groupwise(shape, group_size):
    w = _weight(f"int4-{shape}", *shape)
    packed, scales, zeros = adapter.quantize_call("quantize_int4", w, group_size)
    out_f, in_f = shape
    groups = in_f // group_size
    assert packed.dtype == torch.uint8 and tuple(packed.shape) == (out_f, in_f // 2), (
        f"packed: expected uint8 ({out_f}, {in_f // 2}) (two 4-bit values per byte), got {packed.dtype} "
        f"{tuple(packed.shape)} (README.md, section \"int4 groups\")")
    assert tuple(scales.shape) == (out_f, groups) and scales.dtype == torch.float32, (
        f"scales: expected fp32 ({out_f}, {groups}), one per group of {group_size} columns; got {scales.dtype} "
        f"{tuple(scales.shape)}")
    assert tuple(zeros.shape) == (out_f, groups) and zeros.dtype == torch.uint8, (
        f"zeros: expected uint8 ({out_f}, {groups}); got {zeros.dtype} {tuple(zeros.shape)}")
    want_q, want_s, want_z = ref.quantize_int4(w, group_size)
    assert torch.allclose(scales, want_s, rtol=1e-6, atol=0), (
        "scales: expected (max(max, 0) - min(min, 0)) / 15 per group (README.md, section \"int4 groups\")")
    assert torch.equal(zeros, want_z), "zeros: expected round(-min(min, 0) / scale) per group"
    q = ref.unpack_int4(packed)
    assert int((q.to(torch.int32) - want_q.to(torch.int32)).abs().max()) <= 1, (
        "the packed values, read as low nibble = even column and high nibble = odd column, are not "
        "clamp(round(w / scale) + zero, 0, 15) (README.md, section \"int4 groups\")")
    deq = adapter.quantize_call("dequantize_int4", packed, scales, zeros, group_size)
    grader_deq = ref.dequantize_int4(q, want_s, want_z, group_size)
    kit.assert_close(deq, grader_deq, atol=1e-6, rtol=1e-6, what="dequantize_int4 vs (q - zero) * scale")
    bound = want_s.repeat_interleave(group_size, dim=1) / 2 * (1 + 1e-4) + 1e-7
    assert bool(((deq - w).abs() <= bound).all()), "every dequantized weight must be within scale/2 of w"
    unpacked = adapter.quantize_call("unpack_int4", packed)
    assert torch.equal(unpacked, q), "unpack_int4 must invert the packing (low nibble first)"
    x = torch.randn(2, 3, in_f, generator=torch.Generator().manual_seed(2))       # (batch, T, in)
    y = adapter.quantize_call("int4_linear", x, packed, scales, zeros, group_size)
    kit.assert_close(y, x @ grader_deq.T, atol=1e-4, rtol=1e-4, what="int4_linear vs x @ dequant(W).T")


def test_int8_round_half_to_even():
    """Rows whose max |w| is 127 (scale exactly 1) or 63.5 (scale 0.5) put w / scale on exact .5 ties:
    torch's round goes to the even neighbour (README.md, "int8 per channel")."""
    w = torch.zeros(3, 64)
    w[0, :8] = torch.tensor([127.0, 2.5, -1.5, 0.5, -2.5, 126.5, -0.5, 3.5])
    w[1, :6] = torch.tensor([-63.5, 0.25, 0.75, -1.25, 31.25, 62.25])
    w[2, :4] = torch.tensor([-127.0, -126.5, 125.5, -4.5])
    q, scale = adapter.quantize_call("quantize_int8", w)
    want_q, want_scale = ref.quantize_int8(w)
    assert torch.equal(scale, want_scale), f"scales: expected {want_scale.tolist()}, got {scale.tolist()}"
    bad = (q.to(torch.int32) != want_q.to(torch.int32)).nonzero().tolist()
    assert not bad, (
        f"q = clamp(round(w / scale), -127, 127) on exact .5 ties: {len(bad)} values differ, first at (row, "
        f"column) {bad[0]}: w / scale = {float(w[bad[0][0], bad[0][1]] / want_scale[bad[0][0]])}, expected "
        f"{int(want_q[bad[0][0], bad[0][1]])}, got {int(q[bad[0][0], bad[0][1]])} (torch's round is half to even: "
        "2.5 -> 2, -1.5 -> -2, 126.5 -> 126) (README.md, section \"int8 per channel\")")


def _tie_weight(group_size: int) -> torch.Tensor:
    """Rows whose groups hit exact .5 ties in both roundings, with scales that are powers of two (every
    division exact): torch's round goes to the even neighbour, floor(x + 0.5) and round-half-away do not."""
    w = torch.zeros(4, 2 * group_size)
    # scale 1: lo -6.5, hi 8.5; zero = round(6.5) = 6; w / scale ties at 2.5 -> 2, 8.5 -> 8, -1.5 -> -2, 0.5 -> 0
    w[0, :8] = torch.tensor([-6.5, 8.5, 2.5, -1.5, 0.5, -2.5, 3.5, 1.5])
    # scale 0.5: lo -2.25, hi 5.25; zero = round(4.5) = 4; w / scale = 0.5, 1.5, -0.5, -3.5 -> 0, 2, -0, -4
    w[1, group_size:group_size + 6] = torch.tensor([-2.25, 5.25, 0.25, 0.75, -0.25, -1.75])
    # scale 1: lo -0.5, hi 14.5; zero = round(0.5) = 0; 14.5 -> 14, 12.5 -> 12, -0.5 -> -0 (+ 0)
    w[2, :4] = torch.tensor([-0.5, 14.5, 12.5, 5.5])
    # scale 2: lo -5, hi 25; zero = round(2.5) = 2; w / scale = 2.5 -> 2, 11 -> 11 (+ 2 = 13), -2.5 -> -2 (+ 2)
    w[3, group_size:group_size + 4] = torch.tensor([-5.0, 25.0, 5.0, -5.0 + 0.0])
    return w


@pytest.mark.parametrize("group_size", [32, 128])
def test_int4_round_half_to_even(group_size):
    """Exact .5 ties in zero = round(-lo / scale) and in round(w / scale): torch's round, half to even
    (README.md, "int4 groups"). The random weights never hit a tie exactly."""
    w = _tie_weight(group_size)
    packed, scales, zeros = adapter.quantize_call("quantize_int4", w, group_size)
    want_q, want_s, want_z = ref.quantize_int4(w, group_size)
    assert torch.equal(scales, want_s), f"scales: expected {want_s.tolist()}, got {scales.tolist()}"
    assert torch.equal(zeros, want_z), (
        f"zeros on groups whose -lo / scale is 6.5, 4.5, 0.5 and 2.5: expected {want_z.tolist()} (torch's round, "
        f"half to even), got {zeros.tolist()} (README.md, section \"int4 groups\": `round` is torch's)")
    q = ref.unpack_int4(packed)
    bad = (q != want_q).nonzero().tolist()
    assert not bad, (
        f"q = clamp(round(w / scale) + zero, 0, 15) on exact .5 ties: {len(bad)} values differ, first at "
        f"(row, column) {bad[0]}: w = {float(w[bad[0][0], bad[0][1]])}, expected q = "
        f"{int(want_q[bad[0][0], bad[0][1]])}, got {int(q[bad[0][0], bad[0][1]])} (torch's round is half to even: "
        "2.5 -> 2, 3.5 -> 4, -1.5 -> -2) (README.md, section \"int4 groups\")")


@pytest.mark.parametrize("shape,group_size", [((16, 256), 32), ((24, 384), 128)])
def test_int4_linear_dequantizes_one_tile_at_a_time(shape, group_size):
    """int4_linear dequantizes one (out, group_size) tile per group: no floating-point tensor as large as
    the (out, in) weight is ever made while it runs (README.md, "Dequant on the fly")."""
    out_f, in_f = shape
    w = _weight(f"int4-tile-{shape}", out_f, in_f)
    q, scales, zeros = ref.quantize_int4(w, group_size)
    packed = q[:, 0::2] | (q[:, 1::2] << 4)                                  # the handout's layout
    x = torch.randn(2, in_f, generator=torch.Generator().manual_seed(3))     # fewer elements than the weight
    got = adapter.int4_linear_largest_float(x, packed, scales, zeros, group_size)
    want = x @ ref.dequantize_int4(ref.unpack_int4(packed), scales, zeros, group_size).T
    kit.assert_close(got["y"], want, atol=1e-4, rtol=1e-4, what="int4_linear vs x @ dequant(W).T")
    assert got["largest_numel"] < out_f * in_f, (
        f"int4_linear made a floating-point tensor of shape {got['largest_shape']} ({got['largest_numel']} "
        f"elements) for a ({out_f}, {in_f}) weight: the fp32 weight never exists in memory; dequantize one "
        f"({out_f}, {group_size}) tile per group and accumulate x[:, group] @ tile.T (README.md, "
        "section \"Dequant on the fly\")")


def test_bad_arguments_are_refused():
    w = _weight("bad-args", 6, 96)
    for group_size in (64, 3):      # 96 is not a multiple of 64; 3 divides 96 but is odd (no whole bytes)
        with pytest.raises(ValueError):
            adapter.quantize_call("quantize_int4", w, group_size)
    with pytest.raises(ValueError):
        adapter.quantize_call("quantized_bytes", 8, 128, "fp8", 128)


def test_memory_bytes():
    for out_f, in_f, g in ((4096, 4096, 128), (11008, 4096, 128), (96, 256, 64), (8, 128, 32)):
        for scheme in ("fp32", "int8", "int4"):
            got = adapter.quantize_call("quantized_bytes", out_f, in_f, scheme, g)
            want = ref.quantized_bytes(out_f, in_f, scheme, g)
            assert got == want, (f"quantized_bytes({out_f}, {in_f}, {scheme!r}, group_size={g}): expected {want}, "
                                 f"got {got} (README.md, section \"Memory\")")
    w = _weight("mem", 16, 256)
    assert int(ref.unpack_int4(adapter.quantize_call("quantize_int4", w, 32)[0]).max()) <= 15
    stored = sum(t.numel() * t.element_size() for t in adapter.quantize_call("quantize_int4", w, 64))
    assert stored == ref.quantized_bytes(16, 256, "int4", 64), (
        f"the tensors quantize_int4 returns take {stored} bytes; the handout's layout takes "
        f"{ref.quantized_bytes(16, 256, 'int4', 64)}")
    stored = sum(t.numel() * t.element_size() for t in adapter.quantize_call("quantize_int8", w))
    assert stored == ref.quantized_bytes(16, 256, "int8"), f"the int8 tensors take {stored} bytes"


@pytest.mark.parametrize("scheme,max_delta", [("int8", 0.01), ("int4", 0.05)])
def test_perplexity_delta(scheme, max_delta):
    cfg = ge.ModelConfig()
    w = ge.init_weights(cfg, 0)
    ids = ge.encode(ref.HELD_OUT_TEXT)
    base = ge.perplexity(w, cfg, ids)
    deq = adapter.quantize_model(w, scheme, 128)
    for name, full in w.items():
        bound = 0.02 * full.abs().max() if scheme == "int8" else 0.1 * full.abs().max()
        assert (deq[name] - full).abs().max() <= bound, f"{scheme}: weight {name} moved too far from fp32"
    ppl = ge.perplexity(deq, cfg, ids)
    delta = ppl / base - 1
    assert abs(delta) <= max_delta, (f"{scheme} perplexity {ppl:.3f} vs fp32 {base:.3f}: {100 * delta:+.2f}%, allowed "
                                     f"{100 * max_delta:.0f}% (README.md, section \"Part 4\")")
