def test_help_lists_commands(run_cli):
    result = run_cli("--help")
    assert result.exit_code == 0, result
    assert "Usage" in result.stdout


def test_bad_lang_is_one_line(run_cli):
    result = run_cli("--lang", "fr", "stages")
    assert result.exit_code == 2
    assert "unknown language" in result.stderr
    assert "Traceback" not in result.stderr


def test_error_message_is_not_read_as_markup(run_cli):
    result = run_cli("lab", "show", "[/]")
    assert result.exit_code == 2, result
    assert "[/]" in result.stderr and "Traceback" not in result.stderr
