"""Part 1: the streaming server (README.md, "Part 1"). One server process per
module (max_batch 8), started by the learner process and killed by the
grader when the module ends, pass or fail."""

from __future__ import annotations

import asyncio
import random
import time

import httpx
import pytest

import adapter
import grader_engine as ge
import reference as ref
from conftest import running_server
from http_helpers import MODEL, TIMEOUT, answer_text, buckets, chunk_text, metrics, parse_metrics, post, stream
from roadmap_cli import grading_kit as kit

STEP_OVERHEAD_S = 0.015
MAX_BATCH = 8
NUM_BLOCKS, BLOCK_SIZE = 48, 8     # 384 tokens of KV: three 106-token requests fit, a fourth does not


@pytest.fixture(scope="module")
def url():
    with running_server(MAX_BATCH, STEP_OVERHEAD_S, NUM_BLOCKS, BLOCK_SIZE) as base:
        yield base


def _rng(name: str) -> random.Random:
    return random.Random(kit.seeded(name))


def _prompt(rng: random.Random) -> str:
    return "".join(rng.choice("abcdefghij klmnop,.") for _ in range(rng.randint(3, 30)))


def _reference(prompt: str, max_tokens: int, temperature: float = 0.0, seed=None) -> str:
    return ge.generate(prompt, max_tokens, temperature, seed)


def _complete(url, prompt, max_tokens, chat=False, **extra) -> dict:
    body = {"model": MODEL, "max_tokens": max_tokens, **extra}
    if chat:
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    resp = post(url, "/v1/chat/completions" if chat else "/v1/completions", body)
    assert resp.status_code == 200, f"a valid request answered {resp.status_code}: {resp.text[:300]}"
    return resp.json()


@pytest.mark.parametrize("chat", [False, True], ids=["completions", "chat"])
def test_greedy_matches_offline_generation(url, chat):
    rng = _rng(f"greedy-{chat}")
    for _ in range(3):
        prompt, n = _prompt(rng), rng.randint(2, 30)
        body = _complete(url, prompt, n, chat=chat, temperature=0)
        rendered = ge.render_chat([{"role": "user", "content": prompt}]) if chat else prompt
        want = _reference(rendered, n)
        got = answer_text(body, chat)
        assert got == want, (f"greedy output for prompt {rendered!r}, max_tokens={n}: expected {want!r} (the engine "
                             f"alone), got {got!r} (README.md, section \"Part 1\")")
        assert body["choices"][0]["finish_reason"] == "length", (
            f"finish_reason after max_tokens: expected 'length', got {body['choices'][0]['finish_reason']!r}")
        usage = body.get("usage", {})
        assert usage.get("prompt_tokens") == len(rendered) and usage.get("completion_tokens") == n \
            and usage.get("total_tokens") == len(rendered) + n, (
                f"usage: expected prompt_tokens={len(rendered)}, completion_tokens={n}, total_tokens="
                f"{len(rendered) + n}; got {usage} (README.md, section \"Streaming\")")
        assert body.get("object") == ("chat.completion" if chat else "text_completion") and body.get("model") == MODEL
        assert body["choices"][0].get("index") == 0 and isinstance(body.get("id"), str), (
            "choices[0].index must be 0 and id a string (README.md, section \"Streaming\")")


@pytest.mark.parametrize("chat", [False, True], ids=["completions", "chat"])
def test_stream_chunks_concatenate_to_the_answer(url, chat):
    rng = _rng(f"stream-{chat}")
    prompt, n = _prompt(rng), rng.randint(5, 25)
    path = "/v1/chat/completions" if chat else "/v1/completions"
    body = {"model": MODEL, "max_tokens": n, "temperature": 0}
    body.update({"messages": [{"role": "user", "content": prompt}]} if chat else {"prompt": prompt})
    events = stream(url, path, body)
    assert events and events[-1] == "[DONE]", f"the stream must end with `data: [DONE]`; last events: {events[-2:]}"
    chunks = events[:-1]
    assert all(isinstance(e, dict) for e in chunks), "every event before [DONE] must be a JSON object"
    kind = "chat.completion.chunk" if chat else "text_completion"
    assert all(e.get("object") == kind for e in chunks), f"every chunk's object must be {kind!r}"
    assert all(e["choices"][0].get("index") == 0 for e in chunks), "every chunk's choices[0].index must be 0"
    if chat:
        first = chunks[0]["choices"][0]
        assert first.get("delta") == {"role": "assistant", "content": ""} and first.get("finish_reason") is None, (
            f"the first chat chunk must carry only delta = {{'role': 'assistant', 'content': ''}}, sent at once "
            f"before any token; got {first} (README.md, section \"Streaming\")")
        later = [e["choices"][0].get("delta", {}) for e in chunks[1:]]
        assert all("role" not in d for d in later), (
            "only the first chat chunk carries the role; a later one has it too (README.md, section \"Streaming\")")
    text = "".join(chunk_text(e, chat) for e in chunks)
    rendered = ge.render_chat(body["messages"]) if chat else prompt
    want = _reference(rendered, n)
    assert text == want, (f"streamed chunks concatenate to {text!r}, expected {want!r} (the non-streamed answer) "
                          "(README.md, section \"Streaming\")")
    reasons = [e["choices"][0].get("finish_reason") for e in chunks]
    assert reasons[-1] == "length" and all(r is None for r in reasons[:-1]), (
        f"finish_reason must be null on every chunk but the last, which says 'length'; got {reasons}")
    assert sum(1 for e in chunks if chunk_text(e, chat)) >= 2, "the text must arrive in several chunks, as it is made"


