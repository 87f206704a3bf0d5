"""Rules come from the handout (issue 38; docs/labs.md, "Rules"): every rule
quotes the README.md sentence(s) it enforces, and every *normative* sentence
of README.md is quoted by a rule or by a `not_rules:` entry saying why it
needs no test.

A normative sentence is one a careful reader could get wrong in code: an
imperative ("Return ...", "Raise ..."), a must / never / only / exactly /
each / every / always / not, or a stated formula, order, tie-break, dtype,
unit or edge size. The test is deliberately wide: a false positive costs the
author one `not_rules:` line, a false negative is a rule nobody wrote (the
red team's 25 survivors were all of that kind).

Matching is on whitespace-normalised text (any run of whitespace, newlines
included, is one space); markdown stays verbatim, so a quote is copied from
the handout as written. A sentence is covered when a quote lies inside it or
it lies inside a quote. Code blocks, headings and the "Sources" section are
not sentences to cover (a quote may still cite them).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from roadmap_cli.labs.spec import LabSpec

SKIPPED_SECTIONS = ("Sources",)

_FENCE = re.compile(r"^\s*(```+|~~~+)(.*)$")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{3,}")
_SPACE = re.compile(r"\s+")
# A sentence ends at . ! ? (and any closing quote/bracket/emphasis after it) before a space and
# something that can start a sentence. Abbreviations are rejoined below.
_SENTENCE_END = re.compile(r"(?<=(?<!\.)[.!?])([\"')\]*_]*)\s+(?=[A-Z0-9`*_(\[\"'|$\\-])")
_CODE_SPAN = re.compile(r"`[^`]*`")
_ABBREVIATIONS = ("e.g.", "i.e.", "etc.", "vs.", "cf.", "approx.", "resp.", "Fig.", "No.", "St.")

# Why a sentence counts as normative: the first pattern that matches names the reason.
_IMPERATIVE_VERBS = (
    "add allocate apply assert avoid build call cast check choose clamp clip collect compare compute convert copy "
    "count create cut declare define divide do don't drop emit ensure fill find fold free give handle implement "
    "keep launch leave let load make mark mask measure merge move multiply name note pack pad pass pick place "
    "print put raise read record reject release remove replace report reset reshape return reuse round run save "
    "scale see send set skip sort split start stop store subtract sum take time treat try turn unpack update use "
    "wait write zero"
).split()
_NORMATIVE = [
    (
        "imperative",
        re.compile(r"^(?:[*_(\"]+)?(?:" + "|".join(re.escape(v) for v in _IMPERATIVE_VERBS) + r")\b", re.IGNORECASE),
    ),
    (
        "must/never/only/exactly/each/every/always/not",
        re.compile(
            r"\b(must|never|only|exactly|each|every|always|not|cannot|can't|don't|doesn't|isn't|aren't|"
            r"won't|shouldn't|mustn't|nothing|none|neither|nor)\b",
            re.IGNORECASE,
        ),
    ),
    # In prose: an equation or a bound; inside a code span: any operator between two operands.
    ("formula", re.compile(r"(?:\s=\s|==|!=|<=|>=|≤|≥|->|→|`[^`]*[\w)\]]\s*(?:\*\*|//|[-+*/@%<>=])\s*[\w(\[][^`]*`)")),
    ("order", re.compile(r"\b(before|after|first|then|last|order|ordered|sorted|earliest|latest)\b", re.IGNORECASE)),
    ("tie-break", re.compile(r"\b(ties?|tie-break\w*|tied|half to even|round(?:s|ed|ing)? half)\b", re.IGNORECASE)),
    (
        "dtype",
        re.compile(
            r"\b(u?int(?:4|8|16|32|64)|float(?:16|32|64)|bfloat16|bf16|fp(?:8|16|32|64)|dtype|"
            r"bool|torch\.Size|tuple of ints?|str|integer|string)\b",
            re.IGNORECASE,
        ),
    ),
    # A number with a unit after it: "16 bytes", "5 ms", "1e-4 s" is too rare to be worth the noise.
    (
        "unit",
        re.compile(
            r"\d\s*(ms|µs|us|ns|seconds?|milliseconds?|microseconds?|bytes?|bits?|KiB|MiB|GiB|"
            r"KB|MB|GB|GB/s|TB/s|FLOPs?|TFLOP/s|tokens/s|ticks?|%)(?![\w])"
        ),
    ),
    (
        "edge size",
        re.compile(
            r"\b(empty|size[- ]1|zero|0-d|scalar|at most|at least|up to|past the end|beyond|"
            r"negative|odd|even|remainder|partial|tail|boundary|overflow|inclusive|exclusive|"
            r"limit)\b",
            re.IGNORECASE,
        ),
    ),
]


def normalise(text: str) -> str:
    """Runs of whitespace, newlines included, become one space; ends stripped."""
    return _SPACE.sub(" ", text).strip()


@dataclass(frozen=True)
class Sentence:
    section: str  # the `## ` heading it is under ("" before the first)
    line: int  # 1-based line of README.md where its paragraph starts
    text: str  # whitespace-normalised, markdown verbatim
    why: str = ""  # why it is normative ("" if it is not)


def _units(text: str) -> list[tuple[str, int, str]]:
    """(section, first line, normalised text) of every paragraph, list item and
    table row outside code blocks, headings and the skipped sections."""
    units: list[tuple[str, int, str]] = []
    section, fence, skipping = "", None, False
    buf: list[str] = []
    start = 0

    def flush() -> None:
        nonlocal buf
        if buf and not skipping:
            units.append((section, start, normalise(" ".join(buf))))
        buf = []

    for number, line in enumerate(text.splitlines(), 1):
        opened = _FENCE.match(line)
        if fence is not None:
            if opened and opened.group(1).startswith(fence) and not opened.group(2).strip():
                fence = None
            continue
        if opened:
            flush()
            fence = opened.group(1)
            continue
        heading = _HEADING.match(line)
        if heading:
            flush()
            if len(heading.group(1)) == 2:
                section = heading.group(2)
                skipping = section in SKIPPED_SECTIONS
            continue
        if not line.strip() or line.lstrip().startswith("<!--"):
            flush()
            continue
        if line.lstrip().startswith("|"):
            flush()
            if not _TABLE_RULE.match(line):
                buf, start = [line], number
                flush()
            continue
        if _ITEM.match(line):
            flush()
        if not buf:
            start = number
        buf.append(line)
    flush()
    return units


def _split(unit: str) -> list[str]:
    body = _ITEM.sub("", unit, count=1).lstrip("> ").strip()
    if body.startswith("|"):
        return [body]
    pieces: list[str] = []
    last = 0
    # Never inside a code span (`i = 0 .. n`, `e.g.` in code): split points are found with spans blanked.
    masked = _CODE_SPAN.sub(lambda m: "`" + "x" * (len(m.group(0)) - 2) + "`", body)
    for match in _SENTENCE_END.finditer(masked):
        head = body[last : match.start()]
        if any(head.endswith(a) for a in _ABBREVIATIONS):
            continue
        pieces.append(body[last : match.start(1) + len(match.group(1))].strip())
        last = match.end()
    pieces.append(body[last:].strip())
    return [p for p in pieces if p]


def normative_reason(sentence: str) -> str:
    """Why `sentence` is normative, or "" when it is not."""
    for why, pattern in _NORMATIVE:
        if pattern.search(sentence):
            return why
    return ""


def sentences(readme: Path) -> list[Sentence]:
    """Every sentence of the handout outside code, headings and Sources, with why it is normative."""
    text = readme.read_text(encoding="utf-8")
    return [
        Sentence(section, line, s, normative_reason(s)) for section, line, unit in _units(text) for s in _split(unit)
    ]


def quotes_of(value) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


def _covers(quote: str, sentence: str) -> bool:
    return quote in sentence or sentence in quote


@dataclass
class HandoutVerdict:
    """What dev check and `dev rules` say about a lab's quotes."""

    lab: str
    enforced: bool  # False while lab.yaml says `quotes: pending`
    rules: int = 0
    normative: int = 0
    bad_quotes: list[str] = field(default_factory=list)  # always problems
    unquoted_rules: list[str] = field(default_factory=list)  # rule ids without `quote:`
    uncovered: list[Sentence] = field(default_factory=list)

    @property
    def gaps(self) -> list[str]:
        """The missing quotes and uncovered sentences, one line each."""
        lines = [
            f"rule {rid}: quotes no handout sentence (add `quote:` with the README.md sentence it enforces)"
            for rid in self.unquoted_rules
        ]
        lines += [
            f"README.md:{s.line} ({s.section or 'top'}): normative ({s.why}) but no rule or not_rule "
            f"quotes it: {s.text!r}"
            for s in self.uncovered
        ]
        return lines

    @property
    def problems(self) -> list[str]:
        """What fails dev check: bad quotes always, the gaps once quotes are required."""
        return self.bad_quotes + (self.gaps if self.enforced else [])


