"""GPU code paths checked on the CPU (issue 37): the mechanisms that need no GPU to exist.

What still needs a GPU is listed in docs/labs.md ("Verifiable only on a GPU") and run by
`roadmap dev check --gpu`.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]


def _load(path: Path, name: str):
    """A lab's grader helper module, imported from its file (its folder on sys.path for its siblings)."""
    sys.path.insert(0, str(path.parent))
    try:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(path.parent))


# ------------------------------------------------------------ devices never mix in reference checks


class OnGraderDevice(torch.Tensor):
    """A tensor that stands for one on the grader's device (CUDA on a GPU machine) while the learner's
    outputs come back as plain tensors: any op that mixes the two (beyond a 0-dim scalar) raises, as
    CUDA does for a CPU index into a CUDA tensor. `.cpu()` (or `.to(device)`) leaves the device."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        flat = [a for a in (*args, *kwargs.values())]
        flat += [x for a in flat if isinstance(a, (list, tuple)) for x in a]
        tensors = [a for a in flat if isinstance(a, torch.Tensor)]
        ours = any(type(t) is cls for t in tensors)
        plain = any(type(t) is not cls and t.dim() > 0 for t in tensors)
        name = getattr(func, "__name__", "")
        if ours and plain:
            raise RuntimeError(f"device mix in {name}: a grader-device tensor met a learner-side one")
        moves = name == "cpu" or (
            name == "to" and (any(isinstance(a, (torch.device, str)) for a in args[1:]) or "device" in kwargs)
        )
        with torch._C.DisableTorchFunctionSubclass():
            out = func(*args, **kwargs)
        if moves:
            return out.as_subclass(torch.Tensor) if isinstance(out, torch.Tensor) else out
        return torch._tensor._convert(out, cls) if ours else out


def test_flash_attention_reference_check_never_mixes_devices() -> None:
    """fp32 rows whose scores all sit near -250 take the `wide` path, which indexes the learner's O with a
    mask computed from the grader's tensors (issue 37: a device-mismatch error on every GPU)."""
    refs = _load(ROOT / "labs" / "flash-attention" / "tests" / "references.py", "fa_references_under_test")
    q, k, v = refs.make_qkv(7, 1, 2, 2, 33, 16, torch.float32, "negative")
    o, lse = refs.reference(q, k, v, False, None)  # the learner's (right) answer, on the learner's side
    q, k, v = (t.as_subclass(OnGraderDevice) for t in (q, k, v))
    assert bool((refs.fp32_score_rounding(q, k, v, None) > 0.1 * refs.tolerance(torch.float32)).any())
    refs.check_forward(o, lse, q, k, v, False, None)
    with pytest.raises(RuntimeError, match="device mix"):  # the stand-in really catches a mix
        _ = o[(q[..., 0] > 0).any(-1)[0, 0]]


# ------------------------------------------------------------ the measured roofline's bound

# Published large-GEMM fp16/bf16 figures (cuBLAS or as fast), TFLOP/s: GRADING.md's "H100 tuned bf16 GEMM
# ~780" (H200 has the same SMs and clocks); A100 cuBLAS ~290 of 312 (NVIDIA's A100 deep-learning figures).
# Every other card in the device table: 95% of its dense peak, more than any library reaches.
PUBLISHED_GEMM_TFLOPS = {"H100 SXM": 780.0, "H200 SXM": 780.0, "A100 SXM 80GB": 290.0}


