"""Part 5 — a mixture-of-experts layer: routing, capacity, load balancing.

A router (a linear layer, weight (E, D)) scores each token for each of E
experts; each token is sent to its top-k experts and the outputs are mixed
with the router's gates (README.md, "Part 5: mixture of experts"):

- Mixtral: softmax over all E logits, keep the top-k, renormalise the k gates
  to sum to 1.  Switch Transformer: top-1, gate = the softmax probability
  itself (not renormalised to 1).
- Capacity: each expert takes at most ceil(capacity_factor * N * k / E)
  (token, choice) assignments; assignments are served rank by rank (every
  token's 1st choice in token order, then every token's 2nd choice, ...); an
  assignment over capacity is DROPPED: it adds nothing (the other gates are
  not renormalised).
- Load balancing (Switch, eq. 4): loss = E * sum_i f_i * P_i, f_i = the
  fraction of the N * k assignments routed to expert i (before capacity),
  P_i = the mean router probability of expert i over the N tokens.
Each expert is a SwiGLU MLP: w2 @ (silu(w1 @ x) * (w3 @ x)).
"""

from __future__ import annotations

import math

import torch


def _at_least_float32(x: torch.Tensor) -> torch.Tensor:
    return x.float() if x.dtype in (torch.float16, torch.bfloat16) else x


def route(router_logits: torch.Tensor, top_k: int, normalize: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """router_logits (N, E) -> (gates (N, k), experts (N, k) long), experts in
    decreasing probability (ties: the lower expert index first)."""
    # BEGIN SOLUTION
    # float32 at least (a float16 softmax over many experts loses the small gates)
    probs = torch.softmax(_at_least_float32(router_logits), dim=-1)
    # a stable descending sort keeps tied experts in index order (torch.topk does not promise that)
    gates, experts = torch.sort(probs, dim=-1, descending=True, stable=True)
    gates, experts = gates[:, :top_k], experts[:, :top_k]
    if normalize:
        gates = gates / gates.sum(dim=-1, keepdim=True)
    return gates.to(router_logits.dtype), experts
    # STARTER
    # raise NotImplementedError("route: see README.md, section \"Part 5: mixture of experts\"")
    # END SOLUTION


def expert_capacity(n_tokens: int, n_experts: int, top_k: int, capacity_factor: float | None) -> int | None:
    """Assignments one expert accepts; None means unlimited."""
    # BEGIN SOLUTION
    if capacity_factor is None:
        return None
    return math.ceil(capacity_factor * n_tokens * top_k / n_experts)
    # STARTER
    # raise NotImplementedError("expert_capacity: see README.md, section \"Part 5: mixture of experts\"")
    # END SOLUTION


def dispatch_mask(experts: torch.Tensor, n_experts: int, capacity: int | None) -> torch.Tensor:
    """(N, k) bool: True where the assignment experts[n, j] is served, False where dropped."""
    # BEGIN SOLUTION
    n, k = experts.shape
    kept = torch.ones(n, k, dtype=torch.bool)
    if capacity is None:
        return kept
    load = [0] * n_experts
    for rank in range(k):
        for token in range(n):
            e = int(experts[token, rank])
            if load[e] < capacity:
                load[e] += 1
            else:
                kept[token, rank] = False
    return kept
    # STARTER
    # raise NotImplementedError("dispatch_mask: see README.md, section \"Part 5: mixture of experts\"")
    # END SOLUTION


def moe_forward(x: torch.Tensor, router_weight: torch.Tensor, experts: list, top_k: int = 2,
                normalize: bool = True, capacity_factor: float | None = None) -> dict:
    """x (N, D); router_weight (E, D); experts: E tuples (w1 (H, D), w3 (H, D), w2 (D, H)).
    Returns {"y": (N, D), "kept": (N, k) bool, "aux_loss": scalar tensor}."""
    # BEGIN SOLUTION
    logits = x @ router_weight.t()                                        # (N, E)
    gates, chosen = route(logits, top_k, normalize)
    n_experts = router_weight.shape[0]
    kept = dispatch_mask(chosen, n_experts, expert_capacity(x.shape[0], n_experts, top_k, capacity_factor))
    y = torch.zeros_like(x)
    for e, (w1, w3, w2) in enumerate(experts):
        token_idx, rank_idx = torch.nonzero((chosen == e) & kept, as_tuple=True)
        if token_idx.numel() == 0:
            continue
        h = x[token_idx]
        out = (torch.nn.functional.silu(h @ w1.t()) * (h @ w3.t())) @ w2.t()
        y.index_add_(0, token_idx, out * gates[token_idx, rank_idx][:, None])
    return {"y": y, "kept": kept, "aux_loss": load_balancing_loss(logits, top_k)}
    # STARTER
    # raise NotImplementedError("moe_forward: see README.md, section \"Part 5: mixture of experts\"")
    # END SOLUTION


def load_balancing_loss(router_logits: torch.Tensor, top_k: int = 1) -> torch.Tensor:
    """Switch Transformer's auxiliary loss: E * sum_i f_i * P_i (1.0 when perfectly balanced)."""
    # BEGIN SOLUTION
    n, n_experts = router_logits.shape
    probs = torch.softmax(_at_least_float32(router_logits), dim=-1)
    chosen = torch.sort(probs, dim=-1, descending=True, stable=True).indices[:, :top_k]  # (N, k), ties: lower index
    f = torch.bincount(chosen.reshape(-1), minlength=n_experts).to(probs.dtype) / (n * top_k)
    p = probs.mean(dim=0)
    return n_experts * (f * p).sum()
    # STARTER
    # raise NotImplementedError("load_balancing_loss: see README.md, section \"Part 5: mixture of experts\"")
    # END SOLUTION
