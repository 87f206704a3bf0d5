"""Part 4: SIMT cost of small branchy programs, per warp, exactly; uniform
branches, divergent ones, predication, loops with ragged trip counts, nesting,
and a partial last warp."""

from __future__ import annotations

import pytest

import adapter
import reference
from cases import expect_equal, rng

SECTION = "Part 4: warps and divergence"


def lanes(n, fn):
    return [bool(fn(t)) for t in range(n)]


def programs(n):
    """(name, program, n_threads) for hand-picked cases over n threads."""
    even = lanes(n, lambda t: t % 2 == 0)
    everyone = lanes(n, lambda t: True)
    first_warp = lanes(n, lambda t: t < 32)
    one_lane = lanes(n, lambda t: t == 5)
    trips = [t % 7 for t in range(n)]
    return [
        ("straight line", [("op", 5)], n),
        ("uniform branch", [("if", everyone, [("op", 4)], [("op", 9)])], n),
        ("warp-uniform branch", [("if", first_warp, [("op", 4)], [("op", 9)])], n),
        ("divergent branch", [("if", even, [("op", 4)], [("op", 9)])], n),
        ("one lane diverges", [("if", one_lane, [("op", 20)], [])], n),
        ("predicated", [("pred", even, [("op", 4)], [("op", 9)])], n),
        ("predicated, nobody takes it", [("pred", lanes(n, lambda t: False), [("op", 3)], [])], n),
        ("ragged loop", [("loop", trips, [("op", 2)])], n),
        ("loop nobody runs", [("loop", [0] * n, [("op", 2)])], n),
        ("nested", [("op", 1), ("if", even, [("loop", trips, [("if", one_lane, [("op", 3)], [("op", 1)])])],
                                      [("pred", first_warp, [("op", 2)], [("op", 5)])])], n),
        ("partial last warp", [("if", even, [("op", 2)], [("op", 3)]), ("op", 1)], n - 7 if n > 40 else n),
    ]


KNOWN = [(n, i) for n in (32, 70) for i in range(len(programs(n)))]


@pytest.mark.parametrize("n, index", KNOWN, ids=[f"{programs(n)[i][0].replace(' ', '-').replace(',', '')}-{n}"
                                                for n, i in KNOWN])
def test_known_programs(n, index):
    name, program, threads = programs(n)[index]
    expect_equal(f"simt_cost({name}, n_threads={threads})", adapter.simt_cost(program, threads),
                 reference.simt(program, threads), SECTION)


def _random_program(r, n, depth):
    body = []
    for _ in range(r.randint(1, 3)):
        kind = r.random()
        if depth == 0 or kind < 0.35:
            body.append(("op", r.randint(1, 6)))
        elif kind < 0.6:
            p = r.choice([0.0, 0.5, 1.0, r.random()])
            body.append(("if", [r.random() < p for _ in range(n)], _random_program(r, n, depth - 1),
                         _random_program(r, n, depth - 1) if r.random() < 0.7 else []))
        elif kind < 0.8:
            body.append(("pred", [r.random() < 0.5 for _ in range(n)], _random_program(r, n, depth - 1),
                         _random_program(r, n, depth - 1) if r.random() < 0.5 else []))
        else:
            top = r.choice([0, 1, 3, 6])
            body.append(("loop", [r.randint(0, top) for _ in range(n)], _random_program(r, n, depth - 1)))
    return body


def test_random_programs():
    r = rng("simt-random")
    for _ in range(120):
        n = r.choice([1, 31, 32, 33, 64, 95, r.randint(1, 100)])
        program = _random_program(r, n, r.randint(0, 3))
        expect_equal(f"simt_cost(random program, n_threads={n}): {program}", adapter.simt_cost(program, n),
                     reference.simt(program, n), SECTION)


def test_efficiency():
    r = rng("simt-efficiency")
    cases = [(name, prog, n) for name, prog, n in programs(64)]
    cases += [("random", _random_program(r, m, 2), m) for m in (r.randint(1, 100) for _ in range(40))]
    for name, program, n in cases:
        warps = reference.simt(program, n)
        issued = sum(w["issued"] for w in warps)
        want = sum(w["active_lane_cycles"] for w in warps) / (32 * issued) if issued else 0.0
        expect_equal(f"simt_efficiency({name}, n_threads={n})", adapter.simt_efficiency(program, n), want, SECTION)


def test_zero_threads_raise():
    with pytest.raises(ValueError):
        adapter.simt_cost([("op", 1)], 0)
