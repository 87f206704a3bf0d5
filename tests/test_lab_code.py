"""Facts made in the learner's own process (issue 35, red team P1, P1-worker, P2, P1b;
grading_kit/labcode.py, grading_kit/_learner_main.py).

The lab's adapter runs in the learner process, so learner code there could
replace its helpers (the grader then believes forged launch counts, outputs,
perf ratios) or save a guarded torch function before the guard is on. Three
layers, each tested here:

1. the lab-code check: every learner source is read behind the wall, in the
   learner process, before the first learner import; code that reaches into
   the process is refused with one line `file:line: ... is not allowed in lab
   code: ...`, the attempt is void (no points, outcome error);
2. learner modules are imported from the bytes the check read (a file
   rewritten afterwards never runs), with builtins whose getattr family
   refuses at run time what the check refuses in source;
3. the grader's entry points are captured before learner code runs; a
   replaced adapter/grading-kit function voids the attempt (tested with the
   check off, so this layer is shown to hold on its own).

Unit tests of the check are fast; the grades run behind bubblewrap (they skip
without it, and fail under ROADMAP_REQUIRE_BWRAP=1).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from roadmap_cli.grading_kit import labcode

ROOT = Path(__file__).resolve().parents[1]
LABS = ROOT / "labs"
FIXTURES = Path(__file__).parent / "fixtures_labs"
ATTACKS = Path(__file__).parent / "fixtures_attacks"
LINE = "is not allowed in lab code:"


def _check(tmp_path: Path, files: dict[str, str], lab_code: dict | None = None, helpers=()) -> str | None:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    for name, text in files.items():
        (ws / name).parent.mkdir(parents=True, exist_ok=True)
        (ws / name).write_text(textwrap.dedent(text))
    problem, _ = labcode.check_workspace(str(ws), labcode.Policy.from_config(lab_code, helpers))
    return problem


# ------------------------------------------------------------------ the check, unit


BYPASSES = {
    "import-sys": "import sys\nsys.modules['adapter'].x = 1\n",
    "import-sys-as": "import sys as s\n",
    "from-sys-import-modules": "from sys import modules\n",
    "torch-sys-modules": "import torch\nm = torch.sys.modules\n",
    "numpy-sys": "import numpy as np\nm = np.sys\n",
    "os-sys": "import os\nm = os.sys.modules\n",
    "from-os-import-sys": "from os import sys\n",
    "function-globals": "def f():\n    pass\ng = f.__globals__\n",
    "getattr-literal-dunder": "def f():\n    pass\ng = getattr(f, '__globals__')\n",
    "string-dunder": "key = '__glo' 'bals__'\n",
    "format-dunder": "def f():\n    pass\ntext = '{0.__globals__}'.format(f)\n",
    "exec-string": "exec('import sys')\n",
    "eval-string": "x = eval('1 + 1')\n",
    "compile": "code = compile('1', 'x', 'eval')\n",
    "dunder-import": "m = __import__('sys')\n",
    "dunder-import-computed": "name = 'sy' + 's'\nm = __import__(name)\n",
    "import-adapter": "import adapter\nadapter.time_matmul = None\n",
    "import-importlib": "import importlib\n",
    "import-ctypes": "import ctypes\n",
    "import-gc": "import gc\n",
    "import-inspect": "import inspect\n",
    "import-builtins": "import builtins\n",
    "import-roadmap": "import roadmap_cli.grading_kit\n",
    "torch-private": "import torch\nc = torch._C\n",
    "frame-back": "def g():\n    yield 1\nf = g().gi_frame.f_back\n",
    "traceback-frame": "try:\n    1 / 0\nexcept Exception as e:\n    f = e.__traceback__.tb_frame\n",
    "subclasses": "k = object.__subclasses__()\n",
    "vars-no-args": "v = vars()\n",
    "vars-of-module": "import torch\nv = vars(torch)\n",
    "globals": "g = globals()\n",
    "patch-library": "import torch\ntorch.Tensor.backward = None\n",
    "patch-library-by-alias": "import torch\nT = torch.Tensor\nT.backward = None\n",
    "attrgetter-dunder": "import operator\nget = operator.attrgetter('__globals__')\n",
    "attrgetter-computed": "import operator\nname = 'x'\nget = operator.attrgetter(name)\n",
    "torch-load-pickle": "import torch\nx = torch.load('f', weights_only=False)\n",
    "numpy-load-pickle": "import numpy as np\nx = np.load('f', allow_pickle=True)\n",
    "os-system": "import os\nos.system('true')\n",
    "load-library": "import torch\ntorch.ops.load_library('x.so')\n",
    "cpp-python-api": "SRC = 'void f() { PyRun_SimpleString(\"import sys\"); }'\n",
}


@pytest.mark.parametrize("name", sorted(BYPASSES))
def test_code_that_reaches_into_the_process_is_refused_with_one_line(tmp_path: Path, name: str) -> None:
    problem = _check(tmp_path, {"scalar.py": BYPASSES[name]})
    assert problem is not None, name
    assert problem.startswith("scalar.py:") and LINE in problem and "\n" not in problem, problem


@pytest.mark.parametrize("attack", sorted(str(p.relative_to(ATTACKS)) for p in ATTACKS.rglob("*.py")))
def test_each_red_team_attack_file_is_refused_on_its_own(tmp_path: Path, attack: str) -> None:
    """P1 (_guarded_triton_call/matmul_raises), P2 (time_matmul: the GPU perf facts) and P1b, each alone."""
    name = Path(attack).name
    problem = _check(tmp_path, {name: (ATTACKS / attack).read_text()})
    assert problem and problem.startswith(f"{name}:") and "import sys is not allowed in lab code" in problem, problem


def test_another_workspace_module_may_not_be_changed_from_outside(tmp_path: Path) -> None:
    problem = _check(
        tmp_path, {"scalar.py": "class Value:\n    pass\n", "functions.py": "import scalar\nscalar.Value = int\n"}
    )
    assert problem and problem.startswith("functions.py:2: changing scalar.Value"), problem


def test_a_module_named_like_a_library_is_refused(tmp_path: Path) -> None:
    problem = _check(tmp_path, {"typing.py": "X = 1\n", "scalar.py": "import typing\n"})
    assert problem and problem.startswith("typing.py:1: a module named typing"), problem


@pytest.mark.parametrize(
    "suffix,text",
    [
        (".cu", '#include <dlfcn.h>\nvoid* h = dlopen("x", 0);\n'),
        (".cpp", '// dlopen in a comment is fine\nvoid f() { PyRun_SimpleString("x"); }\n'),
        (".h", '#pragma once\nauto m = pybind11::module_::import("sys");\n'),
    ],
)
def test_cpp_that_reaches_into_the_process_is_refused(tmp_path: Path, suffix: str, text: str) -> None:
    problem = _check(tmp_path, {"kernel" + suffix: text})
    assert problem and problem.startswith(f"kernel{suffix}:2: ") and LINE in problem, problem


def test_cpp_comments_and_strings_are_not_code(tmp_path: Path) -> None:
    assert _check(tmp_path, {"k.cu": '// dlopen("x")\n/* PyRun_SimpleString */\nconst char* s = "dlsym";\n'}) is None


def test_plain_lab_code_passes(tmp_path: Path) -> None:
    code = """
        from __future__ import annotations
        import math, functools, itertools
        from dataclasses import dataclass
        import numpy as np
        import torch
        import torch.nn.functional as F
        import helper

        @dataclass
        class Value:
            data: float
            def __add__(self, other):
                return Value(self.data + other.data)
            def __repr__(self):
                return f"Value({self.data}) {type(self).__name__}"

        def fx_pass(gm, node):
            return getattr(gm, node.target)  # a computed name: checked when it runs

        if __name__ == "__main__":
            print(F.relu(torch.ones(2)), np.zeros(1), math.pi, helper.X)
    """
    assert _check(tmp_path, {"scalar.py": code, "helper.py": "X = 1\n"}) is None


def test_a_lab_declares_extras_per_file_and_attribute(tmp_path: Path) -> None:
    lab_code = {"imports": [{"module": "sys", "files": ["prepare.py"], "attributes": ["argv"], "why": "cli"}]}
    assert _check(tmp_path, {"prepare.py": "import sys\nprint(sys.argv)\n"}, lab_code) is None
    problem = _check(tmp_path, {"prepare.py": "import sys\nprint(sys.modules)\n"}, lab_code)
    assert problem and problem.startswith("prepare.py:2: sys.modules") and "only for argv" in problem, problem
    problem = _check(tmp_path, {"prepare.py": "import sys\nprint(sys.argv)\n", "other.py": "import sys\n"}, lab_code)
    assert problem and problem.startswith("other.py:1: import sys"), problem


def test_a_handout_rule_holds_for_every_module_the_file_imports(tmp_path: Path) -> None:
    lab_code = {"forbid": [{"names": ["torch"], "files": ["scalar.py"], "why": "your engine computes the gradients"}]}
    files = {
        "scalar.py": "import _helper\n",
        "_helper.py": "import torch\ngrad = torch.autograd.grad\n",
        "functions.py": "import torch\n",
    }
    problem = _check(tmp_path, files, lab_code)
    assert problem and problem.startswith("_helper.py:1: torch is not allowed in lab code: your engine"), problem


def test_lab_code_settings_are_validated() -> None:
    from roadmap_cli.labs.spec import lab_code_problems

    assert lab_code_problems(None) == []
    assert lab_code_problems({"imports": [{"module": "sys", "why": "x"}]})  # sys needs its attributes listed
    assert lab_code_problems({"imports": [{"module": "httpx"}]})  # no why
    assert lab_code_problems({"check": False})  # no why
    assert lab_code_problems({"forbid": [{"names": [], "why": "x"}]})
    assert lab_code_problems({"bogus": 1})
    assert lab_code_problems({"imports": [{"module": "httpx", "files": ["a.py"], "why": "client"}]}) == []


def _lab_workspace(tmp_path: Path, lab: str, which: str) -> Path:
    """The lab's starter, or the reference (solution/ and solution_files over the starter)."""
    from roadmap_cli.labs.spec import load_lab

    spec = load_lab(LABS / lab)
    ws = tmp_path / f"{lab}-{which}"
    shutil.copytree(spec.starter_dir, ws)
    if which == "solution":
        for rel, source in spec.solution_sources().items():
            (ws / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(source, ws / rel)
    return ws


@pytest.mark.parametrize("lab", sorted(p.name for p in LABS.iterdir() if (p / "lab.yaml").is_file()))
def test_every_reference_and_starter_passes_the_check(tmp_path: Path, lab: str) -> None:
    from roadmap_cli.labs.spec import load_lab

    spec = load_lab(LABS / lab)
    assert (spec.lab_code or {}).get("check", True) is True, "only the engine's test fixtures may turn the check off"
    policy = labcode.Policy.from_config(spec.lab_code, [Path(n).stem for n in spec.learner_side])
    for which in ("starter", "solution"):
        problem, _ = labcode.check_workspace(str(_lab_workspace(tmp_path, lab, which)), policy)
        assert problem is None, f"{lab} {which}: {problem}"


def test_autograd_gates_torch_autograd_before_learner_code_saves_it() -> None:
    """P1b's first half: torch.autograd.grad saved at import (before any call) is already the gate."""
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(LABS / "autograd" / "tests")!r})
        from roadmap_cli.grading_kit import sandbox
        sandbox.mark_learner_process()
        import adapter, torch
        saved_grad, saved_backward = torch.autograd.grad, torch.Tensor.backward   # the learner's import
        x = torch.tensor(2.0, requires_grad=True)
        with adapter._no_torch_autograd():
            for call in (lambda: saved_grad(x * x, x), lambda: saved_backward(x * x)):
                try:
                    call()
                    print("NOT REFUSED")
                except Exception as exc:
                    print(type(exc).__name__)
        print(float(saved_grad(x * x, x)[0]))  # outside a part 1-2 call (part 3) it is torch's
    """)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert out.stdout.split() == ["ForbiddenOpError", "ForbiddenOpError", "4.0"], out.stdout + out.stderr


# ------------------------------------------------------------------- grades behind the wall


@pytest.fixture
def adder_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The engine's fixture lab, with the lab-code check on (`check_on(False)` turns it off, as the fixture ships)."""
    root = tmp_path / "project"
    shutil.copytree(FIXTURES, root, ignore=shutil.ignore_patterns("__pycache__"))
    (root / ".git").mkdir()
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    monkeypatch.setenv("ROADMAP_LABS_DIR", str(root / "labs"))
    monkeypatch.setenv("ROADMAP_DEVICE", "cpu")
    from roadmap_cli.labs.device import detect_device

    detect_device.cache_clear()
    spec_file = root / "labs" / "adder" / "lab.yaml"
    shipped = spec_file.read_text()
    assert "lab_code: {check: false" in shipped

    def check_on(on: bool = True) -> None:
        spec_file.write_text(
            "\n".join(l for l in shipped.splitlines() if not l.startswith("lab_code:")) + "\n" if on else shipped
        )

    check_on()
    yield root, check_on
    detect_device.cache_clear()


