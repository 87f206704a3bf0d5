"""Every command and every option has help text, and `--help` works everywhere."""

from __future__ import annotations

import typer.main

from roadmap_cli.cli import COMMAND_MODULES, register_all


def _walk(command, path=()):
    yield path, command
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        yield from _walk(sub, path + (name,))


def all_commands():
    return list(_walk(typer.main.get_command(register_all())))


def test_every_command_has_help_text():
    missing = [" ".join(path) or "roadmap" for path, cmd in all_commands() if not (cmd.help or "").strip()]
    assert missing == []


def test_every_option_has_help_text():
    missing = []
    for path, cmd in all_commands():
        for param in cmd.params:
            if param.param_type_name == "option" and not (getattr(param, "help", None) or "").strip():
                if "--help" not in param.opts:
                    missing.append(f"{' '.join(path)} {param.opts[0]}")
    assert missing == []


def test_help_runs_for_every_command(run_cli):
    commands = all_commands()
    assert len(commands) > 40  # the whole tree, not just the root
    for path, _ in commands:
        result = run_cli(*path, "--help")
        assert result.exit_code == 0, (path, result)
        assert "Usage" in result.stdout


def test_read_commands_take_json():
    """Commands that only read data offer --json (writers may too)."""
    readers = [
        ("status",),
        ("next",),
        ("stages",),
        ("stage", "show"),
        ("curriculum", "show"),
        ("curriculum", "validate"),
        ("db", "status"),
        ("lab", "list"),
        ("lab", "status"),
        ("paper", "list"),
        ("paper", "show"),
        ("log", "list"),
        ("cadence",),
        ("doctor",),
    ]
    by_path = {path: cmd for path, cmd in all_commands()}
    lacking = [" ".join(p) for p in readers if not any("--json" in prm.opts for prm in by_path[p].params)]
    assert lacking == []


def test_command_map_matches_what_modules_register():
    """cli.COMMAND_MODULES decides which module a command loads; it must be exact."""
    import importlib

    import typer

    for module_name in set(COMMAND_MODULES.values()):
        probe = typer.Typer()
        importlib.import_module(f"roadmap_cli.cli.{module_name}").register(probe)
        names = {c.name for c in probe.registered_commands}
        names |= {g.name if isinstance(g.name, str) else g.typer_instance.info.name for g in probe.registered_groups}
        assert names == {n for n, m in COMMAND_MODULES.items() if m == module_name}, module_name


def test_a_command_loads_only_its_own_group():
    import subprocess
    import sys

    code = (
        "import sys; from roadmap_cli import cli; cli.register_for(['--lang', 'en', 'status']); "
        "print(sorted(cli._registered))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['core']"