def _stop_case(rng, want: str, length: int, at_start: bool = False):
    """A stop string taken from inside the reference output, starting at k >= 1
    (at k = 0 with at_start: the answer is empty)."""
    k = 0 if at_start else rng.randint(1, max(1, len(want) - length - 1))
    stop = want[k:k + length]
    return stop, want[:want.find(stop)]


@pytest.mark.parametrize("chat", [False, True], ids=["completions", "chat"])
def test_stop_strings(url, chat):
    rng = _rng(f"stop-{chat}")
    path = "/v1/chat/completions" if chat else "/v1/completions"
    for length, at_start in ((2, False), (3, False), (2, True)):
        prompt, n = _prompt(rng), 24     # the stop string lies inside: fewer steps than max_tokens
        rendered = ge.render_chat([{"role": "user", "content": prompt}]) if chat else prompt
        want_full = _reference(rendered, n)
        stop, want = _stop_case(rng, want_full, length, at_start)
        never = "\n\n\n"          # not in the output: a list with it must behave like [stop]
        for stop_arg in (stop, [never, stop]):
            body = {"model": MODEL, "max_tokens": n, "temperature": 0, "stop": stop_arg}
            body.update({"messages": [{"role": "user", "content": prompt}]} if chat else {"prompt": prompt})
            resp = post(url, path, body)
            assert resp.status_code == 200, f"stop={stop_arg!r}: status {resp.status_code}: {resp.text[:200]}"
            got = answer_text(resp.json(), chat)
            assert got == want, (f"stop={stop_arg!r} on an output that reads {want_full!r}: expected {want!r} "
                                 f"(cut before the stop string), got {got!r} (README.md, section \"Stop strings\")")
            assert resp.json()["choices"][0]["finish_reason"] == "stop", "finish_reason after a stop string: 'stop'"
            # The engine generated tokens up to the one that completed the stop string (a token is a character).
            generated = want_full.find(stop) + len(stop)
            usage = resp.json().get("usage", {})
            assert usage.get("completion_tokens") == generated and usage.get("prompt_tokens") == len(rendered) \
                and usage.get("total_tokens") == len(rendered) + generated, (
                    f"stop={stop_arg!r} on an output that reads {want_full!r}: the engine generated {generated} "
                    f"tokens (up to the one completing the stop string), the answer keeps {len(want)}; expected "
                    f"usage completion_tokens={generated}, prompt_tokens={len(rendered)}, total_tokens="
                    f"{len(rendered) + generated}, got {usage}: completion_tokens counts every generated token, "
                    "the ones the stop string cut included (README.md, section \"Streaming\")")
            events = stream(url, path, body)
            text = "".join(chunk_text(e, chat) for e in events[:-1])
            assert text == want, (f"streamed with stop={stop_arg!r}: chunks concatenate to {text!r}, expected "
                                  f"{want!r}: text that may be the start of a stop string must be held back "
                                  "(README.md, section \"Stop strings\")")
    # A stop string that never appears: the answer runs to max_tokens.
    body = {"model": MODEL, "prompt": "abc", "max_tokens": 12, "temperature": 0, "stop": ["\n\n\n"]}
    got = post(url, "/v1/completions", body).json()
    assert got["choices"][0]["text"] == _reference("abc", 12) and got["choices"][0]["finish_reason"] == "length"
    # A stop given as a plain STRING is one stop string, not a list of its characters: its first character is
    # the answer's first, its second is never generated, so it never matches and the answer runs to max_tokens.
    want = _reference("abc", 12)
    never_ch = next(ch for ch in "~`|^" if ch not in want)
    body = {"model": MODEL, "prompt": "abc", "max_tokens": 12, "temperature": 0, "stop": want[0] + never_ch}
    got = post(url, "/v1/completions", body).json()
    assert got["choices"][0]["text"] == want and got["choices"][0]["finish_reason"] == "length", (
        f"stop={body['stop']!r} never occurs in {want!r}, yet the answer was {got['choices'][0]['text']!r} "
        f"({got['choices'][0]['finish_reason']!r}): a string is ONE stop string, not a list of characters "
        "(README.md, section \"Stop strings\")")


def test_temperature_and_seed(url):
    rng = _rng("sampling")
    prompt = _prompt(rng)
    seeds = [rng.randrange(1 << 30) for _ in range(2)]
    temperature = rng.choice([0.7, 1.3])
    for seed in seeds:
        want = _reference(prompt, 12, temperature, seed)
        for _ in range(2):
            got = _complete(url, prompt, 12, temperature=temperature, seed=seed)["choices"][0]["text"]
            assert got == want, (f"temperature={temperature}, seed={seed}: expected {want!r} (the engine sampling "
                                 f"with that seed), got {got!r}: pass temperature and seed to engine.add "
                                 "(README.md, section \"Sampling\")")


