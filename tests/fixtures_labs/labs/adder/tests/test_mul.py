import adapter


def test_mul():
    assert adapter.mul(6, 7) == 42


def test_mul_zero():
    assert adapter.mul(0, 7) == 0
