"""C/C++/CUDA mutants for `roadmap dev mutate` (authoring/mutants_cpp.py): each
token-level operator, what is never mutated (comments, strings, preprocessor
lines, template brackets, declarators, declarations), region limits and
function names; the build log that classifies a mutant that does not
compile as `invalid`; C/C++ file coverage."""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import pytest

from roadmap_cli.grading_kit import cpp_build, cpp_cache
from roadmap_cli.authoring import mutants_cpp
from roadmap_cli.authoring.cpp_tokens import tokenize
from roadmap_cli.authoring.mutants import generate
from roadmap_cli.authoring.mutate_coverage import Coverage
from roadmap_cli.labs.starter_build import solution_text


def _region(body: str, outside: str = "") -> str:
    """A C++ file whose function `f` has `body` in a solution region."""
    inner = textwrap.indent(textwrap.dedent(body).strip("\n"), "  ")
    return (
        f"{outside}int f(int x, int y, int* p, const char* s) {{\n  // BEGIN SOLUTION\n{inner}\n"
        f"  // STARTER\n  // return 0;\n  // END SOLUTION\n}}\n"
    )


def _changes(body: str, operator: str, path: str = "m.cpp") -> list[str]:
    """The mutated body of every `operator` mutant (lines joined by ` | `)."""
    out = []
    for m in generate(_region(body), path, {operator}):
        view = solution_text(m.text, path).splitlines()
        out.append(" | ".join(line.strip() for line in view[1:-1]))
    return sorted(out)


@pytest.mark.parametrize(
    "body, operator, expected",
    [
        ("return x < y;", "compare", ["return x <= y;"]),
        ("return x >= y || x != 3;", "compare", ["return x > y || x != 3;", "return x >= y || x == 3;"]),
        ("return static_cast<int>(x) > y;", "compare", ["return static_cast<int>(x) >= y;"]),
        (
            "return std::max<int>(x, y) - x / 2;",
            "arith",
            ["return std::max<int>(x, y) + x / 2;", "return std::max<int>(x, y) - x * 2;"],
        ),
        ("x += y * 2;", "arith", ["x += y / 2;", "x -= y * 2;"]),
        ("return x && !y;", "bool-op", ["return x || !y;"]),
        ("return !x + -y;", "unary", ["return !x + y;", "return x + -y;"]),
        ("return x + 1u;", "const", ["return x + 0u;", "return x + 2u;"]),
        ("return true;", "const", ["return false;"]),
        ("g(x, y + 1);", "args", ["g(y + 1, x);"]),
        ("g(x);\nreturn x;", "drop", [";\nreturn x;".replace("\n", " | ")]),
    ],
)
def test_each_operator(body, operator, expected):
    assert _changes(body, operator) == sorted(expected)


def test_declarators_and_references_are_not_arithmetic():
    body = """
    const int* q = p;
    int& r = x;
    auto&& t = y;
    return *q * r;
    """
    # only the multiplication of the last line (not the pointer/reference declarators or the dereference)
    assert _changes(body, "arith") == ["const int* q = p; | int& r = x; | auto&& t = y; | return *q / r;"]


def test_template_brackets_are_not_comparisons_but_comparisons_next_to_them_are():
    body = "std::vector<std::vector<int>> v;\nreturn x < y && std::get<0>(t) > 1;"
    got = _changes(body, "compare")
    assert got == sorted(
        [
            "std::vector<std::vector<int>> v; | return x <= y && std::get<0>(t) > 1;",
            "std::vector<std::vector<int>> v; | return x < y && std::get<0>(t) >= 1;",
        ]
    )


def test_comments_strings_chars_and_preprocessor_lines_are_never_mutated():
    body = r"""
    #define LIMIT (3 + 4 < 5)
    const char* m = "a < b + 1 // not a comment";  /* x - 1 */
    char c = '-';  // y > 2
    return m[0] == c;
    """
    mutants = generate(_region(body), "m.cpp")
    descriptions = sorted(m.description for m in mutants)
    assert descriptions == ["`0` -> `-1`", "`0` -> `1`", "`==` -> `!=`"]  # nothing but the last line
    assert all('"a < b + 1 // not a comment"' in m.text and "'-'" in m.text and "3 + 4 < 5" in m.text for m in mutants)


