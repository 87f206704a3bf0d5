"""A lab's rules as data (lab.yaml `rules:`, docs/labs.md "Rules"), checked by
`roadmap dev check`.

A rule is one thing the handout says code must do, must not do or must
return. Each names the handout section that states it, the tests that check
it, and wrong/ variants list the rules they break (`breaks:`). This module
says what is wrong with a lab's rules, given what dev check's grader runs
saw: the node ids the reference solution's run collected and, per wrong
variant, the node ids it failed. A rule holds when

  - it names at least one test, and every test prefix matches a collected test;
  - its section is a heading of README.md, with a matching heading in
    README.zh.md (same level and section number, or the English heading
    quoted in it) when there is a translation;
  - some variant listing it in `breaks:` fails one of its tests: the variant
    fails *because of* this rule, not merely somewhere in the same part.

Tests of parts that need a GPU are not collected on a CPU-only machine: such
a rule is reported as not checked here, never as passing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from roadmap_cli.labs.nodeids import part_for, prefix_matches
from roadmap_cli.labs.spec import LabSpec, Rule

NO_RULES_WARNING = 'no rules listed (lab.yaml has no `rules:` yet; docs/labs.md, "Rules")'

_FENCE = re.compile(r"^(```+|~~~+)(.*)$")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
# "## 1. Tokenizers", "## Part 3: causal", "## 第 3 部分：causal" (as tests/test_lab_handouts.py pairs them).
_NUMBER = re.compile(r"^(?:(\d+(?:\.\d+)*)\.?(?:\s|$)|Part\s+(\d+)\b|第\s*(\d+)\s*部分)")


def headings(path: Path) -> list[tuple[int, str]]:
    """The (level, text) of every heading of a markdown file, code blocks excluded."""
    found: list[tuple[int, str]] = []
    fence: Optional[str] = None
    for line in path.read_text(encoding="utf-8").splitlines():
        opened = _FENCE.match(line)
        if fence is None:
            if opened:
                fence = opened.group(1)
                continue
            match = _HEADING.match(line)
            if match:
                found.append((len(match.group(1)), match.group(2)))
        elif opened and opened.group(1).startswith(fence) and not opened.group(2).strip():
            fence = None
    return found


def _number(title: str) -> Optional[str]:
    match = _NUMBER.match(title)
    return next((g for g in match.groups() if g), None) if match else None


def section_problem(
    spec: LabSpec, rule: Rule, en: list[tuple[int, str]], zh: Optional[list[tuple[int, str]]]
) -> Optional[str]:
    level = next((lv for lv, text in en if text == rule.section and lv == 2), None)
    if level is None:
        return f"rule {rule.id}: section {rule.section!r} is not a `## ` heading of README.md"
    if zh is None:
        return None
    number = _number(rule.section)
    if not any(
        lv == level and ((number is not None and _number(text) == number) or rule.section in text) for lv, text in zh
    ):
        return f"rule {rule.id}: README.zh.md has no heading matching {rule.section!r}"
    return None


@dataclass
class RulesVerdict:
    rules: int
    problems: list[str] = field(default_factory=list)
    unchecked: list[str] = field(default_factory=list)  # rule ids whose tests need a GPU here


def check_rules(
    spec: LabSpec,
    *,
    collected: Optional[list[str]],
    failed_by: dict[str, Optional[list[str]]],
    gradable: set[str],
    interpreted: bool = True,
) -> RulesVerdict:
    """What is wrong with `spec.rules`.

    `collected`: node ids (relative to tests/) the solution's run collected,
    None when that run collected nothing usable (its own row already fails).
    `failed_by`: wrong variant id -> node ids it failed, None when it did not
    run here (its parts need a GPU). `gradable`: the part ids runnable here.
    `interpreted`: Triton runs under the interpreter (False on a GPU, where an
    `interpreter_only` rule is not checked).
    """
    rules = spec.rules or []
    verdict = RulesVerdict(len(rules))
    en = headings(spec.readme)
    zh_path = spec.root / "README.zh.md"
    zh = headings(zh_path) if zh_path.is_file() else None
    parts = spec.part_prefixes()
    for rule in rules:
        problem = section_problem(spec, rule, en, zh)
        if problem:
            verdict.problems.append(problem)
        if not rule.tests:
            verdict.problems.append(f"rule {rule.id}: names no test")
            continue
        if rule.interpreter_only and not interpreted:
            verdict.unchecked.append(rule.id)
            continue
        needs_gpu = False
        for prefix in rule.tests:
            part = part_for(prefix, parts)
            if part is None:
                verdict.problems.append(f"rule {rule.id}: test {prefix!r} belongs to no part")
            elif part not in gradable:
                needs_gpu = True
            elif collected is not None and not any(prefix_matches(prefix, n) for n in collected):
                verdict.problems.append(
                    f"rule {rule.id}: test {prefix!r} does not exist (the grader collects no such test)"
                )
        breakers = [w for w in spec.wrong if rule.id in w.breaks]
        if not breakers:
            verdict.problems.append(f"rule {rule.id}: no wrong variant breaks it (list it in a variant's `breaks:`)")
            continue
        ran = [(w.id, failed_by.get(w.id)) for w in breakers if failed_by.get(w.id) is not None]
        if any(prefix_matches(prefix, n) for _, failed in ran for n in failed for prefix in rule.tests):
            continue
        if not ran or needs_gpu:
            verdict.unchecked.append(rule.id)
            continue
        why = "; ".join(f"wrong/{wid} fails {', '.join(failed[:3]) or 'nothing'}" for wid, failed in ran)
        verdict.problems.append(f"rule {rule.id}: no variant that breaks it fails one of its tests ({why})")
    return verdict
