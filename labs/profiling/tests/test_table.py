"""Part 1: the kernel table: self times, the per-name table and top-k, on synthetic traces with
planted structure (from the secret seed) and on a real torch.profiler trace of the slow model."""

from __future__ import annotations

import pytest

from roadmap_cli import grading_kit as kit

import adapter
import refs

SECTION = "Part 1: the kernel table"
FLOATS = ("total_us", "self_us", "mean_us", "pct")


def _cpu(i: int) -> dict:
    return refs.cpu_trace(refs.rng(f"cpu-{i}"))


def _gpu(i: int) -> dict:
    return refs.gpu_trace(refs.rng(f"gpu-{i}"))


@pytest.mark.parametrize("i", [0, 1])
def test_self_times_nested_ops(i):
    trace = _cpu(i)
    evs = refs.events(trace, "cpu_op")
    got = adapter.call("self_times", evs)
    want = refs.self_times(evs)
    assert isinstance(got, list) and len(got) == len(want), (
        f"self_times on {len(evs)} nested cpu_ops: got {got!r:.200}, expected a list of {len(want)} floats {refs.where(SECTION)}")
    for j, (g, w) in enumerate(zip(got, want)):
        e = evs[j]
        assert refs.close(float(g), w), (
            f"self_times: event {j} ({e['name']}, ts {e['ts']}, dur {e['dur']}, tid {e['tid']}): {g!r} µs, expected {w} µs "
            f"(dur minus the durations of its DIRECT children on the same thread) {refs.where(SECTION)}")


@pytest.mark.parametrize("i", [0, 1, 2])
def test_op_table_cpu_ops(i):
    trace = _cpu(i)
    refs.compare_rows(adapter.call("op_table", trace, "cpu_op"), refs.op_table(trace, "cpu_op"),
                      ("name", "calls"), FLOATS, f"op_table(trace cpu-{i}, 'cpu_op')", SECTION)


def test_op_table_tie_and_order():
    trace = _cpu(3)
    got = adapter.call("op_table", trace, "cpu_op")
    names = [r["name"] for r in got]
    assert "aten::alpha_tie" in names and "aten::zeta_tie" in names, (
        f"op_table: planted ops aten::alpha_tie / aten::zeta_tie missing from {names} {refs.where(SECTION)}")
    assert names.index("aten::alpha_tie") < names.index("aten::zeta_tie"), (
        f"op_table: aten::alpha_tie and aten::zeta_tie have the same self time; ties go by name ascending, "
        f"got order {names} {refs.where(SECTION)}")
    want = [r["name"] for r in refs.op_table(trace, "cpu_op")]
    assert names == want, f"op_table order: {names}, expected {want} (self_us descending) {refs.where(SECTION)}"


def test_op_table_kernels():
    trace = _gpu(0)
    refs.compare_rows(adapter.call("op_table", trace, "kernel"), refs.op_table(trace, "kernel"),
                      ("name", "calls"), FLOATS, "op_table(gpu trace, 'kernel')", SECTION)


@pytest.mark.parametrize("by", ["self_us", "total_us", "calls", "mean_us"])
def test_top_k(by):
    trace = _cpu(4)
    n = len(refs.op_table(trace, "cpu_op"))
    for k in (0, 1, 3, n, n + 2):
        got = adapter.call("top_k", trace, "cpu_op", k, by=by)
        want = refs.top_k(trace, "cpu_op", k, by)
        assert got == want, f"top_k(trace, 'cpu_op', k={k}, by={by!r}): {got}, expected {want} {refs.where(SECTION)}"


def test_top_k_bad_arguments():
    trace = _cpu(5)
    for kwargs in ({"k": 2, "by": "name"}, {"k": -1, "by": "self_us"}):
        with pytest.raises(ValueError):
            adapter.call("top_k", trace, "cpu_op", kwargs["k"], by=kwargs["by"])
            pytest.fail(f"top_k(..., k={kwargs['k']}, by={kwargs['by']!r}) returned; expected ValueError {refs.where(SECTION)}")


# ---------------------------------------------------------------- a real profile


def _real():
    r = refs.rng("real")
    cfg = {"layers": 2, "dim": r.choice([12, 16]), "batch": r.randint(5, 9), "seed": r.randrange(1 << 30), "steps": 2}
    return cfg, adapter.learner_profile(cfg["layers"], cfg["dim"], cfg["batch"], cfg["seed"], cfg["steps"])


REAL = kit.PerSeedCache(_real)


def test_profile_cpu_real_trace():
    cfg, trace = REAL()
    assert isinstance(trace, dict) and isinstance(trace.get("traceEvents"), list), (
        f"profile_cpu: returned {type(trace).__name__}, expected the parsed Chrome trace (a dict with "
        f"'traceEvents') {refs.where(SECTION)}")
    mms = [e for e in refs.events(trace, "cpu_op") if e["name"] == "aten::mm"]
    want = cfg["steps"] * cfg["layers"] * cfg["batch"]
    assert len(mms) == want, (
        f"profile_cpu(slow_forward, steps={cfg['steps']}) with {cfg['layers']} layers, batch {cfg['batch']}: "
        f"{len(mms)} aten::mm events, expected {want} (one per row, layer and step) {refs.where(SECTION)}")
    dims = [e.get("args", {}).get("Input Dims") for e in mms]
    assert all(d and d[0] == [1, cfg["dim"]] for d in dims), (
        f"profile_cpu: aten::mm events carry Input Dims {dims[:3]}, expected [[1, {cfg['dim']}], ...] "
        f"(record_shapes=True) {refs.where(SECTION)}")


def test_op_table_on_real_trace():
    _, trace = REAL()
    refs.compare_rows(adapter.call("op_table", trace, "cpu_op"), refs.op_table(trace, "cpu_op"),
                      ("name", "calls"), FLOATS, "op_table(real torch.profiler trace, 'cpu_op')", SECTION)


def test_self_times_off_the_quarter_grid():
    # real traces hold whole nanoseconds (0.1, 0.013 ...): a child ending exactly at its parent's end can
    # have a float ts + dur a hair past the parent's; in integer ns it is inside
    evs = refs.events(refs.off_grid_trace(refs.rng("off-grid")), "cpu_op")
    got = adapter.call("self_times", evs)
    want = refs.self_times(evs)
    assert isinstance(got, list) and len(got) == len(want), (
        f"self_times on {len(evs)} cpu_ops: got {got!r:.200}, expected a list of {len(want)} floats {refs.where(SECTION)}")
    for j, (g, w) in enumerate(zip(got, want)):
        e = evs[j]
        assert refs.close(float(g), w), (
            f"self_times: event {j} ({e['name']}, ts {e['ts']!r}, dur {e['dur']!r}): {g!r} µs, expected {w} µs (times "
            f"compared as integer nanoseconds, round(t * 1000): a child ending exactly at its parent's end is inside it "
            f"even when the float sums differ in the last bit) {refs.where(SECTION)}")
