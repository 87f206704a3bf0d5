"""Part 1: an OpenAI-compatible streaming server with continuous batching.

Run it:  python server.py --port 8000 [--max-batch 16] [--step-overhead 0.02]
Then:    curl -N localhost:8000/v1/completions -H 'content-type: application/json' \\
              -d '{"model": "tiny-char-lm", "prompt": "hello", "max_tokens": 20, "stream": true}'

The pieces (README.md, section "Part 1"):

- `Histogram`: a Prometheus histogram (cumulative buckets) for TTFT and TPOT.
- `parse_request`: the JSON body -> validated parameters, or an `ApiError`
  that becomes an OpenAI-style 4xx body.
- `EngineLoop`: ONE asyncio task that owns the engine. Every iteration it
  admits waiting requests into free batch slots (continuous batching: a
  request that arrives while others decode joins the NEXT step), runs one
  engine step for every running request, and hands each new token to its
  request's queue. Stop strings, max_tokens and client disconnects end a
  request and give its KV blocks back.
- `create_app`: the HTTP routes (fastapi): /v1/completions,
  /v1/chat/completions (SSE when "stream": true), /health, /metrics.

Concurrency model: the HTTP handlers and the engine loop share one event
loop (one thread), so the queues and dicts below need no locks. The engine
step itself runs in a worker thread (`asyncio.to_thread`) so that streaming
responses keep flowing while it computes; the loop never touches the engine
while a step is in flight.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import time
from collections import deque
from dataclasses import dataclass, field

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, StreamingResponse

import engine as eng

TTFT_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
TPOT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)
MAX_STOP_STRINGS = 4


# ---------------------------------------------------------------- metrics


class Histogram:
    """A Prometheus histogram: `counts[i]` = observations <= buckets[i]
    (cumulative, as the text format wants them), plus sum and count."""

    def __init__(self, name: str, help_text: str, buckets: tuple[float, ...]):
        self.name, self.help_text, self.buckets = name, help_text, buckets
        self.counts = [0] * len(buckets)
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        raise NotImplementedError("Histogram.observe: see README.md, section \"Metrics\"")

    def render(self) -> list[str]:
        """The text-format lines: HELP, TYPE, one _bucket per bound, +Inf, _sum, _count."""
        raise NotImplementedError("Histogram.render: see README.md, section \"Metrics\"")


# ---------------------------------------------------------------- requests and errors


class ApiError(Exception):
    """An error the client caused: becomes {"error": {...}} with `status`."""

    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None,
                 type_: str = "invalid_request_error"):
        super().__init__(message)
        self.status, self.message, self.param, self.code, self.type = status, message, param, code, type_

    def response(self) -> JSONResponse:
        body = {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}
        return JSONResponse(body, status_code=self.status)


@dataclass
class Params:
    prompt: str
    prompt_ids: list[int]
    max_tokens: int = 16
    temperature: float = 1.0
    seed: int | None = None
    stop: list[str] = field(default_factory=list)
    stream: bool = False


def parse_request(body: bytes, chat: bool, model_name: str, max_seq_len: int) -> Params:
    """Validate an OpenAI request body. Raises ApiError (README "Errors" lists
    each case: status, param, code)."""
    raise NotImplementedError("parse_request: see README.md, section \"Errors\"")


def stop_holdback(text: str, stops: list[str]) -> int:
    """How many characters at the end of `text` must be held back because they
    could still grow into a stop string: the longest k with text[-k:] equal to
    a proper prefix of some stop string (0 when none)."""
    raise NotImplementedError("stop_holdback: see README.md, section \"Stop strings\"")


@dataclass
class GenRequest:
    """One request inside the server. `queue` carries ("text", delta) items,
    then exactly one ("done", finish_reason)."""

    id: int
    params: Params
    arrival: float
    queue: asyncio.Queue = field(default_factory=asyncio.Queue)
    text: str = ""                   # generated text so far (stop string cut off once found)
    released: int = 0                # characters of `text` already put on the queue
    num_tokens: int = 0
    first_token_at: float | None = None
    last_token_at: float | None = None
    finish_reason: str | None = None


# ---------------------------------------------------------------- the engine loop


class EngineLoop:
    """Continuous batching around the given PagedEngine (README "Continuous batching")."""

    def __init__(self, engine: eng.PagedEngine, max_batch: int):
        self.engine, self.max_batch = engine, max_batch
        self.waiting: deque[GenRequest] = deque()
        self.running: dict[int, GenRequest] = {}
        self.to_abort: set[int] = set()      # disconnected while a step was in flight
        self.wakeup = asyncio.Event()
        self.ids = itertools.count()
        self.ttft = Histogram("serving_time_to_first_token_seconds", "Time from arrival to the first token.",
                              TTFT_BUCKETS)
        self.tpot = Histogram("serving_time_per_output_token_seconds", "Time between consecutive tokens.",
                              TPOT_BUCKETS)
        self.generated_tokens = 0
        self.finished = 0
        self.aborted = 0

    def submit(self, params: Params) -> GenRequest:
        req = GenRequest(next(self.ids), params, time.perf_counter())
        self.waiting.append(req)
        self.wakeup.set()
        return req

    def cancel(self, req: GenRequest) -> None:
        """The client went away: forget the request; `run` frees its KV blocks
        between steps (never while a step is in flight). A no-op for a request
        that already finished. (Given: the part you write is in `run` and in
        the streaming response's `finally`.)"""
        if req.finish_reason is not None:
            return
        req.finish_reason = "abort"
        self.aborted += 1
        if req in self.waiting:
            self.waiting.remove(req)
        elif req.id in self.running:
            self.to_abort.add(req.id)
            self.wakeup.set()

    async def idle(self) -> None:
        """Sleep until submit() or cancel() has something for the loop."""
        self.wakeup.clear()
        await self.wakeup.wait()

    def admit(self) -> None:
        """Move waiting requests (FIFO) into the running batch while a batch
        slot and the KV blocks for prompt + max_tokens are free."""
        raise NotImplementedError("EngineLoop.admit: see README.md, section \"Continuous batching\"")

    def _finish(self, req: GenRequest, reason: str) -> None:
        req.finish_reason = reason
        if len(req.text) > req.released:
            req.queue.put_nowait(("text", req.text[req.released:]))
            req.released = len(req.text)
        req.queue.put_nowait(("done", reason))
        del self.running[req.id]
        self.engine.finish(req.id)
        self.finished += 1

    def deliver(self, req: GenRequest, token: int, now: float) -> None:
        """One new token for `req`: metrics, stop strings, max_tokens, and the
        text that is safe to stream."""
        raise NotImplementedError("EngineLoop.deliver: see README.md, section \"Stop strings\"")

    async def run(self) -> None:
        """The loop: abort, admit, step, deliver; sleep when nothing runs."""
        while True:
            raise NotImplementedError("EngineLoop.run: see README.md, section \"Continuous batching\"")

    def metrics_text(self) -> str:
        """Prometheus text format (README "Metrics" names every series)."""
        raise NotImplementedError("EngineLoop.metrics_text: see README.md, section \"Metrics\"")


# ---------------------------------------------------------------- HTTP


def sse(data: dict | str) -> str:
    """One server-sent event: `data: <json>` and a blank line."""
    return f"data: {data if isinstance(data, str) else json.dumps(data)}\n\n"


def chunk_body(req: GenRequest, chat: bool, model: str, delta: str | None, finish_reason: str | None,
               role: bool = False) -> dict:
    """One streamed chunk (text_completion / chat.completion.chunk)."""
    raise NotImplementedError("chunk_body: see README.md, section \"Streaming\"")


def full_body(req: GenRequest, chat: bool, model: str, text: str, finish_reason: str) -> dict:
    """The non-streamed answer, with usage."""
    raise NotImplementedError("full_body: see README.md, section \"Streaming\"")


class _ClosingStream(StreamingResponse):
    """A StreamingResponse that always closes its generator, so the generator's
    `finally` (which cancels the request) runs as soon as sending fails."""

    async def __call__(self, scope, receive, send):
        try:
            await super().__call__(scope, receive, send)
        finally:
            await self.body_iterator.aclose()


def create_app(config: eng.EngineConfig, max_batch: int, model_name: str = eng.MODEL_NAME) -> FastAPI:
    engine = eng.PagedEngine(config)
    state: dict = {}

    @contextlib.asynccontextmanager
    async def lifespan(app):
        state["loop"] = EngineLoop(engine, max_batch)
        task = asyncio.create_task(state["loop"].run())
        yield
        task.cancel()

    app = FastAPI(lifespan=lifespan)

    @app.get("/health")
    async def health():
        return {"status": "ok"}

    @app.get("/metrics")
    async def metrics():
        return PlainTextResponse(state["loop"].metrics_text(), media_type="text/plain; version=0.0.4")

    async def serve(request: Request, chat: bool):
        raise NotImplementedError("serve: see README.md, section \"Part 1\"")

    @app.post("/v1/completions")
    async def completions(request: Request):
        return await serve(request, chat=False)

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request):
        return await serve(request, chat=True)

    return app


def main(argv: list[str] | None = None) -> None:
    import uvicorn

    ap = argparse.ArgumentParser(description="the llm-serving lab's server")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--max-batch", type=int, default=16)
    ap.add_argument("--num-blocks", type=int, default=128)
    ap.add_argument("--block-size", type=int, default=16)
    ap.add_argument("--step-overhead", type=float, default=0.02)
    args = ap.parse_args(argv)
    import torch

    torch.set_num_threads(1)     # tiny matmuls: threads only add overhead
    config = eng.EngineConfig(num_blocks=args.num_blocks, block_size=args.block_size,
                              step_overhead_s=args.step_overhead)
    uvicorn.run(create_app(config, args.max_batch), host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
