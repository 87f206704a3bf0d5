"""The grader's side of the live cluster: its own stub replicas (stub_replica.py,
started here, killed here), the learner's router program (forked learner-side
by adapter.start_router), and an asyncio HTTP client that sends a trace and
records, with the grader's own clock, when each request was sent and when its
first token arrived."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

import adapter

HERE = os.path.dirname(os.path.abspath(__file__))
START_TIMEOUT_S = 30.0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_replica(port: int, index: int, token_ms: float, prefill_ms: float) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-I", "-S", os.path.join(HERE, "stub_replica.py"), "--port", str(port),
                             "--index", str(index), "--token-ms", repr(token_ms),
                             "--prefill-ms-per-token", repr(prefill_ms)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, start_new_session=True)


async def _get(port: int, path: str, timeout: float = 5.0):
    reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), timeout)
    try:
        writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        await writer.drain()
        data = await asyncio.wait_for(reader.read(), timeout)
    finally:
        writer.close()
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ")[1])
    return status, json.loads(body) if body else None


def get(port: int, path: str):
    return asyncio.run(_get(port, path))


def wait_up(port: int, what: str, alive) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        with contextlib.suppress(OSError, ValueError, IndexError, asyncio.TimeoutError):
            if get(port, "/health")[0] == 200:
                return
        if not alive():
            pytest.fail(f"{what} exited before answering GET /health (run it by hand to see why; "
                        "README.md, section \"The cluster\")")
        if time.monotonic() > deadline:
            pytest.fail(f"{what} did not answer GET /health within {START_TIMEOUT_S:.0f} s "
                        "(README.md, section \"The cluster\")")
        time.sleep(0.02)


class Cluster:
    def __init__(self, n: int, policy: str, imbalance: int = 4, interval: float = 0.1, fail: int = 2,
                 passes: int = 2, token_ms: float = 2.0, prefill_ms: float = 0.05):
        self.n, self.token_ms, self.prefill_ms = n, token_ms, prefill_ms
        self.ports = [free_port() for _ in range(n)]
        self.replicas = [start_replica(p, i, token_ms, prefill_ms) for i, p in enumerate(self.ports)]
        self.router_pid = None
        for i, (p, proc) in enumerate(zip(self.ports, self.replicas)):
            wait_up(p, f"stub replica {i} (the grader's own)", lambda proc=proc: proc.poll() is None)
        self.port = free_port()
        self.router_pid = adapter.start_router(self.port, self.ports, policy, imbalance, interval, fail, passes)
        wait_up(self.port, "your router (`python serve.py --port PORT --replicas ...`)",
                lambda: adapter.router_alive(self.router_pid))

    def kill(self, i: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.replicas[i].pid, signal.SIGKILL)
        self.replicas[i].wait()

    def restart(self, i: int) -> None:
        self.replicas[i] = start_replica(self.ports[i], i, self.token_ms, self.prefill_ms)
        wait_up(self.ports[i], f"stub replica {i}", lambda: self.replicas[i].poll() is None)

    def replica_stats(self) -> list[dict]:
        return [get(p, "/stats")[1] for p in self.ports]

    def close(self) -> None:
        if self.router_pid is not None:
            with contextlib.suppress(Exception):
                adapter.stop_router(self.router_pid)
        for proc in self.replicas:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@contextlib.contextmanager
def cluster(*args, **kwargs):
    c = None
    try:
        c = Cluster(*args, **kwargs)
        yield c
    finally:
        if c is not None:
            c.close()


async def _one(port: int, req: dict, t0: float, at: float, rec: dict) -> None:
    await asyncio.sleep(max(0.0, t0 + at - time.monotonic()))
    rec["sent"] = time.monotonic()
    rec["events"] = []
    rec["token_times"] = []
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        body = json.dumps(req).encode()
        writer.write(f"POST /generate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
        await writer.drain()
        await reader.readline()
        while (await reader.readline()).strip():
            pass
        while True:
            line = await asyncio.wait_for(reader.readline(), 20.0)
            if not line:
                break
            ev = json.loads(line)
            if "token" in ev:
                rec["token_times"].append(time.monotonic())
            rec["events"].append(ev)
        writer.close()
    except (OSError, ValueError, asyncio.TimeoutError) as exc:
        rec["client_error"] = f"{type(exc).__name__}: {exc}"


async def _trace(port, requests, arrivals, on_start):
    t0 = time.monotonic()
    recs = [{} for _ in requests]
    tasks = [asyncio.create_task(_one(port, r, t0, a, rec)) for r, a, rec in zip(requests, arrivals, recs)]
    if on_start is not None:
        await on_start(t0)
    await asyncio.gather(*tasks)
    return recs


def run_trace(port: int, requests: list, arrivals: list, on_start=None) -> list[dict]:
    """Send requests[j] at arrivals[j] seconds after the start; per request: sent, token_times
    (grader's clock), events (the JSON lines), client_error when the connection itself failed."""
    return asyncio.run(_trace(port, requests, arrivals, on_start))


def token_at(prompt, k):
    return (sum(prompt) * 31 + 7 * k + len(prompt)) % 1000
