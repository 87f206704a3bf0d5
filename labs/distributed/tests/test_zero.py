"""Part 3: ZeRO-1: each rank keeps the AdamW moments of its own shard of the
flattened parameters, steps only that shard, all-gathers the parameters, and
trains exactly like single-process torch.optim.AdamW, step for step."""

from __future__ import annotations

import pytest
import torch

from roadmap_cli import grading_kit as kit

import adapter
import refs

SECTION = "Part 3: ZeRO-1 optimizer sharding"
SIZES = [5, 7, 3]             # 5*7 + 7 + 7*3 + 3 = 66 parameters: 33 per rank on 2, 17/17/16/16 on 4
WORLD = [2, 4]
STEPS = 3
# float64 throughout: the only difference from torch.optim.AdamW is the order of the gradient sum over ranks
# (and sqrt(v / bc2) vs sqrt(v) / sqrt(bc2)), a few ulps per step; lr * steps bounds the drift far below 1e-9.
TOL = 1e-9


def _setup(p: int):
    r = refs.rng(f"zero-{p}")
    g = refs.gen(r)
    hyper = {"lr": r.choice([0.01, 0.03]), "betas": (0.9, r.choice([0.99, 0.999])), "eps": 1e-8,
             "weight_decay": r.choice([0.05, 0.1])}
    per_rank = r.randint(2, 4)
    batches = [[(torch.randn(per_rank, SIZES[0], generator=g, dtype=torch.float64),
                 torch.randn(per_rank, SIZES[-1], generator=g, dtype=torch.float64)) for _ in range(STEPS)]
               for _ in range(p)]
    return {"sizes": SIZES, "weights": refs.random_weights(SIZES, g), "batches": batches, "hyper": hyper}


def _run(p: int):
    payload = _setup(p)
    results = adapter.run_ranks("zero", p, payload)
    refs.raise_errors(results, SECTION)
    return payload, {rank: res["out"] for rank, res in results.items()}


RUN = kit.PerSeedCache(_run)


def _reference(payload, p):
    """torch.optim.AdamW on the full batch: flat parameters and flat moments after each step."""
    model = refs.mlp(SIZES, payload["weights"])
    opt = torch.optim.AdamW(model.parameters(), **payload["hyper"])
    out = []
    for step in range(STEPS):
        x = torch.cat([payload["batches"][r][step][0] for r in range(p)])
        y = torch.cat([payload["batches"][r][step][1] for r in range(p)])
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        params = list(model.parameters())
        out.append({"params": torch.cat([q.detach().reshape(-1) for q in params]),
                    "exp_avg": torch.cat([opt.state[q]["exp_avg"].reshape(-1) for q in params]),
                    "exp_avg_sq": torch.cat([opt.state[q]["exp_avg_sq"].reshape(-1) for q in params])})
    return out


def _bounds(numel, p, rank):
    sizes = refs.chunk_sizes(numel, p)
    return sum(sizes[:rank]), sum(sizes[:rank + 1])


@pytest.mark.parametrize("p", WORLD)
def test_training_matches_adamw_step_for_step(p):
    payload, out = RUN(p)
    want = _reference(payload, p)
    for step in range(STEPS):
        for rank in range(p):
            got = out[rank][step]["params"]
            err = float((got - want[step]["params"]).abs().max())
            assert err <= TOL, (
                f"rank {rank} of {p}, after step {step + 1}: parameters differ from torch.optim.AdamW "
                f"({payload['hyper']}) on the full batch by {err:.3g} at most (README.md, section \"{SECTION}\")")


@pytest.mark.parametrize("p", WORLD)
def test_every_rank_holds_every_updated_parameter(p):
    payload, out = RUN(p)
    for step in range(STEPS):
        for rank in range(1, p):
            assert torch.equal(out[rank][step]["params"], out[0][step]["params"]), (
                f"after step {step + 1}, rank {rank}'s parameters differ from rank 0's: every rank steps its shard, "
                f"then the shards are all-gathered (README.md, section \"{SECTION}\")")
        lo, hi = _bounds(out[0][step]["params"].numel(), p, p - 1)
        if step == 0:
            assert not torch.equal(out[0][0]["params"][lo:hi], torch.cat([w.reshape(-1) for w in payload["weights"]])[lo:hi]), (
                f"rank 0 never received the last rank's updated shard (README.md, section \"{SECTION}\")")


@pytest.mark.parametrize("p", WORLD)
def test_moments_are_this_ranks_shard(p):
    payload, out = RUN(p)
    want = _reference(payload, p)
    numel = want[0]["params"].numel()
    for rank in range(p):
        lo, hi = _bounds(numel, p, rank)
        assert out[rank][0]["shard"] == (lo, hi), (
            f"rank {rank} of {p}: shard {out[rank][0]['shard']}, expected {(lo, hi)}: chunk `rank` of "
            f"torch.tensor_split over the {numel} flattened parameters (README.md, section \"{SECTION}\")")
        for step in range(STEPS):
            for name in ("exp_avg", "exp_avg_sq"):
                got = out[rank][step][name]
                assert tuple(got.shape) == (hi - lo,), (
                    f"rank {rank} of {p}: {name} has shape {tuple(got.shape)}, expected ({hi - lo},): the moments "
                    f"of this rank's shard only (README.md, section \"{SECTION}\")")
                err = float((got - want[step][name][lo:hi]).abs().max())
                scale = max(1e-12, float(want[step][name][lo:hi].abs().max()))
                assert err <= 1e-9 * scale, (
                    f"rank {rank} of {p}, step {step + 1}: {name} differs from torch.optim.AdamW's state for the "
                    f"same slice by {err:.3g} (README.md, section \"{SECTION}\")")


@pytest.mark.parametrize("p", WORLD)
def test_optimizer_keeps_no_full_size_state(p):
    payload, out = RUN(p)
    numel = sum(w.numel() for w in payload["weights"])
    for rank in range(p):
        lo, hi = _bounds(numel, p, rank)
        big = {name: n for name, sizes in out[rank][-1]["kept"].items() for n in sizes if n > hi - lo}
        assert not big, (
            f"rank {rank} of {p}: the optimizer keeps tensors larger than its shard of {hi - lo} elements "
            f"({big}); ZeRO-1 keeps only the shard's state (README.md, section \"{SECTION}\")")


@pytest.mark.parametrize("p", WORLD)
def test_optimizer_keeps_no_storage_larger_than_its_shard(p):
    """A shard-sized view of a full-size buffer has the shard's shape and keeps the whole buffer:
    what counts is the storage behind each tensor, in bytes."""
    payload, out = RUN(p)
    numel = sum(w.numel() for w in payload["weights"])
    width = payload["weights"][0].element_size()
    for rank in range(p):
        lo, hi = _bounds(numel, p, rank)
        big = {name: n for name, sizes in out[rank][-1]["storage"].items() for n in sizes if n > (hi - lo) * width}
        assert not big, (
            f"rank {rank} of {p}: the optimizer keeps tensors whose storage is larger than its shard of "
            f"{(hi - lo) * width} bytes ({big} bytes): a slice of a full-size tensor keeps the whole tensor; "
            f"allocate the shard's size (README.md, section \"{SECTION}\")")
