"""The only door from the grader to the learner's code.

Every function here runs in the learner's process under the sandbox: it loads
the learner's compiled extension (torch.ops.load_library) or imports
vllm_reading, calls it, and returns plain data (tensors, numbers, strings).
The tests compare that data with the grader's own reference.
"""

from __future__ import annotations

from roadmap_cli import grading_kit as kit

_loaded: set = set()


def _ops(so_path: str):
    """torch.ops.cppext after loading the learner's library (once per process)."""
    import torch

    if so_path not in _loaded:
        torch.ops.load_library(so_path)
        _loaded.add(so_path)
    return torch.ops.cppext


@kit.learner_side
def rms_norm(so_path: str, x, weight, eps: float, threads: int = 1):
    """Call torch.ops.cppext.rms_norm with `threads` intra-op threads."""
    import torch

    ops = _ops(so_path)
    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with kit.inputs_unchanged(x, weight, what="x/weight"):
            return ops.rms_norm(x, weight, eps)
    finally:
        torch.set_num_threads(old)


@kit.learner_side
def rms_norm_error(so_path: str, x, weight, eps: float):
    """(exception class name, message) of a call that should be refused, or
    None when it returned normally."""
    ops = _ops(so_path)
    try:
        ops.rms_norm(x, weight, eps)
    except Exception as exc:  # noqa: BLE001 - the test judges the class and message
        return type(exc).__name__, str(exc).split("\nException raised from")[0]
    return None


@kit.learner_side
def meta_call(so_path: str, x_shape, weight_shape, dtype, eps: float):
    """The op on Meta tensors (what torch.compile traces): ("ok", shape, dtype,
    device) of the result, or ("error", exception class name, message)."""
    import torch

    ops = _ops(so_path)
    x = torch.empty(x_shape, dtype=dtype, device="meta")
    w = torch.empty(weight_shape, dtype=dtype, device="meta")
    try:
        out = ops.rms_norm(x, w, eps)
    except Exception as exc:  # noqa: BLE001 - the test judges the class and message
        return "error", type(exc).__name__, str(exc).split("\nException raised from")[0]
    return "ok", tuple(out.shape), out.dtype, str(out.device)


@kit.learner_side
def op_facts(so_path: str) -> dict:
    """The registered schema and which dispatch keys have a kernel."""
    import torch

    ops = _ops(so_path)
    if not hasattr(ops, "rms_norm"):
        return {"schema": None, "cpu": False, "meta": False}
    name = "cppext::rms_norm"
    return {"schema": str(ops.rms_norm.default._schema),
            "cpu": torch._C._dispatch_has_kernel_for_dispatch_key(name, "CPU"),
            "meta": torch._C._dispatch_has_kernel_for_dispatch_key(name, "Meta")}


@kit.learner_side
def opcheck(so_path: str, x, weight, eps: float):
    """torch.library.opcheck's verdict: None when every check passes, else its message."""
    import torch

    ops = _ops(so_path)
    try:
        result = torch.library.opcheck(ops.rms_norm.default, (x, weight, eps))
    except Exception as exc:  # noqa: BLE001
        return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    bad = {k: v for k, v in result.items() if v != "SUCCESS"}
    return None if not bad else repr(bad)


@kit.learner_side(timeout_s=120)
def thread_timings(so_path: str, x, weight, eps: float, threads: int, rounds: int) -> dict:
    """Median seconds with 1 thread and with `threads`, for the learner's op
    ("op") and for the same RMSNorm written with torch's own parallel kernels
    ("torch"), all four measured in alternating rounds in this one process.

    The torch version is the baseline for the machine's state: on a busy box
    (another grader on the other core) every parallel region gets slower,
    torch's own as much as the learner's, and the test judges the learner's
    slowdown against it rather than against an idle machine."""
    import time

    import torch

    ops = _ops(so_path)

    def torch_rms_norm():
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight

    runs = {"op": lambda: ops.rms_norm(x, weight, eps), "torch": torch_rms_norm}
    old = torch.get_num_threads()
    samples = {name: {1: [], threads: []} for name in runs}
    try:
        for _ in range(rounds):
            for n in (1, threads):
                torch.set_num_threads(n)
                for name, run in runs.items():
                    t0 = time.perf_counter()
                    run()
                    samples[name][n].append(time.perf_counter() - t0)
    finally:
        torch.set_num_threads(old)
    return {name: {n: sorted(v)[len(v) // 2] for n, v in by_n.items()} for name, by_n in samples.items()}


@kit.learner_side
def reading(name: str, *args, **kwargs):
    """A Part 5 answer: vllm_reading.<name>(*args, **kwargs) as plain data."""
    result = getattr(kit.learner_module("vllm_reading"), name)(*args, **kwargs)
    if isinstance(result, dict):
        return {k: tuple(v) if isinstance(v, list) else v for k, v in result.items()}
    if isinstance(result, (list, tuple)):
        return type(result)(result)
    return result
