"""The only door from the grader to the learner's code.

Every call into the workspace goes through a `@learner_side` function here: it
runs in the learner process (the sandbox, see roadmap_cli.grading_kit), wraps
the call in the guards this lab needs and returns plain facts (tensors,
numbers, lists of strings); the tests decide pass/fail in the grader process.
Guards:
- `bounds.nan_guarded`: every Triton input is copied into a NaN-filled buffer
  (same layout; NaN after each row and a guard band of more than one tile
  before and after), so a load past an edge reads NaN, never a neighbour;
- `bounds.check_bounds`: under the Triton interpreter every unmasked
  tl.load/tl.store lane is checked against the launch's tensors before memory
  is touched ("read past the edge of A at [127+3, 5]");
- `forbid_torch_ops`: torch.matmul / mm / bmm / einsum / F.linear / `@` raise
  while a learner matmul runs (write the kernel yourself);
- `count_triton_launches`: a @triton.jit kernel must actually have launched;
- `guarded_allocations`: tensors the learner allocates with torch.empty /
  empty_like / zeros / zeros_like get a guard band after their last element,
  and start out filled with a sentinel. Writing past the end (a missing store
  mask) or leaving part of the output unwritten (a grid that misses a tile)
  is then caught deterministically, on CPU as on GPU;
- CUDA parts: the extension built from the learner's .cu file is called
  directly, and the profiler confirms the learner's kernel ran and no
  cuBLAS/CUTLASS GEMM did.
"""

from __future__ import annotations

import contextlib
from typing import Iterator

import torch

from roadmap_cli import grading_kit as kit
from roadmap_cli.grading_kit import bounds, count_triton_launches, forbid_torch_ops, learner_module


MATMUL_OPS = ("matmul", "mm", "bmm", "einsum", "linear")
SENTINEL = -4096.0  # exactly representable in fp16, bf16 and fp32
GUARD_ELEMENTS = 4096

# torch.matmul as it was before any guard patched it: the baseline and references use this.
torch_matmul = torch.matmul


# ---------------------------------------------------------------- guards


class GuardedAllocations:
    def __init__(self) -> None:
        self.buffers: list[tuple[torch.Tensor, int, tuple[int, ...]]] = []

    def overruns(self) -> list[str]:
        """One line per allocation whose guard band was written (plain data for the tests)."""
        found = []
        for storage, used, shape in self.buffers:
            tail = storage[used:]
            if not bool((tail == SENTINEL).all()):
                bad = int((tail != SENTINEL).sum())
                found.append(f"wrote {bad} element(s) past the end of a tensor of shape {list(shape)} "
                             "that your code allocated")
        return found


def _shape_from(size) -> tuple[int, ...] | None:
    if len(size) == 1 and isinstance(size[0], (tuple, list, torch.Size)):
        size = tuple(size[0])
    if all(isinstance(s, int) for s in size):
        return tuple(int(s) for s in size)
    return None


@contextlib.contextmanager
def guarded_allocations() -> Iterator[GuardedAllocations]:
    """Patch torch.empty/empty_like/zeros/zeros_like to hand out guarded,
    sentinel-filled buffers (floating dtypes only; anything unusual falls
    through to torch). Read `overruns()` when the block has ended."""
    originals = {name: getattr(torch, name) for name in ("empty", "empty_like", "zeros", "zeros_like")}
    guards = GuardedAllocations()

    def make(shape, dtype, device, zero: bool):
        numel = 1
        for s in shape:
            numel *= s
        storage = originals["empty"](numel + GUARD_ELEMENTS, dtype=dtype, device=device)
        storage.fill_(SENTINEL)
        view = storage[:numel].view(shape)
        if zero:
            view.zero_()
        guards.buffers.append((storage, numel, shape))
        return view

    def plain_kwargs(kwargs) -> bool:
        dtype = kwargs.get("dtype") or torch.get_default_dtype()
        return set(kwargs) <= {"dtype", "device"} and dtype.is_floating_point

    def empty(*size, **kwargs):
        shape = _shape_from(size)
        if shape is None or not plain_kwargs(kwargs):
            return originals["empty"](*size, **kwargs)
        return make(shape, kwargs.get("dtype") or torch.get_default_dtype(), kwargs.get("device"), zero=False)

    def zeros(*size, **kwargs):
        shape = _shape_from(size)
        if shape is None or not plain_kwargs(kwargs):
            return originals["zeros"](*size, **kwargs)
        return make(shape, kwargs.get("dtype") or torch.get_default_dtype(), kwargs.get("device"), zero=True)

    def like(name: str, zero: bool):
        def allocate(tensor, **kwargs):
            dtype = kwargs.get("dtype") or tensor.dtype
            if not isinstance(tensor, torch.Tensor) or set(kwargs) - {"dtype", "device"} or not dtype.is_floating_point:
                return originals[name](tensor, **kwargs)
            return make(tuple(tensor.shape), dtype, kwargs.get("device") or tensor.device, zero=zero)

        return allocate

    patched = {"empty": empty, "zeros": zeros, "empty_like": like("empty_like", False), "zeros_like": like("zeros_like", True)}
    try:
        for name, fn in patched.items():
            setattr(torch, name, fn)
        yield guards
    finally:
        for name, fn in originals.items():
            setattr(torch, name, fn)


