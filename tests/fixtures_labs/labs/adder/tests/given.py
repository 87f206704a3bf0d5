"""A learner-side helper of the fake lab (lab.yaml `learner_side`): the adapter
imports it in the learner process, from the engine's adapter shim."""


def plain(value):
    """The learner's answer as plain data (what the grader process gets back)."""
    return value
