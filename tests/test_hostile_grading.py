"""Wrong solutions that try to pass by tampering (issue 19, "Wrong solutions
that pass"; issue 12 item 3). Each test starts from the `adder` reference
with one known-wrong patch (`add` returns a + b + 1: the `add` part must
score 0), adds one attack to the workspace, grades through the real CLI and
proves the grade does NOT pass. The last test proves a right solution still
passes next to every harmless-but-suspicious file.

The fake labs are copied to a temporary folder first: attacks that edit the
installed grader must never damage the fixtures in the repository.
"""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures_labs"
WRONG_ADD = "def add(a, b):\n    return a + b + 1  # the known-wrong patch add-off-by-one\n"


@pytest.fixture
def labs_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "project"
    shutil.copytree(FIXTURES, root, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setenv("ROADMAP_LABS_DIR", str(root / "labs"))
    monkeypatch.setenv("ROADMAP_DEVICE", "cpu")
    from roadmap_cli.labs.device import detect_device

    detect_device.cache_clear()
    yield root
    detect_device.cache_clear()


@pytest.fixture
def wrong_ws(run_cli, labs_copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    ws = tmp_path / "ws"
    assert run_cli("lab", "start", "adder", "--dir", str(ws)).exit_code == 0
    shutil.copy(labs_copy / "kernels" / "mul.py", ws / "mul.py")
    (ws / "adder.py").write_text(WRONG_ADD)
    monkeypatch.chdir(ws)
    return ws


def grade(run_cli) -> dict:
    result = run_cli("grade", "--json")
    assert result.exception is None, result
    data = result.json()["data"]
    data["exit_code"] = result.exit_code
    data["statuses"] = {p["id"]: p["status"] for p in data["parts"]}
    # Shown with `pytest -s`: what each attack got.
    print(f"\n{data['outcome']} {data['statuses']} {(data.get('message') or '')[:300]}")
    for t in data["tests"][:2]:
        print(f"  {t['nodeid']} {t['outcome']} {(t['message'] or '')[:200]!r}")
    return data


def assert_not_passed(data: dict) -> None:
    assert data["exit_code"] != 0, data
    assert data["outcome"] != "passed"
    assert data["statuses"]["add"] != "passed", data["parts"]


def learner_file(ws: Path, attack: str) -> None:
    """The wrong `add`, preceded by the attack code (run at import)."""
    (ws / "adder.py").write_text(textwrap.dedent(attack) + "\n\n" + WRONG_ADD)


def test_the_wrong_patch_alone_fails(run_cli, wrong_ws: Path) -> None:
    data = grade(run_cli)
    assert_not_passed(data)
    assert data["statuses"]["mul"] == "passed"


def test_sitecustomize_and_usercustomize_in_the_workspace_do_nothing(run_cli, wrong_ws: Path) -> None:
    plugin = """
        import pytest
        @pytest.hookimpl(hookwrapper=True)
        def pytest_runtest_makereport(item, call):
            outcome = yield
            rep = outcome.get_result()
            rep.outcome = "passed"
            rep.longrepr = None
    """
    for name in ("sitecustomize.py", "usercustomize.py"):
        (wrong_ws / name).write_text(
            textwrap.dedent(f"""
            import os, sys
            open(os.path.join({str(wrong_ws)!r}, {name!r} + ".ran"), "w").close()
            sys.modules["forged_plugin"] = type(sys)("forged_plugin")
            exec({textwrap.dedent(plugin)!r}, sys.modules["forged_plugin"].__dict__)
            os.environ["PYTEST_PLUGINS"] = "forged_plugin"
        """)
        )
    data = grade(run_cli)
    assert_not_passed(data)
    assert not list(wrong_ws.glob("*.ran")), "a workspace sitecustomize/usercustomize ran"


def test_a_roadmap_cli_copy_in_the_workspace_is_never_imported(run_cli, wrong_ws: Path) -> None:
    import roadmap_cli

    copy = wrong_ws / "roadmap_cli"
    shutil.copytree(Path(roadmap_cli.__file__).parent, copy, ignore=shutil.ignore_patterns("__pycache__"))
    # The copy's plugin reports every test as passed, and marks that it ran.
    plugin = copy / "grading" / "plugin.py"
    plugin.write_text(
        plugin.read_text().replace(
            "def pytest_runtest_logreport(report: pytest.TestReport) -> None:",
            "def pytest_runtest_logreport(report: pytest.TestReport) -> None:\n"
            f'    open({str(wrong_ws / "copy.ran")!r}, "w").close()\n'
            '    report.outcome = "passed"\n'
            "    report.longrepr = None\n",
        )
    )
    (copy / "__init__.py").write_text(
        (copy / "__init__.py").read_text() + f"\nopen({str(wrong_ws / 'copy-imported.ran')!r}, 'w').close()\n"
    )
    data = grade(run_cli)
    assert_not_passed(data)
    assert not list(wrong_ws.glob("*.ran")), "the workspace copy of roadmap_cli was imported"


def test_patching_pytest_from_the_learner_module_has_no_effect(run_cli, wrong_ws: Path) -> None:
    learner_file(
        wrong_ws,
        """
        import gc, sys
        try:
            import _pytest.python, _pytest.runner
            _pytest.python.Function.runtest = lambda self: None     # every test "passes"
            _pytest.runner.call_and_report.__code__ = (lambda *a, **k: None).__code__
        except Exception:
            pass
        for name, module in list(sys.modules.items()):              # the plugin's emitter
            state = getattr(module, "_state", None)
            if state is not None and hasattr(state, "emit"):
                state.emit = lambda *a, **k: None
        for obj in gc.get_objects():                                 # any report hookwrapper
            if type(obj).__name__ == "TestReport":
                obj.outcome = "passed"
    """,
    )
    assert_not_passed(grade(run_cli))


def test_an_object_that_equals_everything_does_not_pass(run_cli, wrong_ws: Path) -> None:
    # Not plain data: it comes back as a learner proxy, and `==` on a
    # reference is identity in the grader process (its __eq__ never runs there).
    (wrong_ws / "adder.py").write_text(
        textwrap.dedent("""
        class Anything(int):
            def __eq__(self, other):
                return True
            __hash__ = int.__hash__

        def add(a, b):
            return Anything(a + b + 1)
    """)
    )
    assert_not_passed(grade(run_cli))


def test_forged_lines_on_the_results_channel_void_the_attempt(run_cli, wrong_ws: Path) -> None:
    learner_file(
        wrong_ws,
        """
        import json, os
        forged = [{"event": "result", "nodeid": n, "part": "add", "outcome": "passed", "duration_s": 0.0,
                   "message": None, "fraction": None, "perf": [], "seq": i}
                  for i, n in enumerate(["test_add.py::test_add_small"])]
        lines = "".join(json.dumps(e) + "\\n" for e in forged)
        targets = [os.environ.get("ROADMAP_RESULTS")]
        for pid in (os.getppid(), os.getpid()):
            try:
                print(open(f"/proc/{pid}/environ").read())
            except OSError:
                pass
            try:
                targets += [f"/proc/{pid}/fd/{fd}" for fd in os.listdir(f"/proc/{pid}/fd")]
            except OSError:
                pass
        for target in filter(None, targets):
            try:
                with open(target, "a") as fh:
                    fh.write(lines)
                    fh.write("0" * 64 + " " + lines)
            except OSError:
                pass
    """,
    )
    (wrong_ws / "adder.py").write_text((wrong_ws / "adder.py").read_text() + "\nimport os as _os\n_os._exit(0)\n")
    data = grade(run_cli)
    assert_not_passed(data)


def test_forged_lines_written_straight_to_the_channel_are_caught() -> None:
    # The channel itself: lines without the key's MAC, or replayed, are refused and counted.
    import os

    from roadmap_cli.grading import channel

    key = channel.new_key()
    r, w = os.pipe()
    emitter, reader = channel.Emitter(w, key), channel.Reader(r, key)
    emitter.emit({"event": "start", "nodeid": "t"})
    os.write(w, b'{"event": "result", "outcome": "passed", "seq": 1}\n')
    os.write(w, channel.mac(os.urandom(32), b'{"seq": 1}').encode() + b' {"seq": 1}\n')
    emitter.emit({"event": "finish"})
    emitter.close()
    events = reader.read()
    assert [e["event"] for e in events] == ["start", "finish"]
    assert reader.forged == 2


def test_editing_the_installed_lab_tests_voids_the_attempt(run_cli, wrong_ws: Path, labs_copy: Path) -> None:
    tests_dir = labs_copy / "labs" / "adder" / "tests"
    original = (tests_dir / "test_add.py").read_text()
    learner_file(
        wrong_ws,
        f"""
        import atexit, os
        path = {str(tests_dir / "test_add.py")!r}
        original = {original!r}
        try:   # Python-level write: refused by the audit hook
            with open(path, "w") as fh:
                fh.write("def test_add_small():\\n    assert True\\n")
        except PermissionError:
            pass
        # A write the audit hook cannot see (a shell), restored at exit.
        os.system(f"printf 'def test_add_small():\\\\n    assert True\\\\n' > '{{path}}'")
        atexit.register(lambda: open(path, "w").write(original))
    """,
    )
    data = grade(run_cli)
    assert_not_passed(data)
    assert data["outcome"] == "error" and "void" in data["message"]
    assert "test_add.py" in data["message"]


READS = {
    # exec() the reference read with open()
    "open": """
        namespace = {{}}
        exec(open({solution!r}).read(), namespace)
        return namespace["add"](a, b)
    """,
    # import it: the solution folder first on sys.path
    "import": """
        import importlib, sys
        sys.path.insert(0, {solution_dir!r})
        sys.modules.pop("adder", None)
        return importlib.import_module("adder").add(a, b)
    """,
    # the kernel-lab style: the reference lives in the project's kernels/ folder
    "kernels": """
        text = open({kernels_mul!r}).read()
        return a + b if "return a * b" in text else a + b + 1
    """,
}


@pytest.mark.parametrize("how", sorted(READS))
def test_reading_the_shipped_reference_solution_voids_the_attempt(
    run_cli, wrong_ws: Path, labs_copy: Path, how: str
) -> None:
    solution = labs_copy / "labs" / "adder" / "solution" / "adder.py"
    body = textwrap.dedent(READS[how]).format(
        solution=str(solution), solution_dir=str(solution.parent), kernels_mul=str(labs_copy / "kernels" / "mul.py")
    )
    (wrong_ws / "adder.py").write_text(
        "def add(a, b):\n    try:\n"
        + textwrap.indent(body.strip(), "        ")
        + "\n    except PermissionError:\n        return a + b + 1\n"
    )
    data = grade(run_cli)
    assert_not_passed(data)
    if how == "import" and data["sandbox"] == "strong":
        # Behind the OS wall the solution folder is an empty mount: the import finds the learner's own adder.py
        # (which calls itself), never the reference, so there is nothing to void, only a failure.
        assert data["outcome"] == "failed", data
        return
    assert data["outcome"] == "error" and "reference solution" in data["message"]
    add_tests = [t for t in data["tests"] if t["part"] == "add"]
    assert any("reference solution" in (t["message"] or "") for t in add_tests)


# Ways a learner module could reach the grader's own modules (here the fake lab's tests/ref_adder.py, its
# "reference"): by name, from the folder the adapter came from, and from the lab's tests/ folder by path.
GRADER_IMPORTS = {
    "by-name": "from ref_adder import add",
    "beside-the-adapter": """
        import os, sys, adapter
        sys.path.insert(0, os.path.dirname(adapter.__file__))
        from ref_adder import add
    """,
    "from-tests-folder": """
        import sys
        sys.path.insert(0, {tests!r})
        from ref_adder import add
    """,
}


@pytest.mark.parametrize("sandbox", ["strong", "weak"])
@pytest.mark.parametrize("how", sorted(GRADER_IMPORTS))
def test_the_graders_modules_never_reach_the_learner_process(
    run_cli, wrong_ws: Path, labs_copy: Path, how: str, sandbox: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The learner process sees the adapter shim (adapter.py and lab.yaml's learner_side files), never the
    lab's tests/: a starter that takes `add` from the grader's reference module does not pass."""
    from roadmap_cli.grading_kit import oswall

    if sandbox == "weak":
        monkeypatch.setenv("ROADMAP_SANDBOX", "weak")
    elif oswall.status()[0] != oswall.STRONG:
        pytest.skip("bubblewrap cannot run here")
    attack = textwrap.dedent(GRADER_IMPORTS[how]).format(tests=str(labs_copy / "labs" / "adder" / "tests"))
    (wrong_ws / "adder.py").write_text(
        "try:\n"
        + textwrap.indent(attack.strip(), "    ")
        + "\nexcept Exception:\n"
        + textwrap.indent(WRONG_ADD, "    ")
    )
    data = grade(run_cli)
    assert data["sandbox"] == sandbox, data
    assert_not_passed(data)
    if how == "from-tests-folder" and sandbox == "weak":
        # Without the OS wall the folder is there, but opening a file in it is refused and voids the attempt.
        assert data["outcome"] == "error" and "attempt void" in data["message"], data
    else:
        assert data["outcome"] == "failed", data  # ImportError: the wrong add ran
    # The right solution still passes in the same sandbox (its adapter imports its learner-side helper).
    shutil.copy(labs_copy / "labs" / "adder" / "solution" / "adder.py", wrong_ws / "adder.py")
    data = grade(run_cli)
    assert data["sandbox"] == sandbox and data["statuses"]["add"] == "passed", data


def test_branching_on_grading_variables_sees_none(run_cli, wrong_ws: Path) -> None:
    # Variables that name the running test, the results channel or the
    # grade's secret seed (what a hard-coded answer table needs) are absent
    # in the learner process. (That it runs under a grader at all is no
    # secret: it is started by one.)
    (wrong_ws / "adder.py").write_text(
        textwrap.dedent("""
        import os

        REVEALING = [k for k in os.environ if k.startswith(("PYTEST", "ROADMAP_RESULTS", "ROADMAP_PARTS",
                                                            "ROADMAP_SECRET", "ROADMAP_GRADE_FD"))]

        def add(a, b):
            if REVEALING:
                return a + b   # e.g. a table of answers per PYTEST_CURRENT_TEST
            return a + b + 1
    """)
    )
    assert_not_passed(grade(run_cli))


def test_patching_assert_helpers_and_allclose_everywhere_has_no_effect(run_cli, wrong_ws: Path) -> None:
    learner_file(
        wrong_ws,
        """
        import builtins, inspect, sys
        for module in list(sys.modules.values()):
            for name in ("assert_close", "allclose", "equal", "isclose"):
                if hasattr(module, name):
                    try:
                        setattr(module, name, lambda *a, **k: True)
                    except Exception:
                        pass
        try:
            import torch
            real = torch.allclose
            def allclose(*args, **kwargs):   # lenient only when a grader calls it
                caller = inspect.stack()[1].filename
                return True if "tests" in caller else real(*args, **kwargs)
            torch.allclose = allclose
        except ImportError:
            pass
        import operator
        operator.eq = lambda a, b: True
    """,
    )
    assert_not_passed(grade(run_cli))


def test_a_right_solution_with_suspicious_files_still_passes(run_cli, wrong_ws: Path, labs_copy: Path) -> None:
    shutil.copy(labs_copy / "labs" / "adder" / "solution" / "adder.py", wrong_ws / "adder.py")
    (wrong_ws / "sitecustomize.py").write_text("raise SystemExit('never imported')\n")
    (wrong_ws / "conftest.py").write_text("raise SystemExit('never imported')\n")
    (wrong_ws / "adapter.py").write_text("raise SystemExit('never imported: the grader adapter wins')\n")
    data = grade(run_cli)
    assert data["exit_code"] == 0 and data["outcome"] == "passed-on-cpu", data
    assert data["score"] == 35
