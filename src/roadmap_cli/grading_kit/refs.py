"""The learner process's reference table: learner-side objects the grader
holds a `LearnerProxy` to (learner_proxy.py), by id.

It lives in its own importable module, below both ends: `_learner_main`
fills it as replies are encoded (wire.encode's `remember`), and a LearnerProxy
pickled back as an argument names `resolve_ref` here, which the learner
process's unpickler calls to get the object again. (Not `__main__`: the
learner process is started with `-c`, and a pickled reference must name a
module both processes can import.)
"""

from __future__ import annotations

from typing import Any

_objects: dict[int, Any] = {}
_next_id = [1]


def remember(obj: Any) -> int:
    """Keep `obj` alive in the learner process; its reference id for the grader."""
    ref_id = _next_id[0]
    _next_id[0] += 1
    _objects[ref_id] = obj
    return ref_id


def release(ref_id: int) -> None:
    """The grader dropped its reference: the object may be collected."""
    _objects.pop(ref_id, None)


def resolve_ref(ref_id: int) -> Any:
    """Unpickling hook: a grader-side LearnerProxy passed back as an argument."""
    try:
        return _objects[ref_id]
    except KeyError:
        raise LookupError(f"learner proxy #{ref_id} was released") from None
