"""The learner sandbox's contract (briefs: sandbox_api.md), piece by piece:
what crosses the pipe, the restricted unpickler, re-raised exceptions, remote
references, crashes, timeouts, the scrubbed learner process, digests."""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

import pytest
import torch

from roadmap_cli import grading_kit as kit
from roadmap_cli.grading_kit import sandbox, wire
from roadmap_cli.grading_kit.learner_errors import rebuild


def roundtrip(value):
    refs = []
    encoded = wire.encode(value, lambda obj: refs.append(obj) or len(refs))
    decoded = wire.decode(wire.loads_reply(wire.dumps_reply(encoded)), lambda i, t: ("REF", i, t))
    return decoded, refs


def test_tensors_come_back_as_exact_copies_with_dtype_shape_and_strides() -> None:
    base = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    cases = [
        base,
        base.t(),
        base[:, 1:3],
        torch.tensor(3.5),
        torch.empty(0, 5),
        base.to(torch.bfloat16),
        base > 4,
        base.to(torch.int8),
        torch.randn(2, 3, requires_grad=True),
        base[0:1].expand(5, 4),
    ]
    for t in cases:
        back, _ = roundtrip(t)
        assert type(back) is torch.Tensor and back.dtype == t.dtype and back.shape == t.shape
        assert torch.equal(back, t.detach()) and not back.requires_grad
    assert roundtrip(base.t())[0].stride() == (1, 4)  # a transposed view stays transposed
    state = torch.nn.Linear(2, 3).state_dict()
    back, refs = roundtrip((state, torch.nn.Parameter(base)))
    assert type(back[0]) is dict and list(back[0]) == ["weight", "bias"] and not refs
    assert type(back[1]) is torch.Tensor and torch.equal(back[1], base)
    assert roundtrip([torch.float16, torch.Size([2, 3]), {"k": (1, 2.5, None, b"x", 1j)}, {1, 2}, frozenset("a")])[
        0
    ] == [torch.float16, torch.Size([2, 3]), {"k": (1, 2.5, None, b"x", 1j)}, {1, 2}, frozenset("a")]


class _CudaLooking:
    """A CPU tensor dressed as a CUDA one: what `_tensor_record` reads of a tensor on the GPU."""

    def __init__(self, t: torch.Tensor) -> None:
        self.t = t
        self.device = torch.device("cuda", 0)

    def detach(self):
        return self

    def cpu(self):
        return self.t


def test_the_device_travels_with_a_tensor() -> None:
    """A CUDA result comes back as CPU data that records the learner's device (issue 37: it was rebuilt as a
    plain CPU tensor, and every `is_cuda` check failed; then moved onto the GPU in the grader, which opened a
    CUDA context of its own). The grader never holds a CUDA tensor."""
    base = torch.arange(12, dtype=torch.float16).reshape(3, 4).t()
    record = wire._tensor_record(_CudaLooking(base))
    assert record.data[-1] == "cuda:0"
    assert wire._tensor_record(base).data[-1] == "cpu"
    back = wire.decode(wire.loads_reply(wire.dumps_reply(record)), lambda i, t: None)
    assert back.device.type == "cpu" and torch.equal(back, base) and back.stride() == base.stride()
    assert kit.learner_device(back) == torch.device("cuda", 0) and kit.returned_on_cuda(back)
    assert not torch.cuda.is_initialized()
    plain = wire.decode(wire._tensor_record(base), lambda i, t: None)
    assert type(plain) is torch.Tensor and not kit.returned_on_cuda(plain) and kit.learner_device(plain).type == "cpu"
    assert type(back + 1) is torch.Tensor and not kit.returned_on_cuda(back[0])  # the record is the object's alone
    # Passed back to the learner process, it arrives on the device it came from.
    rebuild_fn, (data, device) = back.__reduce_ex__(pickle.HIGHEST_PROTOCOL)
    assert device == "cuda:0" and type(data) is torch.Tensor and torch.equal(data, base)
    for bad in ("meta", "gibberish:9"):
        with pytest.raises(wire.WireError):
            wire.decode(wire.Tagged("tensor", record.data[:-1] + (bad,)), lambda i, t: None)


def test_numpy_arrays_and_scalars_are_plain_data() -> None:
    np = pytest.importorskip("numpy")
    arr = np.arange(6, dtype=np.int16).reshape(2, 3)
    back, _ = roundtrip((arr, np.float32(2.5)))
    assert (back[0] == arr).all() and back[0].dtype == np.int16 and back[1] == np.float32(2.5)


def test_anything_else_becomes_a_reference() -> None:
    class Learner:
        pass

    class SneakyInt(int):
        def __eq__(self, other):
            return True

    obj, sneaky = Learner(), SneakyInt(3)
    back, refs = roundtrip([obj, sneaky, len])
    assert [b[0] for b in back] == ["REF"] * 3 and refs == [obj, sneaky, len]
    assert back[1][2].endswith("SneakyInt")


