"""Part 3: matmul + bias + GELU fusion on random layer chains from the secret seed: outputs against the
unoptimized graph, the exact node table against the grader's matcher (refs.ref_fusion_table)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from roadmap_cli import grading_kit as kit

import adapter
import graphs
import refs

SECTION = "Part 3: fusing matmul + bias + GELU"
# Each case forces the patterns its rule is about; every case also gets 1-3 random layers.
CASES = {
    "plain": ["plain", "explicit-none"],
    "single-user": ["mm-two-users", "add-two-users", "plain"],
    "bias-first": ["bias-first", "bias-first"],
    "tanh": ["tanh", "sub", "relu", "plain"],
    "placement": ["bias-after-mm", "plain"],
}


def _run():
    r = refs.rng("fusion")
    specs = [refs.fusion_spec(r, force) for force in CASES.values()]
    seeds = [r.randrange(1 << 30) for _ in specs]
    got = adapter.run_pass("fusion", "fuse_linear_gelu", specs, seeds, 0)
    out = {}
    for key, spec, seed, res in zip(CASES, specs, seeds, got):
        gm = graphs.build(spec)
        out[key] = {"spec": spec, "got": res, "want_out": refs.run_graph(gm, graphs.make_inputs(spec, seed), 0),
                    "want_table": refs.ref_fusion_table(spec), "before": graphs.node_table(gm)}
    return out


RUN = kit.PerSeedCache(_run)


def _check(key):
    c = RUN()[key]
    label = (f"fuse_linear_gelu on a chain with layers forced to {CASES[key]} ({len(c['before'])} nodes, "
             f"x {tuple(c['spec']['inputs'][0][1])})")
    if c["got"]["error"]:
        refs.fail(f"{label} raised {c['got']['error']}", SECTION)
    if c["got"]["lint"] is not None:
        refs.fail(f"{label}: gm.graph.lint() failed after the pass: {c['got']['lint']}", SECTION)
    for k, (o, w) in enumerate(zip(c["got"]["out"], c["want_out"])):
        refs.close(o, w, f"{label}: output {k} against the unfused graph's", SECTION)
    if c["got"]["table"] != c["want_table"]:
        refs.fail(f"{label}: node table after fusion\n  got      {c['got']['table']}\n  expected "
                  f"{c['want_table']}\n  (before: {c['before']})", SECTION)
    assert c["got"]["recompiled"] and c["got"]["same_object"], (
        f"{label}: not in place, or gm.recompile() not called (README.md, section \"{SECTION}\")")


def test_fuses_every_matching_chain():
    _check("plain")


def test_only_single_user_intermediates():
    _check("single-user")


def test_bias_on_either_side_of_add():
    _check("bias-first")


def test_only_exact_gelu_and_add():
    _check("tanh")


def test_fused_node_placed_after_its_inputs():
    _check("placement")


@pytest.mark.parametrize("lead", [(1,), (3,), (2, 5)])
def test_fused_function_math(lead):
    r = refs.rng(f"fused-fn-{lead}")
    g = refs.gen(r)
    k, n = r.choice([2, 3, 5]), r.choice([4, 6, 7])
    x, w, b = torch.randn(*lead, k, generator=g), torch.randn(k, n, generator=g), torch.randn(n, generator=g)
    got = adapter.fused_linear_gelu(x, w, b)
    refs.close(got, F.gelu(x @ w + b), f"fused_linear_gelu(x {tuple(x.shape)}, w {tuple(w.shape)}, b {tuple(b.shape)})",
               SECTION)
