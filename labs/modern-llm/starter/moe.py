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
    raise NotImplementedError("route: see README.md, section \"Part 5: mixture of experts\"")


def expert_capacity(n_tokens: int, n_experts: int, top_k: int, capacity_factor: float | None) -> int | None:
    """Assignments one expert accepts; None means unlimited."""
    raise NotImplementedError("expert_capacity: see README.md, section \"Part 5: mixture of experts\"")


def dispatch_mask(experts: torch.Tensor, n_experts: int, capacity: int | None) -> torch.Tensor:
    """(N, k) bool: True where the assignment experts[n, j] is served, False where dropped."""
    raise NotImplementedError("dispatch_mask: see README.md, section \"Part 5: mixture of experts\"")


def moe_forward(x: torch.Tensor, router_weight: torch.Tensor, experts: list, top_k: int = 2,
                normalize: bool = True, capacity_factor: float | None = None) -> dict:
    """x (N, D); router_weight (E, D); experts: E tuples (w1 (H, D), w3 (H, D), w2 (D, H)).
    Returns {"y": (N, D), "kept": (N, k) bool, "aux_loss": scalar tensor}."""
    raise NotImplementedError("moe_forward: see README.md, section \"Part 5: mixture of experts\"")


def load_balancing_loss(router_logits: torch.Tensor, top_k: int = 1) -> torch.Tensor:
    """Switch Transformer's auxiliary loss: E * sum_i f_i * P_i (1.0 when perfectly balanced)."""
    raise NotImplementedError("load_balancing_loss: see README.md, section \"Part 5: mixture of experts\"")
