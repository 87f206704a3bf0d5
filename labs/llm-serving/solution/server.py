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
        # BEGIN SOLUTION
        for i, upper in enumerate(self.buckets):
            if value <= upper:
                self.counts[i] += 1
        self.sum += value
        self.count += 1
        # STARTER
        # raise NotImplementedError("Histogram.observe: see README.md, section \"Metrics\"")
        # END SOLUTION

    def render(self) -> list[str]:
        """The text-format lines: HELP, TYPE, one _bucket per bound, +Inf, _sum, _count."""
        # BEGIN SOLUTION
        lines = [f"# HELP {self.name} {self.help_text}", f"# TYPE {self.name} histogram"]
        for upper, count in zip(self.buckets, self.counts):
            lines.append(f'{self.name}_bucket{{le="{upper}"}} {count}')
        lines.append(f'{self.name}_bucket{{le="+Inf"}} {self.count}')
        lines.append(f"{self.name}_sum {self.sum}")
        lines.append(f"{self.name}_count {self.count}")
        return lines
        # STARTER
        # raise NotImplementedError("Histogram.render: see README.md, section \"Metrics\"")
        # END SOLUTION


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
    # BEGIN SOLUTION
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise ApiError(400, "could not parse the JSON body of the request") from None
    if not isinstance(data, dict):
        raise ApiError(400, "the request body must be a JSON object")
    if data.get("model") != model_name:
        raise ApiError(404, f"the model {data.get('model')!r} does not exist; this server serves {model_name!r}",
                       param="model", code="model_not_found")
    if chat:
        messages = data.get("messages")
        if not isinstance(messages, list) or not messages or not all(
                isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
                for m in messages):
            raise ApiError(400, "messages must be a non-empty list of {role, content} strings", param="messages")
        prompt = eng.render_chat(messages)
    else:
        prompt = data.get("prompt")
        if not isinstance(prompt, str) or not prompt:
            raise ApiError(400, "prompt must be a non-empty string", param="prompt")
    max_tokens = data.get("max_tokens", 16)
    if type(max_tokens) is not int or max_tokens < 1:
        raise ApiError(400, "max_tokens must be an integer >= 1", param="max_tokens")
    temperature = data.get("temperature", 1.0)
    if type(temperature) not in (int, float) or not 0.0 <= temperature <= 2.0:
        raise ApiError(400, "temperature must be a number between 0 and 2", param="temperature")
    seed = data.get("seed")
    if seed is not None and type(seed) is not int:
        raise ApiError(400, "seed must be an integer", param="seed")
    stop = data.get("stop")
    stop = [] if stop is None else [stop] if isinstance(stop, str) else stop
    if not isinstance(stop, list) or len(stop) > MAX_STOP_STRINGS or not all(isinstance(s, str) and s for s in stop):
        raise ApiError(400, f"stop must be a string or a list of at most {MAX_STOP_STRINGS} non-empty strings",
                       param="stop")
    stream = data.get("stream", False)
    if not isinstance(stream, bool):
        raise ApiError(400, "stream must be a boolean", param="stream")
    try:
        prompt_ids = eng.encode(prompt)
    except ValueError as exc:
        raise ApiError(400, str(exc), param="messages" if chat else "prompt") from None
    if len(prompt_ids) + max_tokens > max_seq_len:
        raise ApiError(400, f"this model's maximum context length is {max_seq_len} tokens; you requested "
                            f"{len(prompt_ids) + max_tokens} ({len(prompt_ids)} in the prompt, {max_tokens} "
                            f"for the completion)", param="max_tokens" if chat else "prompt",
                       code="context_length_exceeded")
    return Params(prompt, prompt_ids, max_tokens, float(temperature), seed, stop, stream)
    # STARTER
    # raise NotImplementedError("parse_request: see README.md, section \"Errors\"")
    # END SOLUTION


