"""Grader for the modern-llm lab. adapter.py is the only way to the learner's
code; refs.py holds the grader's own references (written independently:
complex-number RoPE, per-head loops, dense MoE); llama_model.py the grader's
Llama-style model for the KV-cache part; spec_models.py the small models of
the speculative-decoding part."""

import os
import sys

# The grader's helper modules import from this folder.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

torch.set_num_threads(1)
