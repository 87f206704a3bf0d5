"""Part 3: Megatron tensor parallelism on 2 gloo processes (README.md, "Part 3")."""

from __future__ import annotations

import random

import pytest
import torch

import adapter
import grader_engine as ge
from conftest import free_port
from roadmap_cli import grading_kit as kit

CONFIGS = {
    "small": dict(d_model=64, n_heads=4, n_layers=3, d_ff=192, max_seq_len=64),
    "lab": dict(d_model=128, n_heads=4, n_layers=2, d_ff=512, max_seq_len=256),
}


def _weights(name: str, cfg: dict) -> dict:
    return ge.init_weights(ge.ModelConfig(**cfg), kit.seeded(f"tp-{name}") % (1 << 31))


@pytest.mark.parametrize("world_size,rank", [(2, 0), (2, 1), (4, 3)])
def test_shards_are_megatron_slices(world_size, rank):
    cfg = CONFIGS["small"]
    w = _weights("shard", cfg)
    got = adapter.shard_weights(w, cfg, rank, world_size)
    d, f = cfg["d_model"] // world_size, cfg["d_ff"] // world_size
    for name, full in w.items():
        kind = name.rsplit(".", 1)[-1]
        want = {"wq": full[rank * d:(rank + 1) * d], "wk": full[rank * d:(rank + 1) * d],
                "wv": full[rank * d:(rank + 1) * d], "wo": full[:, rank * d:(rank + 1) * d],
                "w1": full[rank * f:(rank + 1) * f], "w2": full[:, rank * f:(rank + 1) * f]}.get(kind, full)
        assert name in got, f"shard_weights lost the weight {name!r}"
        assert tuple(got[name].shape) == tuple(want.shape) and torch.equal(got[name], want), (
            f"rank {rank} of {world_size}, {name} {tuple(full.shape)}: expected the slice of shape "
            f"{tuple(want.shape)} ({'rows' if kind in ('wq', 'wk', 'wv', 'w1') else 'columns' if kind in ('wo', 'w2') else 'replicated'}), "
            f"got shape {tuple(got[name].shape)} with other values (README.md, section \"Part 3\")")


def test_shard_refuses_indivisible_world_size():
    # n_heads 4 with world_size 3 (d_ff 192 IS divisible by 3): heads cannot be split.
    cfg = CONFIGS["small"]
    with pytest.raises(ValueError):
        adapter.shard_weights(_weights("indivisible", cfg), cfg, 0, 3)
    cfg = dict(CONFIGS["small"], d_ff=190)   # heads divide by 2, d_ff 190 does not divide by 4
    with pytest.raises(ValueError):
        adapter.shard_weights(_weights("indivisible-ff", cfg), cfg, 0, 4)


@pytest.mark.parametrize("config", list(CONFIGS))
def test_two_process_forward_equals_single_process(config):
    cfg = CONFIGS[config]
    rng = random.Random(kit.seeded(f"tp-ids-{config}"))
    w = _weights(config, cfg)
    ids = [rng.randrange(len(ge.ALPHABET)) for _ in range(rng.randint(5, 40))]
    want = ge.forward(w, ge.ModelConfig(**cfg), ids)
    results = adapter.run_tensor_parallel(w, cfg, ids, 2, free_port())
    per_call = len(ids) * cfg["d_model"] * 4
    for rank in (0, 1):
        res = results[rank]
        assert res["error"] is None, f"rank {rank} failed: {res['error']} (README.md, section \"Part 3\")"
        calls = res["allreduce_bytes"]
        assert len(calls) == 2 * cfg["n_layers"], (
            f"rank {rank} called all_reduce {len(calls)} times in one forward of {cfg['n_layers']} layers; Megatron "
            f"needs exactly {2 * cfg['n_layers']}: one after the attention block's row-parallel Wo and one after "
            "the MLP's row-parallel W2 (README.md, section \"Part 3\")")
        assert all(c == per_call for c in calls), (
            f"rank {rank}: all-reduce payloads {calls} bytes; each should be the (T, d_model) fp32 partial sum = "
            f"{per_call} bytes")
        got = res["logits"]
        assert got is not None and tuple(got.shape) == tuple(want.shape), (
            f"rank {rank}: logits of shape {None if got is None else tuple(got.shape)}, expected {tuple(want.shape)}")
        err = (got - want).abs().max().item()
        assert err <= 1e-5 * max(1.0, want.abs().max().item()), (
            f"rank {rank}: tensor-parallel logits differ from the single-process forward by {err:.2e} "
            "(tolerance 1e-5) (README.md, section \"Part 3\")")


def test_allreduce_bytes_per_token_formula():
    for cfg in CONFIGS.values():
        for dtype_bytes in (2, 4):
            got = adapter.allreduce_bytes_per_token(cfg, dtype_bytes)
            want = 2 * cfg["n_layers"] * cfg["d_model"] * dtype_bytes
            assert got == want, (f"allreduce_bytes_per_token({cfg}, {dtype_bytes}): expected {want} "
                                 "(2 all-reduces per layer of d_model values), got {got}")
