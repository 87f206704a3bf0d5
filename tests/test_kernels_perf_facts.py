"""grading_kit.perf_facts: a timing Comparison becomes plain data the sandbox can carry."""

from roadmap_cli.grading_kit import timing, wire
from roadmap_cli.grading_kit.perf_facts import comparison_facts


def test_comparison_facts_are_plain_data():
    learner = timing.Timing(median_ms=2.0, min_ms=1.9, mean_ms=2.0, stderr_ms=0.01, repeats=10, host_ms=2.1)
    baseline = timing.Timing(median_ms=1.0, min_ms=0.9, mean_ms=1.0, stderr_ms=0.01, repeats=10, host_ms=1.1)
    cmp = timing.Comparison(
        learner=learner,
        baseline=baseline,
        ratio=0.5,
        tflops=100.0,
        baseline_tflops=200.0,
        pct_of_peak=10.1,
        impossible=False,
        device="NVIDIA H100",
        warnings=("slow host",),
    )
    facts = comparison_facts(cmp)
    assert facts["ratio"] == 0.5 and facts["learner_median_ms"] == 2.0 and facts["baseline_median_ms"] == 1.0
    assert facts["warnings"] == ["slow host"] and "50.0% of baseline speed" in facts["summary"]
    allowed = (type(None), bool, int, float, str, list)
    assert all(isinstance(v, allowed) for v in facts.values())

    def no_refs(obj):
        raise AssertionError(f"{obj!r} would cross the pipe as a learner proxy, not as data")

    assert wire.encode(facts, no_refs) == facts
