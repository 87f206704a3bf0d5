"""Grader for the quantization lab. adapter.py is the only way to the learner's
code (workspace module `quant`, running the given tiny_gpt model); refs.py holds
the grader's own references of every formula in the handout."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

# Tiny shapes: one thread is steadier than several on a busy machine, and the same on every run.
torch.set_num_threads(1)
