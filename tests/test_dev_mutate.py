"""`roadmap dev mutate`: mutant generation (each operator, only inside solution
regions, deterministic), classification on small labs, the cache, --sample.

The graded labs here are tiny (one function, a few mutants). The "weak" lab
is written by the test: a grader that asserts only one case, and whose
conftest writes output digests itself (the sandbox's contract item 6), so
equivalent-suspect detection is tested before the sandbox exists.
"""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest

from roadmap_cli.authoring.mutants import generate
from roadmap_cli.labs.starter_build import solution_text

FIXTURES = Path(__file__).parent / "fixtures_labs"


def _region(body: str, outside: str = "") -> str:
    """A module whose function `f` has `body` in a solution region, plus code outside any region."""
    inner = textwrap.indent(textwrap.dedent(body).strip("\n"), "    ")
    return (
        f"{outside}def f(x, y, z):\n    # BEGIN SOLUTION\n{inner}\n    # STARTER\n"
        f"    # raise NotImplementedError\n    # END SOLUTION\n"
    )


def _changes(body: str, operator: str) -> list[str]:
    text = _region(body)
    return sorted(solution_text(m.text, "m.py").split("\n")[1].strip() for m in generate(text, "m.py", {operator}))


@pytest.mark.parametrize(
    "body, operator, expected",
    [
        ("return x < y", "compare", ["return x <= y"]),
        ("return x is not None", "compare", ["return x is None"]),
        ("return x - (y // 2)", "arith", ["return x + (y // 2)", "return x - (y * 2)"]),
        ("x += 1", "arith", ["x -= 1"]),
        ("return x and y", "bool-op", ["return x or y"]),
        ("return not -x", "unary", ["return -x", "return not x"]),
        ("return x[1:]", "const", ["return x[0:]", "return x[2:]"]),
        ("return True", "const", ["return False"]),
        ("return x[:y]", "slice", ["return x[:y + 1]", "return x[:y - 1]"]),
        ("return g(x, y)", "args", ["return g(y, x)"]),
        ("return g(x, dim=-1, keepdim=True)", "kwarg", ["return g(x, dim=-1)", "return g(x, keepdim=True)"]),
        ("return torch.zeros(x, dtype=torch.float32)", "dtype", ["return torch.zeros(x, dtype=torch.float16)"]),
        ("g(x)", "drop", ["pass"]),
    ],
)
def test_each_operator(body, operator, expected):
    assert _changes(body, operator) == sorted(expected)


def test_only_code_inside_regions_is_mutated_and_order_is_stable():
    text = _region("return x + y < z", outside="LIMIT = 3 + 4\n\n\n")
    mutants = generate(text, "m.py")
    assert mutants and all("LIMIT = 3 + 4" in m.text for m in mutants)
    assert all(m.function == "f" and m.line == 6 for m in mutants)
    assert [m.text for m in generate(text, "m.py")] == [m.text for m in mutants]
    assert len({m.text for m in mutants}) == len(mutants)  # no duplicates
    # the starter lines (comments) are never touched
    assert all("    # raise NotImplementedError\n" in m.text for m in mutants)


def test_docstrings_are_not_dropped_and_triton_functions_are_mutated():
    text = (
        "import triton\nimport triton.language as tl\n\n\n@triton.jit\ndef k(x_ptr, N, BLOCK: tl.constexpr):\n"
        '    # BEGIN SOLUTION\n    """Doc."""\n    offs = tl.arange(0, BLOCK)\n    tl.store(x_ptr + offs, 1.0, mask=offs < N)\n'
        "    # END SOLUTION\n"
    )
    mutants = generate(text, "k.py")
    kinds = {m.operator for m in mutants}
    assert {"compare", "arith", "kwarg", "drop", "const"} <= kinds
    assert not any("Doc." in m.description for m in mutants)


def test_cuda_regions_get_token_mutants():
    text = "__global__ void k(int n) {\n    // BEGIN SOLUTION\n    if (i < n) out[i] = a[i] + 1;  // a < b in a comment\n    // END SOLUTION\n}\n"
    descriptions = sorted(m.description for m in generate(text, "k.cu"))
    # the C/C++ operators (tests/test_mutants_cpp.py); the comment is never touched
    assert descriptions == [
        "`+` -> `-`",
        "`1` -> `0`",
        "`1` -> `2`",
        "`<` -> `<=`",
        "dropped `if (i < n) out[i] = a[i] + 1;`",
    ]


