"""Part 6: speculative decoding. Greedy mode equals target-only greedy decoding
token for token, with one target forward per step; sampling mode preserves the
target's distribution (chi-squared test on the first token over many seeded
runs, false-alarm probability 1e-6) and its acceptance rate and tokens per
target forward agree with the paper's formulas."""

from __future__ import annotations

import math

import pytest
import torch

import adapter
import refs
from spec_models import TableModel

SECTION = "Part 6: speculative decoding"

# chi-squared quantiles at 1 - 1e-6 for df = 1..10 (so a right solution fails once in a million runs).
CHI2_1E6 = {1: 23.93, 2: 27.63, 3: 30.66, 4: 33.38, 5: 35.89, 6: 38.26, 7: 40.52, 8: 42.70, 9: 44.81, 10: 46.86}


def _table(r, *shape):
    return torch.rand(*shape, generator=refs.gen(r), dtype=torch.float64) ** 2 + 0.01


def _greedy_target_only(table, prefix, n):
    seq = list(prefix)
    for _ in range(n):
        seq.append(int(torch.argmax(table[seq[-1]])))
    return seq[len(prefix):]


@pytest.mark.parametrize("k", [1, 3, 5])
def test_greedy_equals_target_greedy(k):
    r = refs.rng(f"spec-greedy-{k}")
    for _ in range(4):
        v = r.randint(3, 12)
        target, draft = TableModel(_table(r, v, v)), TableModel(_table(r, v, v))
        prefix, n = [r.randrange(v) for _ in range(r.randint(1, 4))], r.randint(1, 15)
        got = adapter.speculative(target, draft, prefix, n, k, True, r.randrange(2**31))
        want = _greedy_target_only(target.table, prefix, n)
        assert got["tokens"] == want, (f"greedy speculative decoding (k={k}) gave {got['tokens']}, target-only greedy "
                                       f"gives {want} (README.md, section \"{SECTION}\")")
        assert got["seen_target_calls"] == got["target_calls"], "target_calls must count the target's forwards"
        assert got["seen_draft_calls"] == got["draft_calls"] <= got["target_calls"] * k, (
            f"{got['seen_draft_calls']} draft calls for {got['target_calls']} steps of k={k}")
        steps_needed = math.ceil(n / (k + 1))
        assert steps_needed <= got["target_calls"] <= n, (
            f"{got['target_calls']} target forwards for {n} tokens: one per step of up to k+1 tokens")


@pytest.mark.parametrize("k", [1, 2, 4])
def test_a_perfect_draft_yields_k_plus_one_tokens_per_forward(k):
    """Draft == target: every proposal is accepted, so every step must add the
    k drafts AND the bonus token from p_{k+1}: exactly ceil(n / (k+1)) target forwards."""
    r = refs.rng(f"spec-perfect-{k}")
    v = r.randint(3, 9)
    table = _table(r, v, v)
    n = r.randint(2 * (k + 1), 6 * (k + 1))
    for greedy in (True, False):
        got = adapter.speculative(TableModel(table), TableModel(table), [r.randrange(v)], n, k, greedy, r.randrange(2**31))
        want = math.ceil(n / (k + 1))
        assert got["target_calls"] == want and got["accepted"] == got["proposed"], (
            f"draft identical to the target (greedy={greedy}, k={k}, {n} tokens): {got['target_calls']} target "
            f"forwards and {got['accepted']}/{got['proposed']} drafts accepted; expected {want} forwards (k accepted "
            f"drafts + 1 bonus token from p_(k+1) per step) (README.md, section \"{SECTION}\")")
        assert len(got["tokens"]) == n, f"{len(got['tokens'])} tokens returned, {n} asked for"