def test_the_measured_roofline_admits_cublas_on_every_gpu_in_the_device_table() -> None:
    """gpu-architecture's impossible-time bound for torch.matmul at 4096^3 fp16 (issue 37: the tiled
    traffic model, 63 FLOP/B without cache reuse, called cuBLAS's real speed on an H100 'the timing is
    wrong'). Pure arithmetic over the device table."""
    from roadmap_cli.grading_kit import gpu_peaks

    ref = _load(ROOT / "labs" / "gpu-architecture" / "tests" / "reference.py", "ga_reference_under_test")
    size = 4096
    for _, peak in gpu_peaks._TABLE:
        ceiling = ref.matmul_ceiling_tflops(size, size, size, 2, peak.fp16_tflops, peak.hbm_gbps)
        published = PUBLISHED_GEMM_TFLOPS.get(peak.name, 0.95 * peak.fp16_tflops)
        assert published <= ceiling * 1.05, f"{peak.name}: cuBLAS's {published} TFLOP/s would be 'impossible'"
        assert 2 * peak.fp16_tflops > ceiling * 1.05, f"{peak.name}: twice the peak must still be refused"
    h100 = gpu_peaks.device_peak("NVIDIA H100 80GB HBM3")
    flops, nbytes = ref.matmul_traffic(size, size, size, 128, 128, 2)
    tiled = ref.attainable(flops / nbytes, h100.fp16_tflops, h100.hbm_gbps)
    assert tiled * 1.05 < PUBLISHED_GEMM_TFLOPS["H100 SXM"], "the old bound (tiled traffic) rejected cuBLAS"


# ------------------------------------------------------------ profiling: the harness's syncs


def _recorded_trace(middle_syncs: int) -> dict:
    """A CUDA profile as torch.profiler exports it: a fast model's launches and kernels, `middle_syncs`
    .item() calls between launches, then the two syncs every profiled call ends with (the harness's
    torch.cuda.synchronize() and the profiler's own on exit)."""
    ev, t = [], 0.0

    def x(cat, name, ts, dur, **args):
        ev.append(
            {
                "ph": "X",
                "cat": cat,
                "name": name,
                "pid": 1,
                "tid": 7 if cat != "kernel" else 0,
                "ts": ts,
                "dur": dur,
                "args": args,
            }
        )

    for i in range(3):
        x("cpu_op", "aten::addmm", t, 8.0, **{"Input Dims": [[64], [16, 64], [64, 64]]})
        x("cuda_runtime", "cudaLaunchKernel", t + 2, 4.0, correlation=i)
        x("kernel", "ampere_sgemm_32x32", t + 10, 3.0, correlation=i, stream=7)
        t += 12
        if i < middle_syncs:
            x("cpu_op", "aten::_local_scalar_dense", t, 6.0)
            x("cuda_runtime", "cudaStreamSynchronize", t + 1, 4.0)
            t += 8
    x("cuda_runtime", "cudaDeviceSynchronize", t + 5, 9.0)
    x("cuda_runtime", "cudaDeviceSynchronize", t + 20, 2.0)
    return {"traceEvents": ev}


def test_profiling_ignores_the_syncs_after_the_last_kernel() -> None:
    """profiling Part 5 (issue 37): the fixed model's trace holds exactly the two trailing syncs, which
    equal the host-sync threshold; without them it shows nothing, and a sync between launches still counts."""
    lab = ROOT / "labs" / "profiling"
    refs = _load(lab / "tests" / "refs.py", "pf_refs_under_test")
    fast = _recorded_trace(middle_syncs=0)
    assert refs.find_bottlenecks(fast) == ["host-sync"]  # the trap: 2 syncs = the threshold
    trimmed = refs.without_trailing_syncs(fast)
    assert refs.bottleneck_counts(trimmed)["host-sync"] == 0 and refs.find_bottlenecks(trimmed) == []
    solution = _load(lab / "solution" / "bottlenecks.py", "pf_solution_under_test")
    assert solution.find_bottlenecks(trimmed) == []
    slow = refs.without_trailing_syncs(_recorded_trace(middle_syncs=1))
    assert refs.bottleneck_counts(slow)["host-sync"] == 2 and "host-sync" in solution.find_bottlenecks(slow)


# ------------------------------------------------------------ load_inline behind the OS wall

_BUILD = """
import sys, time, torch
from torch.utils.cpp_extension import load_inline
start = time.perf_counter()
ext = load_inline(name="roadmap_wall_probe_v1", cpp_sources="int twice(int x) { return 2 * x; }",
                  functions=["twice"], verbose=False)
print("twice", ext.twice(21), round(time.perf_counter() - start, 2))
"""


