"""Grader for the flash-attention lab. adapter.py is the only way to the learner's code;
references.py holds inputs, the fp32 reference and the tolerances."""

import os
import sys

# The grader's own helper modules (adapter, references) import from this folder.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
