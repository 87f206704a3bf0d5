"""Part 4: the 1F1B schedule (order, unit-time timeline, bubble fraction) and a
1F1B training step over 2-4 gloo stages whose loss and gradients equal the
unpipelined model's, whose recorded order is 1F1B, whose in-flight activations
stay within p - stage, and whose measured bubble is (p-1)/(m+p-1)."""

from __future__ import annotations

from fractions import Fraction

import pytest
import torch

from roadmap_cli import grading_kit as kit

import adapter
import refs

SECTION = "Part 4: 1F1B pipeline"
# m < p - 1 too ((4, 1), (5, 2)): stage 0's warm-up is cut short by m, min(p - s - 1, m) = m.
SCHEDULES = [(2, 1), (2, 4), (3, 2), (3, 5), (4, 1), (4, 3), (4, 8), (5, 2), (5, 7)]
RUNS = [(2, 4), (3, 2), (4, 2), (4, 5)]
WIDTH = 6


def _schedules():
    return adapter.schedules(SCHEDULES)


SCHED = kit.PerSeedCache(_schedules)


def test_one_f_one_b_order():
    for (p, m), got in zip(SCHEDULES, SCHED()):
        for s in range(p):
            want = refs.one_f_one_b(p, m, s)
            assert got["orders"][s] == want, (
                f"one_f_one_b({p}, {m}, stage={s}) = {got['orders'][s]}, expected {want}: min(p - stage - 1, m) "
                f"warm-up forwards, then one forward one backward, then the remaining backwards "
                f"(README.md, section \"{SECTION}\")")


def test_timeline_starts_each_operation_as_early_as_possible():
    for (p, m), got in zip(SCHEDULES, SCHED()):
        want = refs.simulate([refs.one_f_one_b(p, m, s) for s in range(p)])
        assert set(got["timeline"]) == want and len(got["timeline"]) == len(want), (
            f"timeline({p}, {m}) = {sorted(got['timeline'], key=lambda e: (e[3], e[0]))}, expected "
            f"{sorted(want, key=lambda e: (e[3], e[0]))} (unit ticks, each operation at the first tick its stage is "
            f"free and its input is there) (README.md, section \"{SECTION}\")")


def test_timeline_is_sorted_by_tick_then_stage():
    for (p, m), got in zip(SCHEDULES, SCHED()):
        events = got["timeline"]
        want = sorted(events, key=lambda e: (e[3], e[0]))
        assert events == want, (
            f"timeline({p}, {m}) returned its operations in the order {events}; sort them by tick, then stage: "
            f"{want} (README.md, section \"{SECTION}\")")


def test_bubble_fraction_of_the_1f1b_timeline():
    for (p, m), got in zip(SCHEDULES, SCHED()):
        want = Fraction(p - 1, m + p - 1)
        assert abs(got["bubble"] - float(want)) <= 1e-12, (
            f"bubble_fraction(timeline({p}, {m})) = {got['bubble']}, expected (p-1)/(m+p-1) = {want} "
            f"(README.md, section \"{SECTION}\")")


def test_bubble_fraction_of_other_timelines():
    # A GPipe-order timeline and a timeline with a gap: bubble_fraction measures any schedule.
    gpipe = [[("F", i) for i in range(3)] + [("B", i) for i in range(3)] for _ in range(3)]
    events = sorted(refs.simulate(gpipe))
    late = [(s, i, k, t + (2 if s == 1 else 0)) for s, i, k, t in events]
    # A timeline whose first operation starts at tick 3: the makespan still counts from tick 0.
    shifted = [(s, i, k, t + 3) for s, i, k, t in events]
    for ev, p in ((events, 3), (late, 3), (shifted, 3), ([(0, 0, "F", 0), (0, 0, "B", 4)], 1),
                  ([(0, 0, "F", 2), (0, 0, "B", 3)], 1)):
        got = adapter.bubble_of(ev, p)
        want = refs.bubble(ev, p)
        assert abs(got - float(want)) <= 1e-12, (
            f"bubble_fraction({ev}, num_stages={p}) = {got}, expected {want}: 1 - busy / (stages x makespan), the "
            f"makespan counting ticks 0 .. last (README.md, section \"{SECTION}\")")


def _setup(p: int, m: int):
    r = refs.rng(f"pipe-{p}-{m}")
    g = refs.gen(r)
    b = r.randint(2, 3)
    stage_sizes = [[WIDTH] * (r.randint(1, 2) + 1) for _ in range(p)]   # 1 or 2 Linear(6, 6) per stage
    weights = [refs.random_weights(sz, g) for sz in stage_sizes]
    inputs = [torch.randn(b, WIDTH, generator=g, dtype=torch.float64) for _ in range(m)]
    targets = [torch.randn(b, WIDTH, generator=g, dtype=torch.float64) for _ in range(m)]
    return {"stage_sizes": stage_sizes, "weights": weights, "inputs": inputs, "targets": targets, "m": m,
            "activation_shape": (b, WIDTH)}


def _run(p: int, m: int):
    payload = _setup(p, m)
    results = adapter.run_ranks("pipeline", p, payload)
    refs.raise_errors(results, SECTION)
    return payload, {rank: res["out"] for rank, res in results.items()}


RUN = kit.PerSeedCache(_run)
IDS = [f"p{p}-m{m}" for p, m in RUNS]


