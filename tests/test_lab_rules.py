"""Rules as data (issue 26, docs/labs.md "Rules"): lab.yaml `rules:` is
loaded and cross-checked, and `roadmap dev check` fails a rule with no test, a
rule test that does not exist, a rule no wrong variant breaks (or whose
variant fails none of its tests), and a section the handout does not have.

Most cases call authoring/rules.py directly with what the grader runs would
have seen (cheap); one runs `dev check` end to end on a broken fixture copy."""

from __future__ import annotations

import copy
import shutil
from pathlib import Path

import pytest
import yaml

from roadmap_cli.errors import ValidationError

FIXTURES = Path(__file__).parent / "fixtures_labs"

# What dev check's runs of the fixture lab `adder` collect and fail (see its tests/ and wrong/).
COLLECTED = [
    "test_add.py::test_add_small",
    "test_add.py::test_add_param[0-0]",
    "test_add.py::test_add_param[-1-1]",
    "test_add.py::test_add_param[10-32]",
    "test_mul.py::test_mul",
    "test_mul.py::test_mul_zero",
    "test_speed.py::test_speed",
]
FAILED_BY = {"add-off-by-one": COLLECTED[:4], "mul-adds": ["test_mul.py::test_mul", "test_mul.py::test_mul_zero"]}
GRADABLE = {"add", "mul", "speed"}


@pytest.fixture
def adder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    shutil.copytree(FIXTURES / "labs", tmp_path / "labs")
    shutil.copytree(FIXTURES / "kernels", tmp_path / "kernels")
    monkeypatch.setenv("ROADMAP_LABS_DIR", str(tmp_path / "labs"))
    monkeypatch.setenv("ROADMAP_DEVICE", "cpu")
    return tmp_path / "labs" / "adder"


def edit(lab: Path, change) -> None:
    path = lab / "lab.yaml"
    data = yaml.safe_load(path.read_text())
    change(data)
    path.write_text(yaml.safe_dump(data, allow_unicode=True, sort_keys=False))


def verdict(lab: Path, *, collected=COLLECTED, failed_by=FAILED_BY):
    from roadmap_cli.authoring.rules import check_rules
    from roadmap_cli.labs.spec import load_lab

    return check_rules(load_lab(lab), collected=collected, failed_by=dict(failed_by), gradable=GRADABLE)


def rule(data: dict, rule_id: str) -> dict:
    return next(r for r in data["rules"] if r["id"] == rule_id)


def test_the_fixture_rules_hold(adder: Path):
    result = verdict(adder)
    assert result.rules == 2 and result.problems == [] and result.unchecked == []


def test_a_rule_without_a_test_fails(adder: Path):
    edit(adder, lambda d: rule(d, "mul-returns-product").update(tests=[]))
    assert verdict(adder).problems == ["rule mul-returns-product: names no test"]


def test_a_rule_test_that_does_not_exist_fails(adder: Path):
    edit(adder, lambda d: rule(d, "add-returns-sum")["tests"].append("test_add.py::test_add_large"))
    problems = verdict(adder).problems
    assert problems == [
        "rule add-returns-sum: test 'test_add.py::test_add_large' does not exist (the grader collects no such test)"
    ]
    # A parametrized id prefix is a test that exists; a name that merely starts the same is not.
    edit(adder, lambda d: rule(d, "add-returns-sum").update(tests=["test_add.py::test_add_param[0-0]"]))
    assert verdict(adder).problems == []
    edit(adder, lambda d: rule(d, "add-returns-sum").update(tests=["test_add.py::test_add"]))
    assert "does not exist" in verdict(adder).problems[0]


def test_a_rule_test_in_no_part_fails(adder: Path):
    edit(adder, lambda d: rule(d, "add-returns-sum").update(tests=["test_nowhere.py"]))
    assert "rule add-returns-sum: test 'test_nowhere.py' belongs to no part" in verdict(adder).problems


def test_a_rule_no_variant_breaks_fails(adder: Path):
    edit(adder, lambda d: d["wrong"][1].update(breaks=[]))
    assert verdict(adder).problems == [
        "rule mul-returns-product: no wrong variant breaks it (list it in a variant's `breaks:`)"
    ]


def test_a_variant_must_fail_one_of_the_rules_own_tests(adder: Path):
    """Failing the same part is not enough: the variant must fail *because of* the rule."""
    edit(adder, lambda d: rule(d, "mul-returns-product").update(tests=["test_mul.py::test_mul"]))
    only_zero = dict(FAILED_BY, **{"mul-adds": ["test_mul.py::test_mul_zero"]})
    problems = verdict(adder, failed_by=only_zero).problems
    assert problems == [
        "rule mul-returns-product: no variant that breaks it fails one of its tests "
        "(wrong/mul-adds fails test_mul.py::test_mul_zero)"
    ]


