"""Part 2: SmoothQuant: per-channel scales s_j = max|X_j|^a / max|W_j|^(1-a), folded
into the LayerNorm before the Linear so the float model does not change."""

from __future__ import annotations

import pytest
import torch

import adapter
import refs

SECTION = "Part 2: SmoothQuant"
W = refs.where(SECTION)


def _case(name, in_f=24, outs=(10,)):
    g = refs.gen(refs.rng(name))
    amax = torch.rand(in_f, generator=g) * 4 + 0.1
    amax[torch.randperm(in_f, generator=g)[:2]] *= 50          # outlier channels
    weights = [torch.randn(o, in_f, generator=g) * (0.2 + torch.rand(1, in_f, generator=g)) for o in outs]
    return amax, weights


@pytest.mark.parametrize("alpha", [0.25, 0.5, 0.85])
def test_smooth_scales_match(alpha):
    amax, weights = _case(f"s-{alpha}")
    s = adapter.call("smooth_scales", amax, weights, alpha)
    want = refs.smooth_scales(amax, weights, alpha)
    assert s.dtype == torch.float32 and tuple(s.shape) == tuple(want.shape), (
        f"smooth_scales(alpha={alpha}): want {tuple(want.shape)} float32, got {tuple(s.shape)} {s.dtype} {W}")
    assert torch.allclose(s, want, rtol=1e-5, atol=0), (
        f"smooth_scales(act_amax (24,), one weight (10, 24), alpha={alpha}): s_j = act_amax_j^alpha / "
        f"w_amax_j^(1-alpha), {refs.worst(s, want)} {W}")


def test_smooth_scales_several_weights():
    amax, weights = _case("s-several", outs=(6, 9, 4))
    s = adapter.call("smooth_scales", amax, weights, 0.5)
    want = refs.smooth_scales(amax, weights, 0.5)
    assert torch.allclose(s, want, rtol=1e-5, atol=0), (
        f"smooth_scales(three weights (6|9|4, 24), alpha=0.5): w_amax_j is the max of column j over EVERY "
        f"weight together, {refs.worst(s, want)} {W}")


@pytest.mark.parametrize("alpha", [0.0, 1.0])
def test_alpha_edges(alpha):
    amax, weights = _case(f"s-edge-{alpha}")
    s = adapter.call("smooth_scales", amax, weights, alpha)
    want = 1 / weights[0].abs().amax(0) if alpha == 0.0 else amax
    what = "1 / w_amax" if alpha == 0.0 else "act_amax"
    assert torch.allclose(s, want, rtol=1e-6, atol=0), (
        f"smooth_scales(alpha={alpha}) must be {what}: {refs.worst(s, want)} {W}")


@pytest.mark.parametrize("alpha", [0.0, 0.5, 1.0])
def test_zero_channels(alpha):
    amax, weights = _case(f"s-zero-{alpha}")
    amax[3] = 0
    weights[0][:, 7] = 0
    s = adapter.call("smooth_scales", amax, weights, alpha)
    assert float(s[3]) == 1.0 and float(s[7]) == 1.0, (
        f"smooth_scales(alpha={alpha}): a channel whose act_amax is 0 (channel 3) or whose weight column is 0 "
        f"(channel 7) gets s = 1; got s[3] = {float(s[3])!r}, s[7] = {float(s[7])!r} {W}")
    want = refs.smooth_scales(amax, weights, alpha)
    assert torch.allclose(s, want, rtol=1e-5, atol=0), f"smooth_scales(alpha={alpha}): {refs.worst(s, want)} {W}"


@pytest.mark.parametrize("alpha", [-0.1, 1.5])
def test_alpha_out_of_range(alpha):
    amax, weights = _case("s-range")
    with pytest.raises(ValueError):
        adapter.call("smooth_scales", amax, weights, alpha)


