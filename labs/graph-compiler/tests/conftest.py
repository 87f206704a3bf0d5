"""Grader for the graph-compiler lab. adapter.py is the only way to the learner's code; refs.py holds
the grader's own references (random graphs from the secret seed, reference passes, node counts);
graphs.py and models.py are given code both processes import (lab.yaml `learner_side`)."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

torch.set_num_threads(1)
