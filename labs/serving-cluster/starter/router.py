"""Part 1: the routing core of the cluster's router (README.md, "Part 1: routing policies").

A `Router` decides, for each incoming request, which engine replica serves it.
It never touches a socket: the proxy (proxy.py) asks it `pick(tokens)` when a
request arrives and tells it `on_done(i)` when that request's stream ends, and
the health checker (proxy.py) flips replicas between healthy and ejected with
`set_healthy`. Keeping the decision pure makes every rule checkable without a
network, and is how real routers are built: the policy is a function of the
router's own bookkeeping (outstanding requests, the prefixes it sent where).
"""

from __future__ import annotations

import hashlib

POLICIES = ("round_robin", "least_outstanding", "prefix")


def hash_block(parent: int, block) -> int:
    """Given: the 64-bit hash of one full block of token ids, chained to the hash
    of the block before it (`parent`, 0 for the first block). Chaining makes a
    block's hash name the WHOLE prefix up to and including it, as vLLM's and
    SGLang's prefix caches do: two prompts share block k's hash only if they
    share every token of blocks 0..k."""
    data = repr((int(parent), tuple(int(t) for t in block))).encode()
    return int.from_bytes(hashlib.sha256(data).digest()[:8], "little")


def block_hashes(tokens, block_size: int) -> list[int]:
    """The chained hashes of the FULL blocks of `tokens`: len(tokens) // block_size
    of them, h[k] = hash_block(h[k-1], tokens[k*bs:(k+1)*bs]) with h[-1] = 0. A
    partial last block has no hash (it cannot be shared yet)."""
    raise NotImplementedError("block_hashes: see README.md, section \"Part 1: routing policies\"")


class Router:
    """Routes requests over `num_replicas` replicas (indices 0 .. n-1).

    State the handout fixes (tests read it):
      outstanding[i]  requests picked for replica i whose on_done has not come yet
      healthy[i]      False once the health checker ejected replica i
      prefixes[i]     the set of block hashes of every request routed to i (the
                      router's own picture of replica i's prefix cache)
    """

    def __init__(self, num_replicas: int, policy: str = "round_robin", block_size: int = 8,
                 imbalance: int = 4):
        if policy not in POLICIES:
            raise ValueError(f"unknown policy {policy!r}: one of {POLICIES}")
        if num_replicas < 1:
            raise ValueError("a router needs at least one replica")
        self.num_replicas = num_replicas
        self.policy = policy
        self.block_size = block_size
        self.imbalance = imbalance
        self.outstanding = [0] * num_replicas
        self.healthy = [True] * num_replicas
        self.prefixes: list[set[int]] = [set() for _ in range(num_replicas)]

    def set_healthy(self, i: int, healthy: bool) -> None:
        """Given: the health checker ejects (False) or re-admits (True) replica i."""
        self.healthy[i] = bool(healthy)

    def match_blocks(self, i: int, hashes: list[int]) -> int:
        """How many leading blocks of a request (its chained `hashes`) replica i
        already has in `prefixes[i]`: the largest k with hashes[k-1] in the set
        (0 if none). With chained hashes, hashes[k-1] present means blocks 0..k-1 are."""
        raise NotImplementedError("Router.match_blocks: see README.md, section \"Part 1: routing policies\"")

    def pick(self, tokens, exclude=()) -> int | None:
        """Choose the replica for a request with prompt `tokens`, among the healthy
        replicas not in `exclude`; None when there is none. The chosen replica's
        outstanding count goes up by one and the request's block hashes join its
        `prefixes` set (whatever the policy)."""
        raise NotImplementedError("Router.pick: see README.md, section \"Part 1: routing policies\"")

    def on_done(self, i: int) -> None:
        """The request picked for replica i ended (completed, failed or cancelled)."""
        raise NotImplementedError("Router.on_done: see README.md, section \"Part 1: routing policies\"")