def test_fold_exact_and_function_unchanged():
    g = refs.gen(refs.rng("fold"))
    c = 16
    ln_w, ln_b = torch.rand(c, generator=g) + 0.5, torch.randn(c, generator=g)
    weights = [torch.randn(8, c, generator=g), torch.randn(5, c, generator=g)]
    s = torch.rand(c, generator=g) * 10 + 0.1
    got = adapter.fold(ln_w, ln_b, weights, s)
    for name, have, want in (("ln.weight", got["ln_weight"], ln_w / s), ("ln.bias", got["ln_bias"], ln_b / s),
                             *((f"linears[{i}].weight", got["weights"][i], w * s) for i, w in enumerate(weights))):
        assert torch.allclose(have, want, rtol=1e-6, atol=1e-7), (
            f"fold_smoothing: {name} must become {'its value / s' if name.startswith('ln') else 'W * s (column j times s_j)'}; "
            f"{refs.worst(have, want)} {W}")
    x = torch.randn(7, c, generator=g)
    before = torch.nn.functional.layer_norm(x, (c,), ln_w, ln_b) @ weights[0].t()
    after = torch.nn.functional.layer_norm(x, (c,), got["ln_weight"], got["ln_bias"]) @ got["weights"][0].t()
    assert torch.allclose(after, before, rtol=1e-4, atol=1e-4), (
        f"fold_smoothing: LayerNorm -> Linear must compute the same function after the fold; {refs.worst(after, before)} {W}")


def test_fold_in_place():
    g = refs.gen(refs.rng("fold-in-place"))
    c = 8
    got = adapter.fold(torch.rand(c, generator=g) + 0.5, torch.randn(c, generator=g), [torch.randn(4, c, generator=g)],
                       torch.rand(c, generator=g) + 0.5)
    assert got["in_place"], (
        "fold_smoothing(ln, linears, s) works in place: the LayerNorm's and the Linears' own Parameters, on their own "
        f"storage, hold the new values (`ln.weight /= s` under no_grad), not new tensors bound to them {W}")


def test_collect_inputs():
    ck, idx = refs.checkpoint(), refs.calib_idx()[:2]
    got, hooks, logits = adapter.collect_inputs(ck, idx)
    want = refs.collect_inputs(refs.model(), idx)
    assert sorted(got) == sorted(want), (
        f"collect_inputs: keys must be every block's {sorted(want)[:4]}...; got {sorted(got)} {W}")
    for k in want:
        assert tuple(got[k].shape) == tuple(want[k].shape) and torch.allclose(got[k], want[k], rtol=1e-5, atol=1e-5), (
            f"collect_inputs(model, idx (2, 64))[{k!r}]: the Linear's input as (B*T, in) = {tuple(want[k].shape)}; "
            f"got {tuple(got[k].shape)} {W}")
    assert hooks == 0, f"collect_inputs: {hooks} forward hook(s) left on the model; remove them after the pass {W}"


def test_collect_inputs_removes_its_hooks_when_the_pass_raises():
    """Red team (issue 38): hooks removed after the pass, but not in a `finally`, stayed on the model when the
    pass raised."""
    ck, idx = refs.checkpoint(), refs.calib_idx()[:2].clone()
    idx[0, 3] = 10 ** 6  # past the vocabulary: the embedding raises
    raised, hooks = adapter.collect_inputs_failing(ck, idx)
    assert raised, f"collect_inputs(model, idx with a token past the vocabulary) must let the model's error out {W}"
    assert hooks == 0, (f"collect_inputs: {hooks} forward hook(s) left on the model after the pass raised; "
                        f"\"every hook is removed afterwards, even if the pass raises\" (try/finally) {W}")


def test_smooth_model_matches_reference():
    ck, idx = refs.checkpoint(), refs.calib_idx()
    probe, _ = refs.heldout("sq-probe")
    alpha = refs.rng("sq-alpha").choice([0.4, 0.5, 0.6, 0.75])
    state, logits, same = adapter.smooth_model(ck, idx, alpha, probe[:4])
    want = refs.smooth_model(refs.model(), idx, alpha).state_dict()
    for k, v in want.items():
        assert torch.allclose(state[k], v, rtol=1e-4, atol=1e-6), (
            f"smooth_model(alpha={alpha}): {k} differs from the reference (ln_1 -> attn.c_attn and ln_2 -> mlp.c_fc "
            f"smoothed from the calibration inputs, nothing else changed); {refs.worst(state[k], v)} {W}")
    assert same, f"smooth_model must return the model it was given (it works in place) {W}"
    with torch.no_grad():
        fp = refs.model()(probe[:4])
    err = float((logits - fp).abs().max() / fp.abs().max())
    assert err < 1e-4, f"smooth_model(alpha={alpha}): the float model's logits changed by {err:.3g} (relative) {W}"
