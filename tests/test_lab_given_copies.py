"""Given code the grader keeps its own copy of stays the same program.

A lab may give the learner code to read and run (a model, a replica, random
graph builders) that the grader must not take from the workspace, where the
learner could edit it: the grader keeps a copy in tests/, either as a
`learner_side` file (the learner process imports it in place of the
workspace's) or under a name of its own that it starts itself. A change to
one side without the other would grade the learner's code against a program
the handout does not describe.
"""

from pathlib import Path

import pytest

LABS = Path(__file__).resolve().parents[1] / "labs"
# Copies the grader starts under a name of its own (never importable as the workspace's module):
# (lab, file given in the workspace, the grader's copy under tests/).
RENAMED_COPIES = [("serving-cluster", "replica.py", "stub_replica.py")]


def _copies() -> list[tuple[str, str, str]]:
    from roadmap_cli.labs.spec import all_labs

    pairs = list(RENAMED_COPIES)
    for spec in all_labs():
        pairs += [(spec.id, name, name) for name in spec.learner_side if (spec.solution_dir / name).is_file()]
    return pairs


@pytest.mark.parametrize("lab, given, copy", _copies())
def test_the_graders_copy_of_given_code_is_byte_for_byte_the_given_file(lab, given, copy):
    source = (LABS / lab / "solution" / given).read_bytes()
    assert (LABS / lab / "tests" / copy).read_bytes() == source, (
        f"labs/{lab}/tests/{copy} differs from solution/{given}: copy one over the other"
    )
    assert (LABS / lab / "starter" / given).read_bytes() == source


def test_the_known_copies_are_found():
    found = {(lab, given) for lab, given, _ in _copies()}
    assert {
        ("quantization", "tiny_gpt.py"),
        ("graph-compiler", "graphs.py"),
        ("graph-compiler", "models.py"),
        ("serving-cluster", "replica.py"),
    } <= found
