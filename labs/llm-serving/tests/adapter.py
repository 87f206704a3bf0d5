"""The only door from the grader to the learner's code (workspace modules
server, loadgen, tensor_parallel, quantize, capacity).

Every `@learner_side` function runs in the learner process under the engine's
sandbox (in-process when the tests run by hand) and returns plain data; the
tests decide pass or fail in the grader process.

The learner's SERVER is a third process: `start_server` spawns it from the
learner process (so it inherits the sandbox's limits and scrubbed
environment) in a new session, and returns its pid; the grader process only
talks HTTP to it on 127.0.0.1, and asks the learner process whether it still
runs and to kill its process group when the part ends (`conftest.running_server`):
the pid is the learner process's number, which behind the OS wall (its own
pid namespace) names another process, or none, in the grader's.
"""

from __future__ import annotations

import os
import sys

# Imported here so that the learner process imports torch while pytest collects (the engine preloads this
# module there), and the server it forks (start_server) finds torch imported. The grader process has it anyway.
import torch

from roadmap_cli import grading_kit as kit

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.append(_HERE)

learner_side = kit.learner_side


def _module(name: str):
    return kit.learner_module(name)


# ---------------------------------------------------------------- part 1: the server


@learner_side(timeout_s=60)
def start_server(port: int, max_batch: int, step_overhead_s: float, num_blocks: int = 128,
                 block_size: int = 16) -> int:
    """Start the workspace's `server.py --host 127.0.0.1 --port PORT ...` as
    `__main__`, as a child of this process in its own session (its process
    group id is its pid). Returns the pid; readiness is the grader's business
    (it polls /health).

    In a learner process the child is a FORK of it: torch is imported there
    already (see the import above), and the audit hook, the limits and the import layout are in place,
    so the server answers in about half a second instead of the 2 s a new
    Python spends importing torch (a server starts once per server module and
    per server variant of `dev check`). The learner process is a single
    thread, and the two parts that start a server come first in a grade
    (lab.yaml's order), before any part runs a torch op there: the fork
    copies no lock another thread holds and no started thread pool. Run by
    hand (in the grader's own process, which has threads), it is a new Python
    instead."""
    from roadmap_cli.grading_kit import sandbox

    script = str(kit.workspace() / "server.py")
    args = ["--host", "127.0.0.1", "--port", str(port), "--max-batch", str(max_batch),
            "--step-overhead", repr(float(step_overhead_s)), "--num-blocks", str(num_blocks),
            "--block-size", str(block_size)]
    if not sandbox.in_learner_process():
        import subprocess

        from roadmap_cli.grading_kit.learner_spawn import learner_python

        # Under the learner process's audit hook too (learner_spawn.py): the server runs learner code.
        proc = subprocess.Popen(learner_python(script, *args), cwd=str(kit.workspace()),
                                env=dict(os.environ, OMP_NUM_THREADS="1"), stdin=subprocess.DEVNULL,
                                start_new_session=True)
        return int(proc.pid)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        os.setsid()
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        # Only stdin/stdout/stderr stay open: the learner's request and reply pipes must close with the
        # learner process, never live on in its server.
        os.closerange(3, 1 << 16)
        os.environ["OMP_NUM_THREADS"] = "1"
        sys.argv = [script, *args]
        import runpy

        runpy.run_path(script, run_name="__main__")
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # noqa: BLE001 - the server's own traceback, as `python server.py` would print it
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _child_state(pid: int):
    """The state letter of `pid` if it is a child of this process (a server this learner process started),
    else None: never a process another one's number now names (a learner process started after a crash
    reuses numbers)."""
    try:
        with open(f"/proc/{int(pid)}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[-1].split()
    except OSError:
        return None
    return fields[0] if int(fields[1]) == os.getpid() else None


@learner_side(timeout_s=30)
def server_alive(pid: int) -> bool:
    """Whether the server `start_server` returned still runs (an exited, unreaped one does not)."""
    return _child_state(pid) not in (None, b"Z")


@learner_side(timeout_s=30)
def stop_server(pid: int) -> None:
    """SIGKILL the server's process group (its own session: pgid == pid) and reap it (our child)."""
    import contextlib
    import signal

    pid = int(pid)
    if _child_state(pid) is None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, 0)


@learner_side(timeout_s=30)
def stop_holdback_many(cases: list) -> list[int]:
    """stop_holdback for every (text, stops) case in ONE call to the learner process (a call costs tens of ms)."""
    fn = _module("server").stop_holdback
    return [int(fn(text, list(stops))) for text, stops in cases]


