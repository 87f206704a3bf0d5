import pytest

import adapter


def test_add_small():
    assert adapter.add(2, 3) == 5


@pytest.mark.parametrize("a,b", [(0, 0), (-1, 1), (10, 32)])
def test_add_param(a, b):
    import ref_adder  # a grader helper module (grader process only; here, not at the top: line numbers are asserted)

    assert adapter.add(a, b) == ref_adder.add(a, b)
