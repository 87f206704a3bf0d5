"""The grader's HTTP side: OpenAI-style requests, SSE parsing, /metrics parsing."""

from __future__ import annotations

import json
import re

import httpx

MODEL = "tiny-char-lm"
TIMEOUT = httpx.Timeout(30.0, connect=10.0)   # a right server answers in seconds; a hung one fails fast


def post(url: str, path: str, body, raw: bytes | None = None) -> httpx.Response:
    if raw is not None:
        return httpx.post(url + path, content=raw, headers={"content-type": "application/json"}, timeout=TIMEOUT)
    return httpx.post(url + path, json=body, timeout=TIMEOUT)


def parse_sse(text: str) -> list:
    """The `data:` payloads of an event stream, in order (json-decoded; "[DONE]" kept as a string)."""
    events = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        for line in block.split("\n"):
            if line.startswith("data:"):
                payload = line[5:].strip()
                events.append(payload if payload == "[DONE]" else json.loads(payload))
    return events


def stream(url: str, path: str, body: dict) -> list:
    with httpx.stream("POST", url + path, json={**body, "stream": True}, timeout=TIMEOUT) as resp:
        assert resp.status_code == 200, (
            f"a streaming POST {path} answered {resp.status_code}: {resp.read()[:300]!r} "
            "(README.md, section \"Streaming\")")
        assert resp.headers.get("content-type", "").startswith("text/event-stream"), (
            f"a streaming response must have content-type text/event-stream, got "
            f"{resp.headers.get('content-type')!r} (README.md, section \"Streaming\")")
        return parse_sse(resp.read().decode())


def chunk_text(event: dict, chat: bool) -> str:
    choice = event["choices"][0]
    if chat:
        return choice.get("delta", {}).get("content") or ""
    return choice.get("text") or ""


def answer_text(body: dict, chat: bool) -> str:
    choice = body["choices"][0]
    return choice["message"]["content"] if chat else choice["text"]


_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)$')


def parse_metrics(text: str) -> dict:
    """{"name" or 'name{le="x"}': float} for every sample line; "#" lines skipped."""
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if not m:
            raise ValueError(f"not a Prometheus sample line: {line!r}")
        out[m.group(1) + (m.group(2) or "")] = float(m.group(3))
    return out


def metrics(url: str) -> dict:
    resp = httpx.get(url + "/metrics", timeout=TIMEOUT)
    assert resp.status_code == 200, f"GET /metrics answered {resp.status_code} (README.md, section \"Metrics\")"
    return parse_metrics(resp.text)


def buckets(m: dict, name: str) -> list[tuple[float, float]]:
    """[(le, cumulative count)] of histogram `name`, +Inf last."""
    out = []
    for key, value in m.items():
        mm = re.fullmatch(re.escape(name) + r'_bucket\{le="([^"]+)"\}', key)
        if mm:
            out.append((float("inf") if mm.group(1) == "+Inf" else float(mm.group(1)), value))
    return sorted(out)
