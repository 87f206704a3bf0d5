"""The one way the grader reaches learner code (the showcase of the sandbox).

Each `@kit.learner_side` function runs in the learner process; in the grader
process a call is a request over a pipe and the answer comes back as plain
data. The tests compare that answer with their own expectation, here, where
the learner's code never ran.
"""
from roadmap_cli import grading_kit as kit


@kit.learner_side
def add(a, b):
    import given  # a declared learner-side helper: shown to the learner process in the shim

    return given.plain(kit.learner_module("adder").add(a, b))


@kit.learner_side
def mul(a, b):
    return kit.learner_module("mul").mul(a, b)
