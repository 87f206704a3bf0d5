"""serving-cluster: the grader runs its own copy of the given replica.

The learner's workspace gets `replica.py` (given code, to read and to run by
hand); the grader starts `tests/stub_replica.py`, never the workspace's file,
which the learner could edit to make routing look better than it is. The two
must stay the same program: a change to one without the other would grade
the learner's router against replicas that behave unlike the ones the
handout describes.
"""

from pathlib import Path

LAB = Path(__file__).resolve().parents[1] / "labs" / "serving-cluster"


def test_the_graders_replica_is_the_given_replica_byte_for_byte():
    given = (LAB / "solution" / "replica.py").read_bytes()
    assert (LAB / "tests" / "stub_replica.py").read_bytes() == given, \
        "labs/serving-cluster/tests/stub_replica.py differs from solution/replica.py: copy one over the other"
    assert (LAB / "starter" / "replica.py").read_bytes() == given
