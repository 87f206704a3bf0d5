"""Part 4: OpenTelemetry spans around the given request path, read back from the SDK's in-memory
exporter: names, the parent/child tree across the worker thread, attributes, one event per decode
step, timing against the engine calls the grader's wrapper timed, errors."""

from __future__ import annotations

from roadmap_cli import grading_kit as kit

import adapter
import refs

SECTION = "Part 4: OpenTelemetry spans"
STAGES = ["tokenize", "queue", "prefill", "decode", "detokenize"]


def _requests(tag: str) -> list[dict]:
    r = refs.rng(f"spans-{tag}")
    words = ["profile", "the", "kernel", "trace", "gap", "roofline", "span"]
    out = []
    for i in range(3):
        prompt = " ".join(r.choice(words) for _ in range(r.randint(1, 4)))
        out.append({"id": f"req-{tag}-{i}-{r.randrange(10**6)}", "prompt": prompt,
                    "max_new_tokens": 0 if i == 1 else r.randint(2, 6), "fail_at": None})
    return out


def _failing() -> dict:
    r = refs.rng("spans-fail")
    return {"id": f"req-fail-{r.randrange(10**6)}", "prompt": "trace me", "max_new_tokens": 5, "fail_at": r.randint(1, 3)}


def _sequential():
    reqs = _requests("seq") + [_failing()]
    return reqs, adapter.traced_requests(reqs, 1, False)   # one worker each: the same thread every time


def _concurrent():
    reqs = _requests("par")
    return reqs, adapter.traced_requests(reqs, 2, True)


SEQ = kit.PerSeedCache(_sequential)
PAR = kit.PerSeedCache(_concurrent)


def _tree(out: dict, req: dict) -> tuple[dict, dict]:
    """The request span of `req` and {stage name: span} of its children."""
    roots = [s for s in out["spans"] if s["name"] == "request" and s["attributes"].get("request.id") == req["id"]]
    assert len(roots) == 1, (f"request {req['id']!r}: {len(roots)} spans named 'request' with attribute "
                             f"request.id = {req['id']!r}, expected 1 (spans: {sorted({s['name'] for s in out['spans']})}) "
                             f"{refs.where(SECTION)}")
    root = roots[0]
    kids = [s for s in out["spans"] if s["parent_id"] == root["span_id"] and s["trace_id"] == root["trace_id"]]
    named: dict = {}
    for s in kids:
        assert s["name"] not in named, f"request {req['id']!r}: two child spans named {s['name']!r} {refs.where(SECTION)}"
        named[s["name"]] = s
    return root, named


def _all_requests():
    reqs, out = SEQ()
    return [(r, out) for r in reqs if r["fail_at"] is None]


def test_span_tree():
    for req, out in _all_requests():
        root, kids = _tree(out, req)
        assert root["parent_id"] is None, (
            f"request {req['id']!r}: the 'request' span has a parent ({root['parent_id']:x}); it is the ROOT of a "
            f"new trace even when the caller has a span open {refs.where(SECTION)}")
        assert sorted(kids) == sorted(STAGES), (
            f"request {req['id']!r}: children of 'request' are {sorted(kids)}, expected {sorted(STAGES)} "
            f"(every stage a direct child, in the request's trace) {refs.where(SECTION)}")
        in_trace = [s["name"] for s in out["spans"] if s["trace_id"] == root["trace_id"]]
        assert sorted(in_trace) == sorted(["request"] + STAGES), (
            f"request {req['id']!r}: its trace holds spans {sorted(in_trace)}, expected request + {STAGES} "
            f"{refs.where(SECTION)}")
        assert root["kind"] == "SERVER", f"request span kind {root['kind']}, expected SERVER {refs.where(SECTION)}"