# ---------------------------------------------------------------- graded runs

WEAK_SOLUTION = """\
def clamp_scale(x, factor=2):
    # BEGIN SOLUTION
    y = x * factor
    if y < 0:
        y = 0
    return y
    # STARTER
    # raise NotImplementedError("clamp_scale: see README.md")
    # END SOLUTION
"""

WEAK_CONFTEST = '''\
import hashlib, json, os


def record(nodeid, call, n, value):
    """What the sandbox does for every learner_side call (contract item 6)."""
    path = os.environ.get("ROADMAP_OUTPUT_DIGESTS")
    if path:
        with open(path, "a") as fh:
            digest = hashlib.sha256(repr(value).encode()).hexdigest()
            fh.write(json.dumps({"test": nodeid, "call": call, "n": n, "digest": digest}) + "\\n")
'''

WEAK_TEST = """\
import os
import time

from conftest import record
from roadmap_cli.grading_kit.learner import learner_module


def test_scale():
    calc = learner_module("calc")
    assert calc.clamp_scale(3) == 6
    # A weak grader: negative inputs are computed (and digested) but never checked.
    x = -1 - int(os.environ.get("ROADMAP_SECRET_SEED", "0")) % 3
    record("test_calc.py::test_scale", "calc.clamp_scale", 0, calc.clamp_scale(x))
    # An output that is not a function of the inputs (a timing): it must not hide equivalence.
    record("test_calc.py::test_scale", "calc.elapsed", 1, time.perf_counter())


def test_small():
    assert learner_module("calc").clamp_scale(1) == 2
"""

WEAK_YAML = """\
format_version: 1
id: weak
title: {en: "Weak grader"}
stage: 1
summary: {en: "A grader that misses negative inputs."}
time_limit_s: 30
parts:
  - id: scale
    title: {en: "Scale"}
    points: 5
    tests: ["test_calc.py::test_scale"]
  - id: small
    title: {en: "Small"}
    points: 1
    tests: ["test_calc.py::test_small"]
known_survivors:
  - match: "dropped `if y < 0:`"
    reason: "the test lab never checks negative inputs"
"""


@pytest.fixture
def labs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "labs"
    shutil.copytree(FIXTURES / "labs" / "adder", root / "adder")
    shutil.copytree(FIXTURES / "kernels", tmp_path / "kernels")
    weak = root / "weak"
    for rel, text in {
        "lab.yaml": WEAK_YAML,
        "README.md": "# Weak\n",
        "solution/calc.py": WEAK_SOLUTION,
        "tests/conftest.py": WEAK_CONFTEST,
        "tests/test_calc.py": WEAK_TEST,
    }.items():
        (weak / rel).parent.mkdir(parents=True, exist_ok=True)
        (weak / rel).write_text(text)
    (weak / "starter").mkdir()
    from roadmap_cli.labs.spec import load_lab
    from roadmap_cli.labs.starter_build import build_starter

    build_starter(load_lab(weak))
    monkeypatch.setenv("ROADMAP_LABS_DIR", str(root))
    monkeypatch.setenv("ROADMAP_DEVICE", "cpu")
    return root


def _by_description(data: dict) -> dict[str, str]:
    return {r["description"]: r["status"] for r in data["results"]}


