"""Seeds that a learner cannot predict: a public name mixed with the secret
per-run seed the engine sets (so outputs cannot be hard-coded), but stable
within one run so a failure message can be reproduced by rerunning with the
same ROADMAP_SECRET_SEED."""

from __future__ import annotations

import hashlib
import os


def seeded(name: str) -> int:
    """A 63-bit seed for test `name`, mixed with $ROADMAP_SECRET_SEED."""
    secret = os.environ.get("ROADMAP_SECRET_SEED", "0")
    digest = hashlib.sha256(f"{secret}:{name}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


class PerSeedCache:
    """Call `fn(*args)` once per key and per secret seed, for the tests of a
    module that share one learner-side run (spawning ranks or servers costs
    time); an exception is kept and raised again in every test that asks for
    that run. The secret seed is part of the key: bench_false_fails grades
    many seeds in one process."""

    def __init__(self, fn):
        self.fn = fn
        self.memo: dict = {}

    def __call__(self, *args):
        key = (os.environ.get("ROADMAP_SECRET_SEED"), *args)
        if key not in self.memo:
            try:
                self.memo[key] = (True, self.fn(*args))
            except Exception as exc:  # noqa: BLE001 - re-raised per test
                self.memo[key] = (False, exc)
        ok, value = self.memo[key]
        if not ok:
            raise value
        return value
