import adapter


def test_speed(record_perf, grade_fraction):
    assert adapter.add(1, 1) == 2
    record_perf("ops", 123.0, "op/s", shape="1x1")
    grade_fraction(0.5)
