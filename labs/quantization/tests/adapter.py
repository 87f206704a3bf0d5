"""The only door from the grader to the learner's code (workspace modules w8a8,
smoothquant, int4, awq and evaluate).

Every function here runs in the learner process (@kit.learner_side) and sends back
plain data: tensors, floats, dicts of tensors. The model the learner's code works
on is the given tiny_gpt (this folder's copy, declared learner_side in lab.yaml),
built from the checkpoint the grader passes in; the tests compare the returned
data with refs.py grader-side.
"""

from __future__ import annotations

from roadmap_cli import grading_kit as kit


# Which workspace module defines each function the tests call by name.
MODULE_OF = {
    "quantize_weight_per_channel": "w8a8", "quantize_activation_per_token": "w8a8", "int8_gemm": "w8a8",
    "w8a8_linear": "w8a8", "smooth_scales": "smoothquant", "quantize_int4_groups": "int4",
    "dequantize_int4_groups": "int4", "pack_int4": "int4", "unpack_int4": "int4", "awq_search": "awq",
    "perplexity": "evaluate",
}


def _q(module: str):
    # These shapes are tiny: intra-op threads cost more in synchronisation than they save, and on
    # a busy machine they make every op several times slower. One thread, as in the grader.
    import torch

    torch.set_num_threads(1)
    return kit.learner_module(module)


def _tensors(args) -> list:
    import torch

    out = []
    for a in args:
        if isinstance(a, torch.Tensor):
            out.append(a)
        elif isinstance(a, (list, tuple)):
            out.extend(t for t in a if isinstance(t, torch.Tensor))
    return out


@kit.learner_side(timeout_s=60)
def call(fn: str, *args, **kwargs):
    """<module>.<fn>(*args, **kwargs), its tensor arguments guarded: none may change."""
    module = MODULE_OF[fn]
    with kit.inputs_unchanged(*_tensors(args), what=f"the tensor arguments of {module}.{fn}"):
        return getattr(_q(module), fn)(*args, **kwargs)


def _model(checkpoint):
    import tiny_gpt

    return tiny_gpt.load_tiny_gpt(checkpoint)


def _state(model) -> dict:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


@kit.learner_side(timeout_s=60)
def fold(ln_weight, ln_bias, weights, s):
    """fold_smoothing on a LayerNorm and Linears built from these tensors -> their new tensors."""
    import torch

    ln = torch.nn.LayerNorm(ln_weight.numel())
    lins = []
    with torch.no_grad():
        ln.weight.copy_(ln_weight)
        ln.bias.copy_(ln_bias)
        for w in weights:
            lin = torch.nn.Linear(w.shape[1], w.shape[0])
            lin.weight.copy_(w)
            lins.append(lin)
    # "In place": the same Parameters, on the same storage, hold the new values (not a rebound `.data`).
    params = [ln.weight, ln.bias, *(lin.weight for lin in lins)]
    storage = [p.data_ptr() for p in params]
    with kit.inputs_unchanged(s, what="s"):
        _q("smoothquant").fold_smoothing(ln, lins, s)
    now = [ln.weight, ln.bias, *(lin.weight for lin in lins)]
    in_place = all(a is b and a.data_ptr() == ptr for a, b, ptr in zip(params, now, storage))
    return {"ln_weight": ln.weight.detach().clone(), "ln_bias": ln.bias.detach().clone(),
            "weights": [lin.weight.detach().clone() for lin in lins], "in_place": in_place}


@kit.learner_side(timeout_s=60)
def collect_inputs(checkpoint, idx):
    """-> (the learner's dict of inputs, the number of forward hooks left on the model, logits after)."""
    import torch

    model = _model(checkpoint)
    got = _q("smoothquant").collect_inputs(model, idx)
    hooks = sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())
    with torch.no_grad():
        logits = model(idx)
    return {k: v for k, v in dict(got).items()}, hooks, logits


@kit.learner_side(timeout_s=60)
def collect_inputs_failing(checkpoint, idx):
    """collect_inputs on a pass that raises (`idx` holds a token id past the vocabulary) -> (it raised, the
    number of forward hooks left on the model)."""
    model = _model(checkpoint)
    try:
        _q("smoothquant").collect_inputs(model, idx)
        raised = False
    except Exception:  # noqa: BLE001 - the model's own IndexError, whatever the learner's code lets through
        raised = True
    return raised, sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())


@kit.learner_side(timeout_s=60)
def smooth_model(checkpoint, idx, alpha, probe):
    """smooth_model on a fresh model -> (its state dict, logits on probe)."""
    import torch

    model = _model(checkpoint)
    out = _q("smoothquant").smooth_model(model, idx, alpha)
    with torch.no_grad():
        logits = model(probe)
    return _state(model), logits, out is model


@kit.learner_side(timeout_s=60)
def quantized_logits(checkpoint, method, calib, probe, **kwargs):
    """quantize_model(fresh model, method, calib, **kwargs) -> (logits on probe, state dict, returned model is it)."""
    import torch

    model = _model(checkpoint)
    out = _q("evaluate").quantize_model(model, method, calib, **kwargs)
    with torch.no_grad():
        logits = model(probe)
    return logits, _state(model), out is model


@kit.learner_side(timeout_s=60)
def awq_model(checkpoint, calib, group_size, n_grid, probe):
    """awq_model on a fresh model -> (logits on probe, state dict)."""
    import torch

    model = _model(checkpoint)
    _q("awq").awq_model(model, calib, group_size, n_grid)
    with torch.no_grad():
        logits = model(probe)
    return logits, _state(model)
