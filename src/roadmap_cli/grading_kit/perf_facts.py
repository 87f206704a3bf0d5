"""Timing results as plain data, so a `@kit.learner_side` function can time the
learner's kernel inside the learner process and hand the numbers back.

The timing harness must run where the learner's code runs: timed through the
sandbox's pipe, a call would measure the RPC and the copy of its output, not
the kernel. So a lab's adapter runs `timing.compare_to_baseline` learner-side
and returns `comparison_facts(cmp)`; the test decides the score.
"""

from __future__ import annotations


def comparison_facts(cmp) -> dict:
    """A `timing.Comparison` as a dict of floats, strings and bools (wire-safe)."""
    return {
        "ratio": float(cmp.ratio),
        "tflops": None if cmp.tflops is None else float(cmp.tflops),
        "baseline_tflops": None if cmp.baseline_tflops is None else float(cmp.baseline_tflops),
        "pct_of_peak": None if cmp.pct_of_peak is None else float(cmp.pct_of_peak),
        "impossible": bool(cmp.impossible),
        "device": str(cmp.device),
        "warnings": [str(w) for w in cmp.warnings],
        "learner_median_ms": float(cmp.learner.median_ms),
        "baseline_median_ms": float(cmp.baseline.median_ms),
        "summary": cmp.summary(),
    }
