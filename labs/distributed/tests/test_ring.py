"""Part 1: ring reduce-scatter, all-gather and all-reduce from comm.send/comm.recv
on 2, 3 and 4 gloo ranks, against the grader's sums and torch.distributed's
collectives, with every message counted."""

from __future__ import annotations

import pytest
import torch

from roadmap_cli import grading_kit as kit

import adapter
import refs

SECTION = "Part 1: ring collectives"
WORLD = [2, 3, 4]


def _cases(p: int) -> list[dict]:
    r = refs.rng(f"ring-{p}")
    g = refs.gen(r)
    even = p * r.randint(3, 6)
    uneven = p * r.randint(2, 5) + r.randint(1, p - 1)
    gather_numel = p * r.randint(2, 4) + r.randint(1, p - 1)
    sizes = refs.chunk_sizes(gather_numel, p)
    # Fewer elements than ranks: some chunks are empty, and the ring still sends them (zero-byte messages).
    tiny = r.randint(1, p - 1)
    tiny_sizes = refs.chunk_sizes(tiny, p)
    return [
        {"op": "all_reduce", "inputs": [torch.randn(even, 2, generator=g, dtype=torch.float64) for _ in range(p)]},
        {"op": "all_reduce", "inputs": [torch.randn(uneven, generator=g) for _ in range(p)]},
        {"op": "reduce_scatter", "inputs": [torch.randn(uneven + 1, generator=g, dtype=torch.float64) for _ in range(p)]},
        {"op": "all_gather", "numel": gather_numel,
         "inputs": [torch.randn(sizes[i], generator=g, dtype=torch.float64) for i in range(p)]},
        {"op": "all_reduce", "tiny": True, "inputs": [torch.randn(tiny, generator=g, dtype=torch.float64) for _ in range(p)]},
        {"op": "reduce_scatter", "tiny": True,
         "inputs": [torch.randn(tiny, generator=g, dtype=torch.float64) for _ in range(p)]},
        {"op": "all_gather", "numel": tiny, "tiny": True,
         "inputs": [torch.randn(tiny_sizes[i], generator=g, dtype=torch.float64) for i in range(p)]},
    ]


def _run(p: int):
    cases = _cases(p)
    results = adapter.run_ranks("ring", p, cases)
    refs.raise_errors(results, SECTION)
    return cases, {rank: res["out"] for rank, res in results.items()}


RUN = kit.PerSeedCache(_run)