async def _stream_until_done(client, url, body, events: list, tag: str):
    async with client.stream("POST", url + "/v1/completions", json={**body, "stream": True}) as resp:
        if resp.status_code != 200:
            text = (await resp.aread())[:200]
            raise AssertionError(f"a streaming POST /v1/completions answered {resp.status_code}: {text!r} "
                                 "(README.md, section \"Streaming\")")
        async for line in resp.aiter_lines():
            if line.startswith("data:") and "[DONE]" not in line:
                events.append((tag, "chunk", time.perf_counter()))
    events.append((tag, "done", time.perf_counter()))


async def _settle(tasks: list) -> None:
    """Cancel what still runs and collect every task's outcome before the
    client closes. A task whose exception nobody retrieves is logged when the
    garbage collector finds it, at some random later moment in the grader."""
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def _raise_if_failed(tasks: list) -> None:
    """A request task that already failed (e.g. the server answered 500) ends
    the wait with its own message instead of letting it run out the clock."""
    for task in tasks:
        if task.done() and not task.cancelled() and task.exception() is not None:
            raise task.exception()


def _blocks(prompt: str, max_tokens: int) -> int:
    return -(-(len(prompt) + max_tokens) // BLOCK_SIZE)


def test_new_request_joins_running_batch(url):
    """Continuous batching: a short request that arrives while 3 long ones
    decode must finish before any of them; a 4th long one that does not fit in
    the free KV blocks waits (FIFO) and runs once blocks come back."""
    # Long PROMPTS hold the KV blocks, so the long requests need few decode steps (each costs the step overhead).
    long_tokens = 40
    longs = [f"long {i} " + "x" * 60 for i in range(4)]
    need = [_blocks(p, long_tokens) for p in longs]
    assert sum(need[:3]) + _blocks("short", 3) <= NUM_BLOCKS < sum(need), "grader: block budget"

    async def wait_for(predicate, what: str, tasks: list, timeout: float = 60.0):
        deadline = time.monotonic() + timeout
        while not predicate():
            _raise_if_failed(tasks)
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}")
            await asyncio.sleep(0.01)

    async def scenario():
        events: list = []
        snapshots = {}
        async with httpx.AsyncClient(timeout=TIMEOUT) as client:
            body = {"model": MODEL, "max_tokens": long_tokens, "temperature": 0}
            tasks = [asyncio.create_task(_stream_until_done(client, url, {**body, "prompt": p}, events, f"long{i}"))
                     for i, p in enumerate(longs[:3])]

            def chunks(tag):
                return sum(1 for e in events if e[0] == tag and e[1] == "chunk")

            try:
                await wait_for(lambda: all(chunks(f"long{i}") >= 2 for i in range(3)),
                               "the three long requests to stream", tasks)
                snapshots["three"] = (await client.get(url + "/metrics")).text
                await _stream_until_done(client, url, {"model": MODEL, "prompt": "short", "max_tokens": 3,
                                                       "temperature": 0}, events, "short")
                tasks.append(asyncio.create_task(_stream_until_done(client, url, {**body, "prompt": longs[3]},
                                                                    events, "long3")))
                metrics_now = {}

                async def poll():
                    metrics_now.update(parse_metrics((await client.get(url + "/metrics")).text))
                    return metrics_now

                deadline = time.monotonic() + 60
                while (await poll()).get("serving_num_requests_waiting") != 1 and time.monotonic() < deadline \
                        and not any(e[0] == "long3" for e in events):
                    _raise_if_failed(tasks)
                    await asyncio.sleep(0.01)
                snapshots["waiting"] = dict(metrics_now)
                await asyncio.wait_for(asyncio.gather(*tasks), 120)
            finally:
                await _settle(tasks)
        return events, snapshots

    events, snapshots = asyncio.run(scenario())
    order = [tag for tag, kind, _ in events if kind == "done"]
    assert order[0] == "short", (
        f"requests finished in the order {order}: the 3-token request sent while three {long_tokens}-token requests "
        "were decoding should finish first. It waited for the running batch to end: admit waiting requests into "
        "free batch slots before EVERY step (README.md, section \"Continuous batching\")")
    m = parse_metrics(snapshots["three"])
    assert m.get("serving_num_requests_running") == 3 and m.get("serving_num_requests_waiting") == 0, (
        f"while three requests streamed: serving_num_requests_running = {m.get('serving_num_requests_running')}, "
        f"serving_num_requests_waiting = {m.get('serving_num_requests_waiting')}; expected 3 and 0 "
        "(README.md, section \"Metrics\")")
    want_usage = sum(need[:3]) / NUM_BLOCKS
    assert abs(m.get("serving_kv_cache_usage_ratio", -1) - want_usage) < 1e-9, (
        f"serving_kv_cache_usage_ratio with three {len(longs[0]) + long_tokens}-token requests in {BLOCK_SIZE}-token "
        f"blocks of {NUM_BLOCKS}: expected {want_usage} (engine.kv_usage()), got "
        f"{m.get('serving_kv_cache_usage_ratio')}")
    w = snapshots["waiting"]
    assert w.get("serving_num_requests_waiting") == 1 and w.get("serving_num_requests_running") == 3, (
        f"a 4th long request needs {need[3]} blocks while only {NUM_BLOCKS - sum(need[:3])} are free: it must wait "
        f"(running 3, waiting 1); /metrics said running {w.get('serving_num_requests_running')}, waiting "
        f"{w.get('serving_num_requests_waiting')} (README.md, section \"Continuous batching\")")
    assert order[-1] == "long3", f"the request that waited for blocks should finish last; order {order}"


