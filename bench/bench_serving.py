"""The llm-serving lab's reference, measured: continuous batching vs sequential
serving, and the tensor-parallel all-reduce traffic against the formula.

1. Starts the reference server (labs/llm-serving/solution/server.py, max batch
   16, 20 ms step overhead) on a free loopback port and sends N requests, all
   arriving at t=0, with the reference load generator at concurrency 1
   (sequential serving), 4 and 16, alternating the order over --rounds rounds.
   Prints tokens/s and p99 TTFT (from ARRIVAL, i.e. including the time a request
   waited for a client slot, what a user sees) per concurrency, and the ratios
   against concurrency 1 of the same round: absolute numbers on a loaded 2-core
   box mean little, ratios do.
2. Runs the reference tp_forward on 2 gloo processes, counts the bytes passed
   to all_reduce per forward, and compares bytes per token with
   allreduce_bytes_per_token (2 * n_layers * d_model * 4).

    OMP_NUM_THREADS=1 python bench/bench_serving.py [--requests 16] [--tokens 32] [--rounds 2]
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOLUTION = ROOT / "labs" / "llm-serving" / "solution"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(port: int, max_batch: int) -> subprocess.Popen:
    import httpx

    proc = subprocess.Popen(
        [sys.executable, "server.py", "--port", str(port), "--max-batch", str(max_batch)],
        cwd=SOLUTION,
        env=dict(os.environ, OMP_NUM_THREADS="1"),
        start_new_session=True,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    raise SystemExit("the reference server did not start")


def serving(args) -> None:
    sys.path.insert(0, str(SOLUTION))
    import loadgen

    port = free_port()
    proc = start_server(port, 16)
    url = f"http://127.0.0.1:{port}"
    requests = [(f"user: request {i} " + "abcdefgh"[: i % 8], args.tokens) for i in range(args.requests)]
    levels = (1, 4, 16)
    rows: dict[int, list[tuple[float, float]]] = {c: [] for c in levels}
    ratios: dict[int, list[tuple[float, float]]] = {c: [] for c in levels}
    try:
        for rnd in range(args.rounds):
            order = levels if rnd % 2 == 0 else tuple(reversed(levels))
            measured = {}
            for c in order:
                records = loadgen.run_load(url, requests, [0.0] * len(requests), concurrency=c)
                tps = loadgen.summarize(records)["throughput_tok_s"]
                # TTFT from arrival (t=0 for everyone): the client-side queue counts too.
                p99_ttft = loadgen.percentile([r["first_token"] for r in records], 99)
                measured[c] = (tps, p99_ttft)
                rows[c].append(measured[c])
            for c in levels:
                ratios[c].append((measured[c][0] / measured[1][0], measured[c][1] / measured[1][1]))
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    print(
        f"serving: {args.requests} requests x {args.tokens} tokens, all arriving at t=0, max batch 16, "
        f"20 ms/step, {args.rounds} rounds (order alternated)"
    )
    print(f"{'concurrency':>11} {'tokens/s':>10} {'p99 TTFT s':>11} {'tok/s vs c=1':>13} {'p99 TTFT vs c=1':>16}")
    for c in levels:
        tps = statistics.median(r[0] for r in rows[c])
        ttft = statistics.median(r[1] for r in rows[c])
        rt = statistics.median(r[0] for r in ratios[c])
        rl = statistics.median(r[1] for r in ratios[c])
        print(f"{c:>11} {tps:>10.1f} {ttft:>11.3f} {rt:>12.2f}x {rl:>15.2f}x")


def _tp_rank(rank: int, port: int, queue) -> None:
    import torch
    import torch.distributed as dist

    sys.path.insert(0, str(SOLUTION))
    import engine as eng
    import tensor_parallel as tp

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    sent, real = [], dist.all_reduce

    def counting(tensor, *a, **k):
        sent.append(tensor.numel() * tensor.element_size())
        return real(tensor, *a, **k)

    dist.all_reduce = counting
    cfg = eng.ModelConfig()
    shard = tp.shard_weights(eng.init_weights(cfg), cfg, rank, 2)
    out = []
    for T in (1, 16, 128):
        sent.clear()
        t0 = time.perf_counter()
        with torch.no_grad():
            tp.tp_forward(shard, cfg, torch.arange(T) % cfg.vocab_size, 2)
        out.append((T, len(sent), sum(sent), time.perf_counter() - t0))
    dist.destroy_process_group()
    queue.put((rank, out, tp.allreduce_bytes_per_token(cfg)))


def tensor_parallel() -> None:
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=_tp_rank, args=(r, port, q)) for r in range(2)]
    for p in procs:
        p.start()
    results = dict((r, (out, formula)) for r, out, formula in (q.get(timeout=120) for _ in procs))
    for p in procs:
        p.join()
    out, formula = results[0]
    print(f"\ntensor parallel (2 gloo ranks, lab model): formula 2 * n_layers * d_model * 4 = {formula} B/token")
    print(f"{'tokens':>6} {'all-reduces':>11} {'bytes':>9} {'bytes/token':>11} {'vs formula':>10}")
    for T, calls, total, _ in out:
        print(f"{T:>6} {calls:>11} {total:>9} {total / T:>11.0f} {total / T / formula:>9.2f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=16)
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    serving(args)
    tensor_parallel()


if __name__ == "__main__":
    main()
