"""The one way the grader reaches learner code."""
from roadmap_cli.grading_kit.learner import learner_module


def add(a, b):
    return learner_module("adder").add(a, b)


def mul(a, b):
    return learner_module("mul").mul(a, b)
