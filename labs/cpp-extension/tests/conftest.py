"""Grader for the cpp-extension lab. adapter.py is the only way to the learner's
code (rms_norm.cpp is loaded and vllm_reading.py imported in the learner
process); build.py compiles the learner's C++ once per grade (cached)."""

import os
import sys

# The grader's helper modules (adapter, build, reference) import from this folder.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