def test_batch_limit(url):
    """Ten requests at once on a server with max_batch 8 (and KV blocks for nine):
    never more than 8 run; the others wait."""
    n, prompt, max_tokens = MAX_BATCH + 2, "ab", 38      # 40 tokens = 5 blocks each: 9 x 5 <= 48
    assert (MAX_BATCH + 1) * _blocks(prompt, max_tokens) <= NUM_BLOCKS, "grader: the KV must not be the limit"

    async def scenario():
        seen = []
        async with httpx.AsyncClient(timeout=TIMEOUT) as client:
            body = {"model": MODEL, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0}
            tasks = [asyncio.create_task(client.post(url + "/v1/completions", json=body)) for _ in range(n)]
            try:
                while not all(t.done() for t in tasks):
                    m = parse_metrics((await client.get(url + "/metrics")).text)
                    seen.append((m.get("serving_num_requests_running"), m.get("serving_num_requests_waiting")))
                    await asyncio.sleep(0.01)
                answers = [t.result() for t in tasks]
            finally:
                await _settle(tasks)
        return seen, answers

    seen, answers = asyncio.run(scenario())
    want = _reference(prompt, max_tokens)
    assert all(a.status_code == 200 and a.json()["choices"][0]["text"] == want for a in answers), (
        "ten identical greedy requests must all get the engine's answer")
    most = max(r for r, _ in seen)
    assert most <= MAX_BATCH, (f"serving_num_requests_running reached {most} with --max-batch {MAX_BATCH}: admit "
                               "only while len(running) < max_batch (README.md, section \"Continuous batching\")")
    assert any(r == MAX_BATCH and w >= 1 for r, w in seen), (
        f"with {n} requests at once, /metrics never showed {MAX_BATCH} running and some waiting: {sorted(set(seen))} "
        "(README.md, section \"Metrics\")")


def test_stop_earliest_occurrence_wins(url):
    """Two stop strings complete at the same token: the cut is at the one that
    STARTS earliest in the text, whichever is listed first."""
    rng = _rng("stop-earliest")
    for _ in range(60):
        prompt, n = _prompt(rng), 40
        want_full = _reference(prompt, n)
        # k >= 1 with want[k:k+3] (long) and want[k+1:k+3] (short) both first seen there.
        ks = [k for k in range(1, len(want_full) - 3)
              if want_full.find(want_full[k:k + 3]) == k and want_full.find(want_full[k + 1:k + 3]) == k + 1]
        if ks:
            break
    else:
        pytest.fail("grader: no prompt gave an output with two stop strings ending together")
    k = rng.choice(ks)
    long_stop, short_stop = want_full[k:k + 3], want_full[k + 1:k + 3]
    want = want_full[:k]
    body = {"model": MODEL, "prompt": prompt, "max_tokens": n, "temperature": 0, "stop": [short_stop, long_stop]}
    got = post(url, "/v1/completions", body).json()
    assert got["choices"][0]["text"] == want, (
        f"stop={body['stop']!r} on an output that reads {want_full!r}: both complete with the same token; the "
        f"earliest occurrence is {long_stop!r} at {k}, so expected {want!r}, got {got['choices'][0]['text']!r} "
        "(the earliest occurrence of ANY stop string, not the first one listed) (README.md, section \"Stop strings\")")
    events = stream(url, "/v1/completions", body)
    text = "".join(chunk_text(e, False) for e in events[:-1])
    assert text == want, f"streamed with stop={body['stop']!r}: chunks concatenate to {text!r}, expected {want!r}"


