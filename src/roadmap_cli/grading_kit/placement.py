"""Where a grade's tensors live: the grader's on the CPU, the learner's on the lab's device (issue 37).

Only the learner process opens a CUDA context. A context costs ~300-500 MB of
GPU memory and ~0.3 s, and in EXCLUSIVE_PROCESS compute mode a second one is
refused outright, so the grader process never makes, moves or reads a CUDA
tensor:

- Inputs: the grader builds CPU tensors and wraps each one the learner's code
  receives with `kit.to_device(t)` (learner.py, beside `kit.device()`). The
  wrapper is a `LearnerDeviceTensor`: still the same CPU data for every
  grader-side op, and, pickled into a request,
  rebuilt *in the learner process* on the lab's device (`arrive`) before the
  adapter function runs. The whole storage travels, not just the view, so the
  NaN guards around a padded view (cuda-matmul's inputs.py) and its strides
  and offset are on the GPU too.
- Results: the learner process sends bytes and the device the tensor was on
  (wire.py); the grader rebuilds CPU data that records that device
  (`learner_device(out)`). Checks such as "the CUDA kernel returned a CUDA
  tensor" read the record; every comparison runs on the CPU.

Why a recorded attribute and not a tensor that claims to be on CUDA:
torch's own code (indexing with a mask, `torch.testing.assert_close`,
`.to`) reads `.device`/`.is_cuda` and would see a device the data is not
on. `.device` stays honest (cpu); `learner_device` says where the learner
returned it. The subclass disables `__torch_function__`, so any op's result
is a plain tensor: only what crossed the wire carries the record, and a
recorded tensor passed back to the learner arrives on its device again.

Timing runs in the learner process (`@kit.learner_side` functions that call
grading_kit.timing): through the pipe it would time the pipe.

`guard_grader_against_cuda()` makes any CUDA initialisation in the grader
process raise (the plugin installs it in every CUDA grade); the lint
tests/test_grader_never_touches_cuda.py keeps grader-side code of labs/*/tests
from building CUDA tensors at all.
"""

from __future__ import annotations

from typing import Any

import torch


class LearnerDeviceTensor(torch.Tensor):
    """CPU data that the learner process holds, or will hold, on `learner_device`."""

    # Ops on it give plain tensors: the record belongs to this exact object, never to a derived one.
    __torch_function__ = torch._C._disabled_torch_function_impl
    learner_device: torch.device

    def __reduce_ex__(self, protocol: int):
        # Into a request: the plain CPU tensor (storage, offset, strides, requires_grad) and its device.
        return (arrive, (self.as_subclass(torch.Tensor), str(self.learner_device)))

    def __repr__(self, *args: Any, **kwargs: Any) -> str:
        return f"{self.as_subclass(torch.Tensor)!r} (learner's, on {self.learner_device})"


def tag(tensor: torch.Tensor, device: Any) -> LearnerDeviceTensor:
    """`tensor`'s CPU data, recorded as belonging on `device` in the learner process."""
    tagged = tensor.as_subclass(LearnerDeviceTensor)
    tagged.learner_device = torch.device(device)
    return tagged


def arrive(tensor: torch.Tensor, device: str) -> torch.Tensor:
    """In the learner process: `tensor` on `device`, the whole storage moved (a padded view keeps its
    neighbours, strides and offset), a leaf that requires grad as it did."""
    target = torch.device(device)
    if tensor.device == target:
        return tensor
    storage = tensor.untyped_storage()
    whole = torch.empty(0, dtype=tensor.dtype).set_(storage, 0, (storage.nbytes() // tensor.element_size(),), (1,))
    moved = whole.detach().to(target)
    out = torch.empty(0, dtype=tensor.dtype, device=target).set_(
        moved.untyped_storage(), tensor.storage_offset(), tuple(tensor.shape), tuple(tensor.stride())
    )
    return out.requires_grad_(True) if tensor.requires_grad else out


def learner_device(value: Any) -> torch.device:
    """The device the learner's code returned `value` on (for a plain tensor: where it is)."""
    recorded = getattr(value, "learner_device", None) if isinstance(value, torch.Tensor) else None
    if recorded is not None:
        return recorded
    if isinstance(value, torch.Tensor):
        return value.device
    raise TypeError(f"learner_device needs a tensor, got {type(value).__name__}")


def returned_on_cuda(value: Any) -> bool:
    """Whether the learner returned `value` as a CUDA tensor (a tensor's check; anything else: False)."""
    return isinstance(value, torch.Tensor) and learner_device(value).type == "cuda"


class GraderTouchedCuda(RuntimeError):
    """Grader-side code initialised CUDA: it must build CPU tensors and hand them to kit.to_device."""


def _refuse(*_args: Any, **_kwargs: Any) -> None:
    raise GraderTouchedCuda(
        "the grader process tried to initialise CUDA: the grader's tensors stay on the CPU and "
        "kit.to_device(t) moves them in the learner process; GPU work (timing, CUDA queries) belongs in "
        "@kit.learner_side functions (grading_kit/placement.py)"
    )


def guard_grader_against_cuda() -> None:
    """From now on, anything that would open a CUDA context in this process raises GraderTouchedCuda.

    torch creates a CUDA tensor (and answers device queries) only after `torch.cuda._lazy_init()`,
    which its C++ side looks up on the module at call time; `torch.cuda.is_available()` does not
    need it and keeps working (it opens no context)."""
    import torch.cuda

    if torch.cuda.is_initialized():
        raise GraderTouchedCuda("CUDA was initialised in the grader process before its guard was installed")
    torch.cuda._lazy_init = _refuse
    torch.cuda.init = _refuse
