"""Part 1: block hashes and the three routing policies, on traces drawn from the
secret seed and replayed on the grader's own router (refs.Router)."""

from __future__ import annotations

import pytest

import adapter
import refs

SECTION = "Part 1: routing policies"
W = refs.where(SECTION)


def _prompts(r, groups: int, n: int, bs: int = 8) -> list[list[int]]:
    """n prompts from `groups` shared prefixes (1-4 blocks) plus 0-11 own tokens: prefixes of every length."""
    heads = [[r.randrange(1000) for _ in range(bs * r.randint(1, 4))] for _ in range(groups)]
    out = []
    for _ in range(n):
        h = heads[r.randrange(groups)]
        out.append(h[:bs * r.randint(1, len(h) // bs)] + [r.randrange(1000) for _ in range(r.randint(0, 11))])
    return out


def _random_ops(r, n: int, prompts, health: bool) -> list:
    """picks and dones (never below 0 outstanding), now and then an ejection or re-admission."""
    ops = []
    for p in prompts:
        ops.append(("pick", p, ()))
        if health and r.random() < 0.15:
            ops.append(("health", r.randrange(n), r.random() < 0.5))
        if r.random() < 0.4:
            ops.append(("done", None))
    return ops


def _replay(n, policy, imbalance, ops):
    """Fill each ("done", None) with a replica that has an outstanding request (reference-chosen),
    and work out the expected answers and states."""
    ref = refs.Router(n, policy, 8, imbalance)
    filled, expected = [], []
    r = refs.rng(f"dones-{policy}-{n}")
    for op in ops:
        ans = None
        if op[0] == "pick":
            ans = ref.pick(op[1], op[2])
        elif op[0] == "done":
            busy = [i for i in range(n) if ref.outstanding[i] > 0]
            if not busy:
                continue
            op = ("done", r.choice(busy))
            ref.outstanding[op[1]] -= 1
        elif op[0] == "health":
            ref.healthy[op[1]] = op[2]
        else:
            ans = ref.match(op[1], refs.block_hashes(op[2], 8))
        filled.append(op)
        expected.append((ans, list(ref.outstanding), list(ref.healthy)))
    return filled, expected


def _check(n, policy, imbalance, ops, what):
    ops, expected = _replay(n, policy, imbalance, ops)
    got = adapter.router_trace(n, policy, 8, imbalance, ops)
    for k, (op, g, e) in enumerate(zip(ops, got, expected)):
        if op[0] == "pick" or op[0] == "match":
            assert g[0] == e[0], (
                f"Router({n}, {policy!r}, imbalance={imbalance}): {what}, operation {k} {op[0]}"
                f"{'' if op[0] == 'pick' else ' on replica ' + str(op[1])} of a {len(op[2] if op[0] == 'match' else op[1])}"
                f"-token prompt{' excluding ' + str(list(op[2])) if op[0] == 'pick' and op[2] else ''}: got {g[0]}, "
                f"expected {e[0]} (outstanding before: {expected[k - 1][1] if k else [0] * n}, healthy "
                f"{e[2]}) {W}")
        assert list(g[1]) == e[1], (f"Router.outstanding after operation {k} ({op[0]}) of {what}: {g[1]}, expected "
                                    f"{e[1]} {W}")


def test_block_hashes_are_chained_full_blocks():
    r = refs.rng("hashes")
    cases = [([r.randrange(1000) for _ in range(length)], bs)
             for length, bs in [(0, 8), (7, 8), (8, 8), (29, 8), (5, 1), (13, 4), (12, 3)]]
    got = adapter.hashes_many(cases)
    for (tokens, bs), g in zip(cases, got):
        want = refs.block_hashes(tokens, bs)
        assert g == want, (f"block_hashes({len(tokens)} tokens, block_size={bs}): got {len(g)} hashes "
                           f"{g[:3]}..., expected {len(want)}: {want[:3]}... {W}")


def test_round_robin_cycles_in_index_order():
    got = adapter.router_trace(3, "round_robin", 8, 4, [("pick", [1, 2, 3], ())] * 7)
    picks = [g[0] for g in got]
    assert picks == [0, 1, 2, 0, 1, 2, 0], f"round_robin: 7 picks on 3 replicas gave {picks}, expected [0, 1, 2, 0, 1, 2, 0] {W}"


def test_round_robin_skips_ejected_and_excluded():
    ops = [("pick", [1], ()), ("health", 1, False), ("pick", [1], ()), ("pick", [1], ()), ("pick", [1], (3,)),
           ("health", 1, True), ("pick", [1], ()), ("pick", [1], ()), ("pick", [1], (0, 1, 2, 3))]
    got = [g[0] for g in adapter.router_trace(4, "round_robin", 8, 4, ops)]
    picks = [got[k] for k, op in enumerate(ops) if op[0] == "pick"]
    # 0; 1 ejected -> 2, 3; 3 excluded -> 0; 1 back -> 1, 2; all excluded -> None
    assert picks == [0, 2, 3, 0, 1, 2, None], (
        f"round_robin with replica 1 ejected then re-admitted (and 3 excluded once, then all): picks {picks}, "
        f"expected [0, 2, 3, 0, 1, 2, None] {W}")


@pytest.mark.parametrize("n", [1, 3, 4])
def test_round_robin_random_trace(n):
    r = refs.rng(f"rr-{n}")
    _check(n, "round_robin", 4, _random_ops(r, n, _prompts(r, 3, 40), health=True), "a random trace")


@pytest.mark.parametrize("n", [2, 5])
def test_least_outstanding_lowest_index_on_ties(n):
    r = refs.rng(f"lor-{n}")
    _check(n, "least_outstanding", 4, _random_ops(r, n, _prompts(r, 3, 40), health=True), "a random trace")


def test_outstanding_counts_picks_minus_dones():
    ops = [("pick", [1], ()), ("pick", [1], ()), ("pick", [1], ()), ("done", 0), ("done", 0), ("done", 1)]
    got = adapter.router_trace(2, "least_outstanding", 8, 4, ops)
    states = [g[1] for g in got]
    want = [[1, 0], [1, 1], [2, 1], [1, 1], [0, 1], [0, 0]]
    assert states == want, (f"outstanding after pick, pick, pick, done(0), done(0), done(1): {states}, "
                            f"expected {want} {W}")


def test_every_policy_records_prefixes():
    p = list(range(40))
    for policy in ("round_robin", "least_outstanding"):
        got = [g[0] for g in adapter.router_trace(2, policy, 8, 4, [("pick", p, ()), ("match", 0, p)])]
        assert got[1] == 5, (f"Router(2, {policy!r}): after routing a 40-token prompt to replica 0, "
                             f"match_blocks(0, its hashes) = {got[1]}, expected 5: every pick records the "
                             f"request's block hashes, whatever the policy {W}")


def test_match_blocks_counts_leading_blocks():
    r = refs.rng("match")
    head = [r.randrange(1000) for _ in range(32)]
    other = [r.randrange(1000) for _ in range(16)]
    ops = [("pick", head[:24] + [5, 6], ()), ("match", 0, head), ("match", 0, head[:20]), ("match", 0, other),
           ("match", 1, head), ("match", 0, head[:8] + other)]
    got = [g[0] for g in adapter.router_trace(2, "prefix", 8, 4, ops)]
    want = [0, 3, 2, 0, 0, 1]
    assert got[1:] == want[1:], (f"match_blocks after routing a 26-token prompt (3 full blocks) to replica 0: "
                                 f"{got[1:]}, expected {want[1:]} for (0, 32-token prompt sharing 3 blocks), "
                                 f"(0, its first 20 tokens), (0, an unrelated prompt), (1, the prompt), "
                                 f"(0, first block shared then different) {W}")


@pytest.mark.parametrize("n,imbalance", [(3, 2), (4, 0), (2, 5)])
def test_prefix_policy_random_trace(n, imbalance):
    r = refs.rng(f"prefix-{n}-{imbalance}")
    _check(n, "prefix", imbalance, _random_ops(r, n, _prompts(r, 4, 50), health=True), "a random trace")


def test_prefix_falls_back_when_imbalanced():
    p = list(range(16))
    ops = [("pick", p, ())] * 4
    # imbalance 2: 0 (no match: least), then 0, 0 (match, 1 and 2 <= 0 + 2), then 0 has 3 > 0 + 2 -> least = 1
    got = [g[0] for g in adapter.router_trace(3, "prefix", 8, 2, ops)]
    assert got == [0, 0, 0, 1], (f"prefix policy, imbalance 2, the same 16-token prompt 4 times with no on_done: "
                                 f"picks {got}, expected [0, 0, 0, 1] {W}")


def test_prefix_without_match_goes_least_outstanding():
    a, b, c = list(range(16)), list(range(100, 116)), list(range(200, 216))
    ops = [("pick", a, ()), ("done", 0), ("pick", b, ()), ("pick", c, ())]
    got = [g[0] for k, g in enumerate(adapter.router_trace(3, "prefix", 8, 4, ops)) if ops[k][0] == "pick"]
    assert got == [0, 0, 1], (f"prefix policy, three unrelated prompts (the first done before the second "
                              f"arrives): picks {got}, expected [0, 0, 1] (no match: least outstanding, lowest "
                              f"index) {W}")
