"""Part 6 — speculative decoding (Leviathan et al. 2023; Chen et al. 2023).

A cheap draft model proposes k tokens; the target model scores all of them in
ONE forward; each proposal x_i is accepted with probability
min(1, p_i(x_i) / q_i(x_i)); at the first rejection the token is resampled
from the residual norm(max(0, p_i - q_i)) and the step ends; if all k are
accepted, one bonus token comes from p_{k+1}. The output has exactly the
target's distribution, yet costs one target forward per 1..k+1 tokens
(README.md, "Part 6: speculative decoding"): with acceptance rate a, the
expected tokens per target forward is (1 - a^(k+1)) / (1 - a).

A model here is anything with `probs(tokens, n) -> (n, V)`: row j is the
distribution of the token that follows tokens[: len(tokens) - n + 1 + j].
"""

from __future__ import annotations

import torch


def _sample(probs: torch.Tensor, greedy: bool, generator: torch.Generator) -> int:
    if greedy:
        return int(torch.argmax(probs))
    return int(torch.multinomial(probs, 1, generator=generator))


def speculative_generate(target, draft, prefix: list[int], n_tokens: int, k: int, greedy: bool = False,
                         generator: torch.Generator | None = None) -> dict:
    """Generate n_tokens after prefix. Returns {"tokens": list of n_tokens ints,
    "target_calls", "draft_calls", "proposed", "accepted"} (proposed/accepted:
    draft tokens offered and accepted, counted over every step)."""
    raise NotImplementedError("speculative_generate: see README.md, section \"Part 6: speculative decoding\"")


def expected_tokens_per_target_call(acceptance: float, k: int) -> float:
    """(1 - a^(k+1)) / (1 - a); k + 1 when a = 1."""
    raise NotImplementedError("expected_tokens_per_target_call: see README.md, section \"Part 6: speculative decoding\"")
