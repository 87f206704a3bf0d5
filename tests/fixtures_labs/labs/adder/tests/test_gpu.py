import os

import pytest


def test_gpu_only():
    if os.environ.get("ROADMAP_DEVICE") != "cuda":
        pytest.skip("needs a CUDA GPU")
    raise AssertionError("the engine must never run this part without CUDA")