def _close(got, want, what):
    tol = 1e-5 if want.dtype == torch.float32 else 1e-12
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype}, expected {want.dtype} (README.md, section \"{SECTION}\")"
    assert tuple(got.shape) == tuple(want.shape), (
        f"{what}: shape {tuple(got.shape)}, expected {tuple(want.shape)} (README.md, section \"{SECTION}\")")
    err = float((got.double() - want.double()).abs().max()) if want.numel() else 0.0
    assert err <= tol * max(1.0, float(want.double().abs().max())), (
        f"{what}: max |diff| {err:.3g} (README.md, section \"{SECTION}\")")


@pytest.mark.parametrize("p", WORLD)
def test_all_reduce_sums_in_place(p):
    cases, out = RUN(p)
    for c, case in enumerate(cases):
        if case["op"] != "all_reduce":
            continue
        want = torch.stack([x.double() for x in case["inputs"]]).sum(0).to(case["inputs"][0].dtype)
        for rank in range(p):
            res = out[rank][c]
            label = f"ring_all_reduce on rank {rank} of {p}, shape {tuple(want.shape)} {want.dtype}"
            _close(res["out"], want, label)
            _close(res["out"], res["torch"], label + " vs torch.distributed.all_reduce")
            assert res["same_object"], f"{label}: returned a new tensor; it sums IN PLACE and returns its argument"
            assert res["same_storage"], (f"{label}: the argument's storage was replaced (`tensor.data = ...`); the sum "
                                         f"is written IN PLACE into its own memory (`tensor.copy_(...)`), which every "
                                         f"view of it sees")
            _close(res["input_after"], want, label + ": the argument after the call (in place)")


@pytest.mark.parametrize("p", WORLD)
def test_reduce_scatter_returns_chunk_rank(p):
    cases, out = RUN(p)
    c, case = next((c, k) for c, k in enumerate(cases) if k["op"] == "reduce_scatter")
    total = torch.stack(case["inputs"]).sum(0)
    for rank in range(p):
        res = out[rank][c]
        label = f"ring_reduce_scatter on rank {rank} of {p}, numel {total.numel()}"
        _close(res["out"], total.tensor_split(p)[rank], label + " (chunk `rank` of tensor_split(sum, p))")
        _close(res["out"], res["torch"], label + " vs torch.distributed's reduce-scatter")


@pytest.mark.parametrize("p", WORLD)
def test_reduce_scatter_leaves_its_input(p):
    cases, out = RUN(p)
    c = next(c for c, k in enumerate(cases) if k["op"] == "reduce_scatter")
    for rank in range(p):
        res = out[rank][c]
        assert torch.equal(res["input_after"], res["input_before"]), (
            f"ring_reduce_scatter changed its input tensor on rank {rank} of {p}; work on a copy "
            f"(README.md, section \"{SECTION}\")")


@pytest.mark.parametrize("p", WORLD)
def test_all_gather_concatenates_chunks(p):
    cases, out = RUN(p)
    c, case = next((c, k) for c, k in enumerate(cases) if k["op"] == "all_gather")
    want = torch.cat(case["inputs"])
    for rank in range(p):
        res = out[rank][c]
        label = f"ring_all_gather on rank {rank} of {p}, numel {want.numel()}"
        _close(res["out"], want, label)
        _close(res["out"], res["torch"], label + " vs torch.distributed's all-gather")
        assert torch.equal(res["input_after"], res["input_before"]), f"{label}: changed its input chunk"


@pytest.mark.parametrize("p", WORLD)
def test_all_reduce_bytes_match_the_ring_formula(p):
    cases, out = RUN(p)
    case = cases[0]   # numel divisible by p
    n, b = case["inputs"][0].numel(), case["inputs"][0].element_size()
    want = 2 * (p - 1) * n * b // p
    for rank in range(p):
        log = out[rank][0]["log"]
        sent = sum(e[2] for e in log if e[0] == "send")
        got = sum(e[2] for e in log if e[0] == "recv")
        assert sent == want and got == want, (
            f"ring_all_reduce of {n} float64 on rank {rank} of {p}: sent {sent} and received {got} bytes; the ring "
            f"moves 2(p-1)/p * N * bytes = {want} each way (README.md, section \"{SECTION}\")")


@pytest.mark.parametrize("p", WORLD)
def test_messages_follow_the_ring_schedule(p):
    _check_schedule(p, tiny=False)


@pytest.mark.parametrize("p", WORLD)
def test_messages_follow_the_ring_schedule_with_fewer_elements_than_ranks(p):
    """numel < p leaves some chunks empty; each rank still sends its p - 1 chunks per phase."""
    _check_schedule(p, tiny=True)


def _check_schedule(p, tiny):
    cases, out = RUN(p)
    for c, case in enumerate(cases):
        if bool(case.get("tiny")) != tiny:
            continue
        numel = case.get("numel") or case["inputs"][0].numel()
        sizes = refs.chunk_sizes(numel, p)
        b = case["inputs"][0].element_size()
        for rank in range(p):
            log = out[rank][c]["log"]
            sends = [(e[1], e[2]) for e in log if e[0] == "send"]
            recvs = [(e[1], e[2]) for e in log if e[0] == "recv"]
            want = [((rank + 1) % p, sizes[i] * b) for i in refs.ring_sends(case["op"], numel, p, rank)]
            want_recv = [((rank - 1) % p, sizes[(i - 1) % p] * b) for i in refs.ring_sends(case["op"], numel, p, rank)]
            assert sends == want and recvs == want_recv, (
                f"{case['op']} of {numel} elements on rank {rank} of {p}: sent (to rank, bytes) {sends} and received "
                f"(from rank, bytes) {recvs}; the ring sends chunk (rank - step - 1) % p to rank + 1 in reduce-scatter "
                f"and chunk (rank - step) % p in all-gather, expected {want} and {want_recv} "
                f"(README.md, section \"{SECTION}\")")
