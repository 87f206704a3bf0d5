import pytest

import adapter
import ref_adder


def test_add_small():
    assert adapter.add(2, 3) == 5


@pytest.mark.parametrize("a,b", [(0, 0), (-1, 1), (10, 32)])
def test_add_param(a, b):
    assert adapter.add(a, b) == ref_adder.add(a, b)