def check_handout(spec: LabSpec, readme: Optional[Path] = None) -> HandoutVerdict:
    readme = readme or spec.readme
    verdict = HandoutVerdict(spec.id, enforced=spec.quotes != "pending", rules=len(spec.rules or []))
    haystack = normalise(readme.read_text(encoding="utf-8"))
    quotes: list[str] = []

    def take(owner: str, raw: list[str]) -> None:
        for quote in raw:
            text = normalise(quote)
            if not text:
                verdict.bad_quotes.append(f"{owner}: an empty quote")
            elif text not in haystack:
                verdict.bad_quotes.append(
                    f"{owner}: quote is not in README.md (whitespace-normalised, markdown verbatim): {_short(text)!r}"
                )
            else:
                quotes.append(text)

    for rule in spec.rules or []:
        raw = quotes_of(rule.quote)
        if not raw:
            verdict.unquoted_rules.append(rule.id)
        take(f"rule {rule.id}", raw)
    for i, item in enumerate(spec.not_rules):
        take(f"not_rules[{i}]", quotes_of(item.quote))
    for sentence in sentences(readme):
        if not sentence.why:
            continue
        verdict.normative += 1
        if not any(_covers(q, sentence.text) for q in quotes):
            verdict.uncovered.append(sentence)
    return verdict


def _short(text: str, width: int = 120) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"
