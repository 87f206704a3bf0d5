"""The reference kernels in kernels/ (Triton vector add and matmul) against
torch, under the Triton interpreter on CPU; the CUDA loader and sources; the
starter's API matching the reference; the GPU benchmark's CPU exit."""

from __future__ import annotations

import os

if not os.environ.get("TRITON_INTERPRET"):
    try:
        import torch as _torch

        if not _torch.cuda.is_available():
            os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported anywhere below
    except ImportError:  # pragma: no cover
        pass

import importlib.util
import inspect
import re
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
KERNELS = ROOT / "kernels"
STARTER = ROOT / "labs" / "cuda-matmul" / "starter"


def load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def ref_add():
    return load(KERNELS / "triton" / "vector_add.py", "ref_kernels_vector_add")


@pytest.fixture(scope="module")
def ref_matmul():
    return load(KERNELS / "triton" / "matmul.py", "ref_kernels_matmul")


def device() -> str:
    return "cuda" if torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1" else "cpu"


# ---------------------------------------------------------------- vector add


@pytest.mark.parametrize("n", [1, 1000, 1024, 1025])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_vector_add_matches_torch(ref_add, n, dtype):
    gen = torch.Generator().manual_seed(n)
    x = torch.randn(n, generator=gen).to(dtype).to(device())
    y = torch.randn(n, generator=gen).to(dtype).to(device())
    out = ref_add.vector_add(x, y)
    assert out.dtype == dtype
    torch.testing.assert_close(out, x + y, atol=0, rtol=0)


def test_vector_add_strided_input_and_empty(ref_add):
    x = torch.arange(20, dtype=torch.float32, device=device())[::2]  # stride 2
    y = torch.ones(10, device=device())
    torch.testing.assert_close(ref_add.vector_add(x, y), x + 1)
    assert ref_add.vector_add(x[:0], y[:0]).numel() == 0


def test_vector_add_rejects_bad_inputs(ref_add):
    with pytest.raises(ValueError, match="length mismatch"):
        ref_add.vector_add(torch.zeros(3), torch.zeros(4))
    with pytest.raises(TypeError, match="dtype"):
        ref_add.vector_add(torch.zeros(3), torch.zeros(3, dtype=torch.float16))
    with pytest.raises(ValueError, match="1-D"):
        ref_add.vector_add(torch.zeros(3, 3), torch.zeros(3, 3))


# ---------------------------------------------------------------- matmul


@pytest.mark.parametrize(
    "shape", [(1, 1, 1), (127, 129, 130), (129, 65, 1), (3, 200, 70)], ids=lambda s: "x".join(map(str, s))
)
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32], ids=["fp16", "fp32"])
def test_matmul_matches_torch(ref_matmul, shape, dtype):
    M, N, K = shape
    gen = torch.Generator().manual_seed(M * 1000 + N)
    a = torch.randn((M, K), generator=gen).to(dtype).to(device())
    b = torch.randn((K, N), generator=gen).to(dtype).to(device())
    out = ref_matmul.matmul(a, b)
    expected = a.float().cpu() @ b.float().cpu()
    assert out.dtype == dtype and tuple(out.shape) == (M, N)
    error = float((out.float().cpu() - expected).norm() / expected.norm())
    assert error < (2e-3 if dtype == torch.float16 else 1e-5), error


def test_matmul_partial_last_group_and_strides(ref_matmul):
    """M = 3 tile rows with GROUP_M = 2 (a partial last group) and B transposed
    in memory: every tile must be computed once, from the right addresses."""
    blocks = ref_matmul.INTERPRETER_BLOCKS
    M = 2 * blocks["BLOCK_M"] + 5
    N = 2 * blocks["BLOCK_N"] + 3
    K = blocks["BLOCK_K"] + 7
    a = torch.randn((M, K), device=device())
    b = torch.randn((N, K), device=device()).t()  # column-major (K, N)
    out = ref_matmul.matmul(a, b)
    torch.testing.assert_close(out.cpu(), a.cpu() @ b.cpu(), atol=1e-4, rtol=1e-4)


def test_matmul_accumulates_in_fp32(ref_matmul):
    """Large cancelling terms around small ones: an fp16 accumulator loses the small ones."""
    gen = torch.Generator().manual_seed(1)
    a = torch.rand((16, 320), generator=gen)
    b = torch.rand((320, 16), generator=gen)
    a[:, :16], b[:16, :] = 32.0, 64.0
    a[:, -16:], b[-16:, :] = 32.0, -64.0
    a16, b16 = a.half().to(device()), b.half().to(device())
    out = ref_matmul.matmul(a16, b16).float().cpu()
    expected = a16.float().cpu() @ b16.float().cpu()
    assert float((out - expected).norm() / expected.norm()) < 2e-3


