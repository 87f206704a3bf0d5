"""Grader for the autograd lab. adapter.py is the only way to the learner's code;
programs.py generates the random expression graphs and op sequences (plain
data) that both sides replay: the learner's engine in the learner's process,
torch (the oracle) here."""

import os
import sys

# The grader's helper modules (adapter, programs) import from this folder.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

torch.set_num_threads(1)
