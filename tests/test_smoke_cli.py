def test_help_lists_commands(run_cli):
    result = run_cli("--help")
    assert result.exit_code == 0, result
    assert "Usage" in result.stdout


def test_bad_lang_is_one_line(run_cli):
    result = run_cli("--lang", "fr", "stages")
    assert result.exit_code == 2
    assert "unknown language" in result.stderr
    assert "Traceback" not in result.stderr
