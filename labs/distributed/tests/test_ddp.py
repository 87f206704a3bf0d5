"""Part 2: DDP-style gradient bucketing: buckets in reverse parameter order up
to a byte cap, each bucket all-reduced as soon as it (and every bucket before
it) is ready during backward, gradients averaged to the single-process ones."""

from __future__ import annotations

import pytest
import torch

from roadmap_cli import grading_kit as kit

import adapter
import refs

SECTION = "Part 2: DDP gradient bucketing"
SIZES = [6, 8, 8, 3]          # scale(3), then Linear(6,8) Tanh Linear(8,8) Tanh Linear(8,3): 7 parameters, float64
WORLD = [2, 3]
ITERATIONS = 2


def _weights(g):
    return [1 + 0.1 * torch.randn(SIZES[-1], generator=g, dtype=torch.float64)] + refs.random_weights(SIZES, g)


def _param_bytes():
    return [SIZES[-1] * 8] + refs.param_bytes(SIZES)


def _setup(p: int):
    r = refs.rng(f"ddp-{p}")
    g = refs.gen(r)
    # Ranks other than 0 start from other weights: the constructor must broadcast rank 0's.
    init = [_weights(g) for _ in range(p)]
    per_rank = r.randint(2, 4)
    batches = [[(torch.randn(per_rank, SIZES[0], generator=g, dtype=torch.float64),
                 torch.randn(per_rank, SIZES[-1], generator=g, dtype=torch.float64)) for _ in range(ITERATIONS)]
               for _ in range(p)]
    # Caps whose last bucket is the scale alone: it is ready first but must launch last.
    cap = r.choice([200, 250, 1000])
    return {"sizes": SIZES, "init": init, "batches": batches, "cap_bytes": cap, "lr": 0.1}


def _run(p: int):
    payload = _setup(p)
    results = adapter.run_ranks("ddp", p, payload)
    refs.raise_errors(results, SECTION)
    return payload, {rank: res["out"] for rank, res in results.items()}


RUN = kit.PerSeedCache(_run)


def _single_process_grads(payload, p):
    """Full-batch gradients (all ranks' samples together) with the grader's SGD between iterations."""
    model = refs.scaled_mlp(SIZES, payload["init"][0])
    out = []
    for it in range(ITERATIONS):
        x = torch.cat([payload["batches"][r][it][0] for r in range(p)])
        y = torch.cat([payload["batches"][r][it][1] for r in range(p)])
        model.zero_grad(set_to_none=True)
        torch.nn.functional.mse_loss(model(x), y).backward()
        grads = [q.grad.clone() for q in model.parameters()]
        out.append(grads)
        with torch.no_grad():
            for q in model.parameters():
                q -= payload["lr"] * q.grad
    return out


def _launches(log):
    return [e[1] for e in log if e[0] == "all_reduce"]


def _expected_interleaving(log, buckets, nbytes):
    """The log's ready events with each bucket's launch put right after the ready event that completes it and
    every bucket before it (launches in bucket order), all before backward ends."""
    pending = [len(b) for b in buckets]
    where = {i: k for k, b in enumerate(buckets) for i in b}
    nxt, want = 0, []
    for e in log:
        if e[0] != "ready":
            continue
        want.append(("ready", e[1]))
        pending[where[e[1]]] -= 1
        while nxt < len(buckets) and pending[nxt] == 0:
            want.append(("all_reduce", nbytes[nxt]))
            nxt += 1
    want.append(("backward-done",))
    return want


def test_assign_buckets_reverse_order_and_cap():
    r = refs.rng("ddp-buckets")
    cases = [([100, 50, 50, 200], 100), ([8, 8, 8], 16), ([40, 500, 40, 40], 100), ([30, 30, 30], 1000)]
    for _ in range(6):
        n = r.randint(1, 9)
        cases.append(([r.choice([8, 24, 64, 96, 128, 400]) for _ in range(n)], r.choice([64, 100, 128, 256])))
    for sizes, cap in cases:
        got = adapter.assign_buckets(sizes, cap)
        want = refs.buckets(sizes, cap)
        assert got == want, (
            f"assign_buckets({sizes}, cap_bytes={cap}) = {got}, expected {want}: walk the parameters from the LAST "
            f"to the first and close a bucket as soon as it holds cap_bytes or more (README.md, section \"{SECTION}\")")


