"""quantization ships a checkpoint: data the grader loads on every grade, so
small, and loadable without pickled code. (Its given model's copy in tests/
is kept identical by tests/test_lab_given_copies.py.)
"""

from pathlib import Path

LAB = Path(__file__).resolve().parents[1] / "labs" / "quantization"


def test_the_shipped_checkpoint_is_small_and_weights_only():
    import torch

    path = LAB / "data" / "tiny_gpt.pt"
    assert path.stat().st_size < 1_000_000
    checkpoint = torch.load(path, weights_only=True)
    assert set(checkpoint) == {"config", "state_dict", "chars"}
    assert len(checkpoint["chars"]) == checkpoint["config"]["vocab_size"]