def test_the_restricted_unpickler_builds_no_learner_object() -> None:
    class Evil:
        def __reduce__(self):
            return (os.system, ("echo pwned",))

    with pytest.raises(wire.WireError, match="not plain data"):
        wire.loads_reply(pickle.dumps(Evil()))
    with pytest.raises(wire.WireError):
        wire.loads_reply(pickle.dumps(Path("/etc")))
    with pytest.raises(wire.WireError, match="unreadable"):
        wire.loads_reply(b"\x80\x05garbage")


def test_learner_exceptions_keep_their_builtin_type_message_and_frames() -> None:
    exc = rebuild("KeyError", "mymod.MissingBlock", ("block 7",), "'block 7'", ["cache.py:12 in get"])
    assert isinstance(exc, KeyError) and isinstance(exc, kit.LearnerError)
    assert type(exc).__name__ == "MissingBlock" and exc.args == ("block 7",)
    assert exc.learner_frames == ["cache.py:12 in get"]
    with pytest.raises(KeyError):
        raise exc
    odd = rebuild("UnicodeDecodeError", "UnicodeDecodeError", (), "bad byte", [])
    assert isinstance(odd, kit.LearnerError) and "bad byte" in str(odd)
    assert not issubclass(kit.LearnerCrashed, kit.LearnerError)


def test_digests_are_stable_and_tell_dtypes_apart() -> None:
    a = torch.ones(3)
    assert wire.digest([a, 1]) == wire.digest([a.clone(), 1])
    assert wire.digest(a) != wire.digest(a.double()) and wire.digest({1, 2}) == wire.digest({2, 1})


# ------------------------------------------------------ a live learner process


LEARNER = """
import os, resource, sys, time

class Box:
    def __init__(self, v):
        self.v = v
    def get(self):
        return self.v
    def __len__(self):
        return 3
    def __getitem__(self, i):
        return i * 10
    def __iter__(self):
        return iter([self.v, self.v + 1])

def add(a, b):
    return a + b

def facts():
    caps = [ln.split()[1] for ln in open("/proc/self/status") if ln.startswith("CapEff")][0]
    return {"env": sorted(os.environ), "cwd": os.getcwd(), "path0": sys.path[0], "caps": caps,
            "as": resource.getrlimit(resource.RLIMIT_AS)[0], "core": resource.getrlimit(resource.RLIMIT_CORE)[0],
            "pid": os.getpid()}

def make(v):
    return Box(v)

def unwrap(box):
    return box.v * 2

def boom():
    raise ValueError("bad shape (3, 4)")

def die():
    os._exit(7)

def segv():
    import ctypes
    ctypes.string_at(0)

def sleep():
    time.sleep(60)

def peek(path):
    return open(path).read()
"""

ADAPTER = """
from roadmap_cli import grading_kit as kit

@kit.learner_side
def add(a, b):
    return kit.learner_module("learner").add(a, b)

@kit.learner_side(timeout_s=1.5)
def slow():
    return kit.learner_module("learner").sleep()

@kit.learner_side
def scale(t, factor):
    with kit.forbid_torch_ops("matmul"):
        return t * factor
"""


@pytest.fixture
def live(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest):
    ws, tests_dir, secret = tmp_path / "ws", tmp_path / "tests", tmp_path / "solution"
    for d in (ws, tests_dir, secret):
        d.mkdir()
    (ws / "learner.py").write_text(LEARNER)
    if getattr(request, "param", None) == "decoy-adapter":
        (ws / "adapter.py").write_text("raise SystemExit('the workspace adapter must never be imported')\n")
    (tests_dir / "adapter.py").write_text(ADAPTER)
    (secret / "learner.py").write_text("ANSWER = 42\n")
    digests = tmp_path / "digests.jsonl"
    monkeypatch.setenv("ROADMAP_OUTPUT_DIGESTS", str(digests))
    monkeypatch.setenv("PYTEST_SECRET_SHOULD_NOT_LEAK", "1")
    monkeypatch.setenv("ROADMAP_SECRET_SEED", "12345")
    monkeypatch.syspath_prepend(str(tests_dir))
    monkeypatch.delitem(__import__("sys").modules, "adapter", raising=False)
    sandbox.configure(
        {
            "workspace": str(ws),
            "tests_dir": str(tests_dir),
            "memory_limit_mb": 2048,
            "nofile": 256,
            "forbidden_read": [str(secret)],
            "forbidden_write": [str(tests_dir)],
            "preload": ["adapter"],
            # The learner module here probes the process (resource, ctypes): an engine
            # fixture, so the lab-code check is off, except where a test is about it.
            "lab_code": {"check": getattr(request, "param", None) == "decoy-adapter"},
        }
    )
    monkeypatch.setattr(sandbox, "_client", None)
    import adapter

    yield adapter, ws, secret, digests
    sandbox.shutdown()
    sandbox.configure(None)
    monkeypatch.setattr(sandbox, "_client", None)


