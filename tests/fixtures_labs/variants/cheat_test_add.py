def test_add_small():
    assert True
