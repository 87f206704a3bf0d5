"""The grader process never opens a CUDA context (issue 37, item 10): grader-side code of labs/*/tests builds
CPU tensors and hands them over with `kit.to_device`; only `@kit.learner_side` functions (and the helpers only
they call) make, move or query CUDA. A lint over every lab's tests, and the mechanism's CPU checks: inputs
placed in the real learner process, results' devices recorded, a CPU grade of a GPU lab under the guard that
raises when the grader initialises CUDA."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from roadmap_cli import grading_kit as kit
from roadmap_cli.grading_kit import placement, sandbox

ROOT = Path(__file__).resolve().parents[1]
LABS = ROOT / "labs"


# ------------------------------------------------------------------ the lint


def _is_learner_side(decorator: ast.expr) -> bool:
    node = decorator.func if isinstance(decorator, ast.Call) else decorator
    return (isinstance(node, ast.Name) and node.id == "learner_side") or (
        isinstance(node, ast.Attribute) and node.attr == "learner_side"
    )


def _cuda_device_expr(node: ast.expr, names: frozenset = frozenset()) -> bool:
    """ "cuda", "cuda:0", torch.device("cuda"), kit.device(), device(), DEVICE, or a name assigned one of
    those in the file (`dev = device()`): a device that may be CUDA."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.startswith("cuda")
    if isinstance(node, ast.Call):
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name == "device":
            return not node.args or _cuda_device_expr(node.args[0], names) or not isinstance(node.args[0], ast.Constant)
        return False
    return isinstance(node, ast.Name) and (node.id in ("DEVICE", "DEV") or node.id in names)


def _device_names(tree: ast.Module) -> frozenset:
    """Names the file assigns a possibly-CUDA device to."""
    names: set[str] = set()
    for _ in range(2):  # `a = device(); b = a`
        for n in ast.walk(tree):
            if isinstance(n, ast.Assign) and _cuda_device_expr(n.value, frozenset(names)):
                names.update(t.id for t in n.targets if isinstance(t, ast.Name))
    return frozenset(names)


def _problems(node: ast.AST, names: frozenset = frozenset()) -> list[str]:
    """What in one grader-side node would make or touch CUDA state in the grader process."""
    found = []
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "cuda":
            found.append(".cuda()")
        if (
            isinstance(func, ast.Attribute)
            and func.attr == "to"
            and any(_cuda_device_expr(a, names) for a in node.args)
        ):
            found.append(".to(<the lab's device>)")
        if (
            isinstance(func, ast.Attribute)
            and func.attr == "set_default_device"
            and any(_cuda_device_expr(a, names) for a in node.args)
        ):
            found.append("set_default_device(<the lab's device>)")
        for kw in node.keywords:
            if kw.arg == "device" and _cuda_device_expr(kw.value, names):
                found.append(f"device={ast.unparse(kw.value)}")
    if isinstance(node, ast.Attribute):
        if isinstance(node.value, ast.Name) and node.value.id == "torch" and node.attr == "cuda":
            found.append("torch.cuda")
        if node.attr == "is_cuda":
            found.append(".is_cuda (the grader's copies are CPU data: kit.returned_on_cuda)")
    return found


def _module_functions(tree: ast.Module) -> dict[str, ast.AST]:
    return {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def _learner_side_functions(tree: ast.Module, outside_uses: set[str]) -> set[str]:
    """Decorated functions, and module functions used only inside learner-side ones (their helpers)."""
    funcs = _module_functions(tree)
    learner = {name for name, f in funcs.items() if any(_is_learner_side(d) for d in f.decorator_list)}
    changed = True
    while changed:
        changed = False
        for name in set(funcs) - learner:
            if name in outside_uses:
                continue
            users = {
                owner
                for owner, f in funcs.items()
                if owner != name
                for n in ast.walk(f)
                if isinstance(n, ast.Name) and n.id == name
            }
            top_level = any(
                isinstance(n, ast.Name) and n.id == name
                for stmt in tree.body
                if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef))
                for n in ast.walk(stmt)
            )
            if users and users <= learner and not top_level:
                learner.add(name)
                changed = True
    return learner