def test_string_literals_are_never_moved_or_concatenated_differently():
    body = 'TORCH_CHECK(x > 0, "x must be > 0, got ", x, " and ", y);\nthrow E("id " + std::to_string(x));'
    assert _changes(body, "args") == []  # moving message pieces changes only the message text
    assert _changes(body, "arith") == []  # "..." + std::string is concatenation, `-` would not compile


def test_parameter_lists_are_not_argument_lists():
    text = (
        "struct Pool {\n  Pool(int n, int m)\n      // BEGIN SOLUTION\n      : a_(n), v_(n, false) {\n"
        "    init(m, n);\n  }\n  // END SOLUTION\n  std::vector<bool> v_;\n  int a_;\n};\n"
    )
    swaps = sorted(m.description for m in generate(text, "pool.h", {"args"}))
    # the constructor's initialiser list and body are calls; `(int n, int m)` is not
    assert swaps == ["swapped arguments `m`, `n`", "swapped arguments `n`, `false`"]
    assert {m.function for m in generate(text, "pool.h")} == {"Pool::Pool"}


def test_drop_keeps_declarations_returns_labels_and_if_else_chains():
    body = """
    int a = x;
    std::vector<int> v{1, 2};
    const auto& w = v;
    if (x > 0) {
      p[0] = 1;
    }
    if (y) { a = 2; } else { a = 3; }
    for (int i = 0; i < x; ++i) a += i;
    switch (x) { case 1: a = 4; break; default: break; }
    return a;
    """
    dropped = sorted(m.description for m in generate(_region(body), "m.cpp", {"drop"}))
    assert dropped == sorted(
        [
            "dropped `if (x > 0) { p[0] = 1; }`",
            "dropped `p[0] = 1;`",
            "dropped `a = 2;`",
            "dropped `a = 3;`",
            "dropped `for (int i = 0; i < x; ++i) a += i;`",
            "dropped `break;`",
        ]
    )  # `case 1: a = 4;`, `default: break;` own a label


def test_lambda_bodies_are_function_bodies():
    body = "at::parallel_for(0, x, 1, [&](int64_t b, int64_t e) {\n  for (auto r = b; r < e; ++r) p[r] = 0;\n});"
    dropped = sorted(m.description for m in generate(_region(body), "m.cpp", {"drop"}))
    assert dropped == sorted(
        [
            "dropped `at::parallel_for(0, x, 1, [&](int64_t b, int64_t e) { for (a`",
            "dropped `for (auto r = b; r < e; ++r) p[r] = 0;`",
        ]
    )
    swaps = [m.description for m in generate(_region(body), "m.cpp", {"args"})]
    assert "swapped arguments `0`, `x`" in swaps and not any("int64_t b" in d for d in swaps)


def test_only_region_code_is_mutated_with_class_qualified_function_names():
    text = (
        "#pragma once\nconstexpr int kLimit = 3 + 4;\nclass Pool {\n public:\n  int take(int n) {\n"
        "    // BEGIN SOLUTION\n    return n < kLimit ? n : -1;\n    // STARTER\n    // return -1;\n"
        "    // END SOLUTION\n  }\n  int size() const { return 1 + 1; }\n};\n"
    )
    mutants = generate(text, "pool.h")
    assert mutants and all(m.function == "Pool::take" and m.line == 7 for m in mutants)
    assert all("3 + 4" in m.text and "return 1 + 1;" in m.text and "// return -1;" in m.text for m in mutants)
    assert [m.text for m in generate(text, "pool.h")] == [m.text for m in mutants]  # deterministic
    assert len({m.text for m in mutants}) == len(mutants)
    assert generate(text, "pool.hpp") and generate(text, "pool.cc") and not generate(text, "pool.txt")


def test_gpu_only_sources():
    assert mutants_cpp.gpu_only("k.cu") and mutants_cpp.gpu_only("k.cuh")
    assert not mutants_cpp.gpu_only("block_pool.h") and mutants_cpp.is_cpp("rms_norm.cpp")
    assert not mutants_cpp.is_cpp("vllm_reading.py")