def test_a_variant_that_did_not_run_here_leaves_the_rule_unchecked(adder: Path):
    result = verdict(adder, failed_by=dict(FAILED_BY, **{"mul-adds": None}))
    assert result.problems == [] and result.unchecked == ["mul-returns-product"]


def test_an_unknown_section_fails(adder: Path):
    edit(adder, lambda d: rule(d, "add-returns-sum").update(section="Addition"))
    assert verdict(adder).problems == ["rule add-returns-sum: section 'Addition' is not a `## ` heading of README.md"]


def test_the_translation_must_have_the_section(adder: Path):
    (adder / "README.zh.md").write_text("# 加法器\n\n## 加法（Add）\n\n## 乘\n", encoding="utf-8")
    assert verdict(adder).problems == ["rule mul-returns-product: README.zh.md has no heading matching 'Multiply'"]
    # Numbered sections pair by number, as tests/test_lab_handouts.py pairs them.
    (adder / "README.md").write_text((adder / "README.md").read_text().replace("## Multiply", "## Part 2: multiply"))
    (adder / "README.zh.md").write_text("# 加法器\n\n## 加法（Add）\n\n## 第 2 部分：乘法\n", encoding="utf-8")
    edit(adder, lambda d: rule(d, "mul-returns-product").update(section="Part 2: multiply"))
    assert verdict(adder).problems == []


def test_spec_refuses_unknown_and_duplicate_rule_ids(adder: Path):
    from roadmap_cli.labs.spec import load_lab

    def change(d):
        d["wrong"][0]["breaks"] = ["add-returns-summ"]
        d["rules"].append(copy.deepcopy(d["rules"][0]))

    edit(adder, change)
    with pytest.raises(ValidationError) as caught:
        load_lab(adder)
    details = "\n".join(caught.value.details)
    assert "wrong.0.breaks.0" not in details  # positions, not pydantic paths, for cross-checks
    assert "unknown rule 'add-returns-summ'" in details and "duplicate rule id 'add-returns-sum'" in details


def test_dev_check_fails_a_broken_rules_list_end_to_end(adder: Path, run_cli):
    """The real runs: a variant with `breaks:` reports every test it failed, and the rules row fails."""

    def change(d):
        rule(d, "add-returns-sum")["tests"] = ["test_add.py::test_add_small", "test_add.py::test_add_huge"]
        d["rules"].append(
            {
                "id": "mul-by-zero",
                "section": "Multiply",
                "text": "x * 0 == 0",
                "quote": "anything times 0 is 0",
                "tests": [],
            }
        )
        d["wrong"][1]["breaks"] = []

    edit(adder, change)
    result = run_cli("dev", "check", "adder", "--jobs", "2", "--json")
    assert result.exit_code == 1, result
    rows = {r["check"]: r for r in result.json()["data"]["rows"]}
    assert rows["wrong:add-off-by-one"]["failed_tests"] == COLLECTED[:4]  # all of them, not the first
    assert rows["rules"]["ok"] is False and rows["handout"]["ok"] is True  # its quotes still hold
    assert rows["rules"]["detail"].splitlines() == [
        "rule add-returns-sum: test 'test_add.py::test_add_huge' does not exist (the grader collects no such test)",
        "rule mul-returns-product: no wrong variant breaks it (list it in a variant's `breaks:`)",
        "rule mul-by-zero: names no test",
    ]


def test_an_interpreter_only_rule_is_not_checked_on_a_gpu(adder: Path):
    """Issue 37: on a GPU the interpreter's checks record nothing, so an `interpreter_only` rule (and the
    variants breaking it, which dev check skips there) is 'not checked', never a failure."""
    from roadmap_cli.authoring.rules import check_rules
    from roadmap_cli.labs.spec import load_lab

    edit(adder, lambda d: rule(d, "mul-returns-product").update(interpreter_only=True))
    spec = load_lab(adder)
    failed_by = {**FAILED_BY, "mul-adds": []}  # on a GPU the variant ran and failed none of the rule's tests
    on_gpu = check_rules(spec, collected=COLLECTED, failed_by=failed_by, gradable=GRADABLE, interpreted=False)
    assert on_gpu.problems == [] and on_gpu.unchecked == ["mul-returns-product"]
    on_cpu = check_rules(spec, collected=COLLECTED, failed_by=failed_by, gradable=GRADABLE)
    assert on_cpu.problems and "mul-returns-product" in on_cpu.problems[0]
