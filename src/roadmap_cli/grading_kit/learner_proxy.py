"""Learner proxies: learner-side objects seen from the grader process.

A learner function's return value that is not plain data (see wire.py)
stays in the learner process; the grader gets a `LearnerProxy` that forwards
attribute reads, calls, len, [], iteration and `in` as requests, and that
turns back into the learner-side object when passed as an argument. Every
operation is a round trip (~0.3 ms), so bound methods are cached per
reference (one round trip per method call instead of two).
"""

from __future__ import annotations

from typing import Any


def _ref_type(ref: "LearnerProxy") -> str:
    return object.__getattribute__(ref, "_type")


class LearnerProxy:
    """A learner-side object seen from the grader process. Supports attribute
    reads, calls, len, [], iteration and `in`; passed back as an argument it
    becomes the learner-side object again. Every operation is a round trip."""

    __slots__ = ("_client", "_gen", "_id", "_type", "_label", "_methods", "_is_method", "__weakref__")
    _roadmap_proxy_type = staticmethod(_ref_type)

    def __init__(self, owner: Any, gen: int, ref_id: int, type_name: str, label: str = "") -> None:
        object.__setattr__(self, "_client", owner)
        object.__setattr__(self, "_gen", gen)
        object.__setattr__(self, "_id", ref_id)
        object.__setattr__(self, "_type", type_name)
        object.__setattr__(self, "_label", label or type_name)  # e.g. "mul.mul": named in crash messages
        object.__setattr__(
            self, "_methods", None
        )  # name -> LearnerProxy of a bound method (one round trip saved per call)
        object.__setattr__(self, "_is_method", False)

    def _mark_method(self) -> None:
        object.__setattr__(self, "_is_method", True)

    def _do(self, op: str, *args: Any, label: str = "") -> Any:
        owner = object.__getattribute__(self, "_client")
        owner.check_generation(object.__getattribute__(self, "_gen"))
        label = label or object.__getattribute__(self, "_label")
        return owner.request(op, (object.__getattribute__(self, "_id"), *args), None, label)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)  # Python's own probes (__array__, __fspath__...) stay local
        methods = object.__getattribute__(self, "_methods")
        if methods is not None and name in methods:
            return methods[name]
        value = self._do("getattr", name, label=f"{object.__getattribute__(self, '_label')}.{name}")
        if type(value) is LearnerProxy and object.__getattribute__(value, "_is_method"):
            if methods is None:
                methods = {}
                object.__setattr__(self, "_methods", methods)
            methods[name] = value
        return value

    def __setattr__(self, name: str, value: Any) -> None:
        self._do("setattr", name, value)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._do("call", args, kwargs)

    def __len__(self) -> int:
        return int(self._do("len"))

    def __getitem__(self, key: Any) -> Any:
        return self._do("getitem", key)

    def __setitem__(self, key: Any, value: Any) -> None:
        self._do("setitem", key, value)

    def __iter__(self):
        iterator = self._do("iter")
        while True:
            try:
                yield iterator._do("next")
            except StopIteration:
                return

    def __contains__(self, item: Any) -> bool:
        return bool(self._do("contains", item))

    def __bool__(self) -> bool:
        value = self._do("bool")
        return value if type(value) is bool else True

    def __repr__(self) -> str:
        try:
            text = self._do("repr")
        except Exception:
            text = "?"
        return f"<learner {_ref_type(self)}: {text if type(text) is str else '?'}>"

    def __str__(self) -> str:
        text = self._do("str")
        return text if type(text) is str else repr(self)

    def __reduce__(self):
        object.__getattribute__(self, "_client").check_generation(object.__getattribute__(self, "_gen"))
        from roadmap_cli.grading_kit.refs import resolve_ref

        return (resolve_ref, (object.__getattribute__(self, "_id"),))

    def __del__(self) -> None:
        try:
            owner = object.__getattribute__(self, "_client")
            if owner.generation == object.__getattribute__(self, "_gen"):
                owner.released.append(object.__getattribute__(self, "_id"))
        except Exception:
            pass
