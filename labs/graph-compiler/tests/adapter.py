"""The only door from the grader to the learner's code (workspace modules capture, passes, fusion,
onnx_export, compile_reading). Every function below runs in the learner process and sends back plain
data only: node tables ([op, target_name] rows), tensors, numbers, file bytes. The tests decide."""

from __future__ import annotations

from roadmap_cli import grading_kit as kit

learner_side = kit.learner_side


def _facts(gm, inputs, seed):
    """What the grader reads of a graph after a pass: its node table, its outputs (global RNG seeded
    with `seed` first, so random nodes draw the same numbers as the unoptimized graph did), whether it
    lints, and whether gm.code is the code of gm.graph (recompiled)."""
    import torch

    import graphs

    lint = None
    try:
        gm.graph.lint()
    except Exception as exc:  # noqa: BLE001 - reported as data
        lint = f"{type(exc).__name__}: {exc}"
    torch.manual_seed(seed)
    out = gm(*inputs)
    return {"table": graphs.node_table(gm), "out": list(out), "lint": lint,
            "recompiled": gm.code == gm.graph.python_code("self").src}


class _NoBuiltinDCE:
    """Graph.eliminate_dead_code raises while learner passes run (part 2 writes that pass)."""

    def __enter__(self):
        import torch.fx as fx

        self.saved = fx.Graph.eliminate_dead_code

        def refuse(*_a, **_k):
            raise RuntimeError("Graph.eliminate_dead_code called: part 2 writes that pass itself "
                               "(README.md, section \"Part 2: constant folding, DCE, CSE\")")
        fx.Graph.eliminate_dead_code = refuse

    def __exit__(self, *exc):
        import torch.fx as fx

        fx.Graph.eliminate_dead_code = self.saved
        return False


@learner_side(timeout_s=60)
def run_pass(module: str, name: str, specs: list, input_seeds: list, rng_seed: int) -> list:
    """Build each spec's graph, run learner `module.name` on it, report _facts (or the error)."""
    import graphs

    fn = getattr(kit.learner_module(module), name)
    results = []
    for spec, seed in zip(specs, input_seeds):
        gm = graphs.build(spec)
        inputs = graphs.make_inputs(spec, seed)
        try:
            with _NoBuiltinDCE():
                got = fn(gm)
            res = _facts(got, inputs, rng_seed)
            res["same_object"] = got is gm
            res["error"] = None
        except Exception as exc:  # noqa: BLE001 - reported as data, the test names the graph
            res = {"error": f"{type(exc).__name__}: {exc}"}
        results.append(res)
    return results


@learner_side(timeout_s=30)
def fused_linear_gelu(x, w, b):
    return kit.learner_module("fusion").fused_linear_gelu(x, w, b)


@learner_side(timeout_s=60)
def capture_facts(dims: list, state: dict, x, dtype) -> dict:
    """CaptureNet(*dims) with `state`, in `dtype`: capture it, run the GraphModule, propagate shapes."""
    import torch

    import graphs
    import models

    model = models.CaptureNet(*dims)
    model.load_state_dict(state)
    model = model.to(dtype)
    cap = kit.learner_module("capture")
    gm = cap.capture(model)
    out = [t.detach() for t in gm(x)]
    facts = cap.propagate_shapes(gm, x)
    meta = {n.name: [n.meta.get("shape", "missing"), n.meta.get("dtype", "missing")] for n in gm.graph.nodes
            if n.op != "output"}
    return {"table": graphs.node_table(gm), "out": out, "facts": facts, "order": list(facts),
            "meta": meta, "is_graph_module": isinstance(gm, torch.fx.GraphModule)}


@learner_side(timeout_s=90)
def onnx_facts(dims: list, state: dict, example, xs: list) -> dict:
    """OnnxNet(*dims) with `state`, left in TRAIN mode: export it, read the file back, run it on each x."""
    import os
    import tempfile

    import models

    model = models.OnnxNet(*dims)
    model.load_state_dict(state)
    model.train()
    mod = kit.learner_module("onnx_export")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.onnx")
        returned = mod.export_onnx(model, example, path)
        with open(path, "rb") as f:
            data = f.read()
        # An external-data file next to the model would hold the weights: the grader wants one file.
        outs = [mod.run_onnx(path, x) for x in xs]
        # A file of the grader's own whose input is not named x: run_onnx must ask the session for the name.
        other = os.path.join(tmp, "other.onnx")
        _write_other_input_name_file(other, xs[0].shape[1])
        try:
            other_outs = [mod.run_onnx(other, x) for x in xs]
        except Exception as exc:  # noqa: BLE001 - reported as data: only the input-name test fails on it
            other_outs = f"{type(exc).__name__}: {exc}"
    return {"bytes": data, "returned": returned == path, "outs": outs, "other_outs": other_outs}


OTHER_INPUT_NAME = "features"


def _write_other_input_name_file(path: str, d_in: int) -> None:
    """y = 2 * features + 1 (opset 18, a symbolic batch), plus a second output: run_onnx returns the first."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    two = numpy_helper.from_array(np.array(2.0, dtype=np.float32), "two")
    one = numpy_helper.from_array(np.array(1.0, dtype=np.float32), "one")
    nodes = [helper.make_node("Mul", [OTHER_INPUT_NAME, "two"], ["doubled"]),
             helper.make_node("Add", ["doubled", "one"], ["y"]),
             helper.make_node("Neg", [OTHER_INPUT_NAME], ["second"])]
    shape = ["batch", d_in]
    graph = helper.make_graph(nodes, "other_input_name",
                              [helper.make_tensor_value_info(OTHER_INPUT_NAME, TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape),
                               helper.make_tensor_value_info("second", TensorProto.FLOAT, shape)],
                              initializer=[two, one])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), path)


@learner_side(timeout_s=90)
def compile_facts(cases: list) -> list:
    """compile_facts on models.FUNCTIONS[name] for each (name, first_args, second_args); op_names too.
    torch._dynamo.explain is refused while it runs: the facts come from a backend of the learner's."""
    import torch._dynamo

    import models

    mod = kit.learner_module("compile_reading")
    saved = torch._dynamo.explain

    def refuse(*_a, **_k):
        raise RuntimeError("torch._dynamo.explain called: part 5 records the graphs with a backend of your "
                           "own (README.md, section \"Part 5: reading what torch.compile captured\")")
    torch._dynamo.explain = refuse
    results = []
    try:
        for name, first, second in cases:
            got = mod.compile_facts(models.FUNCTIONS[name], tuple(first), tuple(second))
            results.append({k: got[k] for k in ("graphs_first", "graphs_second", "out_first", "out_second")})
    finally:
        torch._dynamo.explain = saved
    return results


@learner_side(timeout_s=30)
def op_names_of_modules() -> list:
    """op_names on a traced module whose submodules are called: call_module nodes (targets "proj", "act")."""
    import torch

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(3, 4)
            self.act = torch.nn.GELU()

        def forward(self, x):
            return self.act(self.proj(x)) + 1

    return kit.learner_module("compile_reading").op_names(torch.fx.symbolic_trace(Net()))


@learner_side(timeout_s=30)
def op_names_of(spec: dict) -> list:
    import graphs

    return kit.learner_module("compile_reading").op_names(graphs.build(spec))