@pytest.mark.e2e
@pytest.mark.slow  # one torch extension build: ~30 s on an idle core
def test_load_inline_builds_and_loads_behind_the_wall(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A C++ load_inline from inside the wall on the CPU, with the folder rules CUDA's builds use (issue 37:
    ~/.cache/torch_extensions is read-only behind the wall, so every load failed with EROFS). The second
    load reuses the build; a killed build's lock file is cleared before the next learner process starts."""
    import os
    import subprocess

    from roadmap_cli.grading import isolation
    from roadmap_cli.grading_kit import learner_extras, oswall, sandbox
    from roadmap_cli.labs.spec import find_lab

    oswall._probe.cache_clear()
    if oswall._probe()[0] is None:
        if os.environ.get("ROADMAP_REQUIRE_BWRAP") == "1":
            pytest.fail(f"{oswall._probe()[1]} (ROADMAP_REQUIRE_BWRAP=1)", pytrace=False)
        pytest.skip(oswall._probe()[1])
    monkeypatch.setenv("ROADMAP_LABS_DIR", str(ROOT / "tests" / "fixtures_labs" / "labs"))
    monkeypatch.setenv(learner_extras.CACHE_VAR, str(tmp_path / "gpu-cache"))
    monkeypatch.delenv("TORCH_EXTENSIONS_DIR", raising=False)
    ws, scratch, shim = (tmp_path / name for name in ("ws", "scratch", "shim"))
    for folder in (ws, scratch, shim):
        folder.mkdir()
    view = isolation.learner_view(find_lab("adder"), str(ws), str(scratch), str(shim))
    env = sandbox.learner_env({"workspace": str(ws), "os_wall": view})
    extensions = Path(env["TORCH_EXTENSIONS_DIR"])
    assert extensions.is_relative_to(tmp_path / "gpu-cache") and str(extensions) in view["read_write"]
    assert env["TRITON_CACHE_DIR"] in view["read_write"]

    # One folder per workspace: on a cohort's worker one submission must not leave a built extension another
    # learner's load_inline would load.
    other_ws = tmp_path / "other-ws"
    other_ws.mkdir()
    assert (
        Path(sandbox.learner_env({"workspace": str(other_ws), "os_wall": None})["TORCH_EXTENSIONS_DIR"]) != extensions
    )

    def build(environment: dict, timeout: float = 600) -> subprocess.CompletedProcess:
        with oswall.walled([sys.executable, "-I", "-c", _BUILD], view) as (argv, fds):
            return subprocess.run(
                argv, env=environment, cwd=ws, capture_output=True, text=True, timeout=timeout, pass_fds=fds
            )

    # (Without the extensions folder torch would build under the learner's private HOME, an empty tmpfs the wall
    # makes per process: every grade would build again.)
    first = build(env)
    assert first.returncode == 0 and first.stdout.startswith("twice 42"), first.stderr[-2000:]
    lease = learner_extras.ExtensionsLease(extensions)
    try:
        assert lease.renew() == []  # this grade's learner process starts
        stale = extensions / "roadmap_wall_probe_v1" / "lock"
        stale.write_text("")  # what a build killed mid-way leaves
        other = learner_extras.ExtensionsLease(extensions)
        assert other.renew() == [] and stale.exists()  # another grade holds the folder: its build may be live
        other.close()
        assert lease.renew() == [stale] and not stale.exists()  # alone now: the lock was a dead build's
        again = build(env, timeout=120)
        assert again.returncode == 0 and again.stdout.startswith("twice 42"), again.stderr[-2000:]
        assert float(again.stdout.split()[-1]) < float(first.stdout.split()[-1]) / 2  # loaded, not built again
    finally:
        lease.close()


