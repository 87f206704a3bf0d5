"""Part 4: export OnnxNet (handed over in train mode) to ONNX; the grader reads the file with `onnx`,
runs it with its own onnxruntime session and compares with the eval-mode model in torch."""

from __future__ import annotations

import onnx
import onnxruntime as ort
import torch

from roadmap_cli import grading_kit as kit

import adapter
import models
import refs

SECTION = "Part 4: ONNX export and onnxruntime"


def _run():
    r = refs.rng("onnx")
    g = refs.gen(r)
    dims = [r.choice([3, 5]), r.choice([4, 6]), r.choice([2, 3])]
    model = models.OnnxNet(*dims)
    state = {k: (torch.randn(v.shape, generator=g) if v.is_floating_point() else v)
             for k, v in model.state_dict().items()}
    state["bn.running_var"] = state["bn.running_var"].abs() + 0.5
    model.load_state_dict(state)
    model.eval()
    example = torch.randn(r.choice([2, 4]), dims[0], generator=g)
    # batch 1 and an odd batch the export never saw; then every other float dtype (run_onnx casts to float32):
    # float64, float16 and bfloat16 (which numpy has no dtype for: `.numpy()` first fails on it)
    xs = [torch.randn(1, dims[0], generator=g), torch.randn(7, dims[0], generator=g),
          torch.randn(3, dims[0], generator=g, dtype=torch.float64),
          torch.randn(2, dims[0], generator=g).to(torch.float16), torch.randn(2, dims[0], generator=g).to(torch.bfloat16)]
    got = adapter.onnx_facts(dims, state, example, xs)
    proto = onnx.load_from_string(got["bytes"])
    session = ort.InferenceSession(got["bytes"], providers=["CPUExecutionProvider"])
    with torch.no_grad():
        want = [model(x.float()) for x in xs]
    return {"got": got, "proto": proto, "session": session, "xs": xs, "want": want, "example": example}


RUN = kit.PerSeedCache(_run)


def test_onnx_file_matches_eval_torch():
    c = RUN()
    name = c["session"].get_inputs()[0].name
    for x, w in zip(c["xs"], c["want"]):
        got = torch.from_numpy(c["session"].run(None, {name: x.float().numpy()})[0])
        refs.close(got, w, f"onnxruntime on your file, x {tuple(x.shape)}, against OnnxNet in eval mode", SECTION)


def test_input_and_output_names():
    p = RUN()["proto"]
    ins, outs = [i.name for i in p.graph.input], [o.name for o in p.graph.output]
    assert ins == ["x"] and outs == ["y"], (f"export_onnx: graph inputs {ins} and outputs {outs}, expected ['x'] "
                                            f"and ['y'] (README.md, section \"{SECTION}\")")


def test_opset_18():
    p = RUN()["proto"]
    versions = {o.domain or "ai.onnx": o.version for o in p.opset_import}
    assert versions.get("ai.onnx") == 18, (f"export_onnx: opset imports {versions}, expected the default domain "
                                           f"at version 18 (README.md, section \"{SECTION}\")")


def test_dynamic_batch_axis():
    c = RUN()
    p = c["proto"]
    # x is (batch, d_in), y is (batch, d_out): only dim 0 is symbolic, the feature sizes are fixed numbers.
    sizes = [c["xs"][0].shape[1], c["want"][0].shape[1]]
    for v, size in zip(list(p.graph.input) + list(p.graph.output), sizes):
        dims = [d.dim_param if d.HasField("dim_param") else d.dim_value for d in v.type.tensor_type.shape.dim]
        assert dims == ["batch", size], (f"export_onnx: the shape of {v.name!r} is {dims}, expected ['batch', {size}]: "
                                         f"dim 0 the symbolic dimension 'batch', the feature size fixed "
                                         f"(README.md, section \"{SECTION}\")")


def test_run_onnx_float32_first_output():
    c = RUN()
    assert c["got"]["returned"], "export_onnx: did not return the path it wrote"
    name = c["session"].get_inputs()[0].name
    for x, got in zip(c["xs"], c["got"]["outs"]):
        want = c["session"].run(None, {name: x.float().numpy()})[0]
        assert getattr(got, "dtype", None) == want.dtype and got.shape == want.shape, (
            f"run_onnx(path, x {tuple(x.shape)} {x.dtype}): {getattr(got, 'dtype', type(got))} {getattr(got, 'shape', '')}, "
            f"expected float32 {want.shape} (README.md, section \"{SECTION}\")")
        refs.close(torch.from_numpy(got), torch.from_numpy(want), f"run_onnx(path, x {tuple(x.shape)} {x.dtype}) "
                   "against the grader's onnxruntime session", SECTION, tol=1e-6)




def test_run_onnx_reads_the_input_name():
    # The grader's own file, input named "features" (not x): run_onnx feeds under the session's input name.
    c = RUN()
    if isinstance(c["got"]["other_outs"], str):
        refs.fail(f"run_onnx on a file whose input is named {adapter.OTHER_INPUT_NAME!r} raised "
                  f"{c['got']['other_outs']}: feed x under the session's input name", SECTION)
    for x, got in zip(c["xs"], c["got"]["other_outs"]):
        want = (x.float() * 2 + 1).numpy()
        assert getattr(got, "dtype", None) == want.dtype and got.shape == want.shape, (
            f"run_onnx on a file whose input is named {adapter.OTHER_INPUT_NAME!r}, x {tuple(x.shape)} {x.dtype}: "
            f"{getattr(got, 'dtype', type(got))} {getattr(got, 'shape', '')}, expected float32 {want.shape}: the "
            f"first output (README.md, section \"{SECTION}\")")
        refs.close(torch.from_numpy(got), torch.from_numpy(want), f"run_onnx on a file whose input is named "
                   f"{adapter.OTHER_INPUT_NAME!r} (feed x under the input's name), x {tuple(x.shape)} {x.dtype}",
                   SECTION, tol=1e-6)