def test_fifo_admission_and_ttft_from_arrival(url):
    """A long request A holds most KV blocks; B (does not fit) waits at the
    head of the queue; C, sent after B, would fit but must wait behind B
    (FIFO: admission never skips the head). B's TTFT, as /metrics observes it,
    must include its time in the queue: it is at least the span between the
    grader's first poll that saw B waiting and its last one."""
    a_body = {"model": MODEL, "prompt": "a" * 150, "max_tokens": 80, "temperature": 0}    # 29 blocks
    b_body = {"model": MODEL, "prompt": "b" * 150, "max_tokens": 10, "temperature": 0}    # 20: 29 + 20 > 48
    c_body = {"model": MODEL, "prompt": "c", "max_tokens": 3, "temperature": 0}           # 1 block: fits beside A
    assert _blocks(a_body["prompt"], 80) + _blocks(b_body["prompt"], 10) > NUM_BLOCKS, "grader: block budget"
    assert _blocks(a_body["prompt"], 80) + _blocks("c", 3) <= NUM_BLOCKS, "grader: block budget"

    async def scenario():
        events: list = []
        polls: list = []      # (sent, answered, waiting)
        async with httpx.AsyncClient(timeout=TIMEOUT) as client:
            async def poll():
                sent = time.perf_counter()
                m = parse_metrics((await client.get(url + "/metrics")).text)
                polls.append((sent, time.perf_counter(), m.get("serving_num_requests_waiting")))
                return m

            deadline = time.monotonic() + 60
            while (m := await poll()).get("serving_num_requests_running") or m.get("serving_num_requests_waiting"):
                assert time.monotonic() < deadline, "grader: earlier requests still run"
                await asyncio.sleep(0.02)
            before = m
            tasks = [asyncio.create_task(_stream_until_done(client, url, a_body, events, "A"))]

            def chunks(tag):
                return sum(1 for e in events if e[0] == tag and e[1] == "chunk")

            while chunks("A") < 2:
                assert time.monotonic() < deadline, "timed out waiting for the first request to stream"
                await asyncio.sleep(0.01)
            polls.clear()
            tasks.append(asyncio.create_task(_stream_until_done(client, url, b_body, events, "B")))
            while (await poll()).get("serving_num_requests_waiting") != 1 and not tasks[0].done():
                await asyncio.sleep(0.01)
            tasks.append(asyncio.create_task(_stream_until_done(client, url, c_body, events, "C")))
            while not tasks[0].done():
                if (await poll()).get("serving_num_requests_waiting") == 0:
                    break
                await asyncio.sleep(0.01)
            await asyncio.wait_for(asyncio.gather(*tasks), 120)
            after = await poll()
        return events, polls, before, after

    events, polls, before, after = asyncio.run(scenario())
    a_chunks_when_c_done = 0
    for tag, kind, _ in events:
        if tag == "A" and kind == "chunk":
            a_chunks_when_c_done += 1
        if tag == "C" and kind == "done":
            break
    assert a_chunks_when_c_done >= 80 // 2, (
        f"a 3-token request C, sent while request B waited for KV blocks at the head of the queue, finished when A "
        f"(which B waits for) had streamed only {a_chunks_when_c_done} of 80 tokens: C was admitted ahead of B. "
        "Admission is FIFO: when the head does not fit, stop and wait (README.md, section \"Continuous batching\")")
    seen = [p for p in polls if p[2] is not None and p[2] >= 1]
    assert seen, f"/metrics never showed request B waiting (polls: {[p[2] for p in polls][:20]})"
    queued_at_least = seen[-1][0] - seen[0][1]
    ttft_sum = after["serving_time_to_first_token_seconds_sum"] - before["serving_time_to_first_token_seconds_sum"]
    count = after["serving_time_to_first_token_seconds_count"] - before["serving_time_to_first_token_seconds_count"]
    assert count == 3, f"serving_time_to_first_token_seconds_count rose by {count} over 3 requests, expected 3"
    assert ttft_sum >= queued_at_least, (
        f"request B waited in the queue for at least {queued_at_least:.3f} s (the grader's own /metrics polls saw "
        f"it waiting over that span), yet the TTFT histogram's sum rose by only {ttft_sum:.3f} s over all 3 "
        "requests: TTFT runs from the request's ARRIVAL at the server, not from its admission into the batch "
        "(README.md, section \"Metrics\")")


def test_disconnect_frees_kv_blocks(url):
    before = metrics(url)
    max_tokens = 200
    with httpx.Client(timeout=TIMEOUT) as client:
        with client.stream("POST", url + "/v1/completions", json={"model": MODEL, "prompt": "bye", "stream": True,
                                                                   "max_tokens": max_tokens, "temperature": 0}) as resp:
            seen = 0
            for line in resp.iter_lines():
                if line.startswith("data:"):
                    seen += 1
                if seen >= 3:
                    break
    # The connection is closed now. Wait (bounded) for the server to notice.
    deadline = time.monotonic() + 60
    while True:
        m = metrics(url)
        if m.get("serving_num_requests_running") == 0 and m.get("serving_num_requests_waiting") == 0:
            break
        assert time.monotonic() < deadline, "the disconnected request was still running 60 s later"
        time.sleep(0.05)
    generated = m["serving_generation_tokens_total"] - before["serving_generation_tokens_total"]
    assert generated < max_tokens, (
        f"after the client disconnected, the server still generated all {max_tokens} tokens: cancel the request "
        "when the stream's consumer goes away (README.md, section \"Disconnects\")")
    assert m.get("serving_kv_cache_usage_ratio") == 0, (
        f"no request runs, yet serving_kv_cache_usage_ratio = {m.get('serving_kv_cache_usage_ratio')}: the "
        "disconnected request's KV blocks were never returned (engine.abort) (README.md, section \"Disconnects\")")
    aborted = m.get("serving_requests_aborted_total", 0) - before.get("serving_requests_aborted_total", 0)
    assert aborted == 1, f"serving_requests_aborted_total rose by {aborted}, expected 1 (one disconnect)"


