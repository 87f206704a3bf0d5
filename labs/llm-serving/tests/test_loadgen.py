"""Part 2: the load generator and the SLO statistics (README.md, "Part 2").

Every statistic is recomputed here from the learner's raw per-request
timings; timing checks are ratios measured in the same run (continuous vs
sequential) or lower bounds that a stub server guarantees by sleeping."""

from __future__ import annotations

import json
import math
import os
import random
import statistics
import threading
import time
import xml.etree.ElementTree as ET
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import adapter
import grader_engine as ge
import reference as ref
from conftest import running_server
from roadmap_cli import grading_kit as kit


def _rng(name: str) -> random.Random:
    return random.Random(kit.seeded(name))


def test_poisson_arrivals():
    rng = _rng("poisson")
    rate, seed = rng.uniform(2.0, 50.0), rng.randrange(1 << 30)
    got = adapter.poisson_arrivals(rate, 2000, seed)
    assert len(got) == 2000, f"poisson_arrivals(rate, 2000, seed) returned {len(got)} times"
    assert all(b > a for a, b in zip([0.0] + got, got)), "arrival times must be positive and strictly increasing"
    gaps = [b - a for a, b in zip([0.0] + got, got)]
    mean = statistics.fmean(gaps)
    assert abs(mean * rate - 1) < 0.1, (f"mean gap {mean:.4f} s at rate {rate:.2f}/s: expected about 1/rate = "
                                        f"{1 / rate:.4f} s (README.md, section \"Poisson arrivals\")")
    cv = statistics.pstdev(gaps) / mean
    assert abs(cv - 1) < 0.15, (f"the gaps' coefficient of variation is {cv:.3f}; exponential gaps have 1.0 "
                                "(evenly spaced arrivals have 0) (README.md, section \"Poisson arrivals\")")
    want = ref.poisson_arrivals(rate, 2000, seed)
    assert all(math.isclose(a, b, rel_tol=1e-12) for a, b in zip(got, want)), (
        "the arrivals differ from the cumulative sums of random.Random(seed).expovariate(rate) "
        "(README.md, section \"Poisson arrivals\")")
    assert adapter.poisson_arrivals(rate, 5, seed + 1) != got[:5], "a different seed must give different arrivals"


def test_poisson_arrivals_own_generator():
    """`random.Random(seed)` is a generator of the function's own: seeding the global `random` instead gives
    the same numbers, but moves every other user's stream (README.md, "Poisson arrivals")."""
    rng = _rng("poisson-own")
    rate, seed = rng.uniform(2.0, 50.0), rng.randrange(1 << 30)
    got = adapter.poisson_arrivals_global_state(rate, 50, seed)
    want = ref.poisson_arrivals(rate, 50, seed)
    assert all(math.isclose(a, b, rel_tol=1e-12) for a, b in zip(got["arrivals"], want)), (
        "the arrivals differ from the cumulative sums of random.Random(seed).expovariate(rate)")
    assert got["global_state_untouched"], (
        "poisson_arrivals changed the state of the global `random` module: draw from a generator of its own, "
        "`random.Random(seed)`, never `random.seed(seed)` + `random.expovariate` (README.md, "
        "section \"Poisson arrivals\")")


def test_percentile():
    rng = _rng("percentile")
    for n in (1, 2, 7, 100):
        values = [rng.expovariate(1.0) for _ in range(n)]
        for q in (0, 37.5, 50, 90, 99, 100):
            got, want = adapter.percentile(values, q), ref.percentile(values, q)
            assert math.isclose(got, want, rel_tol=1e-12, abs_tol=1e-15), (
                f"percentile of {n} values at q={q}: expected {want!r} (linear interpolation, position (n-1)*q/100), "
                f"got {got!r} (README.md, section \"Statistics\")")


def _fake_records(rng, n):
    out = []
    for i in range(n):
        start = rng.uniform(0, 5)
        ttft = rng.uniform(0.01, 1.0)
        tokens = rng.choice([1, 1, 2, 5, 17, 40])
        end = start + ttft + (tokens - 1) * rng.uniform(0.01, 0.1)
        out.append({"index": i, "start": start, "first_token": start + ttft, "end": end, "num_tokens": tokens,
                    "text": "x" * tokens})
    return out


