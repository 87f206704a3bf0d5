"""The only door from the grader to the learner's code (workspace modules
router, proxy, autoscale, loadgen; and the given serve.py, which runs them
behind HTTP).

Every `@learner_side` function runs in the learner process and returns plain
data; the tests decide pass or fail in the grader process. Whole traces run in
ONE call (a round trip costs ~0.3 ms; a trace of 200 operations through
learner proxies would cost far more).

The learner's router program (serve.py) is a third process: `start_router`
forks it from the learner process (no torch is imported here: the fork is a
small stdlib process) in a new session and returns its pid; the grader process
talks HTTP to it on 127.0.0.1 and asks the learner process to kill its
process group when the test ends (cluster.py).
"""

from __future__ import annotations

import os
import sys

from roadmap_cli import grading_kit as kit

learner_side = kit.learner_side


def _m(name: str):
    return kit.learner_module(name)


# ---------------------------------------------------------------- part 1: routing


@learner_side(timeout_s=30)
def hashes_many(cases: list) -> list:
    fn = _m("router").block_hashes
    return [[int(h) for h in fn(list(tokens), bs)] for tokens, bs in cases]


@learner_side(timeout_s=30)
def router_trace(n: int, policy: str, block_size: int, imbalance: int, ops: list) -> list:
    """Run `ops` on a fresh learner Router: ("pick", tokens, exclude) -> the pick;
    ("done", i); ("health", i, ok); ("match", i, tokens) -> match_blocks. After
    each op: (answer, outstanding, healthy)."""
    rt_mod = _m("router")
    rt = rt_mod.Router(n, policy, block_size, imbalance)
    out = []
    for op in ops:
        ans = None
        if op[0] == "pick":
            got = rt.pick(list(op[1]), exclude=tuple(op[2]))
            ans = None if got is None else int(got)
        elif op[0] == "done":
            rt.on_done(op[1])
        elif op[0] == "health":
            rt.set_healthy(op[1], op[2])
        else:
            ans = int(rt.match_blocks(op[1], rt_mod.block_hashes(list(op[2]), block_size)))
        out.append((ans, [int(v) for v in rt.outstanding], [bool(v) for v in rt.healthy]))
    return out


# ---------------------------------------------------------------- part 2: health and failover


@learner_side(timeout_s=30)
def health_trace(n: int, fail: int, passes: int, ops: list) -> list:
    """("obs", i, ok) ops on a learner HealthChecker over a learner Router: (healthy, ejections) after each."""
    rt = _m("router").Router(n, "round_robin")
    hc = _m("proxy").HealthChecker(rt, fail, passes)
    out = []
    for _, i, ok in ops:
        hc.observe(i, ok)
        out.append(([bool(v) for v in rt.healthy], [int(v) for v in hc.ejections]))
    return out


@learner_side(timeout_s=30)
def forward_runs(n: int, policy: str, scripts: dict, requests: list, close_after: int | None = None) -> list:
    """Drive proxy.forward with a fake upstream. scripts[i] lists what replica i does on its
    successive calls: ["ok"] streams the request's tokens, ["before"] fails before the first
    token, ["after", k] streams k tokens then fails. Returns, per request: the events, the
    replicas called in order, router.outstanding seen at each yielded token and after the
    request, healthy and the health checker's failure counts after it.
    close_after: the client hangs up (aclose) after that many events."""
    import asyncio

    px = _m("proxy")
    rt = _m("router").Router(n, policy)
    hc = px.HealthChecker(rt, 100, 1)   # never ejects here: the failures are counted only
    calls: list = []
    seen: list = []
    counters = {i: 0 for i in range(n)}

    async def upstream(i, request):
        calls.append(int(i))
        script = scripts[i][min(counters[i], len(scripts[i]) - 1)]
        counters[i] += 1
        toks = [(sum(request["prompt"]) * 31 + 7 * k + len(request["prompt"])) % 1000
                for k in range(request["max_tokens"])]
        if script[0] == "before":
            raise px.ReplicaFailed(f"replica {i} refused the connection")
        limit = len(toks) if script[0] == "ok" else script[1]
        for t in toks[:limit]:
            await asyncio.sleep(0)
            seen.append([int(v) for v in rt.outstanding])
            yield t
        if script[0] == "after":
            raise px.ReplicaFailed(f"replica {i} died mid-stream")

    async def run_one(req):
        events = []
        agen = px.forward(rt, hc, req, upstream)
        try:
            async for ev in agen:
                events.append(ev)
                if close_after is not None and len(events) >= close_after:
                    break
        finally:
            await agen.aclose()
        return events

    results = []
    for req in requests:
        calls.clear()
        seen.clear()
        events = asyncio.run(run_one(req))
        results.append({"events": [dict(e) for e in events], "calls": list(calls), "seen": [list(s) for s in seen],
                        "outstanding": [int(v) for v in rt.outstanding], "healthy": [bool(v) for v in rt.healthy],
                        "failures": [int(v) for v in hc.failures],
                        "successes": [int(v) for v in hc.successes]})
    return results


