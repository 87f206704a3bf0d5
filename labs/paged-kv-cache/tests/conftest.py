"""Grader for the paged-kv-cache lab. adapter.py is the only way to the learner's
code; reference.py holds the grader's own references (gather-then-attend, a
contiguous-cache decoder, the block-content tracker); invariants.py checks
GRADING.md's paged-KV invariants after every step of a trace."""

import os
import sys

# The grader's helper modules (adapter, reference, invariants) import from this folder.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

# Tiny tensors everywhere: one thread avoids pool overhead on a 2-core machine.
torch.set_num_threads(1)