def test_the_lab_sources_never_get_a_template_bracket_comment_or_string_mutated():
    """cpp-extension's single source: every operator family appears, and every
    mutant changes a token that is code (not a template bracket, not inside a
    comment or a string literal)."""
    lab = Path(__file__).resolve().parents[1] / "labs" / "cpp-extension" / "solution"
    for name in ("block_pool.h", "rms_norm.cpp"):
        text = (lab / name).read_text(encoding="utf-8")
        tokens = tokenize(text)
        starts = {t.start: t for t in tokens}
        mutants = generate(text, name)
        assert {"compare", "arith", "const", "drop", "args", "unary", "bool-op"} <= {m.operator for m in mutants}
        for m in mutants:
            at = next(i for i, (a, b) in enumerate(zip(text, m.text)) if a != b)
            while at not in starts:  # back to the start of the token that changed
                at -= 1
            assert not starts[at].template, m.description
            assert starts[at].kind != "string" or m.operator in ("args", "drop"), m.description


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_a_failed_build_is_logged_for_dev_mutate(tmp_path, monkeypatch):
    """ROADMAP_CPP_BUILD_LOG gets one line per failed build, the cached failure included:
    dev mutate classifies such a mutant `invalid` (not a bug a test could miss)."""
    log = tmp_path / "builds.jsonl"
    monkeypatch.setenv("ROADMAP_CPP_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("ROADMAP_CPP_BUILD_LOG", str(log))
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "pool.h").write_text("struct Pool { int x = 1 - ; };\n")
    main = tmp_path / "main.cpp"
    main.write_text('#include "pool.h"\nint main() { return Pool{}.x; }\n')
    for _ in range(2):
        with pytest.raises(cpp_build.CppBuildError):
            cpp_build.asan_binary(main, ws, [ws / "pool.h"])
    rows = cpp_cache.read_build_failures(log)
    assert len(rows) == 2 and rows[0] == rows[1]
    assert rows[0]["kind"] == "asan" and rows[0]["inputs"] == ["main.cpp", "pool.h"]
    assert rows[0]["first_error"].startswith("pool.h:1:")
    (ws / "pool.h").write_text("struct Pool { int x = 1; };\n")
    cpp_build.asan_binary(main, ws, [ws / "pool.h"])
    assert len(cpp_cache.read_build_failures(log)) == 2  # a good build adds nothing
    assert json.loads(log.read_text().splitlines()[0])["kind"] == "asan"


def test_cpp_file_coverage_names_the_parts_that_fail_without_it():
    cov = Coverage(["raii", "templates", "threads"])
    cov.measured = True
    cov.files = {"block_pool.h": {"raii"}, "rms_norm.cpp": {"templates", "threads"}}
    assert cov.parts_for("block_pool.h", "BlockPool::allocate") == ["raii"]
    assert cov.parts_for("rms_norm.cpp", "") == ["templates", "threads"]
    cov.blind = {"raii"}
    assert cov.parts_for("rms_norm.cpp", "rms_norm") == ["raii", "templates", "threads"]
    again = Coverage.from_json(json.loads(json.dumps(cov.to_json())))
    assert again.files == cov.files and again.parts_for("block_pool.h", "") == ["raii"]


def test_cuda_launch_brackets_and_shared_declarations():
    text = (
        "__global__ void k(float* o, int n) {\n  // BEGIN SOLUTION\n  __shared__ float t[32];\n  o[0] = t[0];\n"
        "  // END SOLUTION\n}\nvoid run(float* o, int n) {\n  // BEGIN SOLUTION\n  k<<<n / 256, 256>>>(o, n);\n"
        "  // END SOLUTION\n}\n"
    )
    mutants = generate(text, "k.cu")
    # the launch brackets are not shifts (only dropping the whole launch removes them)
    assert all("<<<" in m.text and ">>>" in m.text for m in mutants if m.operator != "drop")
    descriptions = {m.description for m in mutants}
    assert {d for d in descriptions if d.startswith("dropped")} == {
        "dropped `o[0] = t[0];`",
        "dropped `k<<<n / 256, 256>>>(o, n);`",
    }
    assert {"swapped arguments `o`, `n`", "`/` -> `*`", "`256` -> `257`"} <= descriptions
    assert {m.function for m in mutants} == {"k", "run"}