def grader_side_cuda(tests_dir: Path) -> list[str]:
    """file:line: what, for every grader-side use of CUDA in one lab's tests."""
    trees = {p: ast.parse(p.read_text(encoding="utf-8"), str(p)) for p in sorted(tests_dir.glob("*.py"))}
    # Names other files reach as `module.name` (test files call adapter.X grader-side).
    outside: dict[str, set[str]] = {}
    for path, tree in trees.items():
        for n in ast.walk(tree):
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name):
                outside.setdefault(n.value.id, set()).add(n.attr)
            if isinstance(n, ast.ImportFrom) and n.module:
                outside.setdefault(n.module, set()).update(a.name for a in n.names)
    found = []
    for path, tree in trees.items():
        learner = _learner_side_functions(tree, outside.get(path.stem, set()))
        names = _device_names(tree)
        skip = {id(n) for name, f in _module_functions(tree).items() if name in learner for n in ast.walk(f)}
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            for what in _problems(node, names):
                found.append(f"{path.relative_to(tests_dir.parents[1])}:{node.lineno}: {what}")
    return found


def test_no_lab_grader_makes_moves_or_queries_cuda_tensors() -> None:
    found = [
        line for lab in sorted(LABS.iterdir()) if (lab / "tests").is_dir() for line in grader_side_cuda(lab / "tests")
    ]
    assert not found, (
        "grader-side code must build CPU tensors and pass them through kit.to_device (CUDA work "
        "goes in @kit.learner_side functions):\n" + "\n".join(found)
    )


def test_the_lint_catches_each_way_of_reaching_cuda(tmp_path: Path) -> None:
    (tmp_path / "adapter.py").write_text(
        textwrap.dedent("""
        import torch
        from roadmap_cli import grading_kit as kit

        def _helper(n):
            return torch.randn(n, device="cuda")       # only learner-side code calls it: fine

        @kit.learner_side
        def timed(n):
            torch.cuda.synchronize()
            return _helper(n).cuda()

        def grader_helper(x):
            return x.to(kit.device())                  # flagged: called by a test
    """)
    )
    (tmp_path / "test_x.py").write_text(
        textwrap.dedent("""
        import torch
        import adapter
        from roadmap_cli.grading_kit import device
        DEVICE = device()

        def test_a():
            x = torch.randn(3).cuda()
            y = torch.zeros(3, device="cuda:0")
            z = torch.ones(3).to(DEVICE)
            g = torch.Generator(device=device())
            assert adapter.grader_helper(x).is_cuda
            major = torch.cuda.get_device_capability()
            w = torch.ones(3, device=torch.device("cuda"))
            ok = torch.ones(3, device="cpu").to(torch.float16)
            dev = device()
            v = torch.full((3,), 0.0, device=dev)
            torch.set_default_device(dev)
    """)
    )
    found = grader_side_cuda(tmp_path)
    kinds = sorted(line.split(": ", 1)[1].split(" (")[0] for line in found)
    assert kinds == sorted(
        [
            ".to(<the lab's device>)",
            ".cuda()",
            "device='cuda:0'",
            ".to(<the lab's device>)",
            "device=device()",
            ".is_cuda",
            "torch.cuda",
            "device=torch.device('cuda')",
            "device=dev",
            "set_default_device(<the lab's device>)",
        ]
    ), found
    assert not [line for line in found if "adapter.py:6" in line or "adapter.py:10" in line or "adapter.py:11" in line]


# ------------------------------------------------------- the mechanism, on the CPU

ADAPTER = '''
import torch
from roadmap_cli import grading_kit as kit


@kit.learner_side
def arrived(*tensors):
    """What the learner's code receives: device, type, layout, the whole storage, autograd state."""
    return [{"device": str(t.device), "type": type(t).__name__, "shape": tuple(t.shape), "stride": t.stride(),
             "offset": t.storage_offset(), "storage": t.untyped_storage().nbytes() // t.element_size(),
             "requires_grad": t.requires_grad, "leaf": t.is_leaf} for t in tensors]


@kit.learner_side
def whole_storage(t):
    return torch.empty(0, dtype=t.dtype).set_(t.untyped_storage(), 0, (t.untyped_storage().nbytes() // t.element_size(),), (1,))


@kit.learner_side
def twice(t):
    return t * 2
'''


