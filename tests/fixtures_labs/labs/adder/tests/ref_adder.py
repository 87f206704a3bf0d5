"""The grader's own answer (a grader helper module, never learner-side): the
hostile-grading tests check that learner code cannot import it."""


def add(a, b):
    return a + b
