"""Part 2: the health checker's streaks, forward's retries and bookkeeping on a
fake upstream, and a live cluster whose replica the grader kills mid-run."""

from __future__ import annotations

import asyncio

import adapter
import cluster
import refs

SECTION = "Part 2: health checks and failover"
W = refs.where(SECTION)


def _ref_health(n, fail, passes, ops):
    healthy, f, s, ej, out = [True] * n, [0] * n, [0] * n, [0] * n, []
    for _, i, ok in ops:
        if ok:
            f[i], s[i] = 0, s[i] + 1
            if not healthy[i] and s[i] >= passes:
                healthy[i] = True
        else:
            s[i], f[i] = 0, f[i] + 1
            if healthy[i] and f[i] >= fail:
                healthy[i], ej[i] = False, ej[i] + 1
        out.append((list(healthy), list(ej)))
    return out


def _check_health(n, fail, passes, ops, what):
    got = adapter.health_trace(n, fail, passes, ops)
    want = _ref_health(n, fail, passes, ops)
    for k, (g, e) in enumerate(zip(got, want)):
        assert (list(g[0]), list(g[1])) == e, (
            f"HealthChecker(fail_threshold={fail}, pass_threshold={passes}), {what}: after observation {k} "
            f"(replica {ops[k][1]}, ok={ops[k][2]}; the observations of that replica so far: "
            f"{[o[2] for o in ops[:k + 1] if o[1] == ops[k][1]]}) healthy/ejections {list(g[0])}/{list(g[1])}, "
            f"expected {e[0]}/{e[1]} {W}")


def test_ejects_after_consecutive_failures():
    ops = [("obs", 0, False), ("obs", 0, True), ("obs", 0, False), ("obs", 0, False), ("obs", 0, False),
           ("obs", 1, False)]
    _check_health(2, 2, 2, ops, "fail, ok, fail, fail")


def test_readmits_after_consecutive_successes():
    ops = [("obs", 0, False)] * 3 + [("obs", 0, True), ("obs", 0, False), ("obs", 0, True), ("obs", 0, True),
                                     ("obs", 0, True), ("obs", 0, False), ("obs", 0, False), ("obs", 0, False)]
    _check_health(1, 3, 2, ops, "ejected, one ok, a failure, then two oks")


def test_health_random_trace():
    r = refs.rng("health")
    n = 3
    ops = [("obs", r.randrange(n), r.random() < 0.55) for _ in range(120)]
    _check_health(n, r.randint(1, 3), r.randint(1, 3), ops, "a random trace")


def _req(r, max_tokens=5):
    return {"prompt": [r.randrange(1000) for _ in range(r.randint(1, 20))], "max_tokens": max_tokens}


def _tokens(req):
    return [cluster.token_at(req["prompt"], k) for k in range(req["max_tokens"])]


def test_retries_on_another_replica_before_the_first_token():
    r = refs.rng("retry")
    req = _req(r)
    res = adapter.forward_runs(3, "round_robin", {0: [["before"]], 1: [["before"]], 2: [["ok"]]}, [req])[0]
    toks = [e["token"] for e in res["events"] if "token" in e]
    assert res["calls"] == [0, 1, 2], (f"forward: replicas 0 and 1 fail before their first token: replicas called "
                                       f"{res['calls']}, expected [0, 1, 2] (retry on the next pick, excluding "
                                       f"those tried) {W}")
    assert toks == _tokens(req) and res["events"][-1] == {"done": True, "replica": 2, "attempts": 3}, (
        f"forward after two failed attempts: events {res['events']}, expected the {req['max_tokens']} tokens then "
        f"{{'done': True, 'replica': 2, 'attempts': 3}} {W}")


def test_retry_excludes_the_replicas_already_tried():
    r = refs.rng("exclude")
    req = _req(r)
    res = adapter.forward_runs(2, "least_outstanding", {0: [["before"]], 1: [["ok"]]}, [req])[0]
    assert res["calls"] == [0, 1], (f"forward, least_outstanding, replica 0 failing before its first token: "
                                    f"replicas called {res['calls'][:8]}{'...' if len(res['calls']) > 8 else ''}, "
                                    f"expected [0, 1] (a retry excludes every replica tried for this request) {W}")


def test_never_retries_after_tokens_were_sent():
    r = refs.rng("no-retry")
    req = _req(r)
    res = adapter.forward_runs(2, "round_robin", {0: [["after", 2]], 1: [["ok"]]}, [req])[0]
    toks = [e["token"] for e in res["events"] if "token" in e]
    last = res["events"][-1]
    assert res["calls"] == [0] and toks == _tokens(req)[:2] and "error" in last and last.get("replica") == 0 \
        and last.get("attempts") == 1, (
            f"forward: replica 0 dies after 2 tokens: replicas called {res['calls']}, events {res['events']}; "
            f"expected [0] and the 2 tokens then {{'error': ..., 'replica': 0, 'attempts': 1}}: no retry once a "
            f"token went out {W}")


def test_error_when_every_replica_failed():
    r = refs.rng("all-fail")
    req = _req(r)
    res = adapter.forward_runs(3, "least_outstanding", {i: [["before"]] for i in range(3)}, [req])[0]
    last = res["events"][-1]
    assert res["calls"] == [0, 1, 2] and len(res["events"]) == 1 and "error" in last \
        and last.get("replica") is None and last.get("attempts") == 3, (
            f"forward with every replica failing before a token: calls {res['calls']}, events {res['events']}; "
            f"expected [0, 1, 2] and one event {{'error': ..., 'replica': None, 'attempts': 3}} {W}")