def test_adder_mutants_are_all_killed_and_attributed(labs: Path, run_cli):
    spec = labs / "adder" / "lab.yaml"
    # Two more rules, at the end of `rules:` (before `not_rules:`, which follows it since issue 38).
    spec.write_text(
        spec.read_text().replace(
            "not_rules:\n",
            (
                "  - id: mul-by-zero\n    section: Multiply\n    text: anything times 0 is 0\n"
                "    tests: ['test_mul.py::test_mul_zero']\n"
                "  - id: gpu-rule\n    section: Multiply\n    text: a rule graded only on a GPU\n"
                "    tests: ['test_gpu.py']\nnot_rules:\n"
            ),
            1,
        )
    )
    result = run_cli("dev", "mutate", "adder", "--json")
    assert result.exit_code == 0, result
    data = result.json()["data"]
    assert _by_description(data) == {"`+` -> `-`": "killed", "`*` -> `/`": "killed"}
    assert data["score"] == 1.0 and data["part_stats"]["mul"] == {"killed": 1, "survived": 0, "score": 1.0}
    assert data["parts"] == ["add", "mul", "speed"]  # the gpu part is not gradable here
    # Coverage: each mutant is graded only on the parts that run the function it changed.
    graded = {r["description"]: r["graded_parts"] for r in data["results"]}
    assert graded == {"`+` -> `-`": ["add", "speed"], "`*` -> `/`": ["mul"]}
    # Issue 26 item 4: `*` -> `/` fails test_mul (0 / 7 == 0 would pass test_mul_zero anyway): the rule
    # only test_mul_zero checks is one no killed mutant touched; a GPU-only rule is not judged here.
    assert {tuple(r["tests_failed"]) for r in data["results"]} == {
        ("test_add.py::test_add_small", "test_speed.py::test_speed"),
        ("test_mul.py::test_mul",),
    }
    assert data["rules_untouched"] == ["mul-by-zero"]
    assert "rules no killed mutant touched (1): mul-by-zero" in run_cli("dev", "mutate", "adder").stdout


def test_part_grades_only_the_mutants_in_code_it_runs(labs: Path, run_cli):
    data = run_cli("dev", "mutate", "adder", "--part", "mul", "--json").json()["data"]
    assert [(r["description"], r["status"], r["graded_parts"]) for r in data["results"]] == [
        ("`*` -> `/`", "killed", ["mul"])
    ]
    assert data["parts"] == ["mul"] and any("1 mutant(s) in code that part mul runs" in n for n in data["notes"])


def test_coverage_probes_and_kernel_callers(tmp_path: Path):
    from roadmap_cli.authoring.mutate_coverage import Coverage, _kernel_callers, instrument

    text = (
        "import triton\n\n\n@triton.jit\ndef _inner(x):\n    return x\n\n\n@triton.jit\ndef kernel(p):\n"
        '    _inner(p)\n\n\ndef launch(x):\n    """Doc."""\n    kernel[(1,)](x)\n\n\ndef other():\n    return 1\n'
    )
    hits = tmp_path / "hits.txt"
    probed = instrument(text, "k.py", hits)
    namespace: dict = {}
    exec(compile(probed, "k.py", "exec"), namespace)
    namespace["other"]()
    namespace["other"]()
    assert hits.read_text() == "k.py::other\n"  # once per process, however often it runs
    assert probed.count("_roadmap_probe_") == 4  # launch and other, never inside a jit function
    assert _kernel_callers(text) == {"_inner": {"launch"}, "kernel": {"launch"}}
    cov = Coverage(["a", "b", "c"])
    cov.measured = True
    cov.hits = {("k.py", "launch"): {"b"}, ("k.py", "other"): {"c"}}
    cov.kernels = {"k.py": _kernel_callers(text)}
    assert cov.parts_for("k.py", "_inner") == ["b"] and cov.parts_for("k.py", "other") == ["c"]
    assert cov.parts_for("k.py", "") == ["a", "b", "c"]  # module level: every part
    assert cov.parts_for("k.py", "never_seen") == ["a", "b", "c"]


def test_weak_grader_classification_cache_and_exit_code(labs: Path, run_cli, roadmap_home: Path):
    result = run_cli("dev", "mutate", "weak", "-j", "2", "--json")
    assert result.exit_code == 1, result  # survivors: below the target
    data = result.json()["data"]
    statuses = _by_description(data)
    assert statuses["`*` -> `/`"] == "killed"
    assert statuses["`<` -> `<=`"] == "equivalent-suspect"  # same outputs under both seeds
    assert statuses["`0` -> `1`"] in ("equivalent-suspect", "survived")  # two `0`s: `y < 1`, `y = 1`
    assert statuses["dropped `y = 0`"] == "survived"  # the digest differs: a real bug the grader misses
    assert statuses["dropped `if y < 0:`"] == "explained"
    survivors = [r for r in data["results"] if r["status"] == "survived"]
    assert all(r["covered_by"] == ["scale", "small"] for r in survivors)  # both parts run clamp_scale
    assert survivors[0]["diff"].startswith("--- a/calc.py\n+++ b/calc.py\n@@")
    assert data["digests"] is True and data["graded_now"] == len(data["results"])
    assert (roadmap_home / "mutate" / "weak.json").is_file()

    again = run_cli("dev", "mutate", "weak", "--json").json()["data"]
    assert again["graded_now"] == 0 and _by_description(again) == statuses

    human = run_cli("dev", "mutate", "weak", "--show-survivors")
    assert "survived" in human.stdout and "+    pass" in human.stdout and "target 95%" in human.stdout