def _adder_workspace(run_cli, tmp_path: Path, monkeypatch) -> Path:
    ws = tmp_path / "ws"
    assert run_cli("lab", "start", "adder", "--dir", str(ws)).exit_code == 0
    monkeypatch.chdir(ws)
    return ws


def _void_line(data: dict) -> str:
    assert data["outcome"] == "error" and data["score"] == 0, data
    assert all(p["points"] == 0 and p["status"] != "passed" for p in data["parts"]), data["parts"]
    return data["message"]


BEHIND_THE_WALL = {
    # P1's move on the fixture: the adapter's function replaced through sys.modules.
    "sys-modules": "import sys\nsys.modules['adapter'].mul = lambda a, b: a * b\n",
    "torch-sys": "import torch\ntorch.sys.modules['adapter'].mul = lambda a, b: a * b\n",
    "exec": "exec(\"import sys; sys.modules['adapter'].mul = lambda a, b: a * b\")\n",
    "getattr-computed": "import math\nf = getattr(math.sqrt, '__self' + '__')\n",
}


@pytest.mark.parametrize("how", sorted(BEHIND_THE_WALL))
def test_behind_the_wall_a_refused_workspace_gets_no_points_and_one_line(
    run_cli, wall, adder_project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    ws = _adder_workspace(run_cli, tmp_path, monkeypatch)
    (ws / "adder.py").write_text(BEHIND_THE_WALL[how] + "def add(a, b):\n    return a + b\n")
    result = run_cli("grade", "--json")
    assert result.exit_code != 0
    data = result.json()["data"]
    assert data["sandbox"] == "strong"
    line = _void_line(data)
    if how == "getattr-computed":  # a computed name passes the check and is refused when it runs
        assert "used the attribute __self__" in line, line
    else:
        assert "adder.py:" in line and LINE in line, line


def test_a_file_rewritten_after_the_check_is_imported_as_checked(
    run_cli, wall, adder_project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = _adder_workspace(run_cli, tmp_path, monkeypatch)
    (ws / "mul.py").write_text("def mul(a, b):\n    return a * b\n")
    # adder.py rewrites mul.py (after the check read it) with code the check would refuse, then imports it.
    (ws / "adder.py").write_text(
        textwrap.dedent("""
        import pathlib
        pathlib.Path(__file__).with_name("mul.py").write_text("import sys\\nFORGED = True\\ndef mul(a, b):\\n    return 0\\n")
        import mul
        def add(a, b):
            assert not hasattr(mul, "FORGED")
            return a + b
    """)
    )
    data = run_cli("grade", "--json").json()["data"]
    status = {p["id"]: p["status"] for p in data["parts"]}
    assert status["add"] == "passed" and status["mul"] == "passed" and "void" not in (data["message"] or ""), data


def test_startup_hooks_in_the_workspace_never_run_and_a_right_solution_passes(
    run_cli, wall, adder_project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The .pth-like tricks: the learner process starts isolated (-I -P), so a sitecustomize/usercustomize
    module or a .pth file in the workspace is never processed; a right solution passes with the check on."""
    ws = _adder_workspace(run_cli, tmp_path, monkeypatch)
    plant = "import pathlib\npathlib.Path(__file__).with_name('RAN-{0}').write_text('x')\n"
    (ws / "sitecustomize.py").write_text(plant.format("sitecustomize"))
    (ws / "usercustomize.py").write_text(plant.format("usercustomize"))
    (ws / "zz.pth").write_text("import pathlib; pathlib.Path('RAN-pth').write_text('x')\n")
    (ws / "adder.py").write_text("def add(a, b):\n    return a + b\n")
    data = run_cli("grade", "--part", "add", "--json").json()["data"]
    assert {p["id"]: p["status"] for p in data["parts"]}["add"] == "passed", data
    assert not list(ws.glob("RAN-*")) and not list(Path.cwd().glob("RAN-*"))


def test_with_the_check_off_a_replaced_adapter_function_still_voids_the_attempt(
    run_cli, wall, adder_project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Layer 3 on its own: the grader's entry points were captured before learner code ran."""
    _, check_on = adder_project
    check_on(False)
    ws = _adder_workspace(run_cli, tmp_path, monkeypatch)
    (ws / "adder.py").write_text(BEHIND_THE_WALL["sys-modules"] + "def add(a, b):\n    return a + b\n")
    data = run_cli("grade", "--json").json()["data"]
    line = _void_line(data)
    assert "replaced the grader's adapter.mul" in line, line


def _real_lab_workspace(run_cli, lab: str, tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.delenv("ROADMAP_LABS_DIR", raising=False)
    monkeypatch.setenv("ROADMAP_DEVICE", "cpu")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    from roadmap_cli.labs.device import detect_device

    detect_device.cache_clear()
    ws = tmp_path / lab
    assert run_cli("lab", "start", lab, "--dir", str(ws)).exit_code == 0
    monkeypatch.chdir(ws)
    return ws


def _import_at_top(path: Path, module: str) -> None:
    text = path.read_text()
    anchor = "from __future__ import annotations\n"
    path.write_text(
        text.replace(anchor, anchor + f"import {module}  # noqa\n", 1)
        if anchor in text
        else f"import {module}  # noqa\n" + text
    )


def test_red_team_p1_cuda_matmul_starter_with_forged_adapter_helpers_gets_nothing(
    run_cli, wall, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = _real_lab_workspace(run_cli, "cuda-matmul", tmp_path, monkeypatch)
    shutil.copy(ATTACKS / "cuda-matmul" / "_cheat.py", ws / "_cheat.py")
    shutil.copy(ATTACKS / "cuda-matmul" / "_cheat_perf_gpu.py", ws / "_cheat_perf_gpu.py")  # P2, as far as CPU goes
    _import_at_top(ws / "matmul.py", "_cheat")
    _import_at_top(ws / "matmul.py", "_cheat_perf_gpu")
    _import_at_top(ws / "vector_add.py", "_cheat")
    data = run_cli("grade", "--part", "vector-add", "--part", "matmul", "--json").json()["data"]
    line = _void_line(data)
    assert "_cheat" in line and "import sys is not allowed in lab code" in line, line


def test_red_team_p1b_autograd_starter_with_torch_scalars_gets_nothing(
    run_cli, wall, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = _real_lab_workspace(run_cli, "autograd", tmp_path, monkeypatch)
    shutil.copy(ATTACKS / "autograd" / "_cheat.py", ws / "_cheat.py")
    (ws / "scalar.py").write_text((ws / "scalar.py").read_text() + "\nimport _cheat  # noqa\n")
    data = run_cli("grade", "--part", "scalar-engine", "--json").json()["data"]
    line = _void_line(data)
    assert "_cheat.py:" in line and LINE in line, line
    # Without sys: the saved torch.autograd.grad in scalar.py itself; the handout's rule (lab_code forbid) refuses it.
    (ws / "_cheat.py").unlink()
    (ws / "scalar.py").write_text(
        (ws / "scalar.py").read_text().replace("import _cheat  # noqa\n", "import torch\n_grad = torch.autograd.grad\n")
    )
    data = run_cli("grade", "--part", "scalar-engine", "--json").json()["data"]
    line = _void_line(data)
    assert "scalar.py:" in line and "torch is not allowed in lab code" in line, line


def test_cuda_matmul_may_not_save_torch_matmul_when_its_module_loads(tmp_path: Path) -> None:
    """The runtime guard (torch.matmul raises while the learner's matmul runs) is dodged by a reference saved
    at import; the handout's rule, in lab.yaml `lab_code: forbid:`, refuses the name in matmul.py."""
    from roadmap_cli.labs.spec import load_lab

    spec = load_lab(LABS / "cuda-matmul")
    policy = labcode.Policy.from_config(spec.lab_code)
    for saved in (
        "import torch\n_mm = torch.matmul\n",
        "from torch import mm as _mm\n",
        "import torch.nn.functional as F\n_lin = F.linear\n",
        "def f(a, b):\n    return a @ b\n",
    ):
        ws = _lab_workspace(tmp_path / str(abs(hash(saved))), "cuda-matmul", "solution")
        (ws / "matmul.py").write_text((ws / "matmul.py").read_text() + "\n" + saved)
        problem, _ = labcode.check_workspace(str(ws), policy)
        assert problem and problem.startswith("matmul.py:") and "matmul.py may not name" in problem, (saved, problem)