@pytest.mark.parametrize("p", WORLD)
def test_every_rank_starts_from_rank_0(p):
    payload, out = RUN(p)
    for rank in range(p):
        for i, (got, want) in enumerate(zip(out[rank]["after_init"], payload["init"][0])):
            assert torch.equal(got, want), (
                f"rank {rank} of {p}: parameter {i} after BucketedDDP(...) differs from rank 0's; the constructor "
                f"broadcasts rank 0's parameters (README.md, section \"{SECTION}\")")


@pytest.mark.parametrize("p", WORLD)
def test_gradients_equal_single_process(p):
    payload, out = RUN(p)
    want = _single_process_grads(payload, p)
    for rank in range(p):
        for it in range(ITERATIONS):
            for i, (got, w) in enumerate(zip(out[rank]["iterations"][it]["grads"], want[it])):
                assert got is not None, f"rank {rank}: parameter {i} has no .grad after finish()"
                err = float((got - w).abs().max())
                assert err <= 1e-10 * max(1.0, float(w.abs().max())), (
                    f"rank {rank} of {p}, iteration {it + 1}, parameter {i}: gradient differs from the single-process "
                    f"full-batch gradient by {err:.3g} (x{float(got.abs().sum() / w.abs().sum()):.3g} in size): "
                    f"average over ranks, not the sum (README.md, section \"{SECTION}\")")


@pytest.mark.parametrize("p", WORLD)
def test_finish_copies_into_the_existing_grads(p):
    _payload, out = RUN(p)
    for rank in range(p):
        for it in range(ITERATIONS):
            for i, kept in enumerate(out[rank]["iterations"][it]["grads_kept"]):
                what = "another tensor" if not kept["same_object"] else "the same tensor on new storage"
                assert kept["same_object"] and kept["same_storage"], (
                    f"rank {rank} of {p}, iteration {it + 1}, parameter {i}: after finish() .grad is {what}; copy "
                    f"the averaged results back INTO the .grad tensors backward made (grad.copy_(...)), do not "
                    f"rebind .grad (or .grad.data) to a slice of the bucket buffer or a new tensor "
                    f"(README.md, section \"{SECTION}\")")


@pytest.mark.parametrize("p", WORLD)
def test_one_all_reduce_per_bucket(p):
    payload, out = RUN(p)
    sizes = _param_bytes()
    buckets = refs.buckets(sizes, payload["cap_bytes"])
    want = [sum(sizes[i] for i in b) for b in buckets]
    got = _launches(out[0]["iterations"][0]["log"])
    assert got == want, (
        f"cap_bytes={payload['cap_bytes']}, parameter bytes {sizes}: all-reduces of {got} bytes in the first "
        f"iteration; expected one per bucket {buckets} (reverse order), of {want} bytes, in bucket order "
        f"(README.md, section \"{SECTION}\")")


@pytest.mark.parametrize("p", WORLD)
def test_buckets_launch_during_backward_as_they_fill(p):
    payload, out = RUN(p)
    sizes = _param_bytes()
    buckets = refs.buckets(sizes, payload["cap_bytes"])
    nbytes = [sum(sizes[i] for i in b) for b in buckets]
    for rank in range(p):   # every rank issues the same all-reduces in the same order
        log = [e for e in out[rank]["iterations"][0]["log"] if e[0] in ("ready", "all_reduce", "backward-done")]
        want = _expected_interleaving(log, buckets, nbytes)
        assert log == want, (
            f"rank {rank} of {p}: gradient-ready events and all-reduce launches (first iteration) were {log}; "
            f"expected {want}: each bucket "
            f"launches right after the gradient that completes it (and every bucket before it), during backward, "
            f"not after it (README.md, section \"{SECTION}\")")


@pytest.mark.parametrize("p", WORLD)
def test_second_iteration_buckets_again(p):
    payload, out = RUN(p)
    sizes = _param_bytes()
    buckets = refs.buckets(sizes, payload["cap_bytes"])
    nbytes = [sum(sizes[i] for i in b) for b in buckets]
    log = [e for e in out[0]["iterations"][1]["log"] if e[0] in ("ready", "all_reduce", "backward-done")]
    want = _expected_interleaving(log, buckets, nbytes)
    assert log == want, (
        f"second iteration: events {log}, expected {want}: finish() must leave the buckets ready for the next "
        f"backward (README.md, section \"{SECTION}\")")