@pytest.mark.parametrize("k", [1, 4])
def test_sampling_preserves_the_target_distribution(k):
    r = refs.rng(f"spec-dist-{k}")
    v = 5
    p_table, q_table = _table(r, v), _table(r, v)
    target, draft = TableModel(p_table), TableModel(q_table)
    p, q = target.table, draft.table
    trials = 6000
    got = adapter.first_token_counts(target, draft, k, trials, r.randrange(2**31), v)
    counts = torch.tensor(got["counts"], dtype=torch.float64)
    chi2 = float(((counts - trials * p) ** 2 / (trials * p)).sum())
    assert chi2 <= CHI2_1E6[v - 1], (
        f"first-token frequencies {[round(c / trials, 3) for c in counts.tolist()]} vs the target's "
        f"{[round(x, 3) for x in p.tolist()]}: chi-squared {chi2:.1f} > {CHI2_1E6[v - 1]} (p < 1e-6): the output does "
        f"not follow the target distribution; check the acceptance test min(1, p/q) and the residual "
        f"max(0, p - q) (README.md, section \"{SECTION}\")")
    alpha = float(torch.minimum(p, q).sum())
    examined, accepted = got["proposed"], got["accepted"]
    rate = accepted / examined
    sigma = math.sqrt(alpha * (1 - alpha) / examined)
    assert abs(rate - alpha) <= 6 * sigma + 1e-9, (
        f"acceptance rate {rate:.4f} over {examined} drafts, expected sum(min(p, q)) = {alpha:.4f} "
        f"(README.md, section \"{SECTION}\")")
    per_call = got["tokens"] / got["target_calls"]
    formula = adapter.expected_tokens(alpha, k)
    want = (1 - alpha ** (k + 1)) / (1 - alpha)
    assert abs(formula - want) <= 1e-12, f"expected_tokens_per_target_call({alpha:.4f}, {k}) = {formula}, expected {want}"
    assert abs(per_call - want) <= 0.05 * want, (
        f"{per_call:.3f} tokens per target forward, the formula (1 - a^(k+1)) / (1 - a) gives {want:.3f} "
        f"(README.md, section \"{SECTION}\")")


@pytest.mark.parametrize("k", [1, 4])
def test_every_draw_comes_from_the_given_generator(k):
    """Draft samples, the accept/reject draws and the residual samples all use
    `generator`: replaying with the same generator seed under different global
    seeds gives the same tokens (a draw from the global RNG would not)."""
    r = refs.rng(f"spec-stream-{k}")
    v = 6
    target, draft = TableModel(_table(r, v, v)), TableModel(_table(r, v, v))
    seed = r.randrange(2**31)
    runs = adapter.speculative_replays(target, draft, [r.randrange(v)], 60, k, seed, [1, 2, 12345])
    assert runs[0] == runs[1] == runs[2], (
        f"the same generator seed gave different tokens under different global torch seeds ({runs[0][:12]} vs "
        f"{runs[1][:12]} ...): some draw (a draft sample, the accept/reject torch.rand, or the residual sample) "
        f"does not use `generator` (README.md, section \"{SECTION}\")")


def test_a_different_generator_changes_the_draws():
    """The other half of the replay: under ONE global seed, two generator seeds
    must give different runs; code that ignores `generator` (its own fixed
    generator, or none) gives the same tokens both times."""
    r = refs.rng("spec-other-generator")
    v = 6
    target, draft = TableModel(_table(r, v, v)), TableModel(_table(r, v, v))
    prefix, seed = [r.randrange(v)], r.randrange(2**31)
    first = adapter.speculative_replays(target, draft, prefix, 60, 2, seed, [7])[0]
    second = adapter.speculative_replays(target, draft, prefix, 60, 2, seed + 1, [7])[0]
    assert first != second, (
        f"generator seeds {seed} and {seed + 1} under the same global seed gave the same 60 tokens {first[:12]} ...: "
        f"the draws do not come from `generator` (README.md, section \"{SECTION}\")")


def test_expected_tokens_edge_cases():
    assert adapter.expected_tokens(1.0, 4) == 5.0, "acceptance 1.0: every step yields k + 1 tokens"
    assert abs(adapter.expected_tokens(0.0, 4) - 1.0) <= 1e-12, "acceptance 0: one token per step"