@pytest.mark.parametrize("live", ["decoy-adapter"], indirect=True)
def test_a_workspace_adapter_voids_the_attempt_and_is_never_imported(live) -> None:
    """A learner's adapter.py would stand in for the grader's: the lab-code check
    refuses it before any learner code runs (never a SystemExit from the decoy)."""
    adapter = live[0]
    with pytest.raises(kit.LearnerViolation, match="a module named adapter is not allowed in lab code"):
        adapter.add(2, 3)


def test_a_live_learner_process(live) -> None:
    adapter, ws, secret, digests = live
    assert adapter.add(2, 3) == 5
    mod = kit.learner_module("learner")
    facts = mod.facts()
    assert facts["pid"] != os.getpid() and facts["cwd"] == str(ws) and facts["path0"] == str(ws)
    assert not [k for k in facts["env"] if k.startswith("PYTEST") or k in ("ROADMAP_SECRET_SEED", "ROADMAP_GRADE_FD")]
    assert facts["as"] == 2048 << 20 and facts["core"] == 0
    if os.geteuid() == 0:
        assert int(facts["caps"], 16) == 0  # no capability left: cannot read the grader's memory or descriptors

    box = mod.make(7)
    assert isinstance(box, kit.LearnerProxy) and box.get() == 7 and box.v == 7
    assert len(box) == 3 and box[2] == 20 and list(box) == [7, 8] and mod.unwrap(box) == 14
    with pytest.raises(ValueError, match=r"bad shape \(3, 4\)") as info:
        mod.boom()
    assert isinstance(info.value, kit.LearnerError) and info.value.learner_frames[-1].startswith("learner.py:")
    with pytest.raises(kit.LearnerError):
        kit.learner_module("os")  # not from the workspace: refused
    t = torch.arange(4.0)
    assert torch.equal(adapter.scale(t, 2.0), t * 2)

    with pytest.raises(kit.LearnerViolation, match="reference solution"):
        mod.peek(str(secret / "learner.py"))

    with pytest.raises(kit.LearnerCrashed, match=r"exit status 7\) in learner.die"):
        mod.die()
    with pytest.raises(kit.LearnerCrashed):
        box.get()  # a reference into the dead process
    assert adapter.add(1, 1) == 2  # a fresh learner process
    with pytest.raises(kit.LearnerCrashed, match=r"SIGSEGV"):
        kit.learner_module("learner").segv()
    with pytest.raises(kit.LearnerTimeout, match="1.5 s"):
        adapter.slow()
    assert adapter.add(2, 2) == 4

    records = [json.loads(line) for line in digests.read_text().splitlines()]
    assert [r["call"] for r in records][:2] == ["adapter.add", "adapter.scale"]
    assert records[0]["digest"] == wire.digest(5) and records[0]["args_digest"] == wire.digest(((2, 3), {}))


def test_a_record_referenced_many_times_decodes_once_and_the_decoded_size_is_bounded() -> None:
    """Red team A1: one 8 MiB tensor record referenced 32 times through pickle's memo was an 8 MiB reply that
    decoded into 32 copies (and [t] * 100000 could push the grader into the OOM killer)."""
    import pickle

    import torch

    from roadmap_cli.grading_kit import wire

    record = wire._tensor_record(torch.zeros(2 * 1024 * 1024))  # 8 MiB of float32
    payload = pickle.dumps([record] * 32, protocol=pickle.HIGHEST_PROTOCOL)
    assert len(payload) < 9 << 20
    out = wire.decode(wire.loads_reply(payload), lambda i, n: None, limit_bytes=64 << 20)
    assert len(out) == 32 and all(t is out[0] for t in out)  # shared, as on the learner's side
    # Distinct data beyond the limit (the learner process's memory limit, in a grade) is one clear error.
    many = pickle.dumps([wire._tensor_record(torch.full((2 * 1024 * 1024,), float(i))) for i in range(9)])
    with pytest.raises(wire.WireError, match="decodes to more than 64 MiB"):
        wire.decode(wire.loads_reply(many), lambda i, n: None, limit_bytes=64 << 20)
    # Containers count too (8 bytes a slot): 1000 Nones are over a 4000-byte limit.
    with pytest.raises(wire.WireError, match="decodes to more than"):
        wire.decode(wire.loads_reply(pickle.dumps([None] * 1000)), lambda i, n: None, limit_bytes=4000)