ERROR_CASES = [
    # (name, path, raw body or json, status, type, code, param)
    ("bad-json", "/v1/completions", b'{"model": "tiny-char-lm", "prompt": ', 400, "invalid_request_error", None, None),
    ("not-an-object", "/v1/completions", b"[1, 2]", 400, "invalid_request_error", None, None),
    ("unknown-model", "/v1/completions", {"model": "gpt-9", "prompt": "hi"}, 404, "invalid_request_error",
     "model_not_found", "model"),
    ("unknown-model-chat", "/v1/chat/completions", {"model": "gpt-9", "messages": [{"role": "user", "content": "x"}]},
     404, "invalid_request_error", "model_not_found", "model"),
    ("too-long", "/v1/completions", {"model": MODEL, "prompt": "a" * 250, "max_tokens": 7}, 400,
     "invalid_request_error", "context_length_exceeded", "prompt"),
    ("too-long-chat", "/v1/chat/completions", {"model": MODEL, "messages": [{"role": "user", "content": "a" * 240}],
                                               "max_tokens": 7}, 400, "invalid_request_error",
     "context_length_exceeded", "max_tokens"),
    ("no-prompt", "/v1/completions", {"model": MODEL}, 400, "invalid_request_error", None, "prompt"),
    ("no-messages", "/v1/chat/completions", {"model": MODEL, "messages": []}, 400, "invalid_request_error", None,
     "messages"),
    ("bad-max-tokens", "/v1/completions", {"model": MODEL, "prompt": "hi", "max_tokens": 0}, 400,
     "invalid_request_error", None, "max_tokens"),
    ("float-max-tokens", "/v1/completions", {"model": MODEL, "prompt": "hi", "max_tokens": 2.5}, 400,
     "invalid_request_error", None, "max_tokens"),
    ("bad-temperature", "/v1/completions", {"model": MODEL, "prompt": "hi", "temperature": 2.5}, 400,
     "invalid_request_error", None, "temperature"),
    ("bad-seed", "/v1/completions", {"model": MODEL, "prompt": "hi", "seed": "7"}, 400, "invalid_request_error",
     None, "seed"),
    ("too-many-stops", "/v1/completions", {"model": MODEL, "prompt": "hi", "stop": ["a", "b", "c", "d", "e"]}, 400,
     "invalid_request_error", None, "stop"),
    ("empty-stop", "/v1/completions", {"model": MODEL, "prompt": "hi", "stop": [""]}, 400, "invalid_request_error",
     None, "stop"),
    ("bad-stream", "/v1/completions", {"model": MODEL, "prompt": "hi", "stream": "yes"}, 400,
     "invalid_request_error", None, "stream"),
    # JSON true is not an integer or a number, and 1 is not a boolean (README.md, "Errors"): Python's
    # bool is an int, so isinstance() checks let them through.
    ("bool-max-tokens", "/v1/completions", {"model": MODEL, "prompt": "hi", "max_tokens": True}, 400,
     "invalid_request_error", None, "max_tokens"),
    ("bool-seed", "/v1/completions", {"model": MODEL, "prompt": "hi", "seed": True}, 400,
     "invalid_request_error", None, "seed"),
    ("bool-temperature", "/v1/completions", {"model": MODEL, "prompt": "hi", "temperature": True}, 400,
     "invalid_request_error", None, "temperature"),
    ("int-stream", "/v1/completions", {"model": MODEL, "prompt": "hi", "stream": 1}, 400,
     "invalid_request_error", None, "stream"),
    ("bad-character", "/v1/completions", {"model": MODEL, "prompt": "caf\u00e9"}, 400, "invalid_request_error",
     None, "prompt"),
    ("bad-character-chat", "/v1/chat/completions", {"model": MODEL, "messages": [{"role": "user",
                                                                                  "content": "caf\u00e9"}]},
     400, "invalid_request_error", None, "messages"),
    ("prompt-not-a-string", "/v1/completions", {"model": MODEL, "prompt": 5}, 400, "invalid_request_error", None,
     "prompt"),
    ("content-not-a-string", "/v1/chat/completions", {"model": MODEL, "messages": [{"role": "user", "content": 5}]},
     400, "invalid_request_error", None, "messages"),
    # "Checks run in this order": each body below breaks two rows; the earlier row must answer.
    ("order-model-before-prompt", "/v1/completions", {"model": "gpt-9"}, 404, "invalid_request_error",
     "model_not_found", "model"),
    ("order-max-tokens-before-temperature", "/v1/completions", {"model": MODEL, "prompt": "hi", "max_tokens": 0,
                                                                 "temperature": 9}, 400, "invalid_request_error",
     None, "max_tokens"),
    ("order-alphabet-before-length", "/v1/completions", {"model": MODEL, "prompt": "\u00e9" + "a" * 250,
                                                          "max_tokens": 16}, 400, "invalid_request_error", None,
     "prompt"),    # One body per adjacent pair of rows, so any check moved ahead of another fails one of them.
    ("order-model-before-messages", "/v1/chat/completions", {"model": "gpt-9", "messages": []}, 404,
     "invalid_request_error", "model_not_found", "model"),
    ("order-prompt-before-max-tokens", "/v1/completions", {"model": MODEL, "prompt": "", "max_tokens": 0}, 400,
     "invalid_request_error", None, "prompt"),
    ("order-messages-before-max-tokens", "/v1/chat/completions", {"model": MODEL, "messages": [], "max_tokens": 0},
     400, "invalid_request_error", None, "messages"),
    ("order-temperature-before-seed", "/v1/completions", {"model": MODEL, "prompt": "hi", "temperature": 9,
                                                           "seed": "7"}, 400, "invalid_request_error", None,
     "temperature"),
    ("order-seed-before-stop", "/v1/completions", {"model": MODEL, "prompt": "hi", "seed": "7", "stop": [""]}, 400,
     "invalid_request_error", None, "seed"),
    ("order-stop-before-stream", "/v1/completions", {"model": MODEL, "prompt": "hi", "stop": [""], "stream": "yes"},
     400, "invalid_request_error", None, "stop"),
    ("order-stream-before-alphabet", "/v1/completions", {"model": MODEL, "prompt": "caf\u00e9", "stream": 1}, 400,
     "invalid_request_error", None, "stream"),
    ("order-stream-before-alphabet-chat", "/v1/chat/completions",
     {"model": MODEL, "messages": [{"role": "user", "content": "caf\u00e9"}], "stream": "yes"}, 400,
     "invalid_request_error", None, "stream"),
    ("order-max-tokens-before-alphabet", "/v1/completions", {"model": MODEL, "prompt": "caf\u00e9", "max_tokens": 0},
     400, "invalid_request_error", None, "max_tokens"),
    ("order-alphabet-before-length-chat", "/v1/chat/completions",
     {"model": MODEL, "messages": [{"role": "user", "content": "\u00e9" + "a" * 240}], "max_tokens": 16}, 400,
     "invalid_request_error", None, "messages"),
]


