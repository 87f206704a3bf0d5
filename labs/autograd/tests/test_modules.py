"""Part 5: Linear and MultiheadAttention rebuilt from their documented
behaviour: a real module's state_dict loads (strict), Linear initialises
exactly like nn.Linear for the same seed, and outputs match in float64 to 1e-6
across batch_first, key_padding_mask, attn_mask, need_weights and
average_attn_weights."""

from __future__ import annotations

import pytest
import torch

import adapter
import programs

SECTION = "Part 5: reading nn.Linear and nn.MultiheadAttention"


def _close(a, b, what):
    assert a is not None and a.shape == b.shape, f"{what}: shape {None if a is None else tuple(a.shape)}, " \
        f"expected {tuple(b.shape)} (README.md, section \"{SECTION}\")"
    nan_a, nan_b = torch.isnan(a), torch.isnan(b)
    assert torch.equal(nan_a, nan_b), (
        f"{what}: NaN at {nan_a.nonzero().tolist()[:4]}, torch's NaN at {nan_b.nonzero().tolist()[:4]}: masked "
        f"scores are filled with -inf, so a row with every key masked is NaN, as torch's is "
        f"(README.md, section \"{SECTION}\")")
    a, b = a.masked_fill(nan_a, 0.0), b.masked_fill(nan_b, 0.0)
    err = float((a - b).abs().max()) if a.numel() else 0.0
    assert err <= 1e-6, f"{what}: max |diff| {err:.3g} vs torch (README.md, section \"{SECTION}\")"


@pytest.mark.parametrize("bias", [True, False])
def test_linear_init_and_forward(bias):
    r = programs.rng(f"linear-{bias}")
    for _ in range(4):
        seed, fin, fout = r.randrange(2**31), r.randint(1, 17), r.randint(1, 9)
        torch.manual_seed(seed)
        ref = torch.nn.Linear(fin, fout, bias=bias)
        mine = adapter.linear_init(seed, fin, fout, bias)
        assert sorted(mine) == sorted(ref.state_dict()), (
            f"Linear({fin}, {fout}, bias={bias}) has parameters {sorted(mine)}, nn.Linear has "
            f"{sorted(ref.state_dict())} (README.md, section \"{SECTION}\")")
        for name, value in ref.state_dict().items():
            assert torch.equal(mine[name], value), (
                f"Linear({fin}, {fout}) with torch.manual_seed({seed}): {name} differs from nn.Linear's: use the "
                f"same init functions in the same order (read reset_parameters) (README.md, section \"{SECTION}\")")
        ref = ref.double()
        x = torch.randn(r.randint(1, 3), r.randint(1, 4), fin, dtype=torch.float64)
        got = adapter.linear_forward(ref.state_dict(), fin, fout, bias, x)
        xr = x.clone().requires_grad_(True)
        y = ref(xr)
        (gx,) = torch.autograd.grad(y.sum(), xr)
        _close(got["y"], y.detach(), f"Linear({fin}, {fout}, bias={bias}) output")
        _close(got["grad_x"], gx, f"Linear({fin}, {fout}, bias={bias}) d(sum y)/dx")


# The named edge sizes: nn.Linear allows in_features or out_features of 0 (reset_parameters guards the bias
# bound against in_features == 0).
@pytest.mark.parametrize("fin,fout,bias", [(0, 3, True), (0, 3, False), (3, 0, True)], ids=["in0", "in0-nobias", "out0"])
def test_linear_zero_features(fin, fout, bias):
    seed = programs.rng(f"linear-zero-{fin}-{fout}").randrange(2**31)
    torch.manual_seed(seed)
    ref = torch.nn.Linear(fin, fout, bias=bias)
    mine = adapter.linear_init(seed, fin, fout, bias)
    assert sorted(mine) == sorted(ref.state_dict()), (
        f"Linear({fin}, {fout}, bias={bias}) has parameters {sorted(mine)}, nn.Linear has {sorted(ref.state_dict())}")
    for name, value in ref.state_dict().items():
        assert mine[name].shape == value.shape and torch.equal(mine[name], value), (
            f"Linear({fin}, {fout}, bias={bias}): {name} is {mine[name].tolist()}, nn.Linear's is {value.tolist()}: "
            f"initialise exactly as reset_parameters does, its in_features == 0 case too "
            f"(README.md, section \"{SECTION}\")")
    ref = ref.double()
    x = torch.randn(2, fin, dtype=torch.float64)
    got = adapter.linear_forward(ref.state_dict(), fin, fout, bias, x)
    _close(got["y"], ref(x).detach(), f"Linear({fin}, {fout}, bias={bias}) output")


