"""The reference FlashAttention kernel (kernels/triton/flash_attention.py) against plain torch.

Runs under TRITON_INTERPRET=1 on small shapes when there is no CUDA GPU (the
interpreter runs one program at a time, so shapes stay tiny). fp16 and fp32
only on CPU: the interpreter mishandles bf16 dots (triton issue #11584).
"""

from __future__ import annotations

import importlib.util
import math
import os
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
ON_GPU = torch.cuda.is_available()
# Without a GPU, Triton must be in interpreter mode BEFORE triton is first imported:
# triton.language's own @jit helpers (tl.max, ...) are built at import time.
_TRITON_IMPORTED_EARLY = "triton" in sys.modules and os.environ.get("TRITON_INTERPRET") != "1"
if not ON_GPU:
    os.environ["TRITON_INTERPRET"] = "1"
pytest.importorskip("triton")

KERNEL_PATH = Path(__file__).resolve().parents[1] / "kernels" / "triton" / "flash_attention.py"
DEVICE = "cuda" if ON_GPU else "cpu"


@pytest.fixture(scope="module")
def fa():
    """Import the reference kernel module from kernels/ (not a package)."""
    if not ON_GPU and _TRITON_IMPORTED_EARLY:
        pytest.skip("triton was imported before TRITON_INTERPRET=1 was set; run this file on its own")
    spec = importlib.util.spec_from_file_location("roadmap_reference_flash_attention", KERNEL_PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _torch_attention(q, k, v, causal, scale):
    """fp32 (O, LSE) with plain torch ops."""
    n, d = q.shape[-2], q.shape[-1]
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    s = (q @ k.transpose(-2, -1)) * scale
    if causal:
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=s.device).triu(1), float("-inf"))
    return torch.softmax(s, dim=-1) @ v, torch.logsumexp(s, dim=-1)


def _inputs(seed, heads, kv_heads, seq, head_dim, dtype):
    gen = torch.Generator().manual_seed(seed)
    batch = 2 if seq < 32 else 1  # batch > 1 exercises the batch strides; keep the interpreter quick
    shapes = [(batch, heads, seq, head_dim), (batch, kv_heads, seq, head_dim), (batch, kv_heads, seq, head_dim)]
    q, k, v = (torch.randn(s, generator=gen) for s in shapes)
    k = k * torch.linspace(0.5, 3.0, seq)[:, None]  # row maxima move to later blocks: rescaling matters
    return [t.to(DEVICE, dtype) for t in (q, k, v)]


def _tol(dtype):
    return 1e-2 if dtype == torch.float16 else (5e-3 if ON_GPU else 1e-4)


CASES = [  # (heads, kv_heads, seq, head_dim, causal, dtype)
    (2, 2, 1, 16, False, torch.float32),
    (2, 2, 17, 64, False, torch.float16),
    (2, 2, 70, 32, True, torch.float32),
    (4, 2, 65, 16, True, torch.float16),
    (3, 1, 33, 80, False, torch.float32),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"h{c[0]}kv{c[1]}-n{c[2]}-d{c[3]}-c{int(c[4])}-{c[5]}")
def test_forward_and_backward_match_torch(fa, case):
    heads, kv_heads, seq, head_dim, causal, dtype = case
    q, k, v = _inputs(seq * 31 + head_dim, heads, kv_heads, seq, head_dim, dtype)
    leaves = [t.clone().requires_grad_(True) for t in (q, k, v)]
    o, lse = fa.flash_attention(*leaves, causal=causal)
    do = torch.randn_like(o)
    o.backward(do)

    ref_leaves = [t.detach().float().requires_grad_(True) for t in (q, k, v)]
    ref_o, ref_lse = _torch_attention(*ref_leaves, causal, None)
    ref_o.backward(do.float())

    atol = _tol(dtype)
    assert o.dtype == dtype and lse.dtype == torch.float32 and lse.shape == q.shape[:3]
    torch.testing.assert_close(o.float(), ref_o, atol=atol, rtol=atol)
    torch.testing.assert_close(lse, ref_lse, atol=atol, rtol=atol)
    for got, want in zip(leaves, ref_leaves):
        assert got.grad.shape == want.shape
        torch.testing.assert_close(got.grad.float(), want.grad, atol=atol, rtol=atol)


