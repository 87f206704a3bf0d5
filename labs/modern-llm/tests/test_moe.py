"""Part 5: MoE routing (Mixtral top-k renormalised, Switch top-1 raw gate),
capacity with dropped assignments served rank by rank, and the Switch
load-balancing loss, against a dense reference that runs every expert."""

from __future__ import annotations

import pytest
import torch

import adapter
import refs

SECTION = "Part 5: mixture of experts"


def _setup(r, n, d, h, e):
    g = refs.gen(r)
    x = torch.randn(n, d, generator=g, dtype=torch.float64)
    router = torch.randn(e, d, generator=g, dtype=torch.float64)
    experts = [tuple(torch.randn(*s, generator=g, dtype=torch.float64) / 2 for s in ((h, d), (h, d), (d, h)))
               for _ in range(e)]
    return x, router, experts


CONFIGS = [(2, True, None), (1, False, None), (2, True, 1.0), (1, False, 1.25), (3, True, 0.5), (2, False, 2.0)]


@pytest.mark.parametrize("top_k,normalize,capacity", CONFIGS, ids=[f"k{k}-norm{n}-cap{c}" for k, n, c in CONFIGS])
def test_moe_against_dense_reference(top_k, normalize, capacity):
    r = refs.rng(f"moe-{top_k}-{normalize}-{capacity}")
    for _ in range(3):
        n, d, h, e = r.randint(3, 17), r.randint(2, 6), r.randint(2, 7), r.randint(max(top_k, 2), 6)
        x, router, experts = _setup(r, n, d, h, e)
        got = adapter.moe(x, router, experts, top_k, normalize, capacity)
        want_y, want_kept, want_aux, _ = refs.moe_dense(x, router, experts, top_k, normalize, capacity)
        label = f"moe_forward(N={n}, E={e}, top_k={top_k}, normalize={normalize}, capacity_factor={capacity})"
        assert got["kept"].tolist() == want_kept, (
            f"{label}: kept {got['kept'].int().tolist()}, expected {[[int(b) for b in row] for row in want_kept]}: "
            f"capacity ceil(cf*N*k/E), 1st choices of every token before 2nd choices (README.md, section \"{SECTION}\")")
        err = float((got["y"].double() - want_y).abs().max())
        assert err <= 1e-9, f"{label}: output max |diff| {err:.3g} vs the dense reference (README.md, section \"{SECTION}\")"
        assert abs(got["aux_loss"] - want_aux) <= 1e-9, (
            f"{label}: load-balancing loss {got['aux_loss']:.12g}, expected {want_aux:.12g} (README.md, section \"{SECTION}\")")


def test_route_orders_and_normalises():
    r = refs.rng("moe-route")
    logits = torch.randn(6, 5, generator=refs.gen(r), dtype=torch.float64)
    probs = torch.softmax(logits, -1)
    for k, norm in ((1, False), (1, True), (2, True), (3, False)):
        gates, experts = adapter.route(logits, k, norm)
        want_gates, want_experts = torch.topk(probs, k, dim=-1)
        if norm:
            want_gates = want_gates / want_gates.sum(-1, keepdim=True)
        assert experts.tolist() == want_experts.tolist(), f"route(top_k={k}): experts {experts.tolist()}"
        assert torch.allclose(gates.double(), want_gates, atol=1e-12), (
            f"route(top_k={k}, normalize={norm}): gates {gates.tolist()} (README.md, section \"{SECTION}\")")


def test_route_ties_go_to_the_lower_expert_index():
    logits = torch.tensor([[1.0, 1.0, 1.0, 0.0], [0.0, 2.0, 2.0, 2.0], [3.0, 0.0, 3.0, 3.0]], dtype=torch.float64)
    for k in (1, 2, 3):
        _, experts = adapter.route(logits, k, True)
        want = [[0, 1, 2][:k], [1, 2, 3][:k], [0, 2, 3][:k]]
        assert experts.tolist() == want, (f"route(top_k={k}) on tied logits {logits.tolist()}: experts "
                                          f"{experts.tolist()}, expected {want}: ties go to the lower expert index "
                                          f"(README.md, section \"{SECTION}\")")


# (N, E, k, capacity_factor, capacity): fractions round UP, k counts, None is unlimited, exact products stay.
CAPACITIES = [(10, 4, 1, 1.0, 3), (10, 4, 2, 1.0, 5), (7, 3, 2, 1.25, 6), (8, 4, 2, 1.0, 4), (1, 8, 1, 1.0, 1),
              (5, 2, 2, 0.5, 3), (6, 4, 1, None, None)]


def test_expert_capacity_edge_sizes():
    for n, e, k, cf, want in CAPACITIES:
        got = adapter.capacity(n, e, k, cf)
        assert got == want, (f"expert_capacity(n_tokens={n}, n_experts={e}, top_k={k}, capacity_factor={cf}) = {got}, "
                             f"expected ceil(cf * N * k / E) = {want} (None: no limit) (README.md, section \"{SECTION}\")")


def test_capacity_factor_zero_drops_every_assignment():
    # 0 is a capacity, not "no limit": only None means unlimited. A truthiness test (`if not capacity_factor`,
    # `if not capacity`) reads 0 as None, in expert_capacity, dispatch_mask or moe_forward alike.
    r = refs.rng("moe-capacity-zero")
    for zero in (0.0, 0):
        got_cap = adapter.capacity(9, 3, 2, zero)
        assert got_cap == 0, (f"expert_capacity(n_tokens=9, n_experts=3, top_k=2, capacity_factor={zero!r}) = {got_cap}, "
                              f"expected 0: no limit only when capacity_factor is None (README.md, section \"{SECTION}\")")
        for top_k, normalize in ((2, True), (1, False)):
            n, d, h, e = 7, 4, 5, 3
            x, router, experts = _setup(r, n, d, h, e)
            got = adapter.moe(x, router, experts, top_k, normalize, zero)
            _, _, want_aux, _ = refs.moe_dense(x, router, experts, top_k, normalize, None)
            label = f"moe_forward(N={n}, E={e}, top_k={top_k}, normalize={normalize}, capacity_factor={zero!r})"
            assert not bool(got["kept"].any()), (
                f"{label}: kept {got['kept'].int().tolist()}, expected every assignment dropped: the capacity is 0 "
                f"(README.md, section \"{SECTION}\")")
            assert float(got["y"].abs().max()) == 0.0, (
                f"{label}: output is not all zeros although every assignment is dropped (README.md, section \"{SECTION}\")")
            assert abs(got["aux_loss"] - want_aux) <= 1e-9, (
                f"{label}: load-balancing loss {got['aux_loss']:.12g}, expected {want_aux:.12g}: f_i counts assignments "
                f"before capacity (README.md, section \"{SECTION}\")")


def test_balanced_router_loss_is_one():
    logits = torch.zeros(8, 4, dtype=torch.float64)
    logits[torch.arange(8), torch.arange(8) % 4] = 3.0  # 2 tokens per expert, symmetric probabilities
    loss = adapter.balance_loss(logits, 1)
    assert abs(loss - 1.0) <= 1e-9, f"a perfectly balanced router gives loss 1.0, got {loss:.6g} (README.md, section \"{SECTION}\")"