@learner_side(timeout_s=30)
def histogram_observe(buckets: list, values: list) -> dict:
    """A fresh server.Histogram with these bounds, every value observed: its counts, sum and count."""
    hist = _module("server").Histogram("probe_seconds", "probe", tuple(float(b) for b in buckets))
    for value in values:
        hist.observe(float(value))
    return {"counts": [int(c) for c in hist.counts], "sum": float(hist.sum), "count": int(hist.count)}


# ---------------------------------------------------------------- part 2: the load generator


@learner_side(timeout_s=30)
def poisson_arrivals(rate: float, n: int, seed: int) -> list[float]:
    return [float(t) for t in _module("loadgen").poisson_arrivals(rate, n, seed)]


@learner_side(timeout_s=30)
def poisson_arrivals_global_state(rate: float, n: int, seed: int) -> dict:
    """poisson_arrivals run between two reads of the global `random` state (seeded here first): whether it
    touched that state, and its arrivals."""
    import random

    random.seed(987654321)
    before = random.getstate()
    arrivals = [float(t) for t in _module("loadgen").poisson_arrivals(rate, n, seed)]
    return {"arrivals": arrivals, "global_state_untouched": random.getstate() == before}


@learner_side(timeout_s=30)
def percentile(values: list[float], q: float) -> float:
    return float(_module("loadgen").percentile(list(values), q))


@learner_side(timeout_s=30)
def summarize(records: list[dict]) -> dict:
    return _plain(_module("loadgen").summarize([dict(r) for r in records]))


@learner_side(timeout_s=150)
def run_load(base_url: str, requests: list, arrivals: list, concurrency=None, model: str = "tiny-char-lm",
             temperature: float = 0.0) -> list[dict]:
    records = _module("loadgen").run_load(base_url, [tuple(r) for r in requests], list(arrivals),
                                          concurrency=concurrency, model=model, temperature=temperature)
    return [_plain(r) for r in records]


@learner_side(timeout_s=30)
def write_report(results: list[dict], json_path: str, svg_path: str) -> None:
    _module("loadgen").write_report(results, json_path, svg_path)


def _plain(value):
    """Learner data as builtins (a numpy float or a dict subclass become plain)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)
    try:
        return float(value)
    except (TypeError, ValueError):
        return repr(value)


# ---------------------------------------------------------------- part 3: tensor parallelism


@learner_side(timeout_s=60)
def shard_weights(weights: dict, cfg: dict, rank: int, world_size: int) -> dict:
    tp, eng = _module("tensor_parallel"), _module("engine")
    shard = tp.shard_weights(dict(weights), eng.ModelConfig(**cfg), rank, world_size)
    return {str(k): v.detach().clone() for k, v in shard.items()}


@learner_side(timeout_s=30)
def allreduce_bytes_per_token(cfg: dict, dtype_bytes: int) -> int:
    return int(_module("tensor_parallel").allreduce_bytes_per_token(_module("engine").ModelConfig(**cfg),
                                                                    dtype_bytes))


def _tp_worker(rank: int, world_size: int, port: int, weights: dict, cfg: dict, ids, queue) -> None:
    """One rank: gloo over loopback, all_reduce counted, the learner's shard + forward."""
    import torch.distributed as dist

    torch.set_num_threads(1)
    try:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size)
        calls = []
        real = dist.all_reduce

        def counting_all_reduce(tensor, *args, **kwargs):
            calls.append(int(tensor.numel() * tensor.element_size()))
            return real(tensor, *args, **kwargs)

        dist.all_reduce = counting_all_reduce
        tp, eng = _module("tensor_parallel"), _module("engine")
        mcfg = eng.ModelConfig(**cfg)
        shard = tp.shard_weights(weights, mcfg, rank, world_size)
        calls.clear()                       # count the forward only
        with torch.no_grad():
            logits = tp.tp_forward(shard, mcfg, torch.tensor(ids), world_size)
        dist.all_reduce = real
        dist.destroy_process_group()
        # numpy, not a tensor: torch would send a shared-memory handle that dies with this process
        queue.put((rank, {"logits": logits.detach().numpy().copy(), "allreduce_bytes": calls, "error": None}))
    except BaseException as exc:  # noqa: BLE001 - reported as data
        queue.put((rank, {"logits": None, "allreduce_bytes": [], "error": f"{type(exc).__name__}: {exc}"}))


