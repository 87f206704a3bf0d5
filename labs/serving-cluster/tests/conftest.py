"""Grader for the serving-cluster lab. adapter.py is the only way to the
learner's code (router.py, proxy.py, autoscale.py, loadgen.py, and the given
serve.py it forks learner-side); refs.py holds the grader's own references;
cluster.py starts the grader's copy of the stub replicas (stub_replica.py) and
is the HTTP client whose timestamps the TTFT figures come from."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
