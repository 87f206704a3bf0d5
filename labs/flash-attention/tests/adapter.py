"""The only door from the grader to the learner's code.

Every function marked `@learner_side` runs in the learner process (the sandbox,
see roadmap_cli.grading_kit): it calls the learner's code inside the guards this
lab needs and returns plain facts (tensors, numbers, lists of strings). The
test files compare those facts with the fp32 reference in the grader process;
nothing here decides pass or fail.

Guards, all inside the learner process:
- `forbid_torch_ops`: SDPA, softmax and every matmul flavour raise inside the
  Triton parts (the kernel must do the math);
- `count_triton_launches`: the caller checks that a @triton.jit kernel ran;
- `inputs_unchanged`: q, k, v (and dO) must come back unchanged;
- `bounds.nan_guarded`: every kernel input is copied into a NaN-filled buffer
  (same layout, padded rows, a guard band of more than one tile before and
  after), so a load past an edge reads NaN, never a neighbour or unmapped memory;
- `bounds.check_bounds`: under the Triton interpreter every unmasked load/store
  lane is checked against the tensors of its launch before memory is touched;
  violations come back as plain strings.
"""

from __future__ import annotations

import contextlib
from typing import Iterator

from roadmap_cli import grading_kit as kit
from roadmap_cli.grading_kit import bounds


# Inside the learner's Triton forward/backward nothing of torch's may do the math.
KERNEL_FORBIDDEN = ("sdpa", "softmax", "matmul", "mm", "bmm", "einsum")
# Guard band: more than one tile of the largest block the lab suggests (128 rows).
GUARD_ROWS = 160


def _module(name: str):
    return kit.learner_module(name)


# The grader's tile shapes under the interpreter: unequal BLOCK_M / BLOCK_N both ways round,
# so a loop bound or a causal limit written with the wrong block size shows. The learner's
# INTERPRETER_BLOCKS is replaced by one of these while a call runs.
TILE_SETS = [
    {"fwd": (16, 32), "dq": (16, 32), "dkdv": (32, 16)},
    {"fwd": (32, 16), "dq": (32, 16), "dkdv": (16, 32)},
]


@contextlib.contextmanager
def _tiles(module, tiles: dict | None) -> Iterator[None]:
    """Set the learner's INTERPRETER_BLOCKS to the grader's tiles while a call runs."""
    if tiles is None:
        yield
        return
    had = hasattr(module, "INTERPRETER_BLOCKS")
    saved = getattr(module, "INTERPRETER_BLOCKS", None)
    module.INTERPRETER_BLOCKS = dict(tiles)
    try:
        yield
    finally:
        if had:
            module.INTERPRETER_BLOCKS = saved
        else:
            del module.INTERPRETER_BLOCKS


def _guarded(t, pad_rows: bool):
    """t inside a NaN-filled buffer with >= one tile of guard band before and after.
    pad_rows: also NaN after each row's head_dim (the tensor becomes non-contiguous)."""
    row_pad = 16 if pad_rows else 0
    return bounds.nan_guarded(t, guard=bounds.guard_for_tile(GUARD_ROWS, t.shape[-1] + row_pad), row_pad=row_pad)


# ---------------------------------------------------------------- parts 1-2 (torch)


@kit.learner_side
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


@kit.learner_side
def tiled_attention(q, k, v, causal: bool, scale, block_size: int):
    """Returns (O, LSE, shapes of every matmul result as tuples)."""
    with kit.forbid_torch_ops("sdpa", "softmax", "mm", "bmm", "einsum"), \
            kit.inputs_unchanged(q, k, v, what="q/k/v"), record_matmul_shapes() as shapes:
        o, lse = _module("attention_torch").tiled_attention(q, k, v, causal=causal, scale=scale,
                                                            block_size=block_size)
    return o, lse, [tuple(s) for s in shapes]


# ---------------------------------------------------------------- parts 3-6 (Triton)