def test_context_crosses_the_worker_thread():
    reqs, out = PAR()
    traces = set()
    for req in reqs:
        res = out["results"][req["id"]]
        assert res["error"] is None, f"handle_request_traced({req['id']!r}) raised {res['error']} {refs.where(SECTION)}"
        root, kids = _tree(out, req)
        assert sorted(kids) == sorted(STAGES), (
            f"3 concurrent requests on 2 workers: request {req['id']!r} has children {sorted(kids)}, expected "
            f"{sorted(STAGES)}: prefill and decode run on a worker thread, so the request's context must be "
            f"carried there {refs.where(SECTION)}")
        traces.add(root["trace_id"])
        job_threads = {j.get("thread") for j in res["jobs"]}
        model = [r for r in res["records"] if r["stage"] in ("prefill", "decode_step")]
        assert model and all(r["thread"] in job_threads and r["thread"] != res["thread"] for r in model), (
            f"request {req['id']!r}: prefill/decode ran on the caller's thread; they run on the executor's worker, as "
            f"request_path.handle_request does {refs.where(SECTION)}")
    assert len(traces) == len(reqs), f"{len(reqs)} requests share {len(traces)} trace ids; one trace each {refs.where(SECTION)}"


def test_worker_context_detached():
    reqs, out = SEQ()
    for req in reqs:
        res = out["results"][req["id"]]
        assert res["worker_context_left"] is False, (
            f"after request {req['id']!r} (fail_at {req['fail_at']}), the worker thread still has a span current: "
            f"the job must detach the context it attached (in a finally), or the thread's next job inherits it "
            f"{refs.where(SECTION)}")


def test_attributes():
    for req, out in _all_requests():
        root, kids = _tree(out, req)
        ids, gen = refs.toy_ids(req["prompt"], req["max_new_tokens"])
        want = [(root, "request.id", req["id"]), (root, "prompt.tokens", len(ids)), (root, "output.tokens", len(gen)),
                (kids["tokenize"], "tokens", len(ids)), (kids["prefill"], "tokens", len(ids)),
                (kids["decode"], "tokens", req["max_new_tokens"]), (kids["detokenize"], "tokens", len(gen))]
        for span, key, value in want:
            got = span["attributes"].get(key)
            assert got == value and type(got) is type(value), (
                f"request {req['id']!r} (prompt {req['prompt']!r}, max_new_tokens {req['max_new_tokens']}): span "
                f"{span['name']!r} attribute {key!r} = {got!r}, expected {value!r} ({type(value).__name__}) "
                f"{refs.where(SECTION)}")


def test_attributes_on_the_failure_path():
    # What is known before the failing decode step is on its span even though the request fails.
    reqs, out = SEQ()
    req = next(r for r in reqs if r["fail_at"] is not None)
    root, kids = _tree(out, req)
    ids, _ = refs.toy_ids(req["prompt"], req["max_new_tokens"])
    want = [(root, "request.id", req["id"]), (root, "prompt.tokens", len(ids))]
    want += [(kids[name], "tokens", n) for name, n in (("tokenize", len(ids)), ("prefill", len(ids)),
                                                       ("decode", req["max_new_tokens"])) if name in kids]
    assert {"tokenize", "prefill", "decode"} <= set(kids), (
        f"failing request: child spans {sorted(kids)}, expected tokenize, queue, prefill and decode {refs.where(SECTION)}")
    for span, key, value in want:
        got = span["attributes"].get(key)
        assert got == value and type(got) is type(value), (
            f"request {req['id']!r} whose engine fails at decode step {req['fail_at']}: span {span['name']!r} "
            f"attribute {key!r} = {got!r}, expected {value!r}: an attribute known before the failure is set on the "
            f"failure path too {refs.where(SECTION)}")


def test_decode_events():
    for req, out in _all_requests():
        _, kids = _tree(out, req)
        _, gen = refs.toy_ids(req["prompt"], req["max_new_tokens"])
        evs = [e for e in kids["decode"]["events"] if e["name"] == "token"]
        got = [(e["attributes"].get("index"), e["attributes"].get("token_id")) for e in evs]
        want = list(enumerate(gen))
        assert got == want, (f"request {req['id']!r}: decode span's 'token' events (index, token_id) = {got}, expected "
                             f"{want} (one per step, in order) {refs.where(SECTION)}")
        steps = [r for r in out["results"][req["id"]]["records"] if r["stage"] == "decode_step"]
        for i, (e, s) in enumerate(zip(evs, steps)):
            nxt = steps[i + 1]["start"] if i + 1 < len(steps) else kids["decode"]["end"]
            assert s["end"] <= e["timestamp"] <= nxt, (
                f"request {req['id']!r}: event 'token' {i} at {e['timestamp']} ns, but decode step {i} ran "
                f"[{s['start']}, {s['end']}] ns: the event is added after its step returns and before the next "
                f"starts {refs.where(SECTION)}")