@pytest.fixture
def learner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    ws, tests_dir = tmp_path / "ws", tmp_path / "tests"
    ws.mkdir()
    tests_dir.mkdir()
    (tests_dir / "adapter_placement.py").write_text(ADAPTER)
    monkeypatch.setenv("ROADMAP_GPU_CACHE", str(tmp_path / "gpu-cache"))
    monkeypatch.syspath_prepend(str(tests_dir))
    monkeypatch.delitem(sys.modules, "adapter_placement", raising=False)
    sandbox.configure(
        {
            "workspace": str(ws),
            "tests_dir": str(tests_dir),
            "memory_limit_mb": 4096,
            "nofile": 256,
            "forbidden_read": [],
            "forbidden_write": [str(tests_dir)],
            "preload": ["adapter_placement"],
        }
    )
    monkeypatch.setattr(sandbox, "_client", None)
    import adapter_placement

    yield adapter_placement
    sandbox.shutdown()
    sandbox.configure(None)
    monkeypatch.setattr(sandbox, "_client", None)


def _padded_view() -> tuple[torch.Tensor, torch.Tensor]:
    storage = torch.full((40,), float("nan"))
    view = storage[6 : 6 + 2 * 5 : 2]  # every other element, at an offset: NaN all around
    view.copy_(torch.arange(1.0, 6.0))
    return storage, view


def test_inputs_are_placed_on_the_labs_device_in_the_learner_process(learner) -> None:
    storage, view = _padded_view()
    # "meta" stands in for "cuda" on this machine: a device the grader never holds a tensor on.
    sent = kit.to_device(view, "meta")
    assert sent.device.type == "cpu" and torch.equal(sent, view)  # the grader still sees its CPU data
    grad = kit.to_device(torch.randn(3, 4, requires_grad=True), "meta")
    got = learner.arrived(sent, grad, view)
    assert got[0] == {
        "device": "meta",
        "type": "Tensor",
        "shape": (5,),
        "stride": (2,),
        "offset": 6,
        "storage": 40,
        "requires_grad": False,
        "leaf": True,
    }
    assert got[1]["device"] == "meta" and got[1]["requires_grad"] and got[1]["leaf"]
    assert got[2]["device"] == "cpu" and got[2]["type"] == "Tensor"  # an unwrapped tensor goes as it is
    # The whole buffer travels, not just the view: the NaN guards around it are there in the learner process.
    whole = learner.whole_storage(kit.to_device(view, "cpu"))
    assert whole.shape == (40,) and torch.equal(whole[6:16:2], torch.arange(1.0, 6.0))
    assert int(whole.isnan().sum()) == 35
    assert not torch.cuda.is_initialized()


def test_results_record_the_learners_device_and_go_back_there(learner) -> None:
    x = torch.arange(6.0).reshape(2, 3)
    out = learner.twice(kit.to_device(x, "cpu"))
    assert type(out) is torch.Tensor and torch.equal(out, 2 * x) and kit.learner_device(out).type == "cpu"
    # A result the learner returned on CUDA (what wire.decode makes of its record): CPU data here, and passed back
    # in, it arrives on that device again ("meta" standing in for "cuda").
    from_gpu = placement.tag(out, "meta")
    assert learner.arrived(from_gpu)[0]["device"] == "meta"
    with pytest.raises(ValueError, match="CPU tensors"):
        kit.to_device(torch.empty(2, device="meta"))


def test_without_a_learner_process_to_device_moves_the_whole_buffer_here() -> None:
    assert not sandbox.active()
    storage, view = _padded_view()
    moved = kit.to_device(view, "meta")
    assert moved.device.type == "meta" and moved.stride() == (2,) and moved.storage_offset() == 6
    assert moved.untyped_storage().nbytes() == storage.untyped_storage().nbytes()


GUARD_PROBE = r"""
import json, torch
from roadmap_cli.grading_kit import placement
placement.guard_grader_against_cuda()
calls = {"factory": lambda: torch.zeros(1, device="cuda"), "move": lambda: torch.ones(2).cuda(),
         "to": lambda: torch.ones(2).to("cuda:0"), "capability": lambda: torch.cuda.get_device_capability(),
         "init": lambda: torch.cuda.init()}
out = {}
for name, call in calls.items():
    try:
        call()
        out[name] = "ran"
    except placement.GraderTouchedCuda:
        out[name] = "refused"
    except Exception as exc:
        out[name] = type(exc).__name__
out["is_available"] = torch.cuda.is_available() in (True, False)
out["initialized"] = torch.cuda.is_initialized()
print(json.dumps(out))
"""