def _unpipelined(payload, p):
    """The stages as one model (Tanh between every Linear inside a stage, none across stages, as the stage
    modules are built), loss = mean over micro-batches of each micro-batch's MSE."""
    stages = [refs.mlp(sz, w) for sz, w in zip(payload["stage_sizes"], payload["weights"])]
    loss = sum(torch.nn.functional.mse_loss(torch.nn.Sequential(*stages)(x), y)
               for x, y in zip(payload["inputs"], payload["targets"])) / payload["m"]
    loss.backward()
    return float(loss.detach()), [[q.grad for q in st.parameters()] for st in stages]


@pytest.mark.parametrize("p,m", RUNS, ids=IDS)
def test_loss_equals_unpipelined(p, m):
    payload, out = RUN(p, m)
    want, _ = _unpipelined(payload, p)
    got = out[p - 1]["loss"]
    assert got is not None and abs(got - want) <= 1e-10 * max(1.0, abs(want)), (
        f"{p} stages, {m} micro-batches: the last stage returned loss {got}, the unpipelined model's is {want} "
        f"(the mean over micro-batches of each one's MSE) (README.md, section \"{SECTION}\")")


@pytest.mark.parametrize("p,m", RUNS, ids=IDS)
def test_only_the_last_stage_returns_a_loss(p, m):
    _, out = RUN(p, m)
    others = {s: out[s]["loss"] for s in range(p - 1) if out[s]["loss"] is not None}
    assert not others, (
        f"{p} stages: stages {sorted(others)} returned a loss ({others}); only the last stage computes it, the "
        f"others return None (README.md, section \"{SECTION}\")")


@pytest.mark.parametrize("p,m", RUNS, ids=IDS)
def test_gradients_equal_unpipelined(p, m):
    payload, out = RUN(p, m)
    _, want = _unpipelined(payload, p)
    for s in range(p):
        for i, (got, w) in enumerate(zip(out[s]["grads"], want[s])):
            assert got is not None, f"stage {s}: parameter {i} got no gradient (README.md, section \"{SECTION}\")"
            err = float((got - w).abs().max())
            assert err <= 1e-10 * max(1.0, float(w.abs().max())), (
                f"{p} stages, {m} micro-batches, stage {s}, parameter {i}: gradient differs from the unpipelined "
                f"model's by {err:.3g} (x{float(got.abs().sum() / w.abs().sum()):.3g} in size) "
                f"(README.md, section \"{SECTION}\")")


@pytest.mark.parametrize("p,m", RUNS, ids=IDS)
def test_ranks_run_in_1f1b_order(p, m):
    _, out = RUN(p, m)
    for s in range(p):
        want = refs.one_f_one_b(p, m, s)
        assert out[s]["trace"] == want, (
            f"{p} stages, {m} micro-batches: stage {s} ran {out[s]['trace']}, expected the 1F1B order {want} "
            f"(README.md, section \"{SECTION}\")")


@pytest.mark.parametrize("p,m", RUNS, ids=IDS)
def test_in_flight_activations_at_most_p_minus_stage(p, m):
    _, out = RUN(p, m)
    for s in range(p):
        assert out[s]["peak"] <= p - s, (
            f"{p} stages, {m} micro-batches: stage {s} held {out[s]['peak']} micro-batches' activations at once "
            f"(forwards not yet backwarded); 1F1B holds at most p - stage = {p - s} (README.md, section \"{SECTION}\")")


@pytest.mark.parametrize("p,m", RUNS, ids=IDS)
def test_activations_really_held_at_most_p_minus_stage(p, m):
    """The order alone does not free memory: a stage that keeps each micro-batch's input or output
    after its backward holds all m at once, as GPipe does. Counted from the tensors still alive."""
    _, out = RUN(p, m)
    for s in range(p):
        assert out[s]["held"] <= p - s, (
            f"{p} stages, {m} micro-batches: stage {s} still held the input or output tensors of {out[s]['held']} "
            f"micro-batches when a backward ran; 1F1B holds at most p - stage = {p - s}: release a micro-batch's "
            f"activations once its backward is done (README.md, section \"{SECTION}\")")


@pytest.mark.parametrize("p,m", RUNS, ids=IDS)
def test_measured_bubble_is_p_minus_1_over_m_plus_p_minus_1(p, m):
    _, out = RUN(p, m)
    orders = [list(out[s]["trace"]) for s in range(p)]
    events = refs.simulate(orders)
    got = refs.bubble(events, p)
    want = Fraction(p - 1, m + p - 1)
    assert got == want and len(events) == 2 * m * p, (
        f"{p} stages, {m} micro-batches: the recorded per-stage orders {orders}, run at one tick per operation, "
        f"leave a bubble of {got} ({len(events)} operations); 1F1B's is (p-1)/(m+p-1) = {want} "
        f"(README.md, section \"{SECTION}\")")


@pytest.mark.parametrize("p,m", RUNS, ids=IDS)
def test_each_boundary_carries_m_activations_and_m_gradients(p, m):
    payload, out = RUN(p, m)
    b, w = payload["activation_shape"]
    for s in range(p):
        sends = out[s]["sends"]
        fwd = [e for e in sends if e[1] == s + 1]
        bwd = [e for e in sends if e[1] == s - 1]
        want_f, want_b = (m if s < p - 1 else 0), (m if s > 0 else 0)
        assert len(fwd) == want_f and len(bwd) == want_b and len(sends) == want_f + want_b and \
            all(e[2] == b * w * 8 for e in sends), (
                f"{p} stages, {m} micro-batches: stage {s} sent {sends} (to rank, bytes); expected one activation "
                f"of {b * w * 8} bytes per micro-batch to the next stage and one gradient per micro-batch to the "
                f"previous one (README.md, section \"{SECTION}\")")
