from roadmap_cli.grading_kit.learner import learner_module


def test_double():
    assert learner_module("double").double(4) == 8
