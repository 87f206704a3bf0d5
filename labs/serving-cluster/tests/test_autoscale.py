"""Part 3: the autoscaler's decisions on synthetic queue-depth traces."""

from __future__ import annotations

import pytest

import adapter
import refs

SECTION = "Part 3: autoscaling"
W = refs.where(SECTION)


def _check(params, steps, what):
    got = adapter.autoscale_trace(params, steps)
    want = refs.autoscale(params, steps)
    for k, (g, e) in enumerate(zip(got, want)):
        before = steps[k][2] if len(steps[k]) > 2 else want[k - 1] if k else params["start"]
        assert g == e, (f"Autoscaler({params}) on {what}: decide(now={steps[k][0]}, current={before}, "
                        f"queue_depth={steps[k][1]}) returned {g}, expected {e} (decisions so far "
                        f"{want[:k]}) {W}")


def test_scales_to_ceil_of_queue_over_target():
    p = {"target": 4, "min": 1, "max": 50, "cooldown": 0.0, "tolerance": 0.0, "start": 2}
    _check(p, [(0, 9), (1, 20), (2, 21), (3, 3), (4, 0)], "queues 9, 20, 21, 3, 0")


def test_holds_inside_the_tolerance_band():
    p = {"target": 10, "min": 1, "max": 50, "cooldown": 0.0, "tolerance": 0.1, "start": 5}
    _check(p, [(0, 55), (1, 45), (2, 56), (3, 44)], "queues 55, 45 (inside +-10% of 50) then 56, 44")


def test_tolerance_band_is_relative_to_wanted():
    """The band is `tolerance * wanted` around `wanted = current * target`, both edges inclusive, on both
    sides: with a wide band (tolerance 0.5, 0.25: exact in binary) a band measured relative to
    `queue_depth` or to `current`, or an exclusive edge, decides otherwise at each edge (README.md,
    "Part 3")."""
    p = {"target": 4, "min": 1, "max": 50, "cooldown": 0.0, "tolerance": 0.5, "start": 10}
    # wanted 40, band [20, 60]: hold at both edges, rescale just past one; then 16 replicas (band [32, 96]),
    # then 8 (band [16, 48])
    _check(p, [(0, 20), (1, 60), (2, 61), (3, 32), (4, 96), (5, 31), (6, 48), (7, 16), (8, 49)],
           "queues at both edges of the band (tolerance 0.5 of wanted) and one past each")
    p = {"target": 8, "min": 1, "max": 50, "cooldown": 0.0, "tolerance": 0.25, "start": 6}
    # wanted 48, band [36, 60]; then 5 replicas (band [30, 50]), then 7 (band [42, 70])
    _check(p, [(0, 36), (1, 60), (2, 35), (3, 30), (4, 50), (5, 51), (6, 42), (7, 70), (8, 41)],
           "queues at both edges of the band (tolerance 0.25 of wanted) and one past each")


def test_clamps_to_min_and_max():
    p = {"target": 2, "min": 2, "max": 6, "cooldown": 0.0, "tolerance": 0.0, "start": 3}
    _check(p, [(0, 100), (1, 0), (2, 7)], "queues 100 (max 6), 0 (min 2), 7")


def test_scales_down_only_after_cooldown():
    p = {"target": 4, "min": 1, "max": 20, "cooldown": 30.0, "tolerance": 0.0, "start": 2}
    _check(p, [(0, 40), (10, 4), (29.5, 4), (30, 4), (31, 40), (35, 80), (50, 8), (66, 8)],
           "a burst at t=0, quiet until 30 s, another burst at 31 and 35 s")


def test_first_decrease_is_not_held():
    # last_change starts at minus infinity: a decrease at the very first decision (t = 0, or any t below the
    # cooldown) is not held, there was no earlier change to cool down from.
    p = {"target": 4, "min": 1, "max": 20, "cooldown": 30.0, "tolerance": 0.0, "start": 6}
    _check(p, [(0.0, 4), (5.0, 4)], "a quiet queue from the first decision at t=0 (start 6 replicas)")
    _check(p, [(12.0, 8), (20.0, 8)], "a quiet queue from the first decision at t=12 (start 6 replicas)")


def test_clamp_comes_before_the_cooldown_hold():
    """Step 2 (clamp) before step 3 (hold): a caller running more than max_replicas inside the cooldown gets
    its count back (the clamped decrease is held), and fewer than min_replicas is an increase, never held
    (README.md, "Part 3"). The third item of a step is the count the caller runs at that moment."""
    p = {"target": 4, "min": 2, "max": 6, "cooldown": 30.0, "tolerance": 0.0, "start": 4}
    _check(p, [(0, 40), (5, 40, 10), (10, 80, 9), (40, 80, 9)],
           "a burst (6 replicas, the max), then 10 and 9 replicas running inside the cooldown, then after it")
    _check(p, [(0, 0), (5, 0, 1), (6, 12, 1)], "a quiet queue (2, the min), then 1 replica running in the cooldown")


def test_ceil_in_integers():
    """desired = ceil(queue_depth / target) computed in integers: exact past 2**53, where a float
    division rounds (README.md, "Part 3")."""
    big = 2 ** 60
    p = {"target": 3, "min": 1, "max": 2 ** 62, "cooldown": 0.0, "tolerance": 0.0, "start": 1}
    _check(p, [(0, big + 1), (1, 3 * big + 2), (2, 7 * big + 5)], "queue depths past 2**53")
    p = {"target": 7, "min": 1, "max": 2 ** 62, "cooldown": 0.0, "tolerance": 0.0, "start": 1}
    _check(p, [(0, 7 * big + 1), (1, 2 ** 55 - 3)], "queue depths past 2**53, target 7")


@pytest.mark.parametrize("case", range(3))
def test_random_traces(case):
    r = refs.rng(f"autoscale-{case}")
    lo = r.randint(1, 3)
    p = {"target": r.randint(1, 8), "min": lo, "max": lo + r.randint(2, 12), "cooldown": float(r.randint(0, 20)),
         "tolerance": r.choice([0.0, 0.1, 0.25]), "start": lo}
    t, steps = 0.0, []
    for _ in range(60):
        t += r.choice([1.0, 2.5, 5.0])
        steps.append((t, r.randint(0, 120)))
    _check(p, steps, "a random trace")