def test_span_timing():
    for req, out in _all_requests():
        root, kids = _tree(out, req)
        recs = out["results"][req["id"]]["records"]
        for stage, span_name in (("tokenize", "tokenize"), ("prefill", "prefill"), ("decode_step", "decode"),
                                 ("detokenize", "detokenize")):
            span = kids[span_name]
            for rec in (r for r in recs if r["stage"] == stage):
                assert span["start"] <= rec["start"] and rec["end"] <= span["end"], (
                    f"request {req['id']!r}: engine.{stage} ran [{rec['start']}, {rec['end']}] ns, outside its span "
                    f"{span_name!r} [{span['start']}, {span['end']}] ns: a stage's span wraps its call "
                    f"{refs.where(SECTION)}")
        for name, span in kids.items():
            assert root["start"] <= span["start"] <= span["end"] <= root["end"], (
                f"request {req['id']!r}: child span {name!r} [{span['start']}, {span['end']}] lies outside 'request' "
                f"[{root['start']}, {root['end']}] {refs.where(SECTION)}")


def test_queue_span():
    for req, out in _all_requests() + [(r, PAR()[1]) for r in PAR()[0]]:
        _, kids = _tree(out, req)
        res = out["results"][req["id"]]
        q = kids["queue"]
        jobs = res["jobs"]
        assert len(jobs) == 1, f"request {req['id']!r}: {len(jobs)} jobs submitted to the executor, expected 1 {refs.where(SECTION)}"
        job = jobs[0]
        prefill = next(r for r in res["records"] if r["stage"] == "prefill")
        tok = next(r for r in res["records"] if r["stage"] == "tokenize")
        assert tok["end"] <= q["start"] <= job["submit"] and job["start"] <= q["end"] <= prefill["start"], (
            f"request {req['id']!r}: 'queue' span [{q['start']}, {q['end']}] ns; tokenize ended {tok['end']}, the "
            f"job was submitted at {job['submit']}, a worker started it at {job['start']}, prefill began "
            f"{prefill['start']}: the queue span runs from just before submit until the worker starts the job "
            f"{refs.where(SECTION)}")


def test_text_unchanged():
    for req, out in _all_requests() + [(r, PAR()[1]) for r in PAR()[0]]:
        res = out["results"][req["id"]]
        assert res["error"] is None and res["text"] == out["expected_text"][req["id"]], (
            f"handle_request_traced({req['id']!r}, {req['prompt']!r}, {req['max_new_tokens']}): "
            f"{res['error'] or repr(res['text'])}, expected {out['expected_text'][req['id']]!r} (the untraced "
            f"path's text) {refs.where(SECTION)}")


def test_error_is_recorded():
    reqs, out = SEQ()
    req = next(r for r in reqs if r["fail_at"] is not None)
    res = out["results"][req["id"]]
    assert res["error"] and res["error"].startswith("RuntimeError") and "decode step" in res["error"], (
        f"an engine failure at decode step {req['fail_at']}: handle_request_traced returned {res['text']!r} / raised "
        f"{res['error']}; the RuntimeError must propagate to the caller {refs.where(SECTION)}")
    root, kids = _tree(out, req)
    assert "decode" in kids, f"failing request: no 'decode' span (children {sorted(kids)}) {refs.where(SECTION)}"
    dec = kids["decode"]
    tokens = [e for e in dec["events"] if e["name"] == "token"]
    assert len(tokens) == req["fail_at"], (
        f"failing request: {len(tokens)} 'token' events before the failure at step {req['fail_at']}, expected "
        f"{req['fail_at']} {refs.where(SECTION)}")
    for span in (dec, root):
        assert span["status"] == "ERROR", (f"failing request: span {span['name']!r} status {span['status']}, expected "
                                           f"ERROR {refs.where(SECTION)}")
    assert any(e["name"] == "exception" for e in dec["events"]), (
        f"failing request: the decode span has no 'exception' event (record the exception on the span where it "
        f"happened) {refs.where(SECTION)}")