@pytest.mark.parametrize("case", ERROR_CASES, ids=[c[0] for c in ERROR_CASES])
def test_errors_are_openai_style(url, case):
    name, path, body, status, type_, code, param = case
    resp = post(url, path, None, raw=body) if isinstance(body, bytes) else post(url, path, body)
    assert resp.status_code == status, (f"{name}: expected HTTP {status}, got {resp.status_code}: "
                                        f"{resp.text[:200]} (README.md, section \"Errors\")")
    try:
        err = resp.json()["error"]
    except Exception:  # noqa: BLE001
        pytest.fail(f"{name}: the body must be {{\"error\": {{message, type, param, code}}}}, got {resp.text[:200]!r}")
    assert isinstance(err.get("message"), str) and err["message"], f"{name}: error.message must be a non-empty string"
    got = (err.get("type"), err.get("code"), err.get("param"))
    assert got == (type_, code, param), (f"{name}: expected (type, code, param) = {(type_, code, param)}, got {got} "
                                         "(README.md, section \"Errors\")")


def test_limits_at_the_edge_are_accepted(url):
    # prompt + max_tokens == max_seq_len exactly fits; temperature 2 and 0 are in range.
    body = _complete(url, "a" * 250, 6, temperature=2.0, seed=5)
    assert body["choices"][0]["finish_reason"] == "length" and len(body["choices"][0]["text"]) == 6
    body = _complete(url, "b", 1, temperature=0, stop=["zz", "yy", "xx", "ww"])   # 4 stop strings: the maximum
    assert body["choices"][0]["text"] == _reference("b", 1)


def test_defaults(url):
    """Without max_tokens and temperature: 16 tokens sampled at temperature 1.0 (OpenAI's defaults)."""
    seed = _rng("defaults").randrange(1 << 30)
    resp = post(url, "/v1/completions", {"model": MODEL, "prompt": "defaults", "seed": seed})
    assert resp.status_code == 200, resp.text[:200]
    got, want = resp.json()["choices"][0]["text"], _reference("defaults", 16, 1.0, seed)
    assert got == want, (f"defaults (max_tokens 16, temperature 1.0, seed {seed}): expected {want!r}, got {got!r} "
                         "(README.md, section \"Streaming\")")
    assert "data:" not in resp.text, "without \"stream\" the answer is one JSON object, not events"


def test_stop_holdback():
    rng = _rng("holdback")
    cases = [("xaba", ["abab"]), ("xab", ["abc", "b"]), ("", ["ab"]), ("a", ["ab"]), ("ab", ["ab"]),
             ("zzab", ["abx", "bxy"]), ("aaa", ["aaaa"]), ("q", [])]
    cases += [("".join(rng.choice("ab") for _ in range(rng.randint(0, 6))),
               ["".join(rng.choice("ab") for _ in range(rng.randint(1, 4))) for _ in range(rng.randint(1, 3))])
              for _ in range(40)]
    for (text, stops), got in zip(cases, adapter.stop_holdback_many(cases)):
        want = ref.stop_holdback(text, stops)
        assert got == want, (f"stop_holdback({text!r}, {stops}): expected {want} (the longest k with text[-k:] a "
                             f"proper prefix of a stop string), got {got} (README.md, section \"Stop strings\")")


