"""Part 2: health checks, ejection and the request path with retries
(README.md, "Part 2: health checks and failover").

Two pieces the given front end (serve.py) drives:

* `HealthChecker.observe(i, ok)` is called with the result of every probe of
  replica i (serve.py sends GET /health to each replica every
  `--health-interval` seconds) and with every failed attempt of the request
  path (a passive check, as Envoy's outlier detection counts failed requests).
  It ejects a replica after `fail_threshold` failures in a row and re-admits it
  after `pass_threshold` successful probes in a row.
* `forward(router, health, request, upstream)` is the life of one request:
  pick a replica, stream its tokens through, retry on another replica when the
  chosen one dies BEFORE its first token, and report an error (never a retry)
  when it dies after tokens went out (the client has them already: a retry
  would send them twice, or different ones).
"""

from __future__ import annotations


class ReplicaFailed(Exception):
    """Given: raised by an `upstream` stream when its replica cannot be reached,
    closes the connection, or answers something that is not a token stream."""


class HealthChecker:
    """Consecutive-failure ejection and consecutive-success re-admission."""

    def __init__(self, router, fail_threshold: int = 2, pass_threshold: int = 2):
        self.router = router
        self.fail_threshold = fail_threshold
        self.pass_threshold = pass_threshold
        n = router.num_replicas
        self.failures = [0] * n    # failures in a row, reset by any success
        self.successes = [0] * n   # successes in a row, reset by any failure
        self.ejections = [0] * n   # how many times replica i was ejected

    def observe(self, i: int, ok: bool) -> None:
        """One probe (or one request attempt) of replica i succeeded (`ok`) or failed."""
        # BEGIN SOLUTION
        if ok:
            self.failures[i] = 0
            self.successes[i] += 1
            if not self.router.healthy[i] and self.successes[i] >= self.pass_threshold:
                self.router.set_healthy(i, True)
        else:
            self.successes[i] = 0
            self.failures[i] += 1
            if self.router.healthy[i] and self.failures[i] >= self.fail_threshold:
                self.router.set_healthy(i, False)
                self.ejections[i] += 1
        # STARTER
        # raise NotImplementedError("HealthChecker.observe: see README.md, section \"Part 2: health checks and failover\"")
        # END SOLUTION


async def forward(router, health, request: dict, upstream):
    """Serve one request; an async generator of events (dicts):

      {"token": t}                           one per generated token, in order
      {"done": True, "replica": i, "attempts": k}      the last event of a success
      {"error": "...", "replica": i or None, "attempts": k}  the last event of a failure

    `request` is {"prompt": [int, ...], "max_tokens": int}. `upstream(i, request)`
    is an async iterator of replica i's token ids that raises ReplicaFailed when
    the replica fails. `attempts` counts the replicas tried for this request.
    """
    # BEGIN SOLUTION
    tried: set[int] = set()
    while True:
        i = router.pick(request["prompt"], exclude=tried)
        if i is None:
            yield {"error": "no healthy replica left to try", "replica": None, "attempts": len(tried)}
            return
        tried.add(i)
        started = False     # has a token of this attempt reached the client?
        try:
            async for token in upstream(i, request):
                started = True
                yield {"token": int(token)}
        except ReplicaFailed as exc:
            health.observe(i, False)
            if not started:
                continue            # nothing reached the client yet: try another replica
            yield {"error": f"replica {i} failed mid-stream: {exc}", "replica": i, "attempts": len(tried)}
            return
        finally:
            # Exactly once per pick: success, failure, or the client hung up (aclose()).
            router.on_done(i)
        yield {"done": True, "replica": i, "attempts": len(tried)}
        return
    # STARTER
    # raise NotImplementedError("forward: see README.md, section \"Part 2: health checks and failover\"")
    # yield  # (keeps this an async generator)
    # END SOLUTION