def test_stale_lock_clearing_never_follows_a_learner_symlink(tmp_path: Path) -> None:
    """The extensions folder is read-write to learner code; the engine clears `<entry>/lock` outside the wall.
    Red team route X1: an entry that is a symlink to another folder of the grading user's made the engine delete
    that folder's `lock`. Links are never followed, at the entry or at the lock, nor for `.grades.lock`."""
    from roadmap_cli.grading_kit import learner_extras

    extensions = tmp_path / "ext"
    extensions.mkdir()
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "lock").write_text("host file")
    (extensions / "evil").symlink_to(victim)
    (extensions / "real").mkdir()
    (extensions / "real" / "lock").symlink_to(victim / "lock")  # a link named lock: removed as a link only
    (extensions / "dead").mkdir()
    (extensions / "dead" / "lock").write_text("")
    outside = tmp_path / "outside-lock"
    (extensions / ".grades.lock").symlink_to(outside)
    lease = learner_extras.ExtensionsLease(extensions)
    with pytest.raises(OSError):
        lease.renew()  # O_NOFOLLOW: the planted .grades.lock is refused, nothing is created through it
    assert not outside.exists()
    (extensions / ".grades.lock").unlink()
    try:
        assert lease.renew() == [extensions / "dead" / "lock"]
    finally:
        lease.close()
    assert (victim / "lock").read_text() == "host file" and not (extensions / "dead" / "lock").exists()


def test_rlimit_nproc_only_where_it_counts_per_namespace() -> None:
    from roadmap_cli.grading_kit.learner_extras import nproc_is_per_namespace

    assert nproc_is_per_namespace("5.14.0-1-amd64") and nproc_is_per_namespace("6.8.0-45-generic")
    assert not nproc_is_per_namespace("5.10.0-28-cloud-amd64") and not nproc_is_per_namespace("4.18.0-513.el8")
    assert not nproc_is_per_namespace("weird")


# ------------------------------------------------------------ flash-attention tiles per GPU

# Triton's max_shared_mem (the opt-in shared memory per block) by architecture.
SHARED_MEMORY_PER_BLOCK = {
    "sm_75 (T4)": 65536,
    "sm_80 (A100)": 166912,
    "sm_86 (A10, RTX 3090)": 101376,
    "sm_89 (L4, L40S, RTX 4090)": 101376,
    "sm_90 (H100, H200)": 232448,
}


