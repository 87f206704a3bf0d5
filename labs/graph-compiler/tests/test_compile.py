"""Part 5: what TorchDynamo captured for models.FUNCTIONS, as the learner's recording backend reports it,
against the grader's own recording backend run in the grader process on the same inputs."""

from __future__ import annotations

import torch

import adapter
import models
import refs

SECTION = "Part 5: reading what torch.compile captured"


def _cases():
    r = refs.rng("compile")
    g = refs.gen(r)
    d_in, d_out = r.choice([3, 5]), r.choice([2, 4])
    b1, b2 = r.choice([2, 3]), r.choice([5, 6])
    w = torch.randn(d_in, d_out, generator=g)
    x1, x2 = torch.randn(b1, d_in, generator=g), torch.randn(b2, d_in, generator=g)
    # The threshold sits far from relu(x @ w).mean() on one side: the branch taken is the seed's choice.
    threshold = r.choice([-5.0, 50.0])
    return [("branchy", [x1, w, threshold], [x2, w, threshold]), ("chatty", [x1], [x2]),
            ("straight", [x1, w], [x2, w])]


def _grader_facts(name, first, second):
    import torch._dynamo

    torch._dynamo.reset()
    seen = []

    def rec(gm, _example):
        seen.append({"ops": [getattr(n.target, "__name__", n.target) if n.op == "call_function" else n.target
                             for n in gm.graph.nodes if n.op in ("call_function", "call_method")],
                     "inputs": len([n for n in gm.graph.nodes if n.op == "placeholder"])})
        return gm.forward
    f = torch.compile(models.FUNCTIONS[name], backend=rec)
    out1 = f(*first)
    n1 = len(seen)
    out2 = f(*second)
    return {"graphs_first": seen[:n1], "graphs_second": seen[n1:], "out_first": out1, "out_second": out2}


def _run():
    cases = _cases()
    got = adapter.compile_facts(cases)
    want = [_grader_facts(*c) for c in cases]
    return cases, got, want


RUN = refs.Cached(_run)


def _label(case):
    name, first, second = case
    return f"compile_facts({name}) called on x {tuple(first[0].shape)} then x {tuple(second[0].shape)}"


def test_graphs_and_their_ops():
    cases, got, want = RUN()
    for case, g, w in zip(cases, got, want):
        gops, wops = [x["ops"] for x in g["graphs_first"]], [x["ops"] for x in w["graphs_first"]]
        assert gops == wops, (f"{_label(case)}: first call's graphs (ops) {gops}, expected {wops} "
                              f"(README.md, section \"{SECTION}\")")
        refs.close(g["out_first"], w["out_first"], f"{_label(case)}: the compiled function's first output", SECTION)


def test_inputs_per_graph():
    cases, got, want = RUN()
    for case, g, w in zip(cases, got, want):
        for key in ("graphs_first", "graphs_second"):
            gi, wi = [x["inputs"] for x in g[key]], [x["inputs"] for x in w[key]]
            assert gi == wi, (f"{_label(case)}: {key} placeholders per graph {gi}, expected {wi} "
                              f"(README.md, section \"{SECTION}\")")


def test_second_call_reports_only_its_recompiles():
    cases, got, want = RUN()
    for case, g, w in zip(cases, got, want):
        gops, wops = [x["ops"] for x in g["graphs_second"]], [x["ops"] for x in w["graphs_second"]]
        assert gops == wops, (f"{_label(case)}: second call's graphs (ops) {gops}, expected {wops}: only the graphs "
                              f"Dynamo captured during that call (README.md, section \"{SECTION}\")")
        refs.close(g["out_second"], w["out_second"], f"{_label(case)}: the compiled function's second output", SECTION)


def test_op_names_rules():
    r = refs.rng("op-names")
    b = refs.SpecBuilder(r)
    x = b.inp("x", [2, 3])
    c = b.attr([3])
    h = b.call("add", x, c)
    h = b.call("sum", h, op="call_method", dim=0)
    h = b.call("relu", h)
    spec = b.spec([h])
    got = adapter.op_names_of(spec)
    assert got == ["add", "sum", "relu"], (f"op_names on x -> get_attr c0 -> add -> .sum(dim=0) -> relu: {got}, "
                                           f"expected ['add', 'sum', 'relu'] (README.md, section \"{SECTION}\")")
