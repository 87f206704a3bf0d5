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