def test_flash_attention_tiles_fit_each_gpus_shared_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 37: the default tiles at head_dim 128 need more shared memory than sm_86/89 give a block
    (OutOfResources below the autotune threshold, where nothing prunes them)."""
    fa = _load(ROOT / "kernels" / "triton" / "flash_attention.py", "fa_kernel_under_test")
    for arch, limit in SHARED_MEMORY_PER_BLOCK.items():
        monkeypatch.setattr(fa, "_shared_memory_per_block", lambda device, limit=limit: limit)
        for kind in ("fwd", "dkdv", "dq"):
            for block_d in (16, 32, 64, 128):
                for elem, candidates in ((2, fa._GPU_TILES[kind]), (4, [fa._GPU_TILES_FP32[kind]])):
                    tiles = fa._fitting_tiles(kind, candidates, block_d, elem, None)
                    assert tiles, (arch, kind, block_d)
                    for m, n, _, stages in tiles:
                        assert stages >= 1 and fa._tile_bytes(kind, m, n, block_d, stages, elem) <= limit, (
                            arch,
                            kind,
                            block_d,
                            elem,
                            (m, n, stages),
                        )
    monkeypatch.setattr(fa, "_shared_memory_per_block", lambda device: SHARED_MEMORY_PER_BLOCK["sm_90 (H100, H200)"])
    assert fa._fitting_tiles("fwd", fa._GPU_TILES["fwd"], 128, 2, None)[0] == fa._GPU_TILES["fwd"][0]
    small = SHARED_MEMORY_PER_BLOCK["sm_86 (A10, RTX 3090)"]
    default = fa._GPU_TILES["fwd"][0]
    assert fa._tile_bytes("fwd", default[0], default[1], 128, default[3], 2) > small  # the failure the issue saw


def test_temp_folder_caches_refuse_a_folder_another_account_made(tmp_path: Path, monkeypatch) -> None:
    """Red team (by reading): /tmp/roadmap-cpp-cache-<uid> was made with exist_ok and no owner check, so another
    local account could make it first and plant an artefact for the key of the source it submits."""
    import os

    from roadmap_cli.errors import GraderError
    from roadmap_cli.grading_kit import cpp_cache
    from roadmap_cli.paths import private_dir

    mine = tmp_path / "mine"
    mine.mkdir(mode=0o755)
    assert private_dir(mine) == mine and (os.stat(mine).st_mode & 0o777) == 0o700  # ours: closed to others
    other = tmp_path / "squatted"
    other.mkdir()
    try:
        os.chown(other, 4242, 4242)  # made by another account (CI runs as root, which may chown)
    except PermissionError:
        pytest.skip("only root can make a folder another account's")
    with pytest.raises(GraderError, match="another user's") as refused:
        private_dir(other)
    # rm -rf would fail for a user in a sticky /tmp: the way out is a folder of their own
    assert "set ROADMAP_CPP_CACHE to a folder of your own" in str(refused.value)
    assert "rm -rf" not in str(refused.value)
    with pytest.raises(GraderError, match="set ROADMAP_GPU_CACHE to a folder of your own"):
        private_dir(other, "ROADMAP_GPU_CACHE", "~/.cache/roadmap/gpu")
    link = tmp_path / "link"
    link.symlink_to(mine)
    with pytest.raises(GraderError, match="a link"):
        private_dir(link)
    monkeypatch.setenv("ROADMAP_CPP_CACHE", str(other))
    with pytest.raises(GraderError):
        cpp_cache.shared_cache_root()


# ------------------------------------------------------------ one build cache for dev check --gpu


def test_dev_check_gpu_shares_one_build_cache_and_learners_never_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Per workspace for learners' grades; one for every workspace of a `dev check --gpu` run (each grade there
    is a fresh folder, and nvcc plus flash-attention's Triton compiles per grade would blow its ten minutes)."""
    from roadmap_cli.grading_kit import learner_extras

    monkeypatch.setenv(learner_extras.CACHE_VAR, str(tmp_path / "cache"))
    monkeypatch.delenv(learner_extras.SCOPE_VAR, raising=False)
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    assert learner_extras.extensions_dir(a) != learner_extras.extensions_dir(b)
    assert learner_extras.triton_cache_dir(a) != learner_extras.triton_cache_dir(b)
    monkeypatch.setenv(learner_extras.SCOPE_VAR, "dev-check-gpu")
    assert learner_extras.extensions_dir(a) == learner_extras.extensions_dir(b)
    assert learner_extras.triton_cache_dir(a) == learner_extras.triton_cache_dir(b)
    assert (
        learner_extras.learner_env(a, "")["TRITON_CACHE_DIR"] == learner_extras.learner_env(b, "")["TRITON_CACHE_DIR"]
    )


def test_mps_folders_are_granted_only_when_real_and_harmless(tmp_path: Path, monkeypatch) -> None:
    """Red team route M1: `/tmp/nvidia-mps` (or $CUDA_MPS_PIPE_DIRECTORY) was granted read-write behind the wall
    after following links, on every grade: a link to the user's home opened the home to learner code."""
    import os

    from roadmap_cli.grading_kit import learner_extras, oswall

    real = tmp_path / "mps"
    real.mkdir()
    home_link = tmp_path / "evil-mps"
    home_link.symlink_to(os.path.expanduser("~"))
    monkeypatch.setattr(oswall, "gpu_devices", lambda: [])
    monkeypatch.setenv("CUDA_MPS_PIPE_DIRECTORY", str(real))
    assert learner_extras.mps_dirs() == []  # no GPU here: nothing to reach
    monkeypatch.setattr(oswall, "gpu_devices", lambda: ["/dev/nvidia0"])
    assert learner_extras.mps_dirs() == [str(real)]
    monkeypatch.setenv("CUDA_MPS_PIPE_DIRECTORY", str(home_link))
    assert learner_extras.mps_dirs() == []  # a link: refused
    monkeypatch.setenv("CUDA_MPS_PIPE_DIRECTORY", os.path.expanduser("~"))
    assert learner_extras.mps_dirs() == []  # holds the home
    monkeypatch.setenv("CUDA_MPS_PIPE_DIRECTORY", "/")
    assert learner_extras.mps_dirs() == []  # holds everything
