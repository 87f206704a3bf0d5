"""The only door from the grader to the learner's code (workspace modules
trace_analysis, bottlenecks, traced_request and the given slow_model,
request_path). Every function marked learner_side runs in the learner
process and returns plain data; the tests compare it, grader-side, with
refs.py.
"""

from __future__ import annotations

from roadmap_cli import grading_kit as kit

learner_side = kit.learner_side


def _m(name: str):
    return kit.learner_module(name)


# ---------------------------------------------------------------- parts 1-2: trace analysis


@learner_side(timeout_s=30)
def call(func: str, *args, **kwargs):
    """trace_analysis.<func>(*args, **kwargs) or bottlenecks.<func>, whichever module has it.
    The trace arrives as a copy, so the learner may not change the grader's."""
    mod = "bottlenecks" if func == "find_bottlenecks" else "trace_analysis"
    return getattr(_m(mod), func)(*args, **kwargs)


def _weights(layers: int, dim: int, seed: int):
    import torch

    g = torch.Generator().manual_seed(seed)
    return _m("slow_model").make_weights(layers, dim, g), g


@learner_side(timeout_s=60)
def learner_profile(layers: int, dim: int, batch: int, seed: int, steps: int) -> dict:
    """The learner's profile_cpu on the given slow model: the trace it returns (plain JSON data)."""
    import torch

    torch.set_num_threads(1)
    weights, g = _weights(layers, dim, seed)
    x = torch.randn(batch, dim, generator=g)
    trace = _m("trace_analysis").profile_cpu(_m("slow_model").slow_forward, weights, x, steps=steps)
    return trace


def _profile(fn, *args) -> dict:
    """The grader's own CPU profile of fn(*args) (record_shapes=True), as the Chrome-trace dict."""
    import json
    import os
    import tempfile

    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        fn(*args)
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        prof.export_chrome_trace(path)
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    finally:
        os.remove(path)


@learner_side(timeout_s=60)
def slow_and_fast(layers: int, dim: int, batch: int, seed: int, timing: dict) -> dict:
    """Run the given slow model and the learner's fast_forward on the same weights and input:
    both outputs, the grader's profile of each (small shapes), and the same-run timing ratio."""
    import time

    import torch

    torch.set_num_threads(1)
    weights, g = _weights(layers, dim, seed)
    x = torch.randn(batch, dim, generator=g)
    slow = _m("slow_model").slow_forward
    fast = _m("bottlenecks").fast_forward
    out = {"x": x.clone(), "weights": [(w.clone(), b.clone()) for w, b in weights],
           "slow_out": slow(weights, x), "fast_out": fast(weights, x)}
    out["slow_trace"] = _profile(slow, weights, x)
    out["fast_trace"] = _profile(fast, weights, x)

    # Timing: the planted costs grow with the batch, so time a bigger one; slow and fast are
    # interleaved in the same run and each keeps its best of `repeats`, so a busy machine slows
    # both alike. Only the ratio goes back.
    tw, tg = _weights(timing["layers"], timing["dim"], timing["seed"])
    tx = torch.randn(timing["batch"], timing["dim"], generator=tg)
    best = {"slow": float("inf"), "fast": float("inf")}
    fast(tw, tx)
    slow(tw, tx)                                     # warm both once
    for _ in range(timing["repeats"]):
        for name, fn in (("slow", slow), ("fast", fast)):
            t0 = time.perf_counter()
            fn(tw, tx)
            best[name] = min(best[name], time.perf_counter() - t0)
    out["speedup"] = best["slow"] / best["fast"]
    return out


# ---------------------------------------------------------------- part 4: spans


class _RecordingEngine:
    """The given ToyEngine, with each call's wall-clock interval recorded (time.time_ns, the clock
    the OpenTelemetry SDK stamps spans with) and the thread it ran on. `fail_at`: decode step that raises."""

    def __init__(self, engine, fail_at=None):
        import threading

        self._engine, self._fail_at, self._threading = engine, fail_at, threading
        self.records: list[dict] = []
        self._steps = 0

    def _run(self, stage, fn, *args):
        import time

        t0 = time.time_ns()
        try:
            return fn(*args)
        finally:
            self.records.append({"stage": stage, "start": t0, "end": time.time_ns(),
                                 "thread": self._threading.get_ident()})

    def tokenize(self, text):
        return self._run("tokenize", self._engine.tokenize, text)

    def prefill(self, ids):
        return self._run("prefill", self._engine.prefill, ids)

    def decode_step(self, state):
        step = self._steps
        self._steps += 1
        if self._fail_at is not None and step == self._fail_at:
            def boom(_state):
                raise RuntimeError(f"engine failure at decode step {step}")
            return self._run("decode_step", boom, state)
        return self._run("decode_step", self._engine.decode_step, state)

    def detokenize(self, ids):
        return self._run("detokenize", self._engine.detokenize, ids)