def test_sample_is_reproducible(labs: Path, run_cli):
    first = run_cli("dev", "mutate", "weak", "--sample", "2", "--seed", "5", "--json").json()["data"]
    second = run_cli("dev", "mutate", "weak", "--sample", "2", "--seed", "5", "--json").json()["data"]
    assert len(first["results"]) == 2 and [r["id"] for r in first["results"]] == [r["id"] for r in second["results"]]
    assert second["graded_now"] == 0
    assert any("sample of 2" in note for note in first["notes"])


def test_user_mistakes_are_one_line(labs: Path, run_cli):
    unknown = run_cli("dev", "mutate", "nope")
    assert unknown.exit_code == 2 and "unknown lab" in unknown.stderr
    gpu = run_cli("dev", "mutate", "adder", "--part", "gpu")
    assert gpu.exit_code == 2 and "needs a CUDA GPU" in gpu.stderr and "Traceback" not in gpu.stderr


def test_known_survivors_need_an_id_or_a_match(labs: Path):
    from roadmap_cli.errors import ValidationError
    from roadmap_cli.labs.spec import load_lab

    spec_file = labs / "weak" / "lab.yaml"
    spec_file.write_text(spec_file.read_text().replace('  - match: "dropped `if y < 0:`"\n', "  - id: null\n"))
    with pytest.raises(ValidationError) as info:
        load_lab(labs / "weak")
    assert any("known_survivors.0" in d and "needs an `id` or a `match`" in d for d in info.value.details)


def test_the_live_line_says_what_the_final_table_says(labs: Path, roadmap_home: Path):
    """An explained survivor is "explained" as it is reported, not "survived"
    first; an equivalent-suspect that known_survivors lists is explained too."""
    from roadmap_cli.authoring.mutate import run_mutate
    from roadmap_cli.labs.spec import load_lab

    yaml_path = labs / "weak" / "lab.yaml"
    yaml_path.write_text(yaml_path.read_text() + '  - match: "`<` -> `<=`"\n    reason: "y == 0 gives 0 either way"\n')
    live: dict[str, str] = {}
    spec = load_lab(labs / "weak")
    report = run_mutate(spec, roadmap_home, jobs=1, on_result=lambda row: live.__setitem__(row.description, row.status))
    final = {r.description: r.status for r in report.results}
    assert live == final
    assert final["dropped `if y < 0:`"] == final["`<` -> `<=`"] == "explained"
    assert next(r for r in report.results if r.description == "`<` -> `<=`").reason == "y == 0 gives 0 either way"
    # From the cache (nothing graded now) the live line is the same.
    again: dict[str, str] = {}
    run_mutate(spec, roadmap_home, jobs=1, on_result=lambda row: again.__setitem__(row.description, row.status))
    assert again == final


def test_an_interrupted_grade_stops_the_run_and_is_never_counted(labs: Path):
    """Ctrl-C reaches only `dev mutate` (each grade's pytest has its own
    session); the runner records the grade as interrupted. That must stop the
    run (-j 1 used to go on) and never count, or cache, the mutant as killed."""
    from types import SimpleNamespace

    from roadmap_cli.authoring import mutate
    from roadmap_cli.authoring.mutant_rows import MutantResult

    interrupted = SimpleNamespace(outcome="interrupted", tests=[], part=lambda p: SimpleNamespace(status="not-run"))
    grader = SimpleNamespace(seeds=(1, 2), grade=lambda *a, **k: (interrupted, []))
    mutant = SimpleNamespace(file="calc.py", text="x = 1\n")
    row = MutantResult(
        id="abc", file="calc.py", line=1, function="f", operator="const", description="d", diff="", status=""
    )
    with pytest.raises(KeyboardInterrupt):
        mutate._classify(grader, mutant, row, ["scale"])
    assert row.status == ""
