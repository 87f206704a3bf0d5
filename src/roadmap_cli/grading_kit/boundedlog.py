"""Keep only the end of a child's output: a learner printing gigabytes must
cost neither RAM nor disk (issue 19 item 9). A thread drains the pipe as fast
as the child writes (so the child never blocks on a full pipe) and keeps the
last `cap` bytes."""

from __future__ import annotations

import os
import re
import threading
from collections import deque

LOG_TAIL_LINES = 25  # how much of the grader's output a failed grade shows


class BoundedTail:
    def __init__(self, cap: int = 256 * 1024) -> None:
        self.cap = cap
        self.chunks: deque[bytes] = deque()
        self.size = 0
        self.total = 0  # bytes seen, kept or not
        self.lock = threading.Lock()

    def feed(self, data: bytes) -> None:
        with self.lock:
            self.total += len(data)
            if len(data) >= self.cap:
                self.chunks.clear()
                data = data[-self.cap :]
                self.size = 0
            self.chunks.append(data)
            self.size += len(data)
            while self.size - len(self.chunks[0]) >= self.cap:
                self.size -= len(self.chunks.popleft())

    def bytes(self) -> bytes:
        with self.lock:
            return b"".join(self.chunks)[-self.cap :]

    def text(self) -> str:
        out = self.bytes().decode("utf-8", errors="replace")
        if self.total > self.cap:
            out = f"[... {self.total - self.cap} earlier bytes of output dropped ...]\n" + out.split("\n", 1)[-1]
        return out


class PipeDrain:
    """Reads `fd` to EOF on a daemon thread into a BoundedTail; closes `fd` at the end."""

    def __init__(self, fd: int, cap: int = 256 * 1024) -> None:
        self.fd = fd
        self.tail = BoundedTail(cap)
        self.last_read = 0.0
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, name="output-drain", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            while True:
                try:
                    chunk = os.read(self.fd, 1 << 16)
                except OSError:
                    break
                if not chunk:
                    break
                self.tail.feed(chunk)
        finally:
            try:
                os.close(self.fd)
            except OSError:
                pass
            self.done.set()

    def settle(self, timeout: float = 0.5) -> None:
        """Wait until what was written so far has been read (EOF, or no new
        bytes for a moment: descendants may hold the pipe open)."""
        import time

        deadline = time.monotonic() + timeout
        seen = -1
        while time.monotonic() < deadline and not self.done.is_set():
            if self.tail.total == seen:
                break
            seen = self.tail.total
            self.done.wait(0.03)


def _unescape(line: str) -> str:
    """faulthandler writes non-ASCII characters of file names as \\xNN,
    \\uNNNN or \\UNNNNNNNN: show the learner's real path (e.g. a Chinese folder)."""
    return re.sub(r"\\(x[0-9a-f]{2}|u[0-9a-f]{4}|U[0-9a-f]{8})", lambda m: chr(int(m.group(1)[1:], 16)), line)


def crash_tail(text: str, lines: int = LOG_TAIL_LINES) -> str:
    """The end of the grader's output; after a hard crash, the crash report.

    pytest's faulthandler prints "Fatal Python error: ..." and the stack,
    most recent call first: the learner's frames come first, pytest's
    machinery last, so the interesting part is at the top of that block.
    """
    all_lines = text.rstrip().splitlines()
    for i, line in enumerate(all_lines):
        if line.startswith("Fatal Python error"):
            frames = [
                _unescape(ln)
                for ln in all_lines[i + 1 :]
                if ln.strip().startswith("File ")
                and not any(skip in ln for skip in ("/_pytest/", "/pluggy/", "<frozen "))
            ]
            return "\n".join([line, *frames[:lines]])
    return "\n".join(all_lines[-lines:])