def test_summarize_matches_recomputation():
    rng = _rng("summary")
    for n in (1, 3, 50):
        records = _fake_records(rng, n)
        got, want = adapter.summarize(records), ref.summarize(records)
        assert ref.close(got, want), (f"summarize() of {n} records:\n expected {json.dumps(want)}\n got      "
                                      f"{json.dumps(got)}\n(README.md, section \"Statistics\": TPOT only over "
                                      "requests with >= 2 tokens; throughput over max(end) - min(start))")
    # No request with 2 tokens: every TPOT statistic is None (not 0, not a division by zero).
    records = [dict(r, num_tokens=1, text="x", end=r["first_token"]) for r in _fake_records(rng, 3)]
    got = adapter.summarize(records)
    assert got.get("tpot") == {"p50": None, "p90": None, "p99": None, "mean": None}, (
        f"summarize() of one-token requests only: tpot must be all None, got {got.get('tpot')} "
        "(README.md, section \"Statistics\")")
    assert ref.close(got, ref.summarize(records)), f"summarize() of one-token requests: got {json.dumps(got)}"


# ---------------------------------------------------------------- a stub server with known timings

FIRST_TOKEN_DELAY_S = 0.6
SECOND_TOKEN_DELAY_S = 0.5
TOKEN_GAP_S = 0.02


class _Stub:
    """An OpenAI-ish streaming endpoint in the grader process: it sends an
    empty chunk at once (headers and a first body byte), the first token after
    FIRST_TOKEN_DELAY_S, the second SECOND_TOKEN_DELAY_S later, then one token
    per TOKEN_GAP_S. It records the
    bodies it got and the largest number of requests in flight."""

    def __init__(self):
        self.bodies, self.in_flight, self.max_in_flight = [], 0, 0
        self.lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
                stub._left.done = False  # one handler thread per request (ThreadingHTTPServer)
                with stub.lock:
                    stub.bodies.append(body)
                    stub.in_flight += 1
                    stub.max_in_flight = max(stub.max_in_flight, stub.in_flight)
                try:
                    self.send_response(200)
                    self.send_header("content-type", "text/event-stream")
                    self.end_headers()

                    def event(text, finish=None):
                        data = {"object": "text_completion", "choices": [
                            {"index": 0, "text": text, "finish_reason": finish}]}
                        self.wfile.write(f"data: {json.dumps(data)}\n\n".encode())
                        self.wfile.flush()

                    event("")
                    time.sleep(FIRST_TOKEN_DELAY_S)
                    for i in range(body["max_tokens"]):
                        if i:
                            time.sleep(SECOND_TOKEN_DELAY_S if i == 1 else TOKEN_GAP_S)
                        last = i == body["max_tokens"] - 1
                        if last:
                            # The request leaves "in flight" BEFORE its last event is written: once the client
                            # has read it, it may rightly send the next request, and that handler can start
                            # before this thread runs again (a busy box); counting it then would blame a
                            # concurrency-1 client for the stub's own bookkeeping.
                            stub.leave()
                        event("x", "length" if last else None)
                    self.wfile.write(b"data: [DONE]\n\n")
                    self.wfile.flush()
                finally:
                    stub.leave()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._left = threading.local()
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def leave(self):
        """This handler's request is no longer in flight (counted once per request, whichever call comes first)."""
        if getattr(self._left, "done", False):
            return
        self._left.done = True
        with self.lock:
            self.in_flight -= 1

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.parametrize("concurrency", [None, 1], ids=["open-loop", "concurrency-1"])
def test_timings_against_a_stub_server(concurrency):
    rng = _rng(f"stub-{concurrency}")
    n = 4 if concurrency is None else 3     # one at a time, each request takes >= 1.1 s: 3 show the queueing
    requests = [(f"p{i} " + "a" * rng.randint(1, 9), rng.randint(2, 6)) for i in range(n)]
    arrivals = sorted(round(rng.uniform(0.1, 0.3), 3) for _ in range(n))
    temperature = rng.choice([0.0, 0.5])
    with _Stub() as stub:
        called = time.perf_counter()
        records = adapter.run_load(stub.url, requests, arrivals, concurrency, "stub-model", temperature)
        elapsed = time.perf_counter() - called
    assert [r["index"] for r in records] == list(range(n)), "run_load must return one record per request, by index"
    # The load began after this process called run_load and ended before the call returned, so every time "in
    # seconds since the load began" lies in [0, elapsed] of the grader's own clock: a right solution cannot
    # fall outside, however slow the box (no timing margin needed).
    for r in records:
        for key in ("start", "first_token", "end"):
            assert 0 <= r[key] <= elapsed, (
                f"request {r['index']}: {key} = {r[key]!r}, but the whole run_load call took {elapsed:.3f} s: "
                "times are seconds since the load began (README.md, section \"Measuring TTFT\")")
    sent = sorted((b["prompt"], b["max_tokens"]) for b in stub.bodies)
    assert sent == sorted(requests), f"the stub received (prompt, max_tokens) = {sent}, expected {sorted(requests)}"
    for b in stub.bodies:
        assert b.get("stream") is True and b.get("model") == "stub-model" and b.get("temperature") == temperature, (
            f"each request must send stream=true and the given model and temperature; the stub got {b}")
    for r, (prompt, max_tokens), at in zip(records, requests, arrivals):
        assert r["num_tokens"] == max_tokens and r["text"] == "x" * max_tokens, (
            f"request {r['index']}: {max_tokens} one-character tokens were streamed, the record says "
            f"num_tokens={r['num_tokens']}, text={r['text']!r}")
        ttft = r["first_token"] - r["start"]
        assert ttft >= 0.8 * FIRST_TOKEN_DELAY_S, (
            f"request {r['index']}: TTFT {ttft * 1000:.1f} ms, but the stub sent its first token "
            f"{FIRST_TOKEN_DELAY_S * 1000:.0f} ms after an empty first chunk: TTFT ends at the first chunk that "
            "carries text, not at the first byte (README.md, section \"Measuring TTFT\")")
        # (end - first_token has no tight lower bound: a busy client may read several chunks at once;
        # but the second token comes SECOND_TOKEN_DELAY_S after the first.)
        assert r["end"] - r["first_token"] >= 0.5 * SECOND_TOKEN_DELAY_S, (
            f"request {r['index']}: first_token is {r['end'] - r['first_token']:.3f} s before the end, but the stub "
            f"paused {SECOND_TOKEN_DELAY_S} s after the first token: `first_token` is when the first chunk carrying "
            "text arrived (README.md, section \"Measuring TTFT\")")
        floor = FIRST_TOKEN_DELAY_S + SECOND_TOKEN_DELAY_S + TOKEN_GAP_S * (max_tokens - 2)
        assert r["end"] - r["start"] >= 0.95 * floor, (
            f"request {r['index']}: end - start = {r['end'] - r['start']:.3f} s, but the stub needed at least "
            f"{floor:.3f} s to send the whole stream: `end` is when the stream finished")
        assert r["start"] >= at - 0.005, (f"request {r['index']} was sent at {r['start']:.3f} s, before its arrival "
                                          f"time {at:.3f} s (README.md, section \"Part 2\")")
    if concurrency == 1:
        assert stub.max_in_flight == 1, (f"with concurrency=1 the stub saw {stub.max_in_flight} requests in flight "
                                         "at once (README.md, section \"Part 2\")")
        ordered = sorted(records, key=lambda r: r["start"])
        assert all(b["start"] >= a["end"] - 0.005 for a, b in zip(ordered, ordered[1:])), (
            "with concurrency=1 a request must start only after the previous one ended")
    else:
        assert stub.max_in_flight > 1, ("without a concurrency limit, requests must be sent at their arrival times "
                                         "even while others stream (the stub saw one at a time)")


