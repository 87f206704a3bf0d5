"""The authenticated results channel between the engine and the grader process.

The engine makes two pipes and hands their ends to the grader with
`pass_fds` (no path in any environment variable):

- the *config pipe*: the engine writes one JSON document (HMAC key, the
  results descriptor's number, parts, sandbox settings, the secret seed) and
  closes its end; the grader reads it once at start-up and closes it. The
  learner process is started later, with close_fds, and never sees it.
- the *results pipe*: the grader writes one line per event,
  `<hmac> <json>\\n`, where the MAC (HMAC-SHA256 with the per-grade key) covers
  a sequence number inside the JSON. The engine keeps only lines whose MAC
  verifies and whose sequence number is the next one; anything else is
  counted as forged, and a forged line voids the attempt.

Someone who can read the grader's memory (root, or ptrace) can still forge;
docs/architecture.md says what is trusted.
"""

from __future__ import annotations

import hmac
import json
import os
import secrets
from hashlib import sha256
from typing import Any, Optional

MAX_LINE = 1 << 20  # a result line longer than this is not ours


def new_key() -> bytes:
    return secrets.token_bytes(32)


def mac(key: bytes, body: bytes) -> str:
    return hmac.new(key, body, sha256).hexdigest()


class Emitter:
    """Grader side: writes MAC'd, numbered JSON lines to a descriptor."""

    def __init__(self, fd: int, key: bytes) -> None:
        self.out = os.fdopen(fd, "wb", buffering=0)
        self.key = key
        self.seq = 0

    def emit(self, data: dict[str, Any]) -> None:
        data = dict(data, seq=self.seq)
        self.seq += 1
        body = json.dumps(data, default=str).encode()
        self.out.write(mac(self.key, body).encode() + b" " + body + b"\n")

    def close(self) -> None:
        self.out.close()


class Reader:
    """Engine side: non-blocking reads of the results pipe, verified line by line."""

    def __init__(self, fd: int, key: bytes) -> None:
        self.fd = fd
        self.key = key
        self.buffer = b""
        self.seq = 0
        self.forged = 0
        self.eof = False
        os.set_blocking(fd, False)

    def read(self) -> list[dict]:
        events: list[dict] = []
        while not self.eof:
            try:
                chunk = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                break
            if not chunk:
                self.eof = True
                break
            self.buffer += chunk
            *lines, self.buffer = self.buffer.split(b"\n")
            for line in lines:
                event = self._verify(line)
                if event is not None:
                    events.append(event)
            if len(self.buffer) > MAX_LINE:
                self.forged += 1
                self.buffer = b""
        return events

    def _verify(self, line: bytes) -> Optional[dict]:
        tag, _, body = line.partition(b" ")
        if not hmac.compare_digest(tag, mac(self.key, body).encode()):
            self.forged += 1
            return None
        try:
            event = json.loads(body)
        except ValueError:
            self.forged += 1
            return None
        if event.get("seq") != self.seq:  # replayed or reordered
            self.forged += 1
            return None
        self.seq += 1
        return event

    def close(self) -> None:
        try:
            os.close(self.fd)
        except OSError:
            pass