# The grader's tile shapes for the matmul under the interpreter (README: the wrapper reads
# INTERPRETER_BLOCKS at call time). Unequal BLOCK_M / BLOCK_N / BLOCK_K and GROUP_M 1..4,
# so loop bounds, grids and group arithmetic that only work for square tiles show.
TILES = [
    {"BLOCK_M": 32, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 3},
    {"BLOCK_M": 64, "BLOCK_N": 32, "BLOCK_K": 64, "GROUP_M": 1},
    {"BLOCK_M": 64, "BLOCK_N": 16, "BLOCK_K": 32, "GROUP_M": 2},
    {"BLOCK_M": 16, "BLOCK_N": 64, "BLOCK_K": 64, "GROUP_M": 4},
]


@contextlib.contextmanager
def _blocks(module, blocks: dict | None) -> Iterator[None]:
    """Set the learner's INTERPRETER_BLOCKS (README, Part 2) to the grader's tiles while a call runs."""
    if blocks is None:
        yield
        return
    had = hasattr(module, "INTERPRETER_BLOCKS")
    saved = getattr(module, "INTERPRETER_BLOCKS", None)
    module.INTERPRETER_BLOCKS = dict(blocks)
    try:
        yield
    finally:
        if had:
            module.INTERPRETER_BLOCKS = saved
        else:
            del module.INTERPRETER_BLOCKS


def _strided_nan_copy(t: torch.Tensor, step: int, guard: int = 4096) -> torch.Tensor:
    """A copy of the 1-D `t` as every `step`-th element of a NaN-filled buffer, `guard`
    elements into it: a non-contiguous view at an offset. A kernel that indexes x_ptr + i
    without the stride (or a wrapper that skips .contiguous()) reads the NaN in between."""
    storage = torch.full((2 * guard + step * t.shape[0],), float("nan"), dtype=t.dtype, device=t.device)
    view = storage[guard:guard + step * t.shape[0]:step]
    view.copy_(t)
    return view


BLOCK_KEYS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M")


@contextlib.contextmanager
def _launch_recorder() -> Iterator[dict]:
    """Under the interpreter, record per launch the kernel name, its grid (x, y, z) and its
    BLOCK_*/GROUP_M constexprs, and per store the program that made it and the lowest
    address it wrote. Enter it inside check_bounds/count_triton_launches (they patch the
    same functions; the patches are undone in reverse order)."""
    import numpy as np
    from triton.runtime import interpreter

    record: dict = {"launches": [], "stores": []}
    cls = interpreter.InterpretedFunction
    builder = interpreter.interpreter_builder
    original_run, original_grid, original_store = cls.run, builder.set_grid_dim, builder.create_masked_store

    def run(self, *args, grid, warmup, **kwargs):
        if not warmup:
            meta = dict(zip(self.arg_names, args))
            meta.update(kwargs)
            record["launches"].append({"kernel": getattr(self.fn, "__name__", "kernel"), "grid": None,
                                       "blocks": {k: int(meta[k]) for k in BLOCK_KEYS if k in meta}})
        return original_run(self, *args, grid=grid, warmup=warmup, **kwargs)

    def set_grid_dim(nx, ny, nz):
        if record["launches"]:
            record["launches"][-1]["grid"] = [int(nx), int(ny), int(nz)]
        return original_grid(nx, ny, nz)

    def store(ptrs, value, mask, *rest, **kwargs):
        addrs = np.asarray(ptrs.data).astype(np.uint64)
        on = np.broadcast_to(np.asarray(mask.data, dtype=bool), addrs.shape)
        if on.any():
            record["stores"].append((len(record["launches"]) - 1, int(builder.grid_idx[0]), int(addrs[on].min())))
        return original_store(ptrs, value, mask, *rest, **kwargs)

    cls.run, builder.set_grid_dim, builder.create_masked_store = run, set_grid_dim, store
    try:
        yield record
    finally:
        cls.run, builder.set_grid_dim, builder.create_masked_store = original_run, original_grid, original_store


