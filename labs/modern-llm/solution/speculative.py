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
    # BEGIN SOLUTION
    generator = generator if generator is not None else torch.Generator().manual_seed(0)
    seq = list(prefix)
    out: list[int] = []
    stats = {"target_calls": 0, "draft_calls": 0, "proposed": 0, "accepted": 0}
    while len(out) < n_tokens:
        drafts, qs = [], []
        for _ in range(k):
            q = draft.probs(seq + drafts, 1)[0]
            stats["draft_calls"] += 1
            drafts.append(_sample(q, greedy, generator))
            qs.append(q)
        p = target.probs(seq + drafts, k + 1)                     # (k + 1, V): one target forward
        stats["target_calls"] += 1
        new: list[int] = []
        for i, x in enumerate(drafts):
            stats["proposed"] += 1
            if greedy:
                ok = int(torch.argmax(p[i])) == x
            else:
                ok = float(torch.rand(1, generator=generator)) < min(1.0, float(p[i, x] / qs[i][x]))
            if ok:
                stats["accepted"] += 1
                new.append(x)
                continue
            if greedy:
                new.append(int(torch.argmax(p[i])))
            else:
                residual = (p[i] - qs[i]).clamp_min(0)
                new.append(_sample(residual / residual.sum(), False, generator))
            break
        else:
            new.append(_sample(p[k], greedy, generator))
        seq += new
        out += new
    return {"tokens": out[:n_tokens], **stats}
    # STARTER
    # raise NotImplementedError("speculative_generate: see README.md, section \"Part 6: speculative decoding\"")
    # END SOLUTION


def expected_tokens_per_target_call(acceptance: float, k: int) -> float:
    """(1 - a^(k+1)) / (1 - a); k + 1 when a = 1."""
    # BEGIN SOLUTION
    if acceptance >= 1.0:
        return float(k + 1)
    return (1 - acceptance ** (k + 1)) / (1 - acceptance)
    # STARTER
    # raise NotImplementedError("expected_tokens_per_target_call: see README.md, section \"Part 6: speculative decoding\"")
    # END SOLUTION