# ---------------------------------------------------------------- part 3: autoscaling


@learner_side(timeout_s=30)
def autoscale_trace(params: dict, steps: list) -> list:
    a = _m("autoscale").Autoscaler(params["target"], params["min"], params["max"], params["cooldown"],
                                   params["tolerance"])
    current = params["start"]
    out = []
    for now, q, *given in steps:                # a third item: the caller runs that many replicas now
        current = given[0] if given else current
        current = int(a.decide(now, current, q))
        out.append(current)
    return out


# ---------------------------------------------------------------- part 4: load


@learner_side(timeout_s=30)
def arrivals(seed: int, global_seed: int, args: list) -> list:
    """bursty_arrivals with random.Random(seed), the global `random` seeded with global_seed first
    (a generator that draws from the global stream instead of its argument is caught by replaying)."""
    import random

    random.seed(global_seed)
    return [float(t) for t in _m("loadgen").bursty_arrivals(random.Random(seed), *args)]


@learner_side(timeout_s=30)
def percentiles(cases: list) -> list:
    fn = _m("loadgen").percentile
    return [float(fn(list(values), q)) for values, q in cases]


@learner_side(timeout_s=30)
def summarize(records: list, stats: list) -> dict:
    out = _m("loadgen").summarize(records, stats)
    return {k: (None if v is None else float(v) if isinstance(v, float) else v) for k, v in dict(out).items()}


# ---------------------------------------------------------------- the router program (serve.py)


@learner_side(timeout_s=30)
def start_router(port: int, replica_ports: list, policy: str, imbalance: int, interval: float,
                 fail: int, passes: int) -> int:
    """Fork the workspace's given `serve.py` (which imports the learner's router.py and proxy.py) as
    `__main__` in its own session; the pid. Run by hand, a new Python under learner_python instead."""
    from roadmap_cli.grading_kit import sandbox

    script = str(kit.workspace() / "serve.py")
    args = ["--port", str(port), "--replicas", ",".join(str(p) for p in replica_ports), "--policy", policy,
            "--imbalance", str(imbalance), "--health-interval", repr(float(interval)),
            "--fail-threshold", str(fail), "--pass-threshold", str(passes)]
    if not sandbox.in_learner_process():
        import subprocess

        from roadmap_cli.grading_kit.learner_spawn import learner_python

        proc = subprocess.Popen(learner_python(script, *args), cwd=str(kit.workspace()), stdin=subprocess.DEVNULL,
                                start_new_session=True)
        return int(proc.pid)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        os.setsid()
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.closerange(3, 1 << 16)   # the learner's request/reply pipes must close with the learner process
        sys.argv = [script, *args]
        import runpy

        runpy.run_path(script, run_name="__main__")
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # noqa: BLE001 - the program's own traceback
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _child_state(pid: int):
    try:
        with open(f"/proc/{int(pid)}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[-1].split()
    except OSError:
        return None
    return fields[0] if int(fields[1]) == os.getpid() else None


@learner_side(timeout_s=30)
def router_alive(pid: int) -> bool:
    return _child_state(pid) not in (None, b"Z")


@learner_side(timeout_s=30)
def stop_router(pid: int) -> None:
    import contextlib
    import signal

    pid = int(pid)
    if _child_state(pid) is None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, 0)