@kit.learner_side
def flash_forward(q, k, v, causal: bool, scale, pad_rows: bool = True, tiles: dict | None = None):
    """The learner's `flash_attention_forward` on NaN-guarded copies of q, k, v, with
    INTERPRETER_BLOCKS set to `tiles` when given.

    Returns a dict of facts: o, lse, launches (Triton launches counted),
    violations (out-of-bounds lanes, as strings; interpreter only).
    """
    module = _module("flash_attention")
    gq, gk, gv = (_guarded(t, pad_rows) for t in (q, k, v))
    labels = bounds.storage_labels(q=gq, k=gk, v=gv)
    with kit.forbid_torch_ops(*KERNEL_FORBIDDEN), kit.count_triton_launches() as launches, \
            kit.inputs_unchanged(gq, gk, gv, what="q/k/v"), bounds.check_bounds(labels) as report, \
            _tiles(module, tiles):
        o, lse = module.flash_attention_forward(gq, gk, gv, causal=causal, scale=scale)
    return {"o": o, "lse": lse, "launches": launches.count, "violations": report.violations}


@kit.learner_side
def flash_forward_backward(q, k, v, do, causal: bool, scale, pad_rows: bool = True, tiles: dict | None = None):
    """The learner's differentiable `flash_attention`, then O.backward(dO), on NaN-guarded
    leaf copies of q, k, v, dO, with INTERPRETER_BLOCKS set to `tiles` when given.

    Returns a dict of facts: o, lse, dq, dk, dv (None where no gradient arrived),
    launches_fwd, launches_bwd, has_grad_fn, lse_requires_grad, violations (forward and backward).
    """
    module = _module("flash_attention")
    gq, gk, gv, gdo = (_guarded(t, pad_rows) for t in (q, k, v, do))
    for t in (gq, gk, gv):
        t.requires_grad_(True)
    labels = bounds.storage_labels(q=gq, k=gk, v=gv, dO=gdo)
    facts = {"o": None, "lse": None, "dq": None, "dk": None, "dv": None, "launches_fwd": 0,
             "launches_bwd": 0, "has_grad_fn": False, "lse_requires_grad": None, "violations": []}
    with bounds.check_bounds(labels) as report, _tiles(module, tiles):
        with kit.forbid_torch_ops(*KERNEL_FORBIDDEN), kit.count_triton_launches() as launches, \
                kit.inputs_unchanged(gq, gk, gv, what="q/k/v"):
            o, lse = module.flash_attention(gq, gk, gv, causal=causal, scale=scale)
        facts.update(o=o.detach(), lse=lse.detach(), launches_fwd=launches.count,
                     has_grad_fn=o.grad_fn is not None, lse_requires_grad=bool(lse.requires_grad))
        if o.grad_fn is not None:
            with kit.forbid_torch_ops(*KERNEL_FORBIDDEN), kit.count_triton_launches() as launches, \
                    kit.inputs_unchanged(gq, gk, gv, gdo, what="q/k/v/dO"):
                o.backward(gdo)
            facts["launches_bwd"] = launches.count
    facts["violations"] = report.violations
    for name, t in (("dq", gq), ("dk", gk), ("dv", gv)):
        facts[name] = None if t.grad is None else t.grad.detach()
    return facts


@kit.learner_side
def elements_loaded(q, k, v, causal: bool) -> int:
    """Interpreter only: how many elements the forward asks tl.load for (masked lanes included)."""
    from triton.runtime import interpreter

    builder = interpreter.interpreter_builder
    original = builder.create_masked_load
    total = [0]

    def counting(ptrs, *args, **kwargs):
        total[0] += int(ptrs.data.size)
        return original(ptrs, *args, **kwargs)

    builder.create_masked_load = counting
    try:
        _module("flash_attention").flash_attention_forward(q, k, v, causal=causal, scale=None)
    finally:
        builder.create_masked_load = original
    return total[0]


# ---------------------------------------------------------------- GPU timing (learner-side)
# Timing runs in the learner process: timed through the sandbox's pipe, a call would
# measure the pipe and the copy of its output, not the kernel.