def test_non_contiguous_inputs_and_explicit_scale(fa):
    """Views of [B, N, H, D] storage (the layout after a QKV projection) work through strides."""
    gen = torch.Generator().manual_seed(7)
    q, k, v = (torch.randn(1, 40, 2, 32, generator=gen).to(DEVICE).transpose(1, 2) for _ in range(3))
    assert not q.is_contiguous()
    o, lse = fa.flash_attention_forward(q, k, v, causal=True, scale=0.25)
    ref_o, ref_lse = _torch_attention(q, k, v, True, 0.25)
    torch.testing.assert_close(o, ref_o, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(lse, ref_lse, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize(
    "shapes, message",
    [
        (((1, 2, 8, 16), (1, 2, 8, 16), (1, 2, 8, 16)), None),
        (((1, 3, 8, 16), (1, 2, 8, 16), (1, 2, 8, 16)), "multiple of kv_heads"),
        (((1, 2, 8, 8), (1, 2, 8, 8), (1, 2, 8, 8)), "between 16 and 128"),
        (((1, 2, 8, 16), (1, 2, 9, 16), (1, 2, 9, 16)), "kv_heads, seq"),
        (((2, 8, 16), (2, 8, 16), (2, 8, 16)), "batch, heads, seq"),
    ],
)
def test_input_validation(fa, shapes, message):
    tensors = [torch.zeros(s, device=DEVICE) for s in shapes]
    if message is None:
        fa._check_inputs(*tensors)
    else:
        with pytest.raises(ValueError, match=message):
            fa._check_inputs(*tensors)


_COMPILE_SCRIPT = r"""
import importlib.util, sys
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
spec = importlib.util.spec_from_file_location("fa", sys.argv[1])
fa = importlib.util.module_from_spec(spec); spec.loader.exec_module(fa)
kernels = {"fwd": (fa._attn_fwd_kernel, ["Q", "K", "V", "O", "LSE"]),
           "dkdv": (fa._attn_bwd_dkdv_kernel, ["Q", "K", "V", "DO", "LSE", "DELTA", "DK", "DV"]),
           "dq": (fa._attn_bwd_dq_kernel, ["Q", "K", "V", "DO", "LSE", "DELTA", "DQ"])}
for kind, (fn, ptrs) in kernels.items():
    block_m, block_n, warps, stages = fa._GPU_TILES[kind][0]
    for dtype, causal in ((("bf16", False),) if kind == "dkdv" else (("fp16", True),)):
        consts = dict(CAUSAL=causal, DOT_PRECISION="tf32", BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_D=64)
        sig = {n: "constexpr" if n in consts else
               ("*fp32" if n in ("LSE", "DELTA") else "*" + dtype) if n in ptrs else
               "fp32" if n in ("qk_scale", "sm_scale") else "i32" for n in fn.arg_names}
        triton.compile(ASTSource(fn, sig, consts), target=GPUTarget("cuda", 90, 32),
                       options=dict(num_warps=warps, num_stages=stages))
print("compiled")
"""


@pytest.mark.e2e  # every kernel through ptxas
@pytest.mark.slow
def test_kernels_compile_for_a_hopper_gpu(tmp_path):
    """The interpreter accepts things the GPU compiler rejects: compile each kernel for
    sm_90 (through PTX and ptxas, no GPU needed) in a process without TRITON_INTERPRET."""
    import subprocess
    import sys

    import triton

    if not (Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas").exists():
        pytest.skip("this triton build ships no ptxas")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(tmp_path / "triton-cache")
    env.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    done = subprocess.run(
        [sys.executable, "-c", _COMPILE_SCRIPT, str(KERNEL_PATH)], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0 and "compiled" in done.stdout, done.stderr[-3000:]