class _RecordingExecutor:
    """A ThreadPoolExecutor that records when each job was submitted and when a worker started it."""

    def __init__(self, workers: int):
        from concurrent.futures import ThreadPoolExecutor

        self._pool = ThreadPoolExecutor(max_workers=workers)
        self.jobs: list[dict] = []

    def submit(self, fn, *args, **kwargs):
        import threading
        import time

        job = {"submit": time.time_ns(), "submit_thread": threading.get_ident()}
        self.jobs.append(job)

        def run():
            job["start"] = time.time_ns()
            job["thread"] = threading.get_ident()
            return fn(*args, **kwargs)

        return self._pool.submit(run)

    def shutdown(self):
        self._pool.shutdown(wait=True)


def _span_data(span) -> dict:
    return {
        "name": span.name,
        "trace_id": span.context.trace_id,
        "span_id": span.context.span_id,
        "parent_id": span.parent.span_id if span.parent is not None else None,
        "parent_trace_id": span.parent.trace_id if span.parent is not None else None,
        "start": span.start_time,
        "end": span.end_time,
        "kind": span.kind.name,
        "status": span.status.status_code.name,
        "attributes": dict(span.attributes or {}),
        "events": [{"name": e.name, "timestamp": e.timestamp, "attributes": dict(e.attributes or {})}
                   for e in span.events],
    }


@learner_side(timeout_s=60)
def traced_requests(requests: list[dict], workers: int, concurrent: bool) -> dict:
    """Run the learner's handle_request_traced on each request {"id", "prompt", "max_new_tokens",
    "fail_at"} (one at a time, or all at once from threads) with a tracer whose spans land in an
    in-memory exporter. Returns the spans, and per request its result or error, engine records and jobs."""
    import threading

    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("roadmap-profiling-grader")
    traced = _m("traced_request")
    toy = _m("request_path").ToyEngine
    results: dict = {}
    unwritten: list = []  # NotImplementedError from the starter: raised again once every request is done

    def one(req, executor):
        engine = _RecordingEngine(toy(), req.get("fail_at"))
        before = len(executor.jobs)
        out = {"records": engine.records, "thread": threading.get_ident()}
        try:
            # the caller has a span of its own open: the request span must still start a new trace
            with tracer.start_as_current_span("grader-caller"):
                out["text"] = traced.handle_request_traced(req["id"], req["prompt"], req["max_new_tokens"],
                                                           engine, executor, tracer)
            out["error"] = None
        except NotImplementedError as exc:
            # an unwritten function is not a wrong span tree: the grade must say "not implemented yet"
            out["text"], out["error"] = None, f"NotImplementedError: {exc}"
            unwritten.append(exc)
        except Exception as exc:  # noqa: BLE001 - reported as data
            out["text"], out["error"] = None, f"{type(exc).__name__}: {exc}"
        out["jobs"] = [j for j in executor.jobs[before:] if j.get("submit_thread") == out["thread"]]
        results[req["id"]] = out

    if concurrent:
        executor = _RecordingExecutor(workers)
        threads = [threading.Thread(target=one, args=(req, executor)) for req in requests]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        executor.shutdown()
    else:
        from opentelemetry import trace as otel_trace

        def leftover():
            # run on the (single) worker after the request: a job that attached the request's
            # context and never detached it leaves that context current on the thread
            return otel_trace.get_current_span().get_span_context().is_valid

        for req in requests:
            executor = _RecordingExecutor(1)
            one(req, executor)
            results[req["id"]]["worker_context_left"] = executor._pool.submit(leftover).result()
            executor.shutdown()
    provider.shutdown()
    if unwritten:
        raise unwritten[0]
    expected = {req["id"]: toy().detokenize(_untraced(toy(), req)) for req in requests}
    return {"spans": [_span_data(s) for s in exporter.get_finished_spans()], "results": results,
            "expected_text": expected}


def _untraced(engine, req):
    ids = engine.tokenize(req["prompt"])
    state = engine.prefill(ids)
    return [engine.decode_step(state) for _ in range(req["max_new_tokens"])]


# ---------------------------------------------------------------- part 5: a real CUDA trace


@learner_side(timeout_s=120)
def cuda_profiles(layers: int, dim: int, batch: int, seed: int) -> dict:
    """CPU + CUDA profiles (the grader's own profiling) of the slow model and the learner's fast_forward
    on the GPU, after one untimed warm-up call of each (CUDA context, cuBLAS handles)."""
    import json
    import os
    import tempfile

    import torch
    from torch.profiler import ProfilerActivity, profile

    weights, g = _weights(layers, dim, seed)
    x = torch.randn(batch, dim, generator=g).cuda()
    weights = [(w.cuda(), b.cuda()) for w, b in weights]
    out = {}
    for name, fn in (("slow", _m("slow_model").slow_forward), ("fast", _m("bottlenecks").fast_forward)):
        fn(weights, x)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True) as prof:
            fn(weights, x)
            torch.cuda.synchronize()
        fd, path = tempfile.mkstemp(suffix=".json")
        os.close(fd)
        try:
            prof.export_chrome_trace(path)
            with open(path, encoding="utf-8") as f:
                out[name] = json.load(f)
        finally:
            os.remove(path)
    return out