@learner_side(timeout_s=120)
def run_tensor_parallel(weights: dict, cfg: dict, ids: list[int], world_size: int, port: int) -> dict:
    """Run the learner's tp_forward on `world_size` forked ranks. Returns
    {rank: {"logits", "allreduce_bytes": [bytes per call], "error"}}."""
    import multiprocessing as mp
    import queue as queue_mod

    ctx = mp.get_context("fork")
    q = ctx.Queue()
    procs = [ctx.Process(target=_tp_worker, args=(r, world_size, port, weights, cfg, ids, q), daemon=True)
             for r in range(world_size)]
    for p in procs:
        p.start()
    results = {}
    try:
        for _ in range(world_size):
            rank, res = q.get(timeout=90)
            results[int(rank)] = res
    except queue_mod.Empty:
        pass
    finally:
        for p in procs:
            p.join(timeout=5)
            if p.is_alive():
                p.kill()
                p.join()

    for res in results.values():
        if res["logits"] is not None:
            res["logits"] = torch.from_numpy(res["logits"])
    for r in range(world_size):
        results.setdefault(r, {"logits": None, "allreduce_bytes": [], "error": "this rank never answered "
                               "(a hang in an all_reduce that the other rank did not call?)"})
    return results


# ---------------------------------------------------------------- part 4: quantization


@learner_side(timeout_s=60)
def quantize_call(name: str, *args):
    """quantize.<name>(*args), the result as a tuple of tensors / an int."""
    out = getattr(_module("quantize"), name)(*args)
    if isinstance(out, tuple):
        return tuple(t.detach().clone() if hasattr(t, "detach") else t for t in out)
    return out.detach().clone() if hasattr(out, "detach") else int(out)


@learner_side(timeout_s=60)
def int4_linear_largest_float(x, packed, scales, zeros, group_size: int) -> dict:
    """int4_linear run under a dispatch mode that records the largest floating-point tensor any torch op
    makes while it runs (the fp32 weight, if it is ever built, is one), and its output."""
    from torch.utils._python_dispatch import TorchDispatchMode

    largest = {"numel": 0, "shape": None}

    class _Largest(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for t in (out if isinstance(out, (tuple, list)) else (out,)):
                if isinstance(t, torch.Tensor) and t.is_floating_point() and t.numel() > largest["numel"]:
                    largest.update(numel=t.numel(), shape=tuple(t.shape))
            return out

    with _Largest():
        y = _module("quantize").int4_linear(x, packed, scales, zeros, group_size)
    return {"y": y.detach().clone(), "largest_numel": int(largest["numel"]), "largest_shape": largest["shape"]}


@learner_side(timeout_s=120)
def quantize_model(weights: dict, scheme: str, group_size: int = 128) -> dict:
    """Every linear weight quantized and dequantized by the learner's functions;
    the other weights unchanged. The grader computes the perplexity."""
    qz = _module("quantize")
    out = {}
    for name, w in weights.items():
        if name.rsplit(".", 1)[-1] in ("wq", "wk", "wv", "wo", "w1", "w2"):
            if scheme == "int8":
                out[name] = qz.dequantize_int8(*qz.quantize_int8(w)).detach().clone()
            else:
                packed, scales, zeros = qz.quantize_int4(w, group_size)
                out[name] = qz.dequantize_int4(packed, scales, zeros, group_size).detach().clone()
        else:
            out[name] = w
    return out


# ---------------------------------------------------------------- part 5: capacity planning


def _specs(model: dict, gpu: dict | None = None, traffic: dict | None = None):
    cap = _module("capacity")
    return (cap.ModelSpec(**model), None if gpu is None else cap.GpuSpec(**gpu),
            None if traffic is None else cap.Traffic(**traffic))


@learner_side(timeout_s=60)
def capacity_answers(cases: list[dict]) -> list[dict]:
    """For each case {"model", "gpu", "traffic", "tp", "target", "block_size", "max_tp"}:
    every capacity function's answer (or the error text), as plain data."""
    cap = _module("capacity")
    answers = []
    for case in cases:
        m, g, t = _specs(case["model"], case["gpu"], case["traffic"])
        tp, bs = case["tp"], case["block_size"]
        row = {}
        for key, call in (
                ("kv_bytes_per_token", lambda: cap.kv_bytes_per_token(m, tp)),
                ("kv_capacity_tokens", lambda: cap.kv_capacity_tokens(m, g, tp, bs)),
                ("max_concurrent_seqs", lambda: cap.max_concurrent_seqs(case["capacity"], case["seq_len"], bs)),
                ("prefill_time_s", lambda: cap.prefill_time_s(m, g, t, tp)),
                ("p99_ttft_s", lambda: cap.p99_ttft_s(case["service"], case["rate_per_replica"])),
                ("replicas_needed", lambda: cap.replicas_needed(m, g, t, tp, case["target"], bs)),
                ("plan", lambda: cap.plan(m, g, t, case["target"], case["max_tp"], bs))):
            try:
                row[key] = _plain(call())
            except Exception as exc:  # noqa: BLE001
                row[key] = f"error: {type(exc).__name__}: {exc}"
        answers.append(row)
    return answers
