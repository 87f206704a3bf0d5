"""quantization: the grader runs its own copy of the given model, and ships a checkpoint.

The learner's workspace gets `tiny_gpt.py` (given code, to read and to run by
hand); the learner process imports `tests/tiny_gpt.py` (lab.yaml's
`learner_side`), which shadows the workspace's file, and the grader's
references build the same model from it. The two must stay the same program,
or the learner's quantized model would be graded on a model the handout does
not describe. The checkpoint is data the grader loads on every grade: small,
and loadable without pickled code.
"""

from pathlib import Path

LAB = Path(__file__).resolve().parents[1] / "labs" / "quantization"


def test_the_graders_model_is_the_given_model_byte_for_byte():
    given = (LAB / "solution" / "tiny_gpt.py").read_bytes()
    assert (LAB / "tests" / "tiny_gpt.py").read_bytes() == given, \
        "labs/quantization/tests/tiny_gpt.py differs from solution/tiny_gpt.py: copy one over the other"
    assert (LAB / "starter" / "tiny_gpt.py").read_bytes() == given


def test_the_shipped_checkpoint_is_small_and_weights_only():
    import torch

    path = LAB / "data" / "tiny_gpt.pt"
    assert path.stat().st_size < 1_000_000
    checkpoint = torch.load(path, weights_only=True)
    assert set(checkpoint) == {"config", "state_dict", "chars"}
    assert len(checkpoint["chars"]) == checkpoint["config"]["vocab_size"]