# A tiny C++ lab, graded end to end by `dev mutate`: one C++ part (the grader's
# main.cpp built with the learner's pool.h under ASan) and one Python part.
CPOOL_FILES = {
    "lab.yaml": """\
format_version: 1
id: cpool
title: {en: "C++ pool (dev mutate test lab)"}
stage: 6
summary: {en: "A header and a Python file, each graded by its own part."}
time_limit_s: 120
parts:
  - id: pool
    title: {en: "Clamped sum (C++)"}
    points: 5
    tests: ["test_pool.py"]
  - id: py
    title: {en: "Add (Python)"}
    points: 5
    tests: ["test_py.py"]
""",
    "README.md": "# C++ pool\n",
    "solution/pool.h": """\
#pragma once
inline int sum(const int* v, int n) {
  int s = 0;
  for (int i = 0; i < n; ++i) s += v[i];
  return s;
}
// The sum of v[0:n], at most cap.
inline int clamped_sum(const int* v, int n, int cap) {
  // BEGIN SOLUTION
  int total = sum(v, n);
  if (total > cap) total = cap;
  return total;
  // STARTER
  // return 0;
  // END SOLUTION
}
""",
    "solution/calc.py": "def add(a, b):\n    # BEGIN SOLUTION\n    return a + b\n    # STARTER\n    # return 0\n"
    "    # END SOLUTION\n",
    "tests/conftest.py": "import os\nimport sys\n\nsys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))\n",
    "tests/main.cpp": '#include "pool.h"\n#include <cstdio>\nint main() {\n  int a[] = {1, 2, 3}, b[] = {5, 6};\n'
    '  std::printf("%d %d\\n", clamped_sum(a, 3, 10), clamped_sum(b, 2, 10));\n}\n',
    "tests/test_pool.py": """\
from pathlib import Path

from roadmap_cli import grading_kit as kit
from roadmap_cli.grading_kit import cpp_build, cpp_cache


def test_clamped_sum():
    ws = kit.workspace()
    binary = cpp_build.asan_binary(Path(__file__).parent / "main.cpp", ws, [ws / "pool.h"]).path
    assert cpp_build.run_asan_case(binary, "").stdout.split() == ["6", "10"]
""",
    "tests/test_py.py": "from roadmap_cli import grading_kit as kit\n\n\ndef test_add():\n"
    "    assert kit.learner_module('calc').add(2, 3) == 5\n",
}


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_dev_mutate_grades_cpp_mutants_on_their_part_and_sets_uncompilable_ones_apart(
    tmp_path, monkeypatch, run_cli, roadmap_home
):
    from roadmap_cli.labs.spec import load_lab
    from roadmap_cli.labs.starter_build import build_starter

    lab = tmp_path / "labs" / "cpool"
    for rel, text in CPOOL_FILES.items():
        (lab / rel).parent.mkdir(parents=True, exist_ok=True)
        (lab / rel).write_text(text)
    (lab / "starter").mkdir()
    build_starter(load_lab(lab))
    monkeypatch.setenv("ROADMAP_LABS_DIR", str(lab.parent))
    monkeypatch.setenv("ROADMAP_DEVICE", "cpu")
    monkeypatch.setenv("ROADMAP_CPP_CACHE", str(tmp_path / "cpp-cache"))
    result = run_cli("dev", "mutate", "cpool", "-j", "1", "--json")
    data = result.json()["data"]
    rows = {r["description"]: r for r in data["results"]}
    assert {d: r["status"] for d, r in rows.items()} == {
        "`+` -> `-`": "killed",  # calc.py
        "dropped `if (total > cap) total = cap;`": "killed",
        "`>` -> `>=`": "survived",  # equal to cap: the same answer (the test lab cannot tell)
        "swapped arguments `v`, `n`": "invalid",  # sum(n, v) does not compile
    }
    assert rows["swapped arguments `v`, `n`"]["message"].startswith("does not compile: pool.h:")
    # coverage: pool.h mutants on the C++ part only, calc.py mutants on the Python part only
    assert {d: r["graded_parts"] for d, r in rows.items()} == {
        "`+` -> `-`": ["py"],
        "dropped `if (total > cap) total = cap;`": ["pool"],
        "`>` -> `>=`": ["pool"],
        "swapped arguments `v`, `n`": ["pool"],
    }
    assert data["counts"]["invalid"] == 1 and data["score"] == pytest.approx(2 / 3, abs=1e-3)
    assert result.exit_code == 1  # below the 95% target
