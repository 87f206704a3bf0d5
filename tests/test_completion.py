"""Shell completion: commands, lab ids, part ids (of the workspace you are
in), checkpoint and stage ids; without importing torch, triton or pydantic
models of the curriculum."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures_labs"
# Runs the CLI the way the shell's completion script does, then says which heavy modules got imported.
PROBE = (
    "import atexit, sys\n"
    "atexit.register(lambda: sys.stderr.write('HEAVY=' + ','.join(m for m in ('torch', 'triton', "
    "'roadmap_cli.curriculum.models', 'sqlmodel') if m in sys.modules) + '\\n'))\n"
    "from roadmap_cli.cli import main\nmain()\n"
)


def complete(words: str, env: dict, cwd: Path | None = None) -> tuple[list[str], str]:
    n = len(words.split()) - (0 if words.endswith(" ") else 1)
    proc = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        env={**env, "_ROADMAP_COMPLETE": "complete_bash", "COMP_WORDS": words, "COMP_CWORD": str(n)},
    )
    heavy = next((ln for ln in proc.stderr.splitlines() if ln.startswith("HEAVY=")), "HEAVY=?")
    return proc.stdout.split(), heavy


def test_completes_ids_without_heavy_imports(run_cli, roadmap_home: Path, tmp_path: Path, monkeypatch) -> None:
    env = {**os.environ, "ROADMAP_HOME": str(roadmap_home), "ROADMAP_DEVICE": "cpu"}
    commands, heavy = complete("roadmap gr", env)
    assert commands == ["grade"] and heavy == "HEAVY="
    labs, heavy = complete("roadmap lab start ", env)
    assert {"cuda-matmul", "flash-attention", "minigpt", "paged-kv-cache"} <= set(labs) and heavy == "HEAVY="
    checkpoints, _ = complete("roadmap check s2-implement-t", env)
    assert "s2-implement-tokenizer" in checkpoints and all(c.startswith("s2-implement-t") for c in checkpoints)
    stages, _ = complete("roadmap stage show build", env)
    assert stages == ["build-minigpt"]
    refs, heavy = complete("roadmap quiz s5-analyze-", env)
    assert refs == ["s5-analyze-tps-drop", "s5-analyze-high-ttft"] and heavy == "HEAVY="

    # --part completes the parts of the workspace the shell is in.
    monkeypatch.setenv("ROADMAP_LABS_DIR", str(FIXTURES / "labs"))
    ws = tmp_path / "ws"
    assert run_cli("lab", "start", "adder", "--dir", str(ws)).exit_code == 0
    parts, heavy = complete("roadmap grade --part ", {**env, "ROADMAP_LABS_DIR": str(FIXTURES / "labs")}, cwd=ws)
    assert parts == ["add", "mul", "speed", "gpu"] and heavy == "HEAVY="


def test_show_completion_prints_a_script() -> None:
    # Typer finds the shell from the parent processes unless told not to (then it takes the named one): a run
    # detached from any shell (a job runner, a daemonized CI) would otherwise print "Shell  not supported".
    env = {**os.environ, "_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", "from roadmap_cli.cli import main; main()", "--show-completion", "bash"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert proc.returncode == 0 and "_ROADMAP_COMPLETE=complete_bash" in proc.stdout