def _mha_case(r, batch_first):
    h = r.choice([1, 2, 4])
    e = h * r.choice([2, 3, 4])
    n, length, source = r.randint(1, 3), r.randint(1, 5), r.randint(1, 6)
    torch.manual_seed(r.randrange(2**31))
    ref = torch.nn.MultiheadAttention(e, h, batch_first=batch_first).double().eval()
    with torch.no_grad():  # non-zero biases so a missing bias shows
        ref.in_proj_bias.normal_()
        ref.out_proj.bias.normal_()
    shape_q = (n, length, e) if batch_first else (length, n, e)
    shape_kv = (n, source, e) if batch_first else (source, n, e)
    q = torch.randn(*shape_q, dtype=torch.float64)
    k = torch.randn(*shape_kv, dtype=torch.float64) if r.random() < 0.7 else None
    v = torch.randn(*shape_kv, dtype=torch.float64)
    if k is None:  # self-attention-like: key is value
        k = v
    options = {"need_weights": r.random() < 0.75, "average_attn_weights": r.random() < 0.5}
    if r.random() < 0.6:
        kpm = torch.rand(n, source) < 0.3
        kpm[:, 0] = False  # every query keeps at least one key
        options["key_padding_mask"] = kpm
    if r.random() < 0.5:
        am = torch.rand(length, source) < 0.3
        am[:, 0] = False
        options["attn_mask"] = am
    return ref, e, h, q, k, v, options


@pytest.mark.parametrize("batch_first", [False, True])
def test_multihead_attention(batch_first):
    r = programs.rng(f"mha-{batch_first}")
    for trial in range(10):
        ref, e, h, q, k, v, options = _mha_case(r, batch_first)
        want_out, want_w = ref(q, k, v, **options)
        got = adapter.mha_forward(ref.state_dict(), e, h, batch_first, q, k, v, options)
        assert got["names"] == sorted(ref.state_dict()), (
            f"MultiheadAttention parameters {got['names']}, expected {sorted(ref.state_dict())} "
            f"(README.md, section \"{SECTION}\")")
        label = f"MultiheadAttention(E={e}, heads={h}, batch_first={batch_first}) with {sorted(options)}"
        _close(got["out"], want_out.detach(), f"{label}: output")
        if want_w is None:
            assert got["weights"] is None, f"{label}: need_weights=False must return None as the weights"
        else:
            _close(got["weights"], want_w.detach(), f"{label}: attention weights")


# Fixed cases, one per option rule, with 2 heads of 3 (so head split, scaling and averaging all show): the
# random cases above draw their options, and one option may be missing from a run.
MHA_CASES = {
    "plain": (False, {"need_weights": True}),
    "batch-first": (True, {"need_weights": True}),
    "per-head-weights": (False, {"need_weights": True, "average_attn_weights": False}),
    "no-weights": (False, {"need_weights": False}),
    "key-padding-mask": (False, {"need_weights": True, "key_padding_mask": [[False, True, False, True],
                                                                           [False, False, True, False]]}),
    "attn-mask": (False, {"need_weights": True, "attn_mask": [[False, True, True, False], [False, False, True, True],
                                                              [False, True, False, False]]}),
    # as many queries as keys: a mask broadcast along the wrong axis still has the right shape
    "key-padding-mask-square": (False, {"need_weights": True, "key_padding_mask": [[False, True, False, True],
                                                                                  [True, False, False, False]]},
                                (4, 4)),
    # a batch item with every key padded, and a query row with every key masked: NaN rows, as torch gives
    "whole-item-padded": (False, {"need_weights": True, "key_padding_mask": [[False, True, False, True],
                                                                            [True, True, True, True]]}),
    "whole-row-masked": (True, {"need_weights": True, "attn_mask": [[False, True, True, False], [True, True, True, True],
                                                                    [False, True, False, False]]}),
}


@pytest.mark.parametrize("name", list(MHA_CASES))
def test_multihead_attention_options(name):
    batch_first, raw, *sizes = MHA_CASES[name]
    options = {k: torch.tensor(v) if isinstance(v, list) else v for k, v in raw.items()}
    r = programs.rng(f"mha-fixed-{name}")
    e, h, n = 6, 2, 2
    length, source = sizes[0] if sizes else (3, 4)
    torch.manual_seed(r.randrange(2**31))
    ref = torch.nn.MultiheadAttention(e, h, batch_first=batch_first).double().eval()
    with torch.no_grad():  # non-zero biases so a missing bias shows
        ref.in_proj_bias.normal_()
        ref.out_proj.bias.normal_()
    shape_q, shape_kv = ((n, length, e), (n, source, e)) if batch_first else ((length, n, e), (source, n, e))
    q, k, v = (torch.randn(*s, dtype=torch.float64) for s in (shape_q, shape_kv, shape_kv))
    want_out, want_w = ref(q, k, v, **options)
    got = adapter.mha_forward(ref.state_dict(), e, h, batch_first, q, k, v, options)
    label = f"MultiheadAttention(E={e}, heads={h}, batch_first={batch_first}) with {raw}"
    _close(got["out"], want_out.detach(), f"{label}: output")
    if want_w is None:
        assert got["weights"] is None, f"{label}: need_weights=False must return None as the weights"
    else:
        _close(got["weights"], want_w.detach(), f"{label}: attention weights")
