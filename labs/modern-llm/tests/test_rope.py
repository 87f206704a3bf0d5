"""Part 2: RoPE in the rotate-half convention: tables against the formula,
rotation against a complex-number reference, a non-default theta, positions
offset for decoding, and the relative-position property."""

from __future__ import annotations

import math

import pytest
import torch

import adapter
import refs

SECTION = "Part 2: RoPE"


def _close(got, want, tol, what):
    assert got.shape == want.shape, f"{what}: shape {tuple(got.shape)}, expected {tuple(want.shape)}"
    err = float((got.double() - want.double()).abs().max())
    assert err <= tol, f"{what}: max |diff| {err:.3g} (README.md, section \"{SECTION}\")"


@pytest.mark.parametrize("theta", [None, 500.0, 1_000_000.0])
def test_tables(theta):
    r = refs.rng(f"rope-tables-{theta}")
    for _ in range(3):
        d = 2 * r.randint(1, 16)
        positions = sorted(r.sample(range(0, 5000), r.randint(1, 8)))
        base = 10000.0 if theta is None else theta
        angles = torch.tensor([[p * base ** (-2 * (i % (d // 2)) / d) for i in range(d)] for p in positions],
                              dtype=torch.float64)
        cos, sin = adapter.rope_tables(positions, d, theta)
        _close(cos, angles.cos(), 1e-9, f"rope_cos_sin(positions={positions}, head_dim={d}, theta={theta}) cos")
        _close(sin, angles.sin(), 1e-9, f"rope_cos_sin(..., theta={theta}) sin")


@pytest.mark.parametrize("theta", [10000.0, 123.0])
def test_rotation_matches_complex_reference(theta):
    r = refs.rng(f"rope-apply-{theta}")
    for _ in range(4):
        b, h, t, d = r.randint(1, 2), r.randint(1, 3), r.randint(1, 6), 2 * r.randint(1, 8)
        offset = r.choice([0, 7, 1000])  # decoding: positions continue after the prompt
        positions = list(range(offset, offset + t))
        x = torch.randn(b, h, t, d, generator=refs.gen(r), dtype=torch.float64)
        _close(adapter.rope_apply(x, positions, theta), refs.rope_complex(x, positions, theta), 1e-9,
               f"apply_rope(x {tuple(x.shape)}, positions {offset}..{offset + t - 1}, theta={theta})")


def test_scores_depend_only_on_distance():
    r = refs.rng("rope-relative")
    d = 16
    g = refs.gen(r)
    q = torch.randn(1, 1, 1, d, generator=g, dtype=torch.float64)
    k = torch.randn(1, 1, 1, d, generator=g, dtype=torch.float64)
    for _ in range(6):
        m, n, shift = r.randint(0, 300), r.randint(0, 300), r.randint(1, 2000)
        s1 = float((adapter.rope_apply(q, [m], 10000.0) * adapter.rope_apply(k, [n], 10000.0)).sum())
        s2 = float((adapter.rope_apply(q, [m + shift], 10000.0) * adapter.rope_apply(k, [n + shift], 10000.0)).sum())
        assert math.isclose(s1, s2, rel_tol=1e-9, abs_tol=1e-9), (
            f"q.k at positions ({m}, {n}) is {s1:.6g} but at ({m + shift}, {n + shift}) it is {s2:.6g}: with RoPE "
            f"the score depends only on m - n (README.md, section \"{SECTION}\")")
