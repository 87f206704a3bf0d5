"""roadmap: a learning tracker and lab runner for LLM-systems engineers.

The package imports nothing heavy at import time: torch, triton and git are
imported inside the functions that need them, so `roadmap --help` and
`roadmap status` start fast.
"""

__version__ = "0.1.0"