@kit.learner_side
def causal_and_full_forward_ms(batch: int, heads: int, seq: int, head_dim: int, seed: int) -> dict:
    """GPU only: median ms of the learner's forward, causal and full, fp16 (part 4's skip test)."""
    import torch

    from roadmap_cli.grading_kit import timing

    forward = _module("flash_attention").flash_attention_forward
    gen = torch.Generator(device="cuda").manual_seed(seed)
    q, k, v = (torch.randn(batch, heads, seq, head_dim, device="cuda", dtype=torch.float16, generator=gen)
               for _ in range(3))
    # Interleaved, round by round: on a GPU shared with other work (dev check --gpu grades side by side) both
    # see the same contention, and their ratio stays the kernel's. Timed one after the other, it was not.
    timed = timing.compare_to_baseline(lambda q, k, v: forward(q, k, v, causal=True, scale=None),
                                       lambda q, k, v: forward(q, k, v, causal=False, scale=None),
                                       lambda: (q, k, v), rule=timing.StopRule(time_cap_s=2.0))
    return {"full_ms": float(timed.baseline.median_ms), "causal_ms": float(timed.learner.median_ms)}


@kit.learner_side
def time_against_sdpa(batch: int, heads: int, seq: int, head_dim: int, causal: bool, flops_fwd: float,
                      flops_bwd: float) -> dict:
    """GPU only: the learner's forward and backward against F.scaled_dot_product_attention,
    fp16, with the shared harness. Returns {"fwd": facts, "bwd": facts, "check_error": str|None}
    (facts: grading_kit.perf_facts.comparison_facts)."""
    import torch
    import torch.nn.functional as F

    from roadmap_cli.grading_kit import timing
    from roadmap_cli.grading_kit.perf_facts import comparison_facts

    module = _module("flash_attention")
    dtype = torch.float16
    rule = timing.StopRule(time_cap_s=2.0)

    def fresh(grad=False):
        return tuple(torch.randn(batch, heads, seq, head_dim, device="cuda", dtype=dtype).requires_grad_(grad)
                     for _ in range(3))

    def check_fwd(out, args):
        o = out[0] if isinstance(out, tuple) else out
        want = F.scaled_dot_product_attention(*args, is_causal=causal)
        torch.testing.assert_close(o, want, atol=2e-2, rtol=2e-2)

    try:
        fwd = timing.compare_to_baseline(
            lambda q, k, v: module.flash_attention_forward(q, k, v, causal=causal, scale=None),
            lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal),
            fresh, flops=flops_fwd, dtype=dtype, rule=rule, check=check_fwd)
    except AssertionError as error:
        return {"fwd": None, "bwd": None, "check_error": f"forward output under timing: {error}"}

    def make_bwd_inputs():
        q, k, v = fresh(grad=True)
        o_learner = module.flash_attention(q, k, v, causal=causal, scale=None)[0]
        o_sdpa = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        return o_learner, o_sdpa, q, k, v, torch.randn_like(o_sdpa)

    bwd = timing.compare_to_baseline(
        lambda ol, ob, q, k, v, do: torch.autograd.grad(ol, (q, k, v), do, retain_graph=True),
        lambda ol, ob, q, k, v, do: torch.autograd.grad(ob, (q, k, v), do, retain_graph=True),
        make_bwd_inputs, flops=flops_bwd, dtype=dtype, rule=rule)
    return {"fwd": comparison_facts(fwd), "bwd": comparison_facts(bwd), "check_error": None}


# ---------------------------------------------------------------- part 7 (plain Python)


@kit.learner_side
def io_block_sizes(d: int, m: int):
    return tuple(_module("io_analysis").flash_block_sizes(d, m))


@kit.learner_side
def io_standard_accesses(n: int, d: int):
    return _module("io_analysis").standard_attention_hbm_accesses(n, d)


@kit.learner_side
def io_flash_accesses(n: int, d: int, m: int):
    return _module("io_analysis").flash_attention_hbm_accesses(n, d, m)
