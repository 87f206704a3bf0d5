"""Given: a stub LLM-engine replica, one process per replica (README.md, "The cluster").

No model runs here: the replica simulates what matters to a router, the
time a request costs and the prefix cache that can save part of it.

* Prefill is serialised (one request at a time, like one engine step at a
  time) and costs `--prefill-ms-per-token` for each prompt token NOT found in
  the prefix cache; then each of `max_tokens` tokens costs `--token-ms`
  (decodes of different requests overlap, as in continuous batching).
* The prefix cache holds the chained hashes of full `--block-size` blocks
  (router.hash_block's scheme). It is looked up and filled when a request is
  ADMITTED, before prefill: a request's cached tokens depend on which requests
  reached this replica before it, never on timing.
* Token k of a request is `(sum(prompt) * 31 + 7 * k + len(prompt)) % 1000`, so
  whoever receives a stream can check every token.

HTTP/1.1 on 127.0.0.1, one request per connection (`Connection: close`):
  GET  /health    200 {"ok": true}
  GET  /stats     200 {"index", "requests", "prompt_tokens", "cached_tokens", "running"}
  POST /generate  {"prompt": [int], "max_tokens": int} -> 200, application/x-ndjson,
                  one line {"token": t} per token, then {"done": true, "cached_tokens": c}
Kill it (SIGKILL) to simulate a crash: its open streams break mid-way and new
connections are refused.

    python replica.py --port 9001 --index 1
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
from collections import OrderedDict


def hash_block(parent: int, block) -> int:
    data = repr((int(parent), tuple(int(t) for t in block))).encode()
    return int.from_bytes(hashlib.sha256(data).digest()[:8], "little")


def token_at(prompt, k: int) -> int:
    return (sum(prompt) * 31 + 7 * k + len(prompt)) % 1000


class Replica:
    def __init__(self, index: int, block_size: int, cache_blocks: int, prefill_ms_per_token: float, token_ms: float):
        self.index = index
        self.block_size = block_size
        self.cache_blocks = cache_blocks
        self.prefill_s = prefill_ms_per_token / 1000.0
        self.token_s = token_ms / 1000.0
        self.cache: OrderedDict[int, None] = OrderedDict()   # LRU of block hashes
        self.prefill_lock = asyncio.Lock()
        self.stats = {"index": index, "requests": 0, "prompt_tokens": 0, "cached_tokens": 0, "running": 0}

    def admit(self, prompt: list[int]) -> int:
        """Look up then insert the prompt's full blocks; the number of cached prompt tokens."""
        parent, cached, hit = 0, 0, True
        for k in range(len(prompt) // self.block_size):
            parent = hash_block(parent, prompt[k * self.block_size:(k + 1) * self.block_size])
            if hit and parent in self.cache:
                cached += self.block_size
            else:
                hit = False
            self.cache[parent] = None
            self.cache.move_to_end(parent)
            while len(self.cache) > self.cache_blocks:
                self.cache.popitem(last=False)
        self.stats["requests"] += 1
        self.stats["prompt_tokens"] += len(prompt)
        self.stats["cached_tokens"] += cached
        return cached

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            method, path, body = await read_request(reader)
            if method == "GET" and path == "/health":
                await send_json(writer, 200, {"ok": True})
            elif method == "GET" and path == "/stats":
                await send_json(writer, 200, self.stats)
            elif method == "POST" and path == "/generate":
                req = json.loads(body or b"{}")
                prompt = [int(t) for t in req["prompt"]]
                cached = self.admit(prompt)
                self.stats["running"] += 1
                try:
                    async with self.prefill_lock:
                        await asyncio.sleep((len(prompt) - cached) * self.prefill_s)
                    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\nConnection: close\r\n\r\n")
                    for k in range(int(req["max_tokens"])):
                        await asyncio.sleep(self.token_s)
                        writer.write(json.dumps({"token": token_at(prompt, k)}).encode() + b"\n")
                        await writer.drain()
                    writer.write(json.dumps({"done": True, "cached_tokens": cached}).encode() + b"\n")
                    await writer.drain()
                finally:
                    self.stats["running"] -= 1
            else:
                await send_json(writer, 404, {"error": f"no route {method} {path}"})
        except (ConnectionError, asyncio.IncompleteReadError, ValueError, KeyError):
            pass
        finally:
            writer.close()


async def read_request(reader: asyncio.StreamReader):
    """(method, path, body bytes) of one HTTP/1.1 request with a Content-Length body."""
    line = (await reader.readline()).decode("latin-1").strip()
    method, path, _ = line.split(" ", 2)
    length = 0
    while True:
        header = (await reader.readline()).decode("latin-1").strip()
        if not header:
            break
        name, _, value = header.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value.strip())
    body = await reader.readexactly(length) if length else b""
    return method, path, body


async def send_json(writer: asyncio.StreamWriter, status: int, obj) -> None:
    data = json.dumps(obj).encode()
    reason = {200: "OK", 404: "Not Found", 400: "Bad Request", 503: "Service Unavailable"}.get(status, "OK")
    writer.write(f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\n"
                 f"Connection: close\r\n\r\n".encode() + data)
    await writer.drain()


async def main_async(args) -> None:
    replica = Replica(args.index, args.block_size, args.cache_blocks, args.prefill_ms_per_token, args.token_ms)
    server = await asyncio.start_server(replica.handle, args.host, args.port, backlog=256)
    async with server:
        await server.serve_forever()


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description="a stub LLM-engine replica (no model: simulated time and prefix cache)")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--index", type=int, default=0)
    ap.add_argument("--block-size", type=int, default=8)
    ap.add_argument("--cache-blocks", type=int, default=4096)
    ap.add_argument("--prefill-ms-per-token", type=float, default=0.1)
    ap.add_argument("--token-ms", type=float, default=2.0)
    asyncio.run(main_async(ap.parse_args(argv)))


if __name__ == "__main__":
    main()