def test_histogram_bounds_inclusive():
    """Values exactly ON a bound count in that bucket (`<=`), a value above the last bound only in +Inf
    (= count); checked on Histogram itself, without a server (README.md, "Metrics")."""
    bounds = [0.05, 0.1, 0.25, 1.0]
    values = [0.05, 0.1, 0.25, 1.0, 0.0, 0.07, 2.5, 0.1]
    got = adapter.histogram_observe(bounds, values)
    want = [sum(1 for v in values if v <= b) for b in bounds]
    assert got["counts"] == want, (
        f"Histogram({bounds}) after observing {values}: bucket counts {got['counts']}, expected {want}: N counts "
        "observations <= the bound (a value equal to a bound counts in it), cumulative (README.md, "
        "section \"Metrics\")")
    assert got["count"] == len(values) and abs(got["sum"] - sum(values)) < 1e-9, (
        f"count {got['count']} and sum {got['sum']}: expected {len(values)} and {sum(values)}")


def test_metrics_histograms(url):
    rng = _rng("metrics")
    n, k = rng.randint(3, 8), 3
    before = metrics(url)
    client_s = 0.0
    # Request 0 carries a stop string that never matches but whose first character is the answer's first:
    # the server holds that character back and releases it with the next one, so this request makes fewer
    # text pieces than tokens. serving_generation_tokens_total must still count every token.
    first = _reference("m0", n)
    never = next(ch for ch in "~`|^" if ch not in first)
    for i in range(k):
        t0 = time.perf_counter()
        _complete(url, f"m{i}", n, temperature=0, **({"stop": [first[0] + never]} if i == 0 else {}))
        client_s += time.perf_counter() - t0
    after = metrics(url)

    def delta(name):
        return after.get(name, 0) - before.get(name, 0)

    assert delta("serving_time_to_first_token_seconds_count") == k, (
        f"serving_time_to_first_token_seconds_count rose by {delta('serving_time_to_first_token_seconds_count')} "
        f"over {k} requests, expected {k} (one TTFT per request) (README.md, section \"Metrics\")")
    assert delta("serving_time_per_output_token_seconds_count") == k * (n - 1), (
        f"serving_time_per_output_token_seconds_count rose by "
        f"{delta('serving_time_per_output_token_seconds_count')} over {k} requests of {n} tokens, expected "
        f"{k * (n - 1)} (one TPOT per token after the first)")
    assert delta("serving_generation_tokens_total") == k * n, (
        f"serving_generation_tokens_total rose by {delta('serving_generation_tokens_total')} over {k} requests of "
        f"{n} tokens, expected {k * n}: it counts tokens, not the pieces of text released (a held-back character "
        "leaves with the next one) (README.md, section \"Metrics\")")
    assert delta("serving_requests_finished_total") == k, "serving_requests_finished_total must count finished requests"
    ttft_sum = delta("serving_time_to_first_token_seconds_sum")
    assert 0 < ttft_sum <= client_s, (
        f"serving_time_to_first_token_seconds_sum rose by {ttft_sum:.4f} s over {k} requests that took {client_s:.4f} s "
        "in all, as the client measured: observe first-token time - arrival time (README.md, section \"Metrics\")")
    assert delta("serving_time_per_output_token_seconds_sum") <= client_s, (
        "serving_time_per_output_token_seconds_sum grew by more than the requests took: observe the time since "
        "the previous token")
    tpot_sum = delta("serving_time_per_output_token_seconds_sum")
    # Every gap between tokens includes at least one engine step (its fixed overhead).
    assert tpot_sum >= 0.9 * STEP_OVERHEAD_S * k * (n - 1), (
        f"serving_time_per_output_token_seconds_sum rose by {tpot_sum:.4f} s over {k * (n - 1)} gaps, less than "
        f"the engine's own step overhead: observe the time between consecutive tokens")
    for name in ("serving_time_to_first_token_seconds", "serving_time_per_output_token_seconds"):
        bs = buckets(after, name)
        assert len(bs) >= 3 and bs[-1][0] == float("inf"), f"{name}: needs _bucket lines ending with le=\"+Inf\""
        counts = [c for _, c in bs]
        assert counts == sorted(counts), f"{name}: bucket counts must be cumulative (non-decreasing): {bs}"
        assert counts[-1] == after[f"{name}_count"], f"{name}: the +Inf bucket must equal _count"
    tb = dict(buckets(after, "serving_time_per_output_token_seconds"))
    tb0 = dict(buckets(before, "serving_time_per_output_token_seconds"))
    assert tb.get(0.01, 0) - tb0.get(0.01, 0) == 0 and tb.get(0.005, 0) - tb0.get(0.005, 0) == 0, (
        "a TPOT of 10 ms or less is impossible with the engine's 15 ms steps, yet the le=\"0.01\" bucket grew: "
        "a value belongs to every bucket whose bound it is <= (README.md, section \"Metrics\")")
    assert after.get("serving_num_requests_running") == 0 and after.get("serving_num_requests_waiting") == 0
    assert after.get("serving_kv_cache_usage_ratio") == 0