def stop_holdback(text: str, stops: list[str]) -> int:
    """How many characters at the end of `text` must be held back because they
    could still grow into a stop string: the longest k with text[-k:] equal to
    a proper prefix of some stop string (0 when none)."""
    # BEGIN SOLUTION
    best = 0
    for s in stops:
        for k in range(min(len(s) - 1, len(text)), best, -1):
            if text.endswith(s[:k]):
                best = k
                break
    return best
    # STARTER
    # raise NotImplementedError("stop_holdback: see README.md, section \"Stop strings\"")
    # END SOLUTION


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
        # BEGIN SOLUTION
        while self.waiting and len(self.running) < self.max_batch:
            req = self.waiting[0]
            if not self.engine.can_add(len(req.params.prompt_ids), req.params.max_tokens):
                break                        # head-of-line: keep FIFO order, wait for blocks
            self.waiting.popleft()
            p = req.params
            self.engine.add(req.id, p.prompt_ids, p.max_tokens, p.temperature, p.seed)
            self.running[req.id] = req
        # STARTER
        # raise NotImplementedError("EngineLoop.admit: see README.md, section \"Continuous batching\"")
        # END SOLUTION

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
        # BEGIN SOLUTION
        self.generated_tokens += 1
        req.num_tokens += 1
        if req.first_token_at is None:
            req.first_token_at = now
            self.ttft.observe(now - req.arrival)
        else:
            self.tpot.observe(now - req.last_token_at)
        req.last_token_at = now
        req.text += eng.decode([token])
        hits = [i for i in (req.text.find(s) for s in req.params.stop) if i >= 0]
        if hits:
            req.text = req.text[:min(hits)]  # the stop string itself is not returned
            self._finish(req, "stop")
        elif req.num_tokens >= req.params.max_tokens:
            self._finish(req, "length")
        else:
            safe = len(req.text) - stop_holdback(req.text, req.params.stop)
            if safe > req.released:
                req.queue.put_nowait(("text", req.text[req.released:safe]))
                req.released = safe
        # STARTER
        # raise NotImplementedError("EngineLoop.deliver: see README.md, section \"Stop strings\"")
        # END SOLUTION

    async def run(self) -> None:
        """The loop: abort, admit, step, deliver; sleep when nothing runs."""
        while True:
            # BEGIN SOLUTION
            while self.to_abort:             # disconnected during the last step
                seq_id = self.to_abort.pop()
                self.running.pop(seq_id, None)
                self.engine.abort(seq_id)
            self.admit()
            if not self.running:
                await self.idle()
                continue
            tokens = await asyncio.to_thread(self.engine.step, list(self.running))
            now = time.perf_counter()
            for seq_id, token in tokens.items():
                if seq_id not in self.to_abort:
                    self.deliver(self.running[seq_id], token, now)
            # STARTER
            # raise NotImplementedError("EngineLoop.run: see README.md, section \"Continuous batching\"")
            # END SOLUTION

    def metrics_text(self) -> str:
        """Prometheus text format (README "Metrics" names every series)."""
        # BEGIN SOLUTION
        lines = self.ttft.render() + self.tpot.render()
        for name, kind, value in (
                ("serving_num_requests_running", "gauge", len(self.running)),
                ("serving_num_requests_waiting", "gauge", len(self.waiting)),
                ("serving_kv_cache_usage_ratio", "gauge", self.engine.kv_usage()),
                ("serving_generation_tokens_total", "counter", self.generated_tokens),
                ("serving_requests_finished_total", "counter", self.finished),
                ("serving_requests_aborted_total", "counter", self.aborted)):
            lines += [f"# TYPE {name} {kind}", f"{name} {value}"]
        return "\n".join(lines) + "\n"
        # STARTER
        # raise NotImplementedError("EngineLoop.metrics_text: see README.md, section \"Metrics\"")
        # END SOLUTION


# ---------------------------------------------------------------- HTTP


def sse(data: dict | str) -> str:
    """One server-sent event: `data: <json>` and a blank line."""
    return f"data: {data if isinstance(data, str) else json.dumps(data)}\n\n"


def chunk_body(req: GenRequest, chat: bool, model: str, delta: str | None, finish_reason: str | None,
               role: bool = False) -> dict:
    """One streamed chunk (text_completion / chat.completion.chunk)."""
    # BEGIN SOLUTION
    base = {"id": f"{'chatcmpl' if chat else 'cmpl'}-{req.id}", "created": int(time.time()), "model": model}
    if chat:
        d = {"role": "assistant", "content": ""} if role else ({} if delta is None else {"content": delta})
        return {**base, "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": d, "finish_reason": finish_reason}]}
    return {**base, "object": "text_completion",
            "choices": [{"index": 0, "text": delta or "", "finish_reason": finish_reason, "logprobs": None}]}
    # STARTER
    # raise NotImplementedError("chunk_body: see README.md, section \"Streaming\"")
    # END SOLUTION


def full_body(req: GenRequest, chat: bool, model: str, text: str, finish_reason: str) -> dict:
    """The non-streamed answer, with usage."""
    # BEGIN SOLUTION
    usage = {"prompt_tokens": len(req.params.prompt_ids), "completion_tokens": req.num_tokens,
             "total_tokens": len(req.params.prompt_ids) + req.num_tokens}
    base = {"id": f"{'chatcmpl' if chat else 'cmpl'}-{req.id}", "created": int(time.time()), "model": model,
            "usage": usage}
    if chat:
        return {**base, "object": "chat.completion", "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish_reason}]}
    return {**base, "object": "text_completion",
            "choices": [{"index": 0, "text": text, "finish_reason": finish_reason, "logprobs": None}]}
    # STARTER
    # raise NotImplementedError("full_body: see README.md, section \"Streaming\"")
    # END SOLUTION


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
        # BEGIN SOLUTION
        loop: EngineLoop = state["loop"]
        try:
            params = parse_request(await request.body(), chat, model_name, engine.model.max_seq_len)
        except ApiError as err:
            return err.response()
        req = loop.submit(params)
        if params.stream:
            async def events():
                try:
                    if chat:   # the role arrives first, before any token (as OpenAI does)
                        yield sse(chunk_body(req, chat, model_name, None, None, role=True))
                    while True:
                        kind, value = await req.queue.get()
                        if kind == "text":
                            yield sse(chunk_body(req, chat, model_name, value, None))
                        else:
                            yield sse(chunk_body(req, chat, model_name, None, value))
                            break
                    yield sse("[DONE]")
                finally:
                    loop.cancel(req)     # a no-op once finished; frees the blocks after a disconnect
            return _ClosingStream(events(), media_type="text/event-stream")
        parts = []
        while True:
            kind, value = await req.queue.get()
            if kind == "done":
                break
            parts.append(value)
        return JSONResponse(full_body(req, chat, model_name, "".join(parts), value))
        # STARTER
        # raise NotImplementedError("serve: see README.md, section \"Part 1\"")
        # END SOLUTION

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
