"""Given: the router's HTTP front end (README.md, "The cluster").

It wires your pieces to the network: a Router (router.py) and a
HealthChecker (proxy.py) shared by every request, `forward` (proxy.py) run
once per incoming POST /generate, and a health loop that probes every
replica. The I/O is here; every decision is in your code.

    python serve.py --port 9000 --replicas 9001,9002,9003 --policy prefix

HTTP/1.1 on 127.0.0.1, one request per connection:
  POST /generate  {"prompt": [int], "max_tokens": int} -> 200, application/x-ndjson:
                  the events `forward` yields, one JSON object per line
  GET  /health    200 {"ok": true}
  GET  /stats     200 {"outstanding", "healthy", "ejections"}
"""

from __future__ import annotations

import argparse
import asyncio
import json

import proxy
import router as router_mod
from replica import read_request, send_json

PROBE_TIMEOUT_S = 2.0


def make_upstream(ports: list[int], host: str = "127.0.0.1"):
    """upstream(i, request): an async iterator of replica i's tokens; ReplicaFailed on any failure."""

    async def upstream(i: int, request: dict):
        try:
            reader, writer = await asyncio.open_connection(host, ports[i])
        except OSError as exc:
            raise proxy.ReplicaFailed(f"connect to replica {i}: {exc}") from exc
        try:
            body = json.dumps({"prompt": request["prompt"], "max_tokens": request["max_tokens"]}).encode()
            writer.write(f"POST /generate HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
                         f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
            await writer.drain()
            status = (await reader.readline()).decode("latin-1").split(" ")
            if len(status) < 2 or status[1] != "200":
                raise proxy.ReplicaFailed(f"replica {i} answered {' '.join(status).strip()!r}")
            while (await reader.readline()).strip():
                pass   # headers
            while True:
                line = await reader.readline()
                if not line:
                    raise proxy.ReplicaFailed(f"replica {i} closed the stream before it was done")
                event = json.loads(line)
                if "token" in event:
                    yield event["token"]
                elif event.get("done"):
                    return
        except (OSError, ValueError) as exc:
            raise proxy.ReplicaFailed(f"replica {i}: {exc}") from exc
        finally:
            writer.close()

    return upstream


async def probe(host: str, port: int, timeout: float) -> bool:
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
        try:
            writer.write(f"GET /health HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
            await writer.drain()
            status = await asyncio.wait_for(reader.readline(), timeout)
            return status.split(b" ")[1:2] == [b"200"]
        finally:
            writer.close()
    except (OSError, asyncio.TimeoutError, IndexError):
        return False


async def health_loop(health, ports: list[int], interval: float, host: str = "127.0.0.1") -> None:
    while True:
        await asyncio.sleep(interval)
        # A dead replica refuses the connection at once; the generous timeout only spares a live but
        # busy replica (or a loaded machine) from being ejected for one slow answer.
        results = await asyncio.gather(*(probe(host, p, PROBE_TIMEOUT_S) for p in ports))
        for i, ok in enumerate(results):
            health.observe(i, ok)


async def main_async(args) -> None:
    ports = [int(p) for p in args.replicas.split(",")]
    rt = router_mod.Router(len(ports), args.policy, args.block_size, args.imbalance)
    health = proxy.HealthChecker(rt, args.fail_threshold, args.pass_threshold)
    upstream = make_upstream(ports)

    async def handle(reader, writer):
        try:
            method, path, body = await read_request(reader)
            if method == "GET" and path == "/health":
                await send_json(writer, 200, {"ok": True})
            elif method == "GET" and path == "/stats":
                await send_json(writer, 200, {"outstanding": rt.outstanding, "healthy": rt.healthy,
                                              "ejections": health.ejections})
            elif method == "POST" and path == "/generate":
                req = json.loads(body)
                request = {"prompt": [int(t) for t in req["prompt"]], "max_tokens": int(req["max_tokens"])}
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\nConnection: close\r\n\r\n")
                events = proxy.forward(rt, health, request, upstream)
                try:
                    async for event in events:
                        writer.write(json.dumps(event).encode() + b"\n")
                        await writer.drain()
                finally:
                    await events.aclose()   # the client hung up: the request's replica is freed (on_done)
            else:
                await send_json(writer, 404, {"error": f"no route {method} {path}"})
        except (ConnectionError, asyncio.IncompleteReadError, ValueError, KeyError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", args.port, backlog=512)
    asyncio.get_running_loop().create_task(health_loop(health, ports, args.health_interval))
    async with server:
        await server.serve_forever()


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description="the cluster's router: your Router, HealthChecker and forward behind HTTP")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--replicas", required=True, help="comma-separated loopback ports of the replicas")
    ap.add_argument("--policy", default="round_robin", choices=router_mod.POLICIES)
    ap.add_argument("--block-size", type=int, default=8)
    ap.add_argument("--imbalance", type=int, default=4)
    ap.add_argument("--health-interval", type=float, default=0.1, help="seconds between probes of each replica")
    ap.add_argument("--fail-threshold", type=int, default=2)
    ap.add_argument("--pass-threshold", type=int, default=2)
    asyncio.run(main_async(ap.parse_args(argv)))


if __name__ == "__main__":
    main()