def test_matmul_rejects_bad_inputs(ref_matmul):
    with pytest.raises(ValueError, match="inner dimensions"):
        ref_matmul.matmul(torch.zeros(2, 3), torch.zeros(4, 2))
    with pytest.raises(TypeError, match="dtype"):
        ref_matmul.matmul(torch.zeros(2, 3), torch.zeros(3, 2, dtype=torch.float16))
    with pytest.raises(TypeError, match="dtype"):
        ref_matmul.matmul(torch.zeros(2, 3, dtype=torch.int32), torch.zeros(3, 2, dtype=torch.int32))
    with pytest.raises(ValueError, match="2-D"):
        ref_matmul.matmul(torch.zeros(3), torch.zeros(3, 2))


def test_matmul_empty_k_gives_zeros(ref_matmul):
    out = ref_matmul.matmul(torch.zeros(3, 0), torch.zeros(0, 4))
    assert tuple(out.shape) == (3, 4) and bool((out == 0).all())


# ---------------------------------------------------------------- starter and CUDA sources


@pytest.mark.parametrize("module, function", [("vector_add", "vector_add"), ("matmul", "matmul")])
def test_starter_api_matches_reference(module, function):
    ref = load(KERNELS / "triton" / f"{module}.py", f"ref_api_{module}")
    starter = load(STARTER / f"{module}.py", f"starter_api_{module}")
    assert inspect.signature(getattr(starter, function)) == inspect.signature(getattr(ref, function))
    kernel = {"vector_add": "add_kernel", "matmul": "matmul_kernel"}[module]
    assert inspect.signature(getattr(starter, kernel).fn) == inspect.signature(getattr(ref, kernel).fn)


def test_starter_raises_not_implemented_with_pointer():
    starter = load(STARTER / "matmul.py", "starter_raise_matmul")
    with pytest.raises(NotImplementedError, match="README.md"):
        starter.matmul(torch.zeros(2, 2), torch.zeros(2, 2))


def test_starter_cuda_loader_is_the_reference_loader():
    assert (STARTER / "cuda_kernels.py").read_text() == (KERNELS / "cuda" / "cuda_kernels.py").read_text()


@pytest.mark.parametrize("folder", [KERNELS / "cuda", STARTER], ids=["reference", "starter"])
def test_cuda_sources_define_what_the_loader_and_grader_expect(folder):
    loader = (KERNELS / "cuda" / "cuda_kernels.py").read_text()
    for stem, kernels in {
        "vector_add": ["vector_add_kernel"],
        "matmul": ["matmul_naive_kernel", "matmul_tiled_kernel"],
    }.items():
        source = (folder / f"{stem}.cu").read_text()
        for kernel in kernels:  # the grader finds these names in the profiler
            assert re.search(rf"__global__\s+void\s+{kernel}\s*\(", source), f"{stem}.cu: {kernel}"
        for declared in re.findall(r"torch::Tensor (\w+)\(", loader):
            if declared.startswith(stem):
                assert re.search(rf"^torch::Tensor {declared}\(", source, re.M), f"{stem}.cu defines {declared}"


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on machines without CUDA")
def test_cuda_loader_says_it_needs_a_gpu():
    cuda = load(KERNELS / "cuda" / "cuda_kernels.py", "ref_cuda_loader")
    with pytest.raises(RuntimeError, match="need a CUDA GPU"):
        cuda.load_matmul()


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU exit")
def test_bench_exits_cleanly_without_a_gpu(capsys):
    bench = load(KERNELS / "bench_matmul.py", "bench_matmul_cpu_exit")
    assert bench.main(["--quick"]) == 0
    assert "needs a CUDA GPU" in capsys.readouterr().out