def test_continuous_batching_beats_sequential(tmp_path):
    """The learner's loadgen against the learner's server: all requests at
    once, concurrency 1 (one request at a time) vs unlimited, same run."""
    rng = _rng("throughput")
    # A step costs 40 ms + a few ms per sequence: one at a time pays the 40 ms for every token,
    # all at once shares it (8 sequences: >= 2x even if the per-sequence compute were 25 ms).
    n, max_tokens = 8, 16
    requests = [("q" + "".join(rng.choice("abcdef ") for _ in range(rng.randint(2, 12))), max_tokens)
                for _ in range(n)]
    arrivals = [0.0] * n
    with running_server(16, 0.04) as url:
        sequential = adapter.run_load(url, requests, arrivals, 1)
        continuous = adapter.run_load(url, requests, arrivals, None)
    for name, records in (("sequential", sequential), ("continuous", continuous)):
        for r, (prompt, m) in zip(records, requests):
            want = ge.generate(prompt, m)
            assert r["text"] == want, (f"{name} run, request {r['index']}: recorded text {r['text']!r}, the server's "
                                       f"greedy answer is {want!r}")
    seq_tps, cont_tps = ref.throughput(sequential), ref.throughput(continuous)
    ratio = cont_tps / seq_tps
    assert ratio >= 2.0, (
        f"throughput recomputed from your raw timings: {cont_tps:.1f} tok/s with all {n} requests in flight vs "
        f"{seq_tps:.1f} tok/s one at a time: ratio {ratio:.2f}, expected >= 2 (a step costs about the same for 1 or "
        "16 sequences: batch them) (README.md, section \"Continuous batching\")")
    for records in (sequential, continuous):
        assert ref.close(adapter.summarize(records), ref.summarize(records)), (
            "summarize() of your own records differs from the grader's recomputation (README.md, \"Statistics\")")


