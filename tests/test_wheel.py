"""A normal (non-editable) install carries curriculum.yaml, labs/ and kernels/:
build a wheel, install it into a fresh venv, run `roadmap status --json` there."""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.e2e  # a whole install from a wheel
@pytest.mark.slow
def test_wheel_install_runs_status(tmp_path: Path):
    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(dist), str(REPO)],
        check=True,
        timeout=300,
    )
    wheel = next(dist.glob("roadmap_cli-*.whl"))

    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    py = env_dir / "bin" / "python"
    target = Path(
        subprocess.run(
            [py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    # Install the wheel with this interpreter's pip into the fresh venv, and let
    # the fresh venv see the dependencies already installed here (torch & co.)
    # through a .pth file placed *after* its own site-packages.
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
        check=True,
        timeout=300,
    )
    deps = sysconfig.get_paths()["purelib"]
    (target / "zz_deps.pth").write_text(deps + "\n")

    env = {"PATH": f"{env_dir / 'bin'}:/usr/bin:/bin", "ROADMAP_HOME": str(tmp_path / "home"), "LANG": "C.UTF-8"}
    where = subprocess.run(
        [py, "-c", "import roadmap_cli.paths as p; print(p.data_root())"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        check=True,
    ).stdout.strip()
    root = Path(where)
    assert str(root).startswith(str(target)), f"data root {root} is not inside the installed package"
    assert (root / "curriculum.yaml").is_file()
    assert any((root / "labs").glob("*/lab.yaml")), "labs/ missing from the wheel"
    assert (root / "kernels").is_dir(), "kernels/ missing from the wheel"

    proc = subprocess.run(
        [py, "-m", "roadmap_cli", "status", "--json"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["command"] == "status" and data["data"]["total"] == 46

    # The build hook's manifest (hatch_build.py): every grader file as installed; one edit is named.
    check = (
        "import sys; from roadmap_cli.grading import manifest; from roadmap_cli.paths import labs_root\n"
        "lab = labs_root() / 'minigpt'\n"
        "first = manifest.verify(lab)\n"
        "f = lab / 'tests' / 'adapter.py'; f.write_text(f.read_text() + '# edited\\n')\n"
        "print(first.source, first.ok, manifest.verify(lab).line())\n"
    )
    proc = subprocess.run([py, "-c", check], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    source, ok, line = proc.stdout.strip().split(" ", 2)
    assert (source, ok) == ("wheel", "True"), proc.stderr
    assert line == (
        f"grader file changed since install: {root / 'labs' / 'minigpt' / 'tests' / 'adapter.py'} "
        "(repair: reinstall roadmap, see roadmap doctor)"
    )
