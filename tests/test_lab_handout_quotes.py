"""Rules come from the handout (issue 38, docs/labs.md "Rules"): every rule
quotes README.md verbatim, and every normative README.md sentence is quoted
by a rule or a not_rule; `roadmap dev check` and `roadmap dev rules` fail a
bad quote always, and the gaps unless lab.yaml says `quotes: pending`.

The checks are static (no grading): they are called directly on a copy of the
fixture lab `adder`, and once on every real lab."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

FIXTURES = Path(__file__).parent / "fixtures_labs"


@pytest.fixture
def adder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    shutil.copytree(FIXTURES / "labs", tmp_path / "labs")
    shutil.copytree(FIXTURES / "kernels", tmp_path / "kernels")
    monkeypatch.setenv("ROADMAP_LABS_DIR", str(tmp_path / "labs"))
    return tmp_path / "labs" / "adder"


def edit(lab: Path, change) -> None:
    path = lab / "lab.yaml"
    data = yaml.safe_load(path.read_text())
    change(data)
    path.write_text(yaml.safe_dump(data, allow_unicode=True, sort_keys=False))


def rule(data: dict, rule_id: str) -> dict:
    return next(r for r in data["rules"] if r["id"] == rule_id)


def verdict(lab: Path):
    from roadmap_cli.authoring.handout import check_handout
    from roadmap_cli.labs.spec import load_lab

    return check_handout(load_lab(lab))


def test_the_fixture_quotes_hold(adder: Path):
    result = verdict(adder)
    assert result.enforced and result.problems == [] and result.normative == 3


def test_a_quote_not_in_the_handout_fails_even_while_pending(adder: Path):
    # Markdown is verbatim: the same words without the backticks are not the handout's sentence.
    edit(adder, lambda d: rule(d, "add-returns-sum").update(quote="add(a, b) returns the sum a + b"))
    problems = verdict(adder).problems
    assert problems[0] == (
        "rule add-returns-sum: quote is not in README.md (whitespace-normalised, markdown "
        "verbatim): 'add(a, b) returns the sum a + b'"
    )
    edit(adder, lambda d: d.update(quotes="pending"))
    assert verdict(adder).problems[0].startswith("rule add-returns-sum: quote is not in README.md")


def test_a_quote_matches_across_line_breaks_and_runs_of_spaces(adder: Path):
    readme = adder / "README.md"
    readme.write_text(readme.read_text().replace("returns the sum `a + b`, for", "returns the sum\n  `a + b`,   for"))
    assert verdict(adder).problems == []


def test_a_rule_without_a_quote_fails_unless_pending(adder: Path):
    edit(adder, lambda d: rule(d, "mul-returns-product").pop("quote"))
    problems = verdict(adder).problems
    assert problems[0] == (
        "rule mul-returns-product: quotes no handout sentence (add `quote:` with the README.md sentence it enforces)"
    )
    # Its sentence is now uncovered too.
    assert "README.md:9 (Multiply): normative (formula)" in problems[1]
    edit(adder, lambda d: d.update(quotes="pending"))
    result = verdict(adder)
    assert result.problems == [] and len(result.gaps) == 2


def test_an_uncovered_normative_sentence_fails(adder: Path):
    readme = adder / "README.md"
    readme.write_text(readme.read_text() + "\n## Overflow\nResults must fit in an int64.\n")
    assert verdict(adder).problems == [
        "README.md:15 (Overflow): normative (must/never/only/exactly/each/every/"
        "always/not) but no rule or not_rule quotes it: 'Results must fit in an int64.'"
    ]


def test_a_not_rule_covers_a_sentence(adder: Path):
    edit(adder, lambda d: d.pop("not_rules"))
    assert [s.text for s in verdict(adder).uncovered] == [
        "Implement `add(a, b)` in `adder.py` and `mul(a, b)` in `mul.py`."
    ]
    # A clause of the sentence is enough (the quote lies inside it) ...
    edit(adder, lambda d: d.update(not_rules=[{"quote": "Implement `add(a, b)`", "why": "layout"}]))
    assert verdict(adder).problems == []
    # ... and so is a quote the sentence lies inside (a whole paragraph).
    readme = adder / "README.md"
    readme.write_text(readme.read_text().replace("`mul.py`.", "`mul.py`. Both are pure functions."))
    edit(
        adder,
        lambda d: d.update(
            not_rules=[
                {
                    "quote": "Implement `add(a, b)` in `adder.py` and `mul(a, b)` in "
                    "`mul.py`. Both are pure functions.",
                    "why": "layout",
                }
            ]
        ),
    )
    assert verdict(adder).problems == []


def test_a_not_rule_needs_a_reason(adder: Path):
    from roadmap_cli.errors import ValidationError
    from roadmap_cli.labs.spec import load_lab

    edit(adder, lambda d: d.update(not_rules=[{"quote": "Implement"}]))
    with pytest.raises(ValidationError) as caught:
        load_lab(adder)
    assert "not_rules.0.why" in "\n".join(caught.value.details)


def test_sentences_skip_code_headings_and_sources(tmp_path: Path):
    from roadmap_cli.authoring.handout import sentences

    readme = tmp_path / "README.md"
    readme.write_text(
        "# Lab: never graded\n\nIntro text here.\n\n## Part 1: x\n\n"
        "- `f(x)`: returns `x + 1`. It must not print, e.g. to stderr. Then stop.\n"
        "  A second line of the same item.\n\n"
        "```python\nassert f(1) == 2  # never a sentence\n```\n\n"
        "| a | b |\n|---|---|\n| only | row |\n\n"
        "## Sources\n\nEvery paper must be read.\n",
        encoding="utf-8",
    )
    got = [(s.section, s.line, s.text, s.why) for s in sentences(readme)]
    assert got == [
        ("", 3, "Intro text here.", ""),
        ("Part 1: x", 7, "`f(x)`: returns `x + 1`.", "formula"),
        ("Part 1: x", 7, "It must not print, e.g. to stderr.", "must/never/only/exactly/each/every/always/not"),
        ("Part 1: x", 7, "Then stop.", "order"),
        ("Part 1: x", 7, "A second line of the same item.", ""),
        ("Part 1: x", 14, "| a | b |", ""),
        ("Part 1: x", 16, "| only | row |", "must/never/only/exactly/each/every/always/not"),
    ]


@pytest.mark.parametrize(
    "sentence, why",
    [
        ("Return the codes as int8.", "imperative"),
        ("Raise `ValueError` for an empty list.", "imperative"),
        ("The scale is one per row, never zero.", "must/never/only/exactly/each/every/always/not"),
        ("`q = round(w / scale) + zero`, clamped.", "formula"),
        ("The state is updated after the step.", "order"),
        ("On a tie the smallest index wins.", "tie-break"),
        ("The result is a tuple of ints.", "dtype"),
        ("Times are in 100 ms buckets.", "unit"),
        ("A size-1 dimension is allowed.", "edge size"),
        ("This lab is about quantization.", ""),
        ("The model was trained on a small corpus.", ""),
    ],
)
def test_normative_reasons(sentence: str, why: str):
    from roadmap_cli.authoring.handout import normative_reason

    assert normative_reason(sentence) == why


def test_dev_rules_lists_the_gaps_and_exits_1(adder: Path, run_cli):
    edit(adder, lambda d: d.pop("not_rules"))
    result = run_cli("dev", "rules", "adder", "--json")
    assert result.exit_code == 1, result
    lab = result.json()["data"]["labs"][0]
    assert lab["lab"] == "adder" and lab["enforced"] is True and lab["normative"] == 3
    assert [s["text"] for s in lab["uncovered"]] == ["Implement `add(a, b)` in `adder.py` and `mul(a, b)` in `mul.py`."]
    assert len(lab["problems"]) == 1
    people = run_cli("dev", "rules", "adder")
    assert people.exit_code == 1 and "1 uncovered" in people.stdout and "Implement `add(a, b)`" in people.stdout
    edit(adder, lambda d: d.update(quotes="pending"))
    assert run_cli("dev", "rules", "adder").exit_code == 0


def test_every_real_lab_quotes_its_handout():
    """Quotes present in a lab.yaml are in its README.md; a lab whose quotes are required has no gap."""
    from roadmap_cli.authoring.handout import check_handout
    from roadmap_cli.labs.spec import all_labs

    problems = {spec.id: check_handout(spec).problems for spec in all_labs()}
    assert {lab: p for lab, p in problems.items() if p} == {}


def test_dev_checks_handout_row(adder: Path):
    from roadmap_cli.authoring.devcheck import check_handout_row
    from roadmap_cli.labs.spec import load_lab

    row, warning = check_handout_row(load_lab(adder))
    assert row.check == "handout" and row.ok is True and warning is None
    edit(adder, lambda d: d.update(quotes="pending"))  # pending, with nothing missing: say so
    assert check_handout_row(load_lab(adder))[1] == (
        "adder: lab.yaml says `quotes: pending` but nothing is missing: delete that line"
    )
    edit(adder, lambda d: (d.pop("not_rules"), d.update(quotes="pending")))
    row, warning = check_handout_row(load_lab(adder))
    assert row.ok is True and row.got.endswith("(quotes: pending)")
    assert warning == (
        "adder: quotes pending: 0 rule(s) without a quote, 1 normative sentence(s) uncovered "
        "(`roadmap dev rules adder`)"
    )
    edit(adder, lambda d: d.pop("quotes"))
    row, _ = check_handout_row(load_lab(adder))
    assert row.ok is False and "Implement `add(a, b)`" in row.detail
