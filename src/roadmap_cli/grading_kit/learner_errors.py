"""Exceptions a grader test sees when the learner's code misbehaves.

An exception raised by learner code comes back as a class that derives from
BOTH the original builtin type and `LearnerError`, so
`pytest.raises(ValueError)` keeps working and a test can still tell "the
learner raised" from "the grader's own code raised":

    except kit.LearnerError as exc: exc.learner_type, exc.learner_frames

`LearnerCrashed` (the process died) and `LearnerTimeout` (a call ran past
its limit) are deliberately NOT `LearnerError`s: a test expecting the
learner's code to raise (`pytest.raises(kit.LearnerError)` or a builtin
type) must not pass because the learner process died. Graders should check
precise types; `pytest.raises(Exception)` would also catch a crash.
"""

from __future__ import annotations

import builtins
from typing import Optional


class LearnerError(Exception):
    """Mixed into every exception re-raised from the learner process."""

    learner_type: str = ""  # e.g. "mymodule.ShapeError" (the learner's own class name)
    learner_frames: list[str] = []  # "adder.py:2 in add", the learner's frames only, outermost first


class LearnerCrashed(RuntimeError):
    """The learner process died during a call (segfault, os._exit, a limit).
    The next call starts a fresh learner process."""


class LearnerTimeout(RuntimeError):
    """A learner call ran past its time limit (the process was killed)."""


class LearnerViolation(RuntimeError):
    """The learner's code did something that voids the attempt (e.g. opened
    the shipped reference solution)."""


_CLASSES: dict[tuple[str, str], type] = {}


def _builtin(name: str) -> type:
    base = getattr(builtins, name, None)
    if isinstance(base, type) and issubclass(base, Exception):
        return base
    return RuntimeError


def rebuild(base_name: str, learner_type: str, args: tuple, message: str, frames: list[str]) -> BaseException:
    """An exception instance of class (builtin base, LearnerError) named like the learner's class."""
    base = _builtin(base_name)
    short = learner_type.rsplit(".", 1)[-1] or base.__name__
    key = (base.__name__, short)
    cls = _CLASSES.get(key)
    if cls is None:
        cls = type(short, (base, LearnerError), {"__module__": "learner"})
        _CLASSES[key] = cls
    exc: Optional[BaseException] = None
    for attempt in (args, (message,)) if args else ((message,),):
        try:
            exc = cls(*attempt)
            break
        except Exception:  # e.g. UnicodeDecodeError wants 5 arguments
            continue
    if exc is None:
        exc = type(short, (RuntimeError, LearnerError), {"__module__": "learner"})(message)
    exc.learner_type = learner_type
    exc.learner_frames = list(frames)
    if frames:
        exc.add_note("learner traceback (most recent call last):\n" + "\n".join(f"  {f}" for f in frames))
    return exc
