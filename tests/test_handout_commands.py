"""Every `roadmap ...` command the handouts and docs quote must exist.

A learner copies commands out of labs/*/README.md (and README.zh.md), README.md
and docs/*.md; cpp-extension's handout once said `roadmap lab grade
cpp-extension`, a command that never existed. This test collects every
`roadmap ...` quoted in backticks or on a line of a fenced code block, walks
typer's command tree (`typer.main.get_command(app)`) along it, and checks the
command path exists and every option it names belongs to that command.

Synopsis notation is understood: `[--week|--month]` (each alternative is
checked), `lab list|show|start` (each subcommand), and placeholders (`ID`,
`<id>`, `...`) stop the walk where they stand.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted(
    [*ROOT.glob("labs/*/README.md"), *ROOT.glob("labs/*/README.zh.md"), ROOT / "README.md", *ROOT.glob("docs/*.md")]
)

INLINE = re.compile(r"`(roadmap(?:\s[^`]*)?)`")
FENCE = re.compile(r"^\s*(```+|~~~+)")
# In a code block: `roadmap ...` at the start of a line (after a `$ ` prompt) or after `&&`, `;`, `|`, `(`.
IN_CODE = re.compile(r"(?:^\s*(?:\$\s+)?|&&\s*|;\s*|\|\s*|\(\s*)(roadmap(?:\s.*)?)$")


def quoted_commands(text: str) -> list[tuple[int, str]]:
    """(line number, command) for every `roadmap ...` quoted in the markdown text."""
    found: list[tuple[int, str]] = []
    fence = None
    for number, line in enumerate(text.splitlines(), 1):
        opened = FENCE.match(line)
        if opened:
            fence = None if fence and opened.group(1).startswith(fence) else (fence or opened.group(1))
            continue
        if fence:
            # One command per line; a trailing comment is prose.
            code = re.sub(r"\s#\s.*$", "", line.rstrip().rstrip("\\").rstrip())
            for piece in re.split(r"(?=&&|;)", code):
                match = IN_CODE.search(piece.strip())
                if match:
                    found.append((number, match.group(1).strip()))
        else:
            found += [(number, m.group(1).strip()) for m in INLINE.finditer(line)]
    return found


def _tokens(command: str) -> list[str]:
    command = command.replace("\\|", "|")
    try:
        return shlex.split(command)
    except ValueError:  # an unbalanced quote in prose: split on blanks
        return command.split()


def _is_placeholder(token: str) -> bool:
    word = token.strip("[]")
    return (
        not word
        or word.startswith(("<", ".", "{"))
        or "..." in word
        or word.isupper()
        or not re.fullmatch(r"[a-z][a-z0-9-]*(\|[a-z][a-z0-9-]*)*", word)
    )


def _options(command) -> set[str]:
    names: set[str] = set()
    for param in command.params:
        names.update(param.opts)
        names.update(param.secondary_opts)
    return names | {"-h", "--help"}


def problems_in(command_line: str, app_command: object) -> list[str]:
    """What is wrong with one quoted command ([] when it exists as written)."""
    tokens = _tokens(command_line)[1:]  # after `roadmap`
    node = app_command
    path = ["roadmap"]
    wrong: list[str] = []
    walking = True
    for token in tokens:
        pieces = [p for p in token.strip("[]").split("|") if p]
        flags = [p.split("=", 1)[0].rstrip(",") for p in pieces if re.match(r"^--?[A-Za-z]", p)]
        if flags:
            known = _options(node)
            wrong += [f"`{' '.join(path)}` has no option {f}" for f in flags if f not in known]
            continue
        if not walking or not hasattr(node, "commands"):
            continue  # an argument, or an option's value
        if _is_placeholder(token):
            walking = False
            continue
        names = [p for p in pieces if not p.isupper()]
        missing = [n for n in names if n not in node.commands]
        if missing:
            wrong += [f"`{' '.join(path)} {n}` is not a command" for n in missing]
            walking = False
        elif len(names) > 1:
            walking = False  # `lab list|show|...`: each exists; options after it could belong to any
        else:
            node = node.commands[names[0]]
            path.append(names[0])
    return wrong


@pytest.fixture(scope="module")
def command_tree() -> object:
    import typer

    from roadmap_cli.cli import register_all

    return typer.main.get_command(register_all())


def _relative(path: Path) -> str:
    return str(path.relative_to(ROOT))


@pytest.mark.parametrize("doc", DOCS, ids=_relative)
def test_quoted_commands_exist(doc: Path, command_tree: object) -> None:
    bad = [
        f"{_relative(doc)}:{number}: {problem}  (in `{command}`)"
        for number, command in quoted_commands(doc.read_text(encoding="utf-8"))
        for problem in problems_in(command, command_tree)
    ]
    assert not bad, "\n".join(bad)


def test_the_docs_quote_commands() -> None:
    counted = sum(len(quoted_commands(d.read_text(encoding="utf-8"))) for d in DOCS)
    assert counted > 100 and any("cpp-extension" in str(d) for d in DOCS)


def test_the_checker_catches_what_does_not_exist(command_tree: object) -> None:
    assert problems_in("roadmap lab grade cpp-extension", command_tree) == ["`roadmap lab grade` is not a command"]
    assert problems_in("roadmap grade --parts P", command_tree) == ["`roadmap grade` has no option --parts"]
    assert problems_in("roadmap stats [--weeks N] [--width W]", command_tree) == []
    assert problems_in("roadmap lab list|show|nope", command_tree) == ["`roadmap lab nope` is not a command"]
    assert problems_in("roadmap cadence [--week\\|--month\\|--year]", command_tree) == [
        "`roadmap cadence` has no option --year"
    ]
    assert problems_in("roadmap --curriculum my.yaml status", command_tree) == []
    assert problems_in("roadmap dev ...", command_tree) == []


def test_commands_are_found_in_backticks_and_code_blocks() -> None:
    text = (
        "Run `roadmap grade` now.\n\n```bash\n$ roadmap lab start adder  # the first lab\ncd x && roadmap watch\n```\n"
    )
    assert quoted_commands(text) == [(1, "roadmap grade"), (4, "roadmap lab start adder"), (5, "roadmap watch")]
