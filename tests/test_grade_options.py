"""grading/options.py: `roadmap grade`'s options, one table for the typer command and the
console script's early start (roadmap_cli/entry.py), which reads the command line before typer loads."""

from __future__ import annotations

import pytest
from typer._click.exceptions import UsageError  # typer's own click, as cli/__init__.py catches it
from typer.main import get_command

from roadmap_cli.grading import options
from roadmap_cli.grading.options import GRADE_OPTIONS


@pytest.fixture(scope="module")
def grade_command():
    from roadmap_cli.cli import register_all

    return get_command(register_all()).commands["grade"]


def _typer_options(command) -> dict:
    return {p.name: p for p in command.params if p.param_type_name == "option" and p.name != "help"}


def test_the_command_declares_exactly_the_table(grade_command):
    declared = _typer_options(grade_command)
    assert sorted(declared) == sorted(o.dest for o in GRADE_OPTIONS)
    for opt in GRADE_OPTIONS:
        param = declared[opt.dest]
        assert tuple(param.opts + param.secondary_opts) == opt.flags, opt.dest
        assert param.is_flag is not opt.takes_value, opt.dest
        assert param.multiple is opt.repeatable, opt.dest
        assert param.min == opt.number_min, opt.dest
    arguments = [p.name for p in grade_command.params if p.param_type_name == "argument"]
    assert arguments == [options.LAB_ID]


def _value(opt) -> str:
    return "7" if opt.number_min is not None else "v"


@pytest.mark.parametrize("opt", GRADE_OPTIONS, ids=lambda o: o.dest)
def test_the_early_reader_and_typer_agree_on_every_option(opt, grade_command):
    """Every name of every option, with a value where it takes one: what typer parses is what
    the early start read (or the early start leaves that form to typer)."""
    for flag in opt.flags:
        args = ["adder", flag, _value(opt)] if opt.takes_value else ["adder", flag]
        parsed = grade_command.make_context("grade", list(args)).params
        read = options.read(args)
        if not opt.early:
            assert read is None
            continue
        assert read is not None, args
        assert {k: read[k] for k in parsed} == {k: (list(v) if isinstance(v, tuple) else v) for k, v in parsed.items()}


def test_repeatable_options_add_up_and_the_last_single_value_wins(grade_command):
    args = ["--test", "a.py", "--test=b.py", "--part", "one", "--part=two", "--timeout", "5", "--timeout=9"]
    parsed = grade_command.make_context("grade", list(args)).params
    read = options.read(args)
    assert read["test"] == list(parsed["test"]) == ["a.py", "b.py"]
    assert read["part"] == parsed["part"] == "two"
    assert read["timeout"] == parsed["timeout"] == 9.0


@pytest.mark.parametrize(
    "args",
    [
        ["--timeout", "0"],  # typer: below min=1
        ["--timeout", "x"],
        ["--part"],  # a missing value
        ["--json=1"],  # a flag given a value
        ["a", "b"],  # a second ID
        ["--bogus"],
    ],
)
def test_what_typer_refuses_the_early_reader_leaves_to_it(args, grade_command):
    with pytest.raises(UsageError):
        grade_command.make_context("grade", list(args))
    assert options.read(args) is None