def _guarded_triton_call(call, inputs: dict, forbid: tuple[str, ...] = (), step: int = 1,
                         record_launches: bool = False) -> dict:
    """Run call(*guarded inputs) inside every guard; return the facts as plain data.
    step > 1: 1-D inputs are passed as non-contiguous views (every step-th element)."""
    # Guard bands: 64 rows of a matrix (one full 64-row tile), 4096 elements after a vector
    # (four 1024-element blocks).
    guarded = {name: (_strided_nan_copy(t, step) if t.dim() == 1 and step > 1 else
                      bounds.nan_guarded(t, guard=bounds.guard_for_tile(64, t.shape[-1] + 16) if t.dim() == 2 else 4096))
               for name, t in inputs.items()}
    labels = bounds.storage_labels(**guarded)
    recorder = _launch_recorder() if record_launches else contextlib.nullcontext({"launches": [], "stores": []})
    with bounds.check_bounds(labels) as report, count_triton_launches() as launches, \
            guarded_allocations() as allocations, forbid_torch_ops(*forbid), \
            kit.inputs_unchanged(*guarded.values(), what="/".join(inputs)), recorder as record:
        out = call(*guarded.values())
    facts = {"out": out, "launches": launches.count, "violations": report.violations,
             "overruns": allocations.overruns(), "recorded": record["launches"]}
    if record_launches and isinstance(out, torch.Tensor) and out.dim() == 2:
        # Each program's lowest stored address, as the (row, column) of the output it is in.
        base, size = out.data_ptr(), out.element_size()
        rows, cols = out.shape
        stride_m, stride_n = out.stride()
        tiles = []
        for launch, pid, addr in record["stores"]:
            offset, rem = divmod(addr - base, size)
            row, col = (offset // stride_m, (offset % stride_m) // stride_n) if stride_m >= stride_n \
                else ((offset % stride_n) // stride_m, offset // stride_n)
            if rem == 0 and 0 <= offset and 0 <= row < rows and 0 <= col < cols:
                tiles.append([launch, pid, int(row), int(col)])
        facts["stores"] = tiles
    return facts


# ---------------------------------------------------------------- Triton parts


@kit.learner_side
def vector_add(x: torch.Tensor, y: torch.Tensor, step: int = 1) -> dict:
    """Facts of the learner's vector_add(x, y) on NaN-guarded copies: out, launches,
    violations (out-of-bounds lanes), overruns (writes past allocations).
    step > 1: x and y are passed as every step-th element of a NaN buffer."""
    module = learner_module("vector_add")
    return _guarded_triton_call(module.vector_add, {"x": x, "y": y}, step=step)


@kit.learner_side
def matmul(a: torch.Tensor, b: torch.Tensor, blocks: dict | None = None) -> dict:
    """Facts of the learner's matmul(a, b) on NaN-guarded copies (B keeps its layout),
    with INTERPRETER_BLOCKS set to `blocks` when given."""
    module = learner_module("matmul")
    with _blocks(module, blocks):
        return _guarded_triton_call(module.matmul, {"A": a, "B": b}, forbid=MATMUL_OPS)


@kit.learner_side
def matmul_launches(a: torch.Tensor, b: torch.Tensor, blocks: dict) -> dict:
    """matmul(a, b) with INTERPRETER_BLOCKS = blocks, as `matmul` returns it, plus
    `recorded` (per launch: kernel, grid, blocks) and `stores` ([launch, program id,
    row, column of C] of each store's lowest address). Interpreter only."""
    module = learner_module("matmul")
    with _blocks(module, blocks):
        return _guarded_triton_call(module.matmul, {"A": a, "B": b}, forbid=MATMUL_OPS, record_launches=True)


@kit.learner_side
def matmul_raises(a: torch.Tensor, b: torch.Tensor) -> str | None:
    """The name of the exception the learner's matmul raises for (a, b), or None."""
    try:
        learner_module("matmul").matmul(a, b)
    except Exception as error:  # noqa: BLE001 - the test checks which kind
        return type(error).__name__
    return None


@kit.learner_side
def time_matmul(M: int, N: int, K: int, seed: int) -> dict:
    """GPU only: the learner's matmul against torch.matmul (cuBLAS) in fp16, timed in the
    learner process with the shared harness (timing through the sandbox's pipe would
    measure the pipe). Returns comparison_facts plus launches and check_error (the first
    wrong output seen while timed, as text, or None)."""
    from roadmap_cli.grading_kit import timing
    from roadmap_cli.grading_kit.perf_facts import comparison_facts

    learner_matmul = learner_module("matmul").matmul
    gen = torch.Generator(device="cuda").manual_seed(seed)

    def make_inputs():  # fresh contents for every timed call
        a = torch.randn((M, K), device="cuda", dtype=torch.float16, generator=gen)
        b = torch.randn((K, N), device="cuda", dtype=torch.float16, generator=gen)
        return a, b

    def check(out, args):  # the timed output must still be right (first and last timed call)
        a, b = args
        error = kit.rel_fro_error(out.float(), torch_matmul(a.float(), b.float()))
        if not error < 1e-2:
            raise _WrongWhileTimed(f"relative Frobenius error {error:.3g} >= 1e-2")

    try:
        with forbid_torch_ops(*MATMUL_OPS), count_triton_launches() as launches:
            result = timing.compare_to_baseline(
                learner_matmul,
                torch_matmul,  # torch.matmul saved before the guard: cuBLAS
                make_inputs,
                flops=2.0 * M * N * K,
                bytes_moved=2.0 * (M * K + K * N + M * N),
                dtype=torch.float16,
                check=check,
            )
    except _WrongWhileTimed as error:
        return {"check_error": str(error), "launches": launches.count}
    return {**comparison_facts(result), "check_error": None, "launches": launches.count}


class _WrongWhileTimed(Exception):
    pass


# ---------------------------------------------------------------- CUDA parts

# Kernel-name pieces of library GEMMs: cuBLAS (H100's cuBLAS 12.x names its own kernels nvjet_*), CUTLASS.
GEMM_LIBRARY_MARKERS = ("gemm", "cublas", "cutlass", "xmma", "nvjet", "sm80_", "sm90_", "sm100_", "ampere_", "volta_",
                        "turing_")


def _kernel_names(fn, *args):
    """Run fn(*args) under the CUDA profiler; return (output, names of GPU kernels that ran)
    or (output, None) when the profiler records no CUDA activity on this machine."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        out = fn(*args)
        torch.cuda.synchronize()
    names = [e.name for e in prof.events() if getattr(e, "device_type", None) is not None and "cuda" in str(e.device_type).lower()]
    return out, (names or None)


def _cuda_call(extension, function: str, kernel: str, *args):
    fn = getattr(extension, function, None)
    if fn is None:
        raise AssertionError(f"the extension built from your .cu file has no function {function!r}")
    # Here, in the learner process: the grader's tensors are copies of what the kernel received, so only this
    # side can see the kernel write into its inputs.
    inputs = [a for a in args if isinstance(a, torch.Tensor)]
    with forbid_torch_ops(*MATMUL_OPS), kit.inputs_unchanged(*inputs, what=f"{function}'s input"):
        out, names = _kernel_names(fn, *args)
    if names is not None:
        if not any(kernel in n for n in names):
            raise AssertionError(f"{function} did not launch a kernel named {kernel} (GPU kernels seen: {names[:5]})")
        library = [n for n in names if any(m in n.lower() for m in GEMM_LIBRARY_MARKERS)]
        if library:
            raise AssertionError(f"{function} ran a library GEMM ({library[0]}): write the kernel yourself")
    return out


@kit.learner_side
def cuda_vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    extension = learner_module("cuda_kernels").load_vector_add()
    return _cuda_call(extension, "vector_add", "vector_add_kernel", x, y)


@kit.learner_side
def cuda_matmul(variant: str, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """variant: "naive" or "tiled"."""
    extension = learner_module("cuda_kernels").load_matmul()
    return _cuda_call(extension, f"matmul_{variant}", f"matmul_{variant}_kernel", a, b)