@pytest.mark.parametrize(
    "patch", sorted((ROOT / "labs" / "cuda-matmul" / "wrong").glob("*.patch")), ids=lambda p: p.stem
)
def test_wrong_variant_patches_still_apply_to_the_reference(patch, tmp_path):
    """The wrong/ patches are diffs against kernels/: editing a reference kernel
    must come with regenerated patches (roadmap dev check then proves they fail)."""
    import subprocess

    from roadmap_cli.labs.starter_build import solution_text

    # The solution view (markers and starter lines stripped) of every file a patch may touch.
    kernel_files = (
        ("triton", "vector_add.py"),
        ("triton", "matmul.py"),
        ("cuda", "vector_add.cu"),
        ("cuda", "matmul.cu"),
        ("cuda", "cuda_kernels.py"),
    )
    for folder, name in kernel_files:
        (tmp_path / name).write_text(solution_text((KERNELS / folder / name).read_text(), name))
    result = subprocess.run(["git", "apply", "--check", str(patch)], cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


_AOT_COMPILE = """
import sys
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
sys.path.insert(0, sys.argv[1])
import matmul, vector_add

target = GPUTarget("cuda", 90, 32)
ints = ("M", "N", "K", "stride_am", "stride_ak", "stride_bk", "stride_bn", "stride_cm", "stride_cn")
blocks = {k: matmul._GPU_SMALL_BLOCKS[k] for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M")}
signature = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", **{k: "i32" for k in ints},
             **{k: "constexpr" for k in blocks}}
try:
    compiled = triton.compile(ASTSource(matmul.matmul_kernel, signature, blocks), target=target,
                              options={"num_warps": 4, "num_stages": 3})
except FileNotFoundError as exc:  # no ptxas
    print("SKIP", exc)
    sys.exit(0)
assert "mma" in compiled.asm["ptx"], "the fp16 matmul did not lower to tensor-core mma"
triton.compile(ASTSource(vector_add.add_kernel, {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32",
                                                 "n_elements": "i32", "BLOCK_SIZE": "constexpr"},
                         {"BLOCK_SIZE": 1024}), target=target)
print("OK")
"""


@pytest.mark.e2e  # every kernel through ptxas
@pytest.mark.slow
def test_reference_kernels_compile_for_a_hopper_gpu(tmp_path):
    """The interpreter accepts code the GPU compiler rejects: compile both
    kernels ahead of time for sm_90 (Triton's bundled ptxas, no GPU needed) and
    check the matmul lowers to tensor-core mma instructions. In a subprocess:
    the interpreter's patches in this process would break the compiler."""
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(TRITON_CACHE_DIR=str(tmp_path / "triton-cache"), TRITON_DEFAULT_FP_FUSION="1")
    result = subprocess.run(
        [sys.executable, "-c", _AOT_COMPILE, str(KERNELS / "triton")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    if result.stdout.startswith("SKIP"):
        pytest.skip(result.stdout)
    assert result.stdout.strip().endswith("OK")


# ---------------------------------------------------------------- the lab grader's helpers


@pytest.fixture
def lab_adapter(monkeypatch):
    tests_dir = ROOT / "labs" / "cuda-matmul" / "tests"
    monkeypatch.syspath_prepend(str(tests_dir))
    return load(tests_dir / "adapter.py", "cuda_matmul_lab_adapter")


def test_guarded_allocations_catch_writes_past_the_end_and_mark_unwritten(lab_adapter):
    original_empty = torch.empty
    with lab_adapter.guarded_allocations():
        out = torch.empty((2, 3))
        zeros = torch.zeros_like(out)
        ints = torch.empty(4, dtype=torch.int64)  # not guarded: falls through to torch
    assert bool((out == lab_adapter.SENTINEL).all()) and bool((zeros == 0).all()) and ints.shape == (4,)
    assert torch.empty is original_empty  # restored
    with lab_adapter.guarded_allocations() as guards:
        out = torch.empty(5)
        torch.as_strided(out, (6,), (1,)).fill_(1.0)  # one element too far: into the guard band
    assert len(guards.overruns()) == 1 and "past the end of a tensor of shape [5]" in guards.overruns()[0]


class _FakeExtension:
    @staticmethod
    def matmul_tiled(a, b):
        return "C"


def test_cuda_call_requires_the_learners_kernel_and_no_library_gemm(lab_adapter, monkeypatch):
    def profiled(names):
        return lambda fn, *args: (fn(*args), names)

    monkeypatch.setattr(lab_adapter, "_kernel_names", profiled(["matmul_tiled_kernel(float const*, ...)"]))
    assert lab_adapter._cuda_call(_FakeExtension, "matmul_tiled", "matmul_tiled_kernel", 1, 2) == "C"
    monkeypatch.setattr(lab_adapter, "_kernel_names", profiled(["sm90_xmma_gemm_f32f32_tf32", "matmul_tiled_kernel"]))
    with pytest.raises(AssertionError, match="library GEMM"):
        lab_adapter._cuda_call(_FakeExtension, "matmul_tiled", "matmul_tiled_kernel", 1, 2)
    monkeypatch.setattr(lab_adapter, "_kernel_names", profiled(["some_other_kernel"]))
    with pytest.raises(AssertionError, match="did not launch a kernel named matmul_tiled_kernel"):
        lab_adapter._cuda_call(_FakeExtension, "matmul_tiled", "matmul_tiled_kernel", 1, 2)
    monkeypatch.setattr(lab_adapter, "_kernel_names", profiled(None))  # profiler saw nothing: no verdict
    assert lab_adapter._cuda_call(_FakeExtension, "matmul_tiled", "matmul_tiled_kernel", 1, 2) == "C"
    with pytest.raises(AssertionError, match="no function 'matmul_naive'"):
        lab_adapter._cuda_call(_FakeExtension, "matmul_naive", "matmul_naive_kernel", 1, 2)
