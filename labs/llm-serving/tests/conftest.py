"""Grader for the llm-serving lab. adapter.py is the only way to the learner's
code; grader_engine.py is the grader's own copy of the given engine (its
offline generation and forward pass are the references); reference.py holds
the grader's statistics, quantization and capacity formulas; http_helpers.py
the HTTP client side (OpenAI requests, SSE parsing, /metrics parsing)."""

import atexit
import contextlib
import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import pytest  # noqa: E402
import torch  # noqa: E402

# Tiny tensors everywhere: one thread avoids pool overhead on a 2-core machine.
torch.set_num_threads(1)

SERVER_START_TIMEOUT_S = 90.0   # importing torch + fastapi on a loaded 2-core box


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def kill_group(pid: int) -> None:
    """SIGKILL the server's process group, from the learner process that started it (the pid is
    its number: behind the OS wall that is another pid namespace's)."""
    import adapter
    from roadmap_cli.grading_kit import LearnerError

    with contextlib.suppress(LearnerError):  # a learner process that is gone took its server with it
        adapter.stop_server(pid)


def _alive(pid: int) -> bool:
    import adapter
    from roadmap_cli.grading_kit import LearnerError

    try:
        return adapter.server_alive(pid)
    except LearnerError:
        return False


_started: set[int] = set()


@atexit.register
def _kill_leftovers() -> None:
    """Run by hand (no engine, no supervisor), a grader process that is
    interrupted never reaches the fixture's `finally`: kill its servers here.
    (Under the engine the learner process and all it started end with the grade.)"""
    from roadmap_cli.grading_kit import sandbox

    if sandbox.active():
        return  # a call now would start a new learner process just to kill a server that is already gone
    for pid in list(_started):
        kill_group(pid)


@contextlib.contextmanager
def running_server(max_batch: int, step_overhead_s: float, num_blocks: int = 128, block_size: int = 16):
    """Start the learner's server on a free loopback port; yield its base URL;
    ALWAYS kill its process group afterwards, pass or fail."""
    import adapter
    import httpx

    port = free_port()
    pid = adapter.start_server(port, max_batch, step_overhead_s, num_blocks, block_size)
    _started.add(pid)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + SERVER_START_TIMEOUT_S
        while True:
            if not _alive(pid):
                pytest.fail("the server process exited before answering GET /health (run `python server.py "
                            "--port 8000` in your workspace to see why; README.md, section \"Part 1\")")
            try:
                if httpx.get(url + "/health", timeout=2.0).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"GET /health did not answer 200 within {SERVER_START_TIMEOUT_S:.0f} s of starting "
                            "`python server.py --port PORT` (README.md, section \"Part 1\")")
            time.sleep(0.05)      # a forked server answers within about half a second
        yield url
    finally:
        kill_group(pid)
        _started.discard(pid)
