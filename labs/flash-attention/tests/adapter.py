"""The only door from the grader to the learner's code.

Every call runs inside the guards this lab needs: the learner's inputs must
come back unchanged; the Triton parts run with SDPA, softmax and every matmul
flavour disabled and must launch at least one Triton kernel.
"""

from __future__ import annotations

import contextlib
from typing import Iterator

from roadmap_cli import grading_kit as kit

# Inside the learner's Triton forward/backward nothing of torch's may do the math.
KERNEL_FORBIDDEN = ("sdpa", "softmax", "matmul", "mm", "bmm", "einsum")


def _module(name: str):
    return kit.learner_module(name)


def reference_attention(q, k, v, causal: bool, scale):
    with kit.forbid_torch_ops("sdpa", "softmax"), kit.inputs_unchanged(q, k, v, what="q/k/v"):
        return _module("attention_torch").reference_attention(q, k, v, causal=causal, scale=scale)


@contextlib.contextmanager
def record_matmul_shapes() -> Iterator[list[tuple[int, ...]]]:
    """Record the shape of every `@` / torch.matmul result while active."""
    import torch

    shapes: list[tuple[int, ...]] = []
    originals = [(torch, "matmul", torch.matmul), (torch.Tensor, "matmul", torch.Tensor.matmul),
                 (torch.Tensor, "__matmul__", torch.Tensor.__matmul__)]

    def wrap(original):
        def recorded(*args, **kwargs):
            out = original(*args, **kwargs)
            shapes.append(tuple(out.shape))
            return out

        return recorded

    for owner, name, original in originals:
        setattr(owner, name, wrap(original))
    try:
        yield shapes
    finally:
        for owner, name, original in originals:
            setattr(owner, name, original)


def tiled_attention(q, k, v, causal: bool, scale, block_size: int):
    """Returns (O, LSE, shapes of every matmul result)."""
    with kit.forbid_torch_ops("sdpa", "softmax", "mm", "bmm", "einsum"), \
            kit.inputs_unchanged(q, k, v, what="q/k/v"), record_matmul_shapes() as shapes:
        o, lse = _module("attention_torch").tiled_attention(q, k, v, causal=causal, scale=scale,
                                                            block_size=block_size)
    return o, lse, shapes


def _require_launch(counter, what: str) -> None:
    if counter.count == 0:
        raise AssertionError(f"{what}: no Triton kernel was launched; the work must happen in a @triton.jit kernel")


def flash_forward(q, k, v, causal: bool, scale):
    """The learner's `flash_attention_forward` -> (O, LSE)."""
    module = _module("flash_attention")
    with kit.forbid_torch_ops(*KERNEL_FORBIDDEN), kit.count_triton_launches() as launches, \
            kit.inputs_unchanged(q, k, v, what="q/k/v"):
        o, lse = module.flash_attention_forward(q, k, v, causal=causal, scale=scale)
    _require_launch(launches, "flash_attention_forward")
    return o, lse


def flash_forward_backward(q, k, v, do, causal: bool, scale):
    """The learner's differentiable `flash_attention`, then O.backward(dO).

    Returns (O, LSE, dq, dk, dv). q, k, v are used as fresh leaf tensors.
    """
    module = _module("flash_attention")
    q, k, v = (t.detach().clone().requires_grad_(True) for t in (q, k, v))
    with kit.forbid_torch_ops(*KERNEL_FORBIDDEN), kit.count_triton_launches() as launches, \
            kit.inputs_unchanged(q, k, v, what="q/k/v"):
        o, lse = module.flash_attention(q, k, v, causal=causal, scale=scale)
    _require_launch(launches, "flash_attention (forward)")
    if o.grad_fn is None:
        raise AssertionError("flash_attention returned an O without a grad_fn: wrap it in a torch.autograd.Function")
    with kit.forbid_torch_ops(*KERNEL_FORBIDDEN), kit.count_triton_launches() as launches, \
            kit.inputs_unchanged(q, k, v, do, what="q/k/v/dO"):
        o.backward(do)
    _require_launch(launches, "flash_attention (backward)")
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.grad is None:
            raise AssertionError(f"no gradient reached {name}")
    return o.detach(), lse.detach(), q.grad, k.grad, v.grad


def flash_forward_plain(q, k, v, causal: bool, scale):
    """The learner's forward without guards or checks, for timing on a GPU."""
    return _module("flash_attention").flash_attention_forward(q, k, v, causal=causal, scale=scale)


def flash_autograd_plain(q, k, v, causal: bool, scale):
    """The learner's differentiable `flash_attention`, unguarded, for timing on a GPU."""
    return _module("flash_attention").flash_attention(q, k, v, causal=causal, scale=scale)


def io_functions():
    """(flash_block_sizes, standard_attention_hbm_accesses, flash_attention_hbm_accesses)."""
    module = _module("io_analysis")
    return module.flash_block_sizes, module.standard_attention_hbm_accesses, module.flash_attention_hbm_accesses