def test_write_report(tmp_path):
    """write_report on summaries of made-up records (no server needed): the JSON as given, the plot's series."""
    rng = _rng("report")
    results = [{"load": load, "summary": ref.summarize(_fake_records(rng, 20))} for load in (1, 4, 2)]
    # pytest's tmp_path: the folder the grader and the learner process (behind the OS wall) can both reach.
    folder = str(tmp_path)
    os.chmod(folder, 0o777)
    json_path, svg_path = os.path.join(folder, "result.json"), os.path.join(folder, "plot.svg")
    adapter.write_report(results, json_path, svg_path)
    with open(json_path, encoding="utf-8") as fh:
        written = json.load(fh)
    assert ref.close(written, results), "write_report: the JSON file must hold the results list as given"
    root = ET.parse(svg_path).getroot()
    assert root.tag.endswith("svg"), f"write_report: {svg_path} is not an SVG document (root <{root.tag}>)"
    lines = {el.get("id"): el.get("points") for el in root.iter() if el.tag.endswith("polyline")}
    want_root = ET.fromstring(ref.svg_line_plot(
        {name: [(r["load"], r["summary"]["e2e"][name]) for r in results] for name in ("p50", "p99")}, "x"))
    want = {el.get("id"): el.get("points") for el in want_root.iter() if el.tag.endswith("polyline")}
    assert lines == want, (f"write_report: the plot's polylines are {lines}, expected {want}: series \"p50\" and "
                           "\"p99\" of the e2e latency against load, drawn with svg_line_plot "
                           "(README.md, section \"Report\")")


CHUNKS = ["ab", "", "cde", "f"]          # 6 tokens in 3 text chunks (and an empty one between)
CHUNK_GAP_S = 0.2


def test_tokens_are_characters_not_chunks():
    """A stub that streams several characters per chunk (a server releasing
    held-back text does): num_tokens counts characters, and the record's
    timings are bounded below by the stub's own clock (the same monotonic
    clock, another process): first_token - start >= what the stub waited
    before its first text, end - start >= the whole stream."""
    stamps: dict = {}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def log_message(self, *args):
            pass

        def do_POST(self):
            self.rfile.read(int(self.headers.get("content-length", 0)))
            stamps["received"] = time.perf_counter()
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.end_headers()
            for i, text in enumerate([""] + CHUNKS):
                if i:
                    time.sleep(CHUNK_GAP_S)
                finish = "length" if i == len(CHUNKS) else None
                data = {"object": "text_completion", "choices": [{"index": 0, "text": text, "finish_reason": finish}]}
                if text and "first_text" not in stamps:
                    stamps["first_text"] = time.perf_counter()
                self.wfile.write(f"data: {json.dumps(data)}\n\n".encode())
                self.wfile.flush()
            stamps["done"] = time.perf_counter()
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        records = adapter.run_load(f"http://127.0.0.1:{server.server_address[1]}", [("p", 6)], [0.0], None,
                                   "stub-model", 0.0)
    finally:
        server.shutdown()
        server.server_close()
    (r,) = records
    want = "".join(CHUNKS)
    assert r["text"] == want and r["num_tokens"] == len(want), (
        f"the stub streamed {want!r} in {sum(1 for c in CHUNKS if c)} text chunks: expected num_tokens={len(want)} "
        f"(characters: one token per character), got num_tokens={r['num_tokens']}, text={r['text']!r}: a chunk is "
        "not a token (README.md, section \"Measuring TTFT\")")
    ttft_floor = stamps["first_text"] - stamps["received"]
    assert r["first_token"] - r["start"] >= ttft_floor, (
        f"TTFT {r['first_token'] - r['start']:.3f} s, but the stub itself held its first text for {ttft_floor:.3f} s "
        "after receiving the request (README.md, section \"Measuring TTFT\")")
    e2e_floor = stamps["done"] - stamps["received"]
    assert r["end"] - r["start"] >= e2e_floor, (
        f"end - start = {r['end'] - r['start']:.3f} s, but the stub took {e2e_floor:.3f} s to stream the answer")