def test_the_guard_refuses_every_way_into_cuda() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", GUARD_PROBE],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    import json

    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got == {
        "factory": "refused",
        "move": "refused",
        "to": "refused",
        "capability": "refused",
        "init": "refused",
        "is_available": True,
        "initialized": False,
    }


@pytest.fixture
def cpu_labs(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("ROADMAP_DEVICE", "cpu")
    from roadmap_cli.labs.device import detect_device

    detect_device.cache_clear()
    yield detect_device()
    detect_device.cache_clear()


def test_a_grade_sets_the_guard_in_the_grader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cpu_labs) -> None:
    """The plugin installs the guard (every CUDA grade; here forced on a CPU grade): grader-side code that
    reaches for CUDA fails with the guard's message, not torch's."""
    import shutil

    from roadmap_cli.grading.runner import grade_workspace
    from roadmap_cli.labs import workspace as ws
    from roadmap_cli.labs.spec import find_lab

    fixtures = ROOT / "tests" / "fixtures_labs"
    shutil.copytree(fixtures / "labs", tmp_path / "labs")
    shutil.copytree(fixtures / "kernels", tmp_path / "kernels")
    monkeypatch.setenv("ROADMAP_LABS_DIR", str(tmp_path / "labs"))
    spec = find_lab("adder")
    with open(spec.tests_dir / "test_add.py", "a", encoding="utf-8") as fh:
        fh.write("\n\ndef test_grader_side_cuda():\n    import torch\n\n    torch.zeros(1, device='cuda')\n")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    ws.write_solution(spec, workspace)
    messages = {}
    for guard in ("1", ""):
        run = grade_workspace(
            spec, workspace, parts=["add"], device=cpu_labs, extra_env={"ROADMAP_GRADER_CUDA_GUARD": guard}
        )
        test = next(t for t in run.tests if t.nodeid.endswith("test_grader_side_cuda"))
        assert test.outcome == "failed"
        messages[guard] = test.message or ""
    assert "GraderTouchedCuda" in messages["1"] and "kit.to_device" in messages["1"]
    assert "GraderTouchedCuda" not in messages[""]


def test_a_cpu_grade_of_a_gpu_lab_passes_under_the_guard(tmp_path: Path, cpu_labs) -> None:
    """cuda-matmul's Triton parts, graded on the CPU with the guard on: every input went through
    kit.to_device and the learner process, and the grader never initialised CUDA."""
    from roadmap_cli.grading.runner import grade_workspace
    from roadmap_cli.labs import workspace as ws
    from roadmap_cli.labs.spec import find_lab

    spec = find_lab("cuda-matmul")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    ws.write_solution(spec, workspace)
    run = grade_workspace(
        spec, workspace, parts=["vector-add"], device=cpu_labs, extra_env={"ROADMAP_GRADER_CUDA_GUARD": "1"}
    )
    assert run.outcome == "passed", (run.message, run.log_tail[-1500:], [t.message for t in run.tests if t.message])
    assert run.part("vector-add").status == "passed"


def test_the_grader_learns_the_gpu_from_the_engine_not_from_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    """In a CUDA grade the grader's has_cuda/device/cuda_capability come from the engine's environment; torch
    is never asked (even is_available loads the driver in the grader)."""
    from roadmap_cli.grading.launch import grader_env
    from roadmap_cli.labs.device import DeviceInfo

    env = grader_env(DeviceInfo("cuda", "NVIDIA A10", "8.6"))
    assert env["ROADMAP_DEVICE"] == "cuda" and env["ROADMAP_GPU_NAME"] == "NVIDIA A10"
    assert env["ROADMAP_GPU_CAPABILITY"] == "8.6" and "TRITON_INTERPRET" not in env

    def asked(*_args):
        raise AssertionError("the grader asked torch.cuda")

    monkeypatch.setattr(torch.cuda, "is_available", asked)
    monkeypatch.setattr(torch.cuda, "get_device_capability", asked)
    for key in ("ROADMAP_DEVICE", "ROADMAP_GPU_CAPABILITY"):
        monkeypatch.setenv(key, env[key])
    monkeypatch.setattr(sandbox, "_config", {"workspace": "/nonexistent"})
    assert kit.has_cuda() and kit.device() == "cuda" and kit.cuda_capability() == (8, 6)
    monkeypatch.setenv("ROADMAP_DEVICE", "cpu")
    assert not kit.has_cuda() and kit.device() == "cpu" and kit.cuda_capability() is None