def test_on_done_once_per_pick():
    r = refs.rng("on-done")
    reqs = [_req(r) for _ in range(4)]
    scripts = {0: [["ok"], ["before"], ["after", 1]], 1: [["ok"]], 2: [["before"], ["ok"]]}
    res = adapter.forward_runs(3, "round_robin", scripts, reqs)
    for k, rr in enumerate(res):
        assert rr["outstanding"] == [0, 0, 0], (f"Router.outstanding after request {k} ended (replicas called "
                                                f"{rr['calls']}): {rr['outstanding']}, expected [0, 0, 0]: "
                                                f"on_done once per pick, failed attempts included {W}")
        for s in rr["seen"]:
            assert sum(s) == 1, (f"Router.outstanding while request {k} streamed: {s}, expected exactly one "
                                 f"request outstanding (a failed attempt's pick must be done before the retry) {W}")


def test_on_done_when_the_client_hangs_up():
    r = refs.rng("hang-up")
    res = adapter.forward_runs(2, "round_robin", {0: [["ok"]], 1: [["ok"]]}, [_req(r, 6)], close_after=2)[0]
    assert res["outstanding"] == [0, 0], (f"forward closed by the client (aclose) after 2 events: "
                                          f"Router.outstanding {res['outstanding']}, expected [0, 0] {W}")


def test_failed_attempts_count_as_failures():
    r = refs.rng("passive")
    before = adapter.forward_runs(2, "round_robin", {0: [["before"]], 1: [["ok"]]}, [_req(r)])[0]
    after = adapter.forward_runs(2, "round_robin", {0: [["after", 1]], 1: [["ok"]]}, [_req(r)])[0]
    assert before["failures"] == [1, 0] and after["failures"] == [1, 0], (
        f"HealthChecker.failures after a request whose replica 0 failed before its first token (then replica 1 "
        f"served it): {before['failures']}, expected [1, 0]; after one whose replica 0 failed mid-stream: "
        f"{after['failures']}, expected [1, 0] (every failed attempt is observed as a failure) {W}")


def test_successful_requests_are_not_observed():
    """Passive checks are failed requests only: a request that succeeds does not call observe(i, True), so it
    neither resets the replica's failure streak nor adds to its successes (README.md, "Part 2")."""
    r = refs.rng("passive-success")
    reqs = [_req(r) for _ in range(3)]
    res = adapter.forward_runs(1, "round_robin", {0: [["after", 1], ["ok"], ["ok"]]}, reqs)
    got = [(rr["failures"], rr["successes"]) for rr in res]
    want = [([1], [0]), ([1], [0]), ([1], [0])]
    assert got == want, (
        f"one replica: a request that fails mid-stream, then two that succeed: (failures, successes) after each "
        f"{got}, expected {want}: forward observes failed attempts only, never a success (those come from the "
        f"probes) {W}")
    hung = adapter.forward_runs(2, "round_robin", {0: [["ok"]], 1: [["ok"]]}, [_req(r, 6)], close_after=2)[0]
    assert (hung["failures"], hung["successes"]) == ([0, 0], [0, 0]), (
        f"a client that hangs up (aclose after 2 events) is neither a failed request nor a check: (failures, "
        f"successes) {(hung['failures'], hung['successes'])}, expected ([0, 0], [0, 0]) {W}")


def test_killed_replica_is_ejected_and_no_request_is_lost():
    r = refs.rng("live-kill")
    n_req = 40
    reqs = [_req(r, 6) for _ in range(n_req)]
    arrivals = [0.012 * j for j in range(n_req)]
    # Probes every 0.5 s: the trace (40 requests, 12 ms apart) is over before two probes could eject replica 1,
    # so it is the requests sent to the dead replica that find it dead (each retried, each observed as a
    # failure): on a loaded machine a stalled router can never let the probes eject it before any request came.
    with cluster.cluster(3, "round_robin", interval=0.5, fail=2, passes=2, token_ms=4.0) as c:
        async def kill_at(t0):
            await asyncio.sleep(0.15)
            c.kill(1)

        recs = cluster.run_trace(c.port, reqs, arrivals, kill_at)
        status, stats = cluster.get(c.port, "/stats")
        ejected = list(stats["healthy"])
        ejections = list(stats["ejections"])
        c.restart(1)
        import time
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline and not cluster.get(c.port, "/stats")[1]["healthy"][1]:
            time.sleep(0.05)
        readmitted = cluster.get(c.port, "/stats")[1]["healthy"]
    retried = 0
    for j, (req, rec) in enumerate(zip(reqs, recs)):
        evs = rec.get("events", [])
        toks = [e["token"] for e in evs if "token" in e]
        last = evs[-1] if evs else None
        where = f"request {j} (sent {rec['sent'] - recs[0]['sent']:.3f} s after the first; replica 1 killed at 0.15 s)"
        assert "client_error" not in rec and last is not None and ("done" in last or "error" in last), (
            f"{where}: no final done/error event (events {evs[-3:]}, {rec.get('client_error', '')}): a request "
            f"was lost {W}")
        if "done" in last:
            assert toks == _tokens(req), f"{where}: done after tokens {toks}, expected {_tokens(req)} {W}"
            retried += last.get("attempts", 1) > 1
        else:
            assert toks, (f"{where}: ended with an error before any token ({last}): a replica that dies before "
                          f"the first token must be retried on another {W}")
    assert ejected[1] is False and ejections[1] >= 1, (
        f"after replica 1 was killed, the router's /stats says healthy {ejected}, ejections {ejections}: "
        f"expected replica 1 ejected {W}")
    assert retried >= 1, f"replica 1 was killed mid-run yet no request was retried on another replica {W}"
    assert readmitted[1] is True, (f"replica 1 restarted on its port: healthy {readmitted} 5 s later, expected it "
                                   f"re-admitted after pass_threshold good probes {W}")
