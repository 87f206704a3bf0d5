"""Part 1: capture CaptureNet with torch.fx and propagate shapes, against the grader's own
symbolic_trace and eager run of the same weights."""

from __future__ import annotations

import pytest
import torch
import torch.fx as fx

from roadmap_cli import grading_kit as kit

import adapter
import graphs
import models
import refs

SECTION = "Part 1: capture and shape propagation"


def _case(i: int):
    r = refs.rng(f"capture-{i}")
    g = refs.gen(r)
    dims = [r.choice([1, 3, 5]), r.choice([2, 4, 7]), r.choice([1, 3, 6])]
    model = models.CaptureNet(*dims)
    state = {k: torch.randn(v.shape, generator=g) for k, v in model.state_dict().items()}
    model.load_state_dict(state)
    # case 0: float32, batch 1, 2-D; case 1: float64, 3-D input (batch, time, features)
    dtype = torch.float32 if i == 0 else torch.float64
    lead = [1] if i == 0 else [r.choice([2, 3]), r.choice([1, 4])]
    x = torch.randn(*lead, dims[0], generator=g).to(dtype)
    return dims, state, x, dtype, model.to(dtype)


def _run(i: int):
    dims, state, x, dtype, model = _case(i)
    return adapter.capture_facts(dims, state, x, dtype), model, x


RUN = kit.PerSeedCache(_run)


def _expected(model, x) -> dict:
    """The grader's shape facts: eager values of every node of its own trace."""
    gm = fx.symbolic_trace(model)
    want = {}

    class Rec(fx.Interpreter):
        def run_node(self, node):
            v = super().run_node(node)
            if node.op != "output":
                want[node.name] = ({"shape": tuple(v.shape), "dtype": str(v.dtype)} if isinstance(v, torch.Tensor)
                                   else {"shape": None, "dtype": type(v).__name__})
            return v
    Rec(gm).run(x)
    return gm, want


@pytest.mark.parametrize("i", [0, 1])
def test_capture_is_symbolic_trace(i):
    got, model, x = RUN(i)
    gm, _ = _expected(model, x)
    assert got["is_graph_module"], "capture: did not return a torch.fx.GraphModule"
    want = graphs.node_table(gm)
    assert got["table"] == want, (f"capture(CaptureNet) on {tuple(x.shape)} {x.dtype}: node table {got['table']}, "
                                  f"expected torch.fx.symbolic_trace's {want} (README.md, section \"{SECTION}\")")
    ref = model(x)
    for k, (o, w) in enumerate(zip(got["out"], ref)):
        kit_close(o, w, f"capture(...)(x) output {k}")


def kit_close(got, want, what):
    refs.close(got, want, what, SECTION)


@pytest.mark.parametrize("i", [0, 1])
def test_shapes_every_node_in_order(i):
    got, model, x = RUN(i)
    _, want = _expected(model, x)
    assert got["order"] == list(want), (f"propagate_shapes: keys {got['order']}, expected every node but the "
                                        f"output, in graph order: {list(want)} (README.md, section \"{SECTION}\")")
    for name, w in want.items():
        if w["shape"] is None:
            continue
        s = got["facts"][name]["shape"]
        assert type(s) is tuple and all(type(d) is int for d in s) and s == w["shape"], (
            f"propagate_shapes on {tuple(x.shape)} {x.dtype}: node {name!r} shape {s!r} ({type(s).__name__}), "
            f"expected the tuple of ints {w['shape']} (README.md, section \"{SECTION}\")")


@pytest.mark.parametrize("i", [0, 1])
def test_shapes_dtypes(i):
    got, model, x = RUN(i)
    _, want = _expected(model, x)
    for name, w in want.items():
        if w["shape"] is not None:
            d = got["facts"].get(name, {}).get("dtype")
            assert d == w["dtype"], (f"propagate_shapes on {tuple(x.shape)} {x.dtype}: node {name!r} dtype {d!r}, "
                                     f"expected {w['dtype']!r} (README.md, section \"{SECTION}\")")


def test_shapes_non_tensor_values():
    got, model, x = RUN(1)
    _, want = _expected(model, x)
    ints = {n: w for n, w in want.items() if w["shape"] is None}
    assert ints, "grader: CaptureNet has no non-tensor node"
    for name, w in ints.items():
        assert got["facts"].get(name) == w, (
            f"propagate_shapes: node {name!r} (an int, from h.size(-1)) gave {got['facts'].get(name)!r}, "
            f"expected {w!r} (README.md, section \"{SECTION}\")")


@pytest.mark.parametrize("i", [0, 1])
def test_shapes_stored_in_node_meta(i):
    got, model, x = RUN(i)
    for name, fact in got["facts"].items():
        assert got["meta"].get(name) == [fact["shape"], fact["dtype"]], (
            f"propagate_shapes: node {name!r} has node.meta shape/dtype {got['meta'].get(name)!r}, expected the "
            f"returned {[fact['shape'], fact['dtype']]!r} (README.md, section \"{SECTION}\")")
