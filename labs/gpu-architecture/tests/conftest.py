"""Grader for the gpu-architecture lab. adapter.py is the only way to the learner's
code; reference.py holds the grader's own models; cases.py the adversarial cases."""

import os
import sys

# The grader's helper modules (adapter, reference, cases) import from this folder.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
