"""README's commands run as written, and every lab README and docs/ name exists.

tests/test_handout_commands.py checks that each quoted command parses; this
one runs every `roadmap ...` line of README's fenced code blocks, in order,
in one scratch data home, the way a newcomer types them (`cd "$(roadmap lab
path minigpt)"` included). A command that cannot run here is in SKIP with the
reason and the test that covers it instead; a skip whose command is no longer
in README fails, so the list cannot rot.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from test_handout_commands import FENCE, IN_CODE, quoted_commands

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = [README, *sorted((ROOT / "docs").glob("*.md"))]
# The user's path: README, then the guides it links, in the order a newcomer reads them (issue 39 moved the
# cohort, remote-grading, quiz, report and paper sections out of README into these pages).
WALK = [
    README,
    *(
        ROOT / "docs" / name
        for name in ("install.md", "grading.md", "quizzes.md", "reports.md", "papers.md", "cohort.md", "remote.md")
    ),
]

# command (as README writes it) -> why it is not run here, and where it is tested instead
SKIP = {
    "roadmap quiz s1-explain-query-key-value": "asks its questions on a terminal (tests/test_quiz*.py drive it)",
    "roadmap review": "asks its questions on a terminal (tests/test_review*.py drive it)",
    "roadmap watch": "runs until `q` on a terminal (tests/test_watch.py drives it in a pty)",
    'roadmap db copy --to "$DATABASE_URL"': "needs a PostgreSQL server (tests/test_db_copy*.py start one)",
    "roadmap remote check h100": "needs an ssh server at the README's example address (tests/test_remote*.py)",
    "roadmap grade --on h100": "needs an ssh server (tests/test_grade_on.py uses a loopback sshd)",
    "roadmap watch --on h100": "needs an ssh server and a terminal (tests/test_grade_on.py)",
    "roadmap worker --concurrency 1": "needs the cohort's PostgreSQL server (tests/test_cohort_queue.py)",
    "roadmap worker --labs flash-attention,cuda-matmul": "needs the cohort's PostgreSQL server "
    "(tests/test_cohort_queue.py)",
    "roadmap submit": "needs the cohort's PostgreSQL server (tests/test_cohort_queue.py)",
    "roadmap submissions": "needs the cohort's PostgreSQL server (tests/test_cohort_queue.py)",
}
# What a command exits with when it works as documented (the starter fails its grade).
EXPECTED_EXIT = {"roadmap grade": 1}


def fenced_lines(text: str) -> list[tuple[int, str, str]]:
    """(line number, the whole line, one `roadmap ...` command) for every command in a fenced block."""
    found = []
    fence = None
    for number, line in enumerate(text.splitlines(), 1):
        opened = FENCE.match(line)
        if opened:
            fence = None if fence and opened.group(1).startswith(fence) else (fence or opened.group(1))
            continue
        if not fence:
            continue
        code = re.sub(r"\s#\s.*$", "", line.rstrip())
        for piece in re.split(r"&&|;", code):
            match = IN_CODE.search(piece.strip())
            if match:
                found.append((number, code, match.group(1).strip().removesuffix(')"').strip()))
    return found


def test_every_fenced_readme_command_runs_in_a_scratch_home(run_cli, roadmap_home, monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ROADMAP_DEVICE", "cpu")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.chdir(tmp_path)
    from paper_registry import serve_docs_papers

    _registry, stop = serve_docs_papers(monkeypatch)  # `paper log 2307.08691` asks a registry: a local one
    try:
        _walk(run_cli, monkeypatch, tmp_path)
    finally:
        stop()


def _walk(run_cli, monkeypatch, tmp_path: Path) -> None:
    from roadmap_cli import context

    ran, skipped = [], set()
    steps = [
        (page.relative_to(ROOT), *found) for page in WALK for found in fenced_lines(page.read_text(encoding="utf-8"))
    ]
    current = None
    for page, number, line, command in steps:
        if page != current:  # each guide reads on its own: a fresh data home for each
            current = page
            monkeypatch.setenv("ROADMAP_HOME", str(tmp_path / "homes" / page.name))
            context.reset()
        if command in SKIP:
            skipped.add(command)
            continue
        result = run_cli(*shlex.split(command)[1:])
        expected = EXPECTED_EXIT.get(command, 0)
        assert result.exit_code == expected, f"{page}:{number}: `{command}` exited {result.exit_code}\n{result}"
        assert "Traceback" not in result.stdout + result.stderr, f"{page}:{number}: {result}"
        if f'cd "$({command})"' in line:  # the workspace the next commands run in
            monkeypatch.chdir(result.stdout.strip())
        ran.append(command)
    assert "roadmap grade" in ran and "roadmap lab start minigpt" in ran  # the walk really ran the lab commands
    assert skipped == set(SKIP), f"SKIP names commands the guides no longer have: {sorted(set(SKIP) - skipped)}"


# ---------------------------------------------------------------- lab ids

# Where a text names a lab: after the commands that take one, in `--labs a,b`, in a lab's folder path,
# and in prose such as "lab `x`", "`x` lab", "submissions of `x`".
LAB_COMMAND = re.compile(
    r"^roadmap (?:lab (?:start|show|path|status|history|hint|reset|solution)|grade|submit"
    r"|cohort board|dev check|dev mutate|dev build-starter) ([a-z][a-z0-9-]+)"
)
LAB_PROSE = [
    re.compile(p)
    for p in (
        r"\blabs?\s+`([a-z][a-z0-9-]+)`",
        r"`([a-z][a-z0-9-]+)`\s+labs?\b",
        r"\bsubmissions of `([a-z][a-z0-9-]+)`",
        r"\d+ `([a-z][a-z0-9-]+)`\s+submissions",
        r"(?<![\w/.])labs/([a-z][a-z0-9-]+)/",
    )
]


def named_labs(text: str) -> set[tuple[int, str]]:
    found = set()
    for number, command in quoted_commands(text):
        tokens = command.split()
        match = LAB_COMMAND.match(command)
        if match and not match.group(1).isupper():
            found.add((number, match.group(1)))
        for i, token in enumerate(tokens[:-1]):
            if token == "--labs":
                found |= {(number, lab) for lab in tokens[i + 1].split(",") if lab}
    for number, line in enumerate(text.splitlines(), 1):
        for pattern in LAB_PROSE:
            found |= {(number, m.group(1)) for m in pattern.finditer(line)}
    return found


def test_every_lab_readme_and_docs_name_exists() -> None:
    from roadmap_cli.labs.spec import load_all

    labs = {spec.id for spec in load_all()[0]}
    wrong = [
        f"{path.relative_to(ROOT)}:{number}: {lab}"
        for path in DOCS
        for number, lab in sorted(named_labs(path.read_text(encoding="utf-8")))
        if lab not in labs
    ]
    assert not wrong, "lab ids that do not exist:\n" + "\n".join(wrong)


def test_the_lab_id_check_can_fail() -> None:
    text = (
        "```\nroadmap worker --labs flash-attention,gemm\nroadmap lab start minigpt\n```\n"
        "Measured with 40 submissions of `adder`; the `paged-kv-cache` lab; labs/cuda-matmul/README.md\n"
    )
    assert {lab for _, lab in named_labs(text)} == {
        "flash-attention",
        "gemm",
        "minigpt",
        "adder",
        "paged-kv-cache",
        "cuda-matmul",
    }


@pytest.mark.parametrize("command", sorted(SKIP))
def test_every_skip_has_a_reason(command: str) -> None:
    assert len(SKIP[command]) > 20 and "tests/" in SKIP[command]


# ---------------------------------------------------------------- a README a newcomer reads in five minutes

LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def test_readme_is_short_and_every_relative_link_resolves() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 150, "README.md is over 150 lines: move the detail to a docs/ page"
    broken = [
        f"{page.relative_to(ROOT)}: {target}"
        for page in DOCS
        for target in LINK.findall(page.read_text(encoding="utf-8"))
        if not target.startswith(("http://", "https://", "mailto:")) and not (page.parent / target).exists()
    ]
    assert not broken, "links to nothing:\n" + "\n".join(broken)
